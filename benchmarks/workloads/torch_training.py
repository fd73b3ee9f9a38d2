"""Training-step overhead of DDP and FSDP2: 2 ranks, gloo on CPU, a small MLP.

python -m benchmarks.workloads.torch_training [--strategy ddp|fsdp2] [--steps 60]

The ranks are started with torch.multiprocessing.spawn and meet through a
FileStore in a private temporary directory (no port). Rank 0 times the
steady state only: the steps after ``WARMUP`` (the first ones build DDP's
buckets and FSDP2's buffers), which is what a long training run pays per
step. Each step is forward, backward (gradient all-reduce for DDP; parameter
all-gathers and gradient reduce-scatters for FSDP2) and an SGD update.
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from benchmarks.workloads.timing import timed

WARMUP = 5
WIDTH = 64
BATCH = 32


def build(strategy: str) -> nn.Module:
    torch.manual_seed(0)
    layers = [nn.Linear(WIDTH, WIDTH) for _ in range(4)]
    model = nn.Sequential(*layers, nn.Linear(WIDTH, 1))
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model)
    from torch.distributed.fsdp import fully_shard

    for layer in layers:
        fully_shard(layer)
    return fully_shard(model)


def step(model: nn.Module, optimizer: torch.optim.Optimizer, source: torch.Tensor,
         target: torch.Tensor) -> None:
    optimizer.zero_grad()
    nn.functional.mse_loss(model(source), target).backward()
    optimizer.step()


def rank_main(rank: int, strategy: str, steps: int, store_path: str) -> None:
    os.environ["RANK"], os.environ["WORLD_SIZE"] = str(rank), "2"
    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.FileStore(store_path, 2), rank=rank,
                            world_size=2)
    model = build(strategy)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    generator = torch.Generator().manual_seed(rank)
    source = torch.randn(BATCH, WIDTH, generator=generator)
    target = torch.randn(BATCH, 1, generator=generator)
    for _ in range(WARMUP):
        step(model, optimizer, source, target)
    dist.barrier()
    if rank == 0:
        with timed():
            for _ in range(steps):
                step(model, optimizer, source, target)
            dist.barrier()
    else:
        for _ in range(steps):
            step(model, optimizer, source, target)
        dist.barrier()
    # a group still held by a reference cycle would be freed at exit, where
    # gloo aborts now and then ("terminate called without an active exception")
    gc.collect()
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--strategy", choices=("ddp", "fsdp2"), default="ddp")
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    with tempfile.TemporaryDirectory(prefix="distea-bench-torch-") as folder:
        mp.spawn(rank_main, args=(args.strategy, args.steps, os.path.join(folder, "store")),
                 nprocs=2)
    print(f"{args.strategy}: {args.steps} steps")


if __name__ == "__main__":
    main()
