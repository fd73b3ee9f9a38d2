"""Sink: collects one result per task and tells the workers to stop.

The ventilator tells the sink how many tasks are in the batch; that message
travels on its own connection, so it may arrive after some results, and the
sink simply counts until both the batch size and the results are in.
"""

from __future__ import annotations

import zmq

from sample_systems._launch import announce_ready
from sample_systems.task_pipeline._zmq import bind_loopback, make_socket

STOP = b"STOP"


def collect_results(results: zmq.Socket[bytes]) -> dict[int, int]:
    """Receive results until every task of the announced batch is accounted for."""
    expected: int | None = None
    collected: dict[int, int] = {}
    while expected is None or len(collected) < expected:
        kind, *fields = results.recv_multipart()
        if kind == b"BATCH":
            expected = int(fields[0])
        else:
            task_id, value = (int(field) for field in fields)
            collected[task_id] = value
    return collected


def broadcast_stop(control: zmq.Socket[bytes]) -> None:
    """Tell every worker (subscribed to the control channel) to exit."""
    control.send(STOP)


def main() -> None:
    with zmq.Context() as ctx:
        results = make_socket(ctx, zmq.PULL)
        control = make_socket(ctx, zmq.PUB)
        announce_ready(bind_loopback(results), bind_loopback(control))
        collected = collect_results(results)
        broadcast_stop(control)
        results.close()
        control.close()
    print(f"collected {len(collected)} results; total = {sum(collected.values())}")


if __name__ == "__main__":
    main()
