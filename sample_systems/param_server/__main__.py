"""Launch the parameter-server sample: one server process and N worker processes.

python -m sample_systems.param_server [--workers N] [--steps S]
"""

from __future__ import annotations

import argparse
import sys
from functools import partial

from sample_systems._launch import Role, RoleGroup, run_sample


def launch(workers: int, steps: int) -> list[Role]:
    """Start the server, then the workers against its port; wait for all."""
    with RoleGroup() as group:
        server = group.start("server", "sample_systems.param_server.server", "--workers", workers)
        (port,) = group.wait_ready(server)
        for rank in range(workers):
            group.start(
                f"worker-{rank}",
                "sample_systems.param_server.worker",
                "--port", port,
                "--rank", rank,
                "--world-size", workers,
                "--steps", steps,
            )  # fmt: skip
        return group.finish()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    return run_sample("param_server", partial(launch, args.workers, args.steps))


if __name__ == "__main__":
    sys.exit(main())
