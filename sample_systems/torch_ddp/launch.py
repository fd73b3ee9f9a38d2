"""Start the DDP ranks with torch.multiprocessing.spawn and collect their results."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from typing import Any

import torch.multiprocessing as mp

from sample_systems.torch_ddp.trainer import run_worker

TIMEOUT_S = 120.0
LOOPBACK_INTERFACE = {"linux": "lo", "darwin": "lo0"}


def pin_gloo_to_loopback() -> None:
    """Make gloo (inherited by the spawned ranks) use the loopback interface only."""
    interface = LOOPBACK_INTERFACE.get(sys.platform)
    if interface is not None:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", interface)


def spawn_ranks(world_size: int, steps: int, use_ddp: bool, store_path: str, results: Any) -> None:
    """Spawn the ranks and wait for them, terminating all of them at the deadline."""
    context = mp.spawn(
        run_worker,
        args=(world_size, steps, use_ddp, store_path, results),
        nprocs=world_size,
        join=False,
    )
    deadline = time.monotonic() + TIMEOUT_S
    while not context.join(1.0):
        if time.monotonic() > deadline:
            for process in context.processes:
                if process.is_alive():
                    process.terminate()
                process.join(timeout=5)
            raise TimeoutError("DDP ranks did not finish before the deadline")


def collect(results: Any, world_size: int) -> list[tuple[int, list[float], list[float]]]:
    """Every rank's (rank, losses, weights), in rank order."""
    return sorted(results.get(timeout=10) for _ in range(world_size))


def report(ranks: list[tuple[int, list[float], list[float]]]) -> None:
    """Print the loss curve and check that DDP kept every replica identical."""
    losses = ranks[0][1]
    for step, loss in enumerate(losses):
        if step % 5 == 0 or step == len(losses) - 1:
            print(f"step {step:3d}  loss {loss:.4f}")
    print(f"first loss {losses[0]:.4f}  last loss {losses[-1]:.4f}")
    agree = all(weights == ranks[0][2] for _, _, weights in ranks)
    print(f"{len(ranks)} ranks {'agree' if agree else 'DISAGREE'} on the final weights")
    if not agree:
        raise RuntimeError("DDP replicas diverged")


def run(world_size: int, steps: int, use_ddp: bool) -> int:
    """Train with `world_size` spawned ranks; print a deterministic summary."""
    pin_gloo_to_loopback()
    results = mp.get_context("spawn").Queue()
    with tempfile.TemporaryDirectory(prefix="distea-ddp-") as tmp:
        try:
            spawn_ranks(world_size, steps, use_ddp, os.path.join(tmp, "store"), results)
            ranks = collect(results, world_size)
        except Exception as err:
            print(f"torch_ddp: FAILED: {err}", file=sys.stderr)
            return 1
    how = "DistributedDataParallel" if use_ddp else "explicit all_reduce"
    print(f"torch_ddp: launcher + {world_size} ranks started with torch.multiprocessing.spawn")
    print(f"gloo backend on CPU, gradients averaged by {how}")
    report(ranks)
    return 0
