"""One training rank: linear regression on its shard, gradients averaged by ring all-reduce.

Runs in a process started with the multiprocessing `spawn` method. RANK,
WORLD_SIZE and LOCAL_RANK are in the environment from the very start of the
process (the launcher sets them before spawning), as torchrun would set them.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from multiprocessing.queues import Queue

import numpy as np

from sample_systems.ring_allreduce.ring import connect_ring, ring_allreduce

SEED = 99
SAMPLES = 480
FEATURES = 8
LEARNING_RATE = 0.1
QUEUE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class WorkerResult:
    """What a rank reports back to the launcher."""

    rank: int
    losses: list[float]
    weights: bytes


def rank_from_environment() -> tuple[int, int]:
    """Read this process's rank and world size the way torchrun-style code does."""
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])


def load_shard(rank: int, world_size: int) -> tuple[np.ndarray, np.ndarray]:
    """This rank's contiguous slice of a seeded synthetic regression problem."""
    rng = np.random.default_rng(SEED)
    true_weights = rng.normal(size=FEATURES)
    features = rng.normal(size=(SAMPLES, FEATURES))
    targets = features @ true_weights + rng.normal(scale=0.1, size=SAMPLES)
    rows = np.array_split(np.arange(SAMPLES), world_size)[rank]
    return features[rows], targets[rows]


def compute_gradient(
    weights: np.ndarray, features: np.ndarray, targets: np.ndarray
) -> tuple[np.ndarray, float]:
    """Gradient of the mean squared error on the shard, and the shard's loss."""
    residuals = features @ weights - targets
    return 2.0 * features.T @ residuals / len(targets), float(np.mean(residuals**2))


def apply_update(weights: np.ndarray, gradient: np.ndarray) -> np.ndarray:
    """One step of gradient descent with the all-reduced (averaged) gradient."""
    return weights - LEARNING_RATE * gradient


def rendezvous(listener: socket.socket, rank: int, ports_out: Queue, ports_in: Queue) -> int:
    """Publish this rank's listening port; learn the right neighbour's port."""
    ports_out.put((rank, listener.getsockname()[1]))
    ports: list[int] = ports_in.get(timeout=QUEUE_TIMEOUT_S)
    return ports[(rank + 1) % len(ports)]


def train(
    rank: int, world_size: int, steps: int, left: socket.socket, right: socket.socket
) -> tuple[list[float], np.ndarray]:
    """Synchronous data-parallel gradient descent; returns the global loss per step."""
    features, targets = load_shard(rank, world_size)
    weights = np.zeros(FEATURES)
    losses = []
    for _ in range(steps):
        gradient, loss = compute_gradient(weights, features, targets)
        # The loss rides along as one more element, so one all-reduce averages both.
        total = ring_allreduce(np.append(gradient, loss), rank, world_size, left, right)
        mean = total / world_size
        weights = apply_update(weights, mean[:-1])
        losses.append(float(mean[-1]))
    return losses, weights


def run_worker(steps: int, ports_out: Queue, ports_in: Queue, results: Queue) -> None:
    """Process entry point: join the ring, train, report."""
    rank, world_size = rank_from_environment()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        right_port = rendezvous(listener, rank, ports_out, ports_in)
        left, right = connect_ring(listener, right_port)
    with left, right:
        losses, weights = train(rank, world_size, steps, left, right)
    results.put(WorkerResult(rank, losses, weights.tobytes()))
