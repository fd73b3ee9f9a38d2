"""Launch the ZeroMQ task pipeline: sink, ventilator and two worker processes."""

from __future__ import annotations

import sys

from sample_systems._launch import Role, RoleGroup, run_sample

WORKERS = ("worker-1", "worker-2")


def launch() -> list[Role]:
    """Start the sink and ventilator (they bind), then the workers (they connect)."""
    with RoleGroup() as group:
        sink = group.start("sink", "sample_systems.task_pipeline.sink")
        sink_port, control_port = group.wait_ready(sink)
        ventilator = group.start(
            "ventilator",
            "sample_systems.task_pipeline.ventilator",
            "--sink-port", sink_port,
            "--workers", len(WORKERS),
        )  # fmt: skip
        tasks_port, ready_port = group.wait_ready(ventilator)
        for name in WORKERS:
            group.start(
                name,
                "sample_systems.task_pipeline.worker",
                "--name", name,
                "--tasks-port", tasks_port,
                "--ready-port", ready_port,
                "--sink-port", sink_port,
                "--control-port", control_port,
            )  # fmt: skip
        return group.finish()


if __name__ == "__main__":
    sys.exit(run_sample("task_pipeline", launch))
