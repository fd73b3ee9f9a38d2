"""Small but real distributed Python programs: the subjects of distea's demo, tests and benchmarks.

Each sample is a subpackage run as ``python -m sample_systems.NAME``: a
launcher process that starts several role processes (servers, clients,
workers) on 127.0.0.1 with OS-chosen ports, waits for all of them with
deadlines, and prints a short deterministic summary. See docs/samples.md.

`SAMPLES` lists them for the CLI demo, the tests and the benchmarks. Importing
this package is cheap: it imports no sample code (and never torch).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SampleInfo:
    """What a tool needs to know to run a sample and ask it good questions.

    `interesting_queries` are method names (``module.qualname``) worth giving
    to ``distea impact``. `never_impacted` are methods that, in every process
    where they run, finish before anything caused by an interesting query can
    reach that process, so no impact set of an interesting query may contain
    them: reporting one is a precision bug (never a safety one). `processes`
    counts the OS processes a traced run should record with default
    arguments, helpers included (multiprocessing's resource tracker).
    """

    name: str
    summary: str
    module: str
    processes: int
    needs_torch: bool = False
    requires: tuple[str, ...] = ()
    """Modules beyond distea's own dependencies that the sample imports (numpy)."""
    interesting_queries: tuple[str, ...] = ()
    never_impacted: tuple[str, ...] = ()

    @property
    def command(self) -> tuple[str, ...]:
        """Arguments after the interpreter: ``python -m MODULE``."""
        return ("-m", self.module)


_PS = "sample_systems.param_server"
_RING = "sample_systems.ring_allreduce"
_PIPE = "sample_systems.task_pipeline"
_WC = "sample_systems.wordcount"

SAMPLES: dict[str, SampleInfo] = {
    info.name: info
    for info in (
        SampleInfo(
            name="param_server",
            summary="data-parallel logistic regression: a ZeroMQ parameter server and 2 workers",
            module=_PS,
            processes=4,
            requires=("numpy",),
            interesting_queries=(
                f"{_PS}.worker.compute_gradient",
                f"{_PS}.server.apply_update",
                f"{_PS}.server.evaluate_loss",
                f"{_PS}.server.report",
            ),
            never_impacted=(
                f"{_PS}.server.init_weights",
                f"{_PS}.worker.load_shard",
                f"{_PS}.data.make_dataset",
            ),
        ),
        SampleInfo(
            name="chat",
            summary="threaded TCP chat server and 3 scripted clients (join, say, tell, leave)",
            module="sample_systems.chat",
            processes=5,
            interesting_queries=(
                "sample_systems.chat.client.send_private",
                "sample_systems.chat.server.ChatRoom.broadcast_message",
                "sample_systems.chat.client.carol_script",
            ),
            never_impacted=("sample_systems.chat.client.ChatSession.__init__",),
        ),
        SampleInfo(
            name="echo_async",
            summary="asyncio TCP echo server and 2 clients pipelining requests",
            module="sample_systems.echo_async",
            processes=4,
            interesting_queries=(
                "sample_systems.echo_async.client.send_requests",
                "sample_systems.echo_async.server.echo_line",
            ),
        ),
        SampleInfo(
            name="task_pipeline",
            summary="ZeroMQ ventilator -> 2 workers -> sink (PUSH/PULL), stop over PUB/SUB",
            module=_PIPE,
            processes=5,
            interesting_queries=(
                f"{_PIPE}.worker.count_primes",
                f"{_PIPE}.ventilator.dispatch_tasks",
                f"{_PIPE}.sink.broadcast_stop",
            ),
            never_impacted=(
                f"{_PIPE}.ventilator.generate_tasks",
                f"{_PIPE}.ventilator.wait_for_workers",
                f"{_PIPE}.worker.report_ready",
            ),
        ),
        SampleInfo(
            name="kvstore",
            summary="primary + 2 backups with synchronous replication, then a failover",
            module="sample_systems.kvstore",
            processes=5,
            interesting_queries=(
                "sample_systems.kvstore.node.NodeState.handle_put",
                "sample_systems.kvstore.client.failover",
                "sample_systems.kvstore.node.NodeState.promote_to_primary",
            ),
            never_impacted=("sample_systems.kvstore.node.NodeServer.__init__",),
        ),
        SampleInfo(
            name="ring_allreduce",
            summary="3 spawned ranks training with ring all-reduce over TCP between neighbours",
            module=_RING,
            processes=5,
            requires=("numpy",),
            interesting_queries=(
                f"{_RING}.worker.compute_gradient",
                f"{_RING}.ring.reduce_scatter",
                f"{_RING}.worker.apply_update",
            ),
            never_impacted=(
                f"{_RING}.worker.load_shard",
                f"{_RING}.worker.rendezvous",
                f"{_RING}.ring.connect_ring",
            ),
        ),
        SampleInfo(
            name="wordcount",
            summary="map-reduce word count: 3 mappers send partial counts early, "
                    "a busy reducer reads them late (distea vs DistIA)",
            module=_WC,
            processes=5,
            interesting_queries=(
                f"{_WC}.mapper.shard_statistics",
                f"{_WC}.mapper.count_words",
                f"{_WC}.mapper.write_local_summary",
                f"{_WC}.reducer.merge_partition",
            ),
            never_impacted=(
                f"{_WC}.reducer.open_mailboxes",
                f"{_WC}.reducer.load_stopwords",
                f"{_WC}.mapper.load_shard",
                f"{_WC}.corpus.make_shard",
            ),
        ),
        SampleInfo(
            name="torch_ddp",
            summary="DistributedDataParallel, 3 ranks via torch.multiprocessing.spawn, gloo on "
                    "CPU; rank 0 checkpoints (needs torch)",
            module="sample_systems.torch_ddp",
            processes=5,
            needs_torch=True,
            interesting_queries=(
                "sample_systems.torch_ddp.trainer.save_checkpoint",
                "sample_systems.torch_ddp.trainer.train_step",
            ),
            never_impacted=("sample_systems.torch_ddp.trainer.load_shard",),
        ),
    )
}
"""Every sample by name; `param_server` first because it is the demo subject."""

DEMO_SAMPLE = "param_server"
