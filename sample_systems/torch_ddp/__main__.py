"""Launch DDP training: W ranks via torch.multiprocessing.spawn, gloo backend on CPU.

    python -m sample_systems.torch_ddp [--workers W] [--steps S] [--explicit]

Exits with status 3 and a message on stderr when PyTorch (with
torch.distributed) is not available, so callers can tell "cannot run here"
from "ran and failed".
"""

from __future__ import annotations

import argparse
import sys

EXIT_NO_TORCH = 3


def torch_available() -> str | None:
    """None if torch.distributed can be used; otherwise the reason why not."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError as err:
        return f"PyTorch is not installed ({err})"
    except OSError as err:  # a broken install: missing shared libraries
        return f"PyTorch cannot be loaded ({err})"
    if not dist.is_available():
        return f"this PyTorch build ({torch.__version__}) has no torch.distributed"
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument(
        "--explicit", action="store_true",
        help="average gradients with explicit dist.all_reduce calls instead of "
             "DistributedDataParallel",
    )
    args = parser.parse_args()
    reason = torch_available()
    if reason is not None:
        print(f"torch_ddp: cannot run: {reason}; install torch to run this sample", file=sys.stderr)
        return EXIT_NO_TORCH
    from sample_systems.torch_ddp.launch import run

    return run(args.workers, args.steps, not args.explicit)


if __name__ == "__main__":
    sys.exit(main())
