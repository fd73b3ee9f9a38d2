"""One data-parallel rank: logistic regression on its shard, gradients all-reduced over gloo.

Runs in a process started by `torch.multiprocessing.spawn`. Rendezvous goes
through a `FileStore` in a private temporary directory (no TCP store, no port
to pick), and gloo is pinned to the loopback interface, so nothing listens
beyond 127.0.0.1.

By default the model is wrapped in DistributedDataParallel, whose C++
reducer broadcasts the initial parameters and all-reduces gradient buckets
during backward (constructing it imports torch._dynamo, which costs several
seconds per process). Rank 0 alone saves a checkpoint every
``CHECKPOINT_EVERY`` steps (`save_checkpoint`): what it does reaches the
other ranks only through the next gradient all-reduce. With ``use_ddp``
false the gradients are averaged with explicit `dist.all_reduce` calls
(`average_gradients`), the pattern of PyTorch's own distributed tutorial.
"""

from __future__ import annotations

import gc
import io
import os
from datetime import timedelta
from multiprocessing.queues import Queue

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

SEED = 2024
SAMPLES = 600
FEATURES = 6
LEARNING_RATE = 0.5
INIT_TIMEOUT = timedelta(seconds=30)
CHECKPOINT_EVERY = 5


def set_rank_environment(rank: int, world_size: int) -> None:
    """Publish RANK/WORLD_SIZE/LOCAL_RANK as torchrun would, for tools that label processes."""
    os.environ["RANK"] = str(rank)
    os.environ["WORLD_SIZE"] = str(world_size)
    os.environ["LOCAL_RANK"] = str(rank)


def init_distributed(rank: int, world_size: int, store_path: str) -> None:
    """Join the gloo process group through the shared file store."""
    store = dist.FileStore(store_path, world_size)
    dist.init_process_group(
        "gloo", store=store, rank=rank, world_size=world_size, timeout=INIT_TIMEOUT
    )


def load_shard(rank: int, world_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's samples (every world_size-th, from `rank`) of a seeded data set."""
    generator = torch.Generator().manual_seed(SEED)
    true_weights = torch.randn(FEATURES, generator=generator, dtype=torch.float64)
    features = torch.randn(SAMPLES, FEATURES, generator=generator, dtype=torch.float64)
    noise = 0.5 * torch.randn(SAMPLES, generator=generator, dtype=torch.float64)
    labels = ((features @ true_weights + noise) > 0).to(torch.float64)
    return features[rank::world_size], labels[rank::world_size]


def build_model(use_ddp: bool) -> nn.Module:
    """A zero-initialised linear model, optionally wrapped in DDP."""
    model = nn.Linear(FEATURES, 1, dtype=torch.float64)
    with torch.no_grad():
        model.weight.zero_()
        model.bias.zero_()
    return DistributedDataParallel(model) if use_ddp else model


def broadcast_initial_weights(model: nn.Module) -> None:
    """Make every replica start from rank 0's parameters (DDP does this itself)."""
    for parameter in model.parameters():
        dist.broadcast(parameter.data, src=0)


def average_gradients(model: nn.Module, world_size: int) -> None:
    """Replace each local gradient by the mean over all ranks."""
    for parameter in model.parameters():
        assert parameter.grad is not None
        dist.all_reduce(parameter.grad, op=dist.ReduceOp.SUM)
        parameter.grad /= world_size


def apply_update(model: nn.Module) -> None:
    """Plain gradient descent, written out (torch.optim would import torch._dynamo)."""
    with torch.no_grad():
        for parameter in model.parameters():
            assert parameter.grad is not None
            parameter -= LEARNING_RATE * parameter.grad
            parameter.grad = None


def train_step(
    model: nn.Module, features: torch.Tensor, labels: torch.Tensor, world_size: int
) -> torch.Tensor:
    """Forward, backward, gradient averaging, update; returns the local loss."""
    logits = model(features).squeeze(1)
    loss = nn.functional.binary_cross_entropy_with_logits(logits, labels)
    loss.backward()  # with DDP, gradients are all-reduced during this call
    if not isinstance(model, DistributedDataParallel):
        average_gradients(model, world_size)
    apply_update(model)
    return loss.detach()


def save_checkpoint(model: nn.Module, step: int) -> int:
    """Rank 0's checkpoint of the weights (to memory: the sample writes no files); its size."""
    module = model.module if isinstance(model, DistributedDataParallel) else model
    buffer = io.BytesIO()
    torch.save({"step": step, "model": module.state_dict()}, buffer)
    return buffer.tell()


def average_loss(local_loss: torch.Tensor, world_size: int) -> float:
    """The global loss: the mean of the ranks' (equal-sized) shard losses."""
    total = local_loss.clone()
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    return float(total) / world_size


def train(rank: int, world_size: int, steps: int, use_ddp: bool) -> tuple[list[float], list[float]]:
    """Synchronous data-parallel training; returns the loss curve and final weights."""
    features, labels = load_shard(rank, world_size)
    model = build_model(use_ddp)
    if not use_ddp:
        broadcast_initial_weights(model)
    losses = []
    for step in range(steps):
        local_loss = train_step(model, features, labels, world_size)
        losses.append(average_loss(local_loss, world_size))
        if rank == 0 and step % CHECKPOINT_EVERY == 0:
            save_checkpoint(model, step)
    weights = torch.cat([parameter.detach().flatten() for parameter in model.parameters()])
    return losses, weights.tolist()  # plain floats: no numpy needed


def run_worker(
    rank: int, world_size: int, steps: int, use_ddp: bool, store_path: str, results: Queue
) -> None:
    """Process entry point (mp.spawn passes the rank first)."""
    set_rank_environment(rank, world_size)
    torch.set_num_threads(1)
    init_distributed(rank, world_size, store_path)
    try:
        losses, weights = train(rank, world_size, steps, use_ddp)
        dist.barrier()
    finally:
        # a group still held by a reference cycle would be freed at exit, where
        # gloo aborts now and then ("terminate called without an active exception")
        gc.collect()
        dist.destroy_process_group()
    results.put((rank, losses, weights))
