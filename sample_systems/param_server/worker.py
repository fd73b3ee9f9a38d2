"""Worker: computes gradients on its shard of the data and trades them for new weights.

Each step is one request/reply with the server: push the local gradient, get
back the weights that the averaged update produced. `load_shard` runs before
the first gradient exists anywhere.
"""

from __future__ import annotations

import argparse

import numpy as np
import zmq

from sample_systems.param_server.data import cross_entropy, make_dataset, predict
from sample_systems.param_server.wire import (
    DONE,
    PULL,
    PUSH,
    decode_array,
    decode_int,
    encode_array,
    encode_int,
)

RECV_TIMEOUT_MS = 10_000
LINGER_MS = 2000


def load_shard(rank: int, world_size: int) -> tuple[np.ndarray, np.ndarray]:
    """This worker's slice of the data set: every world_size-th sample from `rank`."""
    features, labels = make_dataset()
    return features[rank::world_size], labels[rank::world_size]


def compute_gradient(
    weights: np.ndarray, features: np.ndarray, labels: np.ndarray
) -> tuple[np.ndarray, float]:
    """Gradient of the mean cross-entropy on the shard, and the shard's loss."""
    errors = predict(weights, features) - labels
    gradient = features.T @ errors / len(labels)
    return gradient, cross_entropy(weights, features, labels)


def pull_weights(sock: zmq.Socket[bytes]) -> tuple[int, np.ndarray]:
    """Ask the server for the current weights."""
    sock.send_multipart([PULL])
    step, weights = sock.recv_multipart()
    return decode_int(step), decode_array(weights)


def push_gradient(
    sock: zmq.Socket[bytes], rank: int, step: int, gradient: np.ndarray
) -> tuple[int, np.ndarray]:
    """Send a gradient; the reply (after everyone's gradients) holds the new weights."""
    sock.send_multipart([PUSH, encode_int(rank), encode_int(step), encode_array(gradient)])
    new_step, weights = sock.recv_multipart()
    return decode_int(new_step), decode_array(weights)


def say_done(sock: zmq.Socket[bytes]) -> None:
    """Tell the server this worker will send nothing more."""
    sock.send_multipart([DONE])
    sock.recv_multipart()


def train(sock: zmq.Socket[bytes], rank: int, world_size: int, steps: int) -> list[float]:
    """The worker's training loop; returns its local loss at every step."""
    features, labels = load_shard(rank, world_size)
    step, weights = pull_weights(sock)
    local_losses = []
    while step < steps:
        gradient, loss = compute_gradient(weights, features, labels)
        local_losses.append(loss)
        step, weights = push_gradient(sock, rank, step, gradient)
    say_done(sock)
    return local_losses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world-size", type=int, required=True)
    parser.add_argument("--steps", type=int, required=True)
    args = parser.parse_args()
    with zmq.Context() as ctx:
        sock = ctx.socket(zmq.REQ)
        sock.setsockopt(zmq.LINGER, LINGER_MS)
        sock.setsockopt(zmq.RCVTIMEO, RECV_TIMEOUT_MS)
        sock.connect(f"tcp://127.0.0.1:{args.port}")
        losses = train(sock, args.rank, args.world_size, args.steps)
        sock.close()
    print(f"rank {args.rank}: {len(losses)} steps, local loss {losses[0]:.6f} -> {losses[-1]:.6f}")


if __name__ == "__main__":
    main()
