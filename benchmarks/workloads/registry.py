"""The workloads of the overhead benchmark, each at a quick and a default size.

Every workload is a command started from the repository root, so its own
code (``benchmarks.workloads.*``, ``sample_systems.*``) is in distea's
default scope, and the standard library and site-packages are not.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Workload:
    name: str
    module: str
    default_args: tuple[str, ...] = ()
    quick_args: tuple[str, ...] = ()
    distributed: bool = False
    """Several processes exchanging messages (the ≤ 1.10x target applies)."""
    cpu_bound: bool = False
    """The worst case for callbacks (the ≤ 1.5x target applies)."""
    precision: bool = False
    """Used as a subject of the precision study (every executed method as a query)."""
    needs: tuple[str, ...] = field(default_factory=tuple)
    """Modules that must be importable."""
    programs: tuple[str, ...] = field(default_factory=tuple)
    """Programs that must be on PATH (servers the workload starts)."""

    def argv(self, quick: bool) -> list[str]:
        args = self.quick_args if quick else self.default_args
        return [sys.executable, "-m", self.module, *args]

    def missing(self) -> str | None:
        for name in (self.module, *self.needs):
            try:
                if importlib.util.find_spec(name) is None:
                    return f"{name} not found"
            except ModuleNotFoundError:
                return f"{name} not found"
        for program in self.programs:
            if shutil.which(program) is None:
                return f"{program} not on PATH"
        return None


WORKLOADS: tuple[Workload, ...] = (
    Workload("empty program (start-up)", "benchmarks.workloads.empty"),
    Workload("spawn Pool(4).map, 100 items (start-up)", "benchmarks.workloads.spawn_pool",
             ("--items", "100"), ("--items", "20"), distributed=True),
    Workload("6-process multiprocessing program (start-up)", "benchmarks.workloads.six_procs",
             ("--tasks", "50"), ("--tasks", "10"), distributed=True),
    Workload("CPU-bound: recursive fib", "benchmarks.workloads.cpu",
             ("--n", "27", "--rounds", "4"), ("--n", "25", "--rounds", "3"), cpu_bound=True),
    Workload("call-heavy loop", "benchmarks.workloads.calls",
             ("--n", "250000"), ("--n", "100000"), cpu_bound=True),
    Workload("TCP request/response (2 processes)", "benchmarks.workloads.tcp_loop",
             ("--n", "30000"), ("--n", "5000"), distributed=True, precision=True),
    Workload("asyncio streams round trip, standard loop (2 processes)",
             "benchmarks.workloads.asyncio_loop", ("--n", "20000"), ("--n", "3000"),
             distributed=True),
    Workload("asyncio streams round trip, uvloop (2 processes)",
             "benchmarks.workloads.asyncio_loop", ("--n", "20000", "--loop", "uvloop"),
             ("--n", "3000", "--loop", "uvloop"), distributed=True, needs=("uvloop",)),
    Workload("TLS round trip, SSLSocket server, asyncio client (2 processes)",
             "benchmarks.workloads.tls_loop", ("--n", "20000"), ("--n", "3000"),
             distributed=True, needs=("trustme",)),
    Workload("TLS round trip, SSLSocket at both ends (2 processes)",
             "benchmarks.workloads.tls_loop", ("--n", "20000", "--client", "block"),
             ("--n", "3000", "--client", "block"), distributed=True, needs=("trustme",)),
    Workload("ZeroMQ REQ/REP (2 processes)", "benchmarks.workloads.zmq_loop",
             ("--n", "10000"), ("--n", "3000"), distributed=True, precision=True,
             needs=("zmq",)),
    Workload("gRPC unary round trips (2 processes)", "benchmarks.workloads.grpc_loop",
             ("--n", "3000"), ("--n", "1000"), distributed=True, precision=True,
             needs=("grpc",)),
    Workload("Ray tasks (driver, worker, raylet)", "benchmarks.workloads.ray_tasks",
             ("--n", "300"), ("--n", "100"), distributed=True, needs=("ray",)),
    Workload("param_server sample", "sample_systems.param_server",
             ("--steps", "60"), ("--steps", "10"), distributed=True, precision=True,
             needs=("numpy",)),
    Workload("ring_allreduce sample", "sample_systems.ring_allreduce",
             ("--steps", "30"), ("--steps", "5"), distributed=True, precision=True,
             needs=("numpy",)),
    Workload("file-heavy: 2,000 small files written, then read by a child",
             "benchmarks.workloads.files", ("--files", "2000"), ("--files", "500"),
             distributed=True),
    Workload("wordcount sample (late reads)", "sample_systems.wordcount",
             ("--documents", "10000"), ("--documents", "2000"), distributed=True,
             precision=True),
    # the other sample systems, at their own (fixed) size: every sample is a
    # subject of the precision study, as every subject was in the DistIA study
    Workload("chat sample", "sample_systems.chat", distributed=True, precision=True),
    Workload("echo_async sample", "sample_systems.echo_async", distributed=True,
             precision=True),
    Workload("task_pipeline sample", "sample_systems.task_pipeline", distributed=True,
             precision=True, needs=("zmq",)),
    Workload("kvstore sample", "sample_systems.kvstore", distributed=True, precision=True),
    Workload("torch_ddp sample", "sample_systems.torch_ddp", distributed=True,
             precision=True, needs=("torch",)),
    # training-step overhead in steady state (the loop rank 0 times, after warm-up)
    Workload("torch DDP training (2 ranks)", "benchmarks.workloads.torch_training",
             ("--strategy", "ddp", "--steps", "200"), ("--strategy", "ddp", "--steps", "40"),
             distributed=True, needs=("torch",)),
    Workload("torch FSDP2 training (2 ranks)", "benchmarks.workloads.torch_training",
             ("--strategy", "fsdp2", "--steps", "100"), ("--strategy", "fsdp2", "--steps", "20"),
             distributed=True, needs=("torch",)),
    Workload("Celery via Redis round trip (4 processes + redis-server)",
             "benchmarks.workloads.celery_loop", ("--n", "300"), ("--n", "60"),
             distributed=True, needs=("celery", "redis"), programs=("redis-server",)),
)
