"""Parameter server: owns the weights, averages the workers' gradients, applies updates.

Synchronous data parallelism over a ZeroMQ ROUTER socket. Each worker (a REQ
socket) first pulls the initial weights, then, every step, pushes a gradient;
the server holds every reply until all gradients of the step are in, applies
the averaged update, evaluates the loss, and answers everyone with the new
weights. `init_weights` and the first `evaluate_loss` run before any gradient
arrives, so nothing a worker does can affect them.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

import numpy as np
import zmq

from sample_systems._launch import announce_ready
from sample_systems.param_server.data import FEATURES, cross_entropy, make_dataset
from sample_systems.param_server.wire import (
    DONE,
    PULL,
    PUSH,
    decode_array,
    decode_int,
    encode_array,
    encode_int,
)

LEARNING_RATE = 0.5
RECV_TIMEOUT_MS = 10_000
LINGER_MS = 2000


@dataclass
class TrainingState:
    """The weights, the current step, and the gradients received for it."""

    weights: np.ndarray
    step: int = 0
    pending: dict[int, np.ndarray] = field(default_factory=dict)
    waiting: list[bytes] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)


def init_weights() -> np.ndarray:
    """Start from zero weights (loss = ln 2), so the fall in loss is easy to read."""
    return np.zeros(FEATURES)


def evaluate_loss(weights: np.ndarray, features: np.ndarray, labels: np.ndarray) -> float:
    """Loss of the current weights on the whole data set."""
    return cross_entropy(weights, features, labels)


def average_gradients(gradients: dict[int, np.ndarray]) -> np.ndarray:
    """Mean of the workers' gradients, summed in rank order so runs are reproducible."""
    return np.mean(np.stack([gradients[rank] for rank in sorted(gradients)]), axis=0)


def apply_update(weights: np.ndarray, gradient: np.ndarray) -> np.ndarray:
    """One step of gradient descent."""
    return weights - LEARNING_RATE * gradient


def reply(sock: zmq.Socket[bytes], identity: bytes, *frames: bytes) -> None:
    """Answer one REQ peer through the ROUTER socket."""
    sock.send_multipart([identity, b"", *frames])


def receive_gradient(
    state: TrainingState, identity: bytes, rank: int, step: int, gradient: np.ndarray
) -> None:
    """Park a worker's gradient (and its reply) until the whole step is in."""
    if step != state.step:
        raise RuntimeError(f"rank {rank} pushed step {step} during step {state.step}")
    state.pending[rank] = gradient
    state.waiting.append(identity)


def finish_step(
    state: TrainingState, sock: zmq.Socket[bytes], features: np.ndarray, labels: np.ndarray
) -> None:
    """Apply the averaged update, record the loss, and release every waiting worker."""
    state.weights = apply_update(state.weights, average_gradients(state.pending))
    state.losses.append(evaluate_loss(state.weights, features, labels))
    state.step += 1
    for identity in state.waiting:
        reply(sock, identity, encode_int(state.step), encode_array(state.weights))
    state.pending.clear()
    state.waiting.clear()


def serve(sock: zmq.Socket[bytes], workers: int) -> TrainingState:
    """Handle pulls and pushes until every worker has said it is done."""
    features, labels = make_dataset()
    state = TrainingState(init_weights())
    state.losses.append(evaluate_loss(state.weights, features, labels))
    done = 0
    while done < workers:
        identity, _, kind, *frames = sock.recv_multipart()
        if kind == PULL:
            reply(sock, identity, encode_int(state.step), encode_array(state.weights))
        elif kind == PUSH:
            rank, step, gradient = decode_int(frames[0]), decode_int(frames[1]), frames[2]
            receive_gradient(state, identity, rank, step, decode_array(gradient))
            if len(state.pending) == workers:
                finish_step(state, sock, features, labels)
        elif kind == DONE:
            done += 1
            reply(sock, identity, DONE)
    return state


def report(losses: list[float]) -> None:
    """Print the loss curve (every fifth step) and the first and last loss."""
    for step, loss in enumerate(losses):
        if step % 5 == 0 or step == len(losses) - 1:
            print(f"step {step:3d}  loss {loss:.6f}")
    print(f"first loss {losses[0]:.6f}  last loss {losses[-1]:.6f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with zmq.Context() as ctx:
        sock = ctx.socket(zmq.ROUTER)
        sock.setsockopt(zmq.LINGER, LINGER_MS)
        sock.setsockopt(zmq.RCVTIMEO, RECV_TIMEOUT_MS)
        announce_ready(sock.bind_to_random_port("tcp://127.0.0.1"))
        state = serve(sock, args.workers)
        sock.close()
    print(f"trained {state.step} steps with {args.workers} workers")
    report(state.losses)


if __name__ == "__main__":
    main()
