"""The sample systems run correctly, quickly and deterministically without distea.

Each sample is run as a user would (``python -m sample_systems.NAME``) twice:
the first run must succeed and print the facts that show the distributed
work really happened (messages delivered, totals right, loss falling); the
second must print exactly the same thing, because traced runs of the samples
are compared against each other and against golden outputs.
"""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sample_systems import DEMO_SAMPLE, SAMPLES
from sample_systems._launch import RoleGroup, SampleError

REPO_ROOT = Path(__file__).resolve().parents[1]
RUN_TIMEOUT_S = 60
TORCH_RUN_TIMEOUT_S = 240  # four processes each import torch (seconds apiece on 2 cores)
PLAIN_SAMPLES = [name for name, info in SAMPLES.items() if not info.needs_torch]


def run_sample(
    name: str, *args: str, timeout: float = RUN_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", f"sample_systems.{name}", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO_ROOT,
    )


def losses(stdout: str) -> tuple[float, float]:
    match = re.search(r"first loss ([\d.]+)\s+last loss ([\d.]+)", stdout)
    assert match, stdout
    return float(match[1]), float(match[2])


def check_chat(stdout: str) -> None:
    assert "3 members joined; relayed 2 broadcast and 1 private messages" in stdout
    assert "[bob] <- MSG alice hello everyone" in stdout
    assert "[carol] <- MSG alice hello everyone" in stdout
    assert "[carol] <- PRIV bob psst, alice is here" in stdout
    assert "[alice] <- MSG carol thanks bob" in stdout
    assert "PRIV" not in "".join(line for line in stdout.splitlines() if "[alice]" in line)
    for name in ("alice", "bob", "carol"):
        assert f"[{name}] <- BYE" in stdout


def check_echo_async(stdout: str) -> None:
    assert "[server] echoed 12 lines for 2 clients" in stdout
    for client in ("client-1", "client-2"):
        replies = [line for line in stdout.splitlines() if line.startswith(f"[{client}] ECHO")]
        assert len(replies) == 6
        assert replies[0] == f"[{client}] ECHO 1 {client} batch 0 request 0"
        assert replies[-1] == f"[{client}] ECHO 6 {client} batch 1 request 2"


def check_task_pipeline(stdout: str) -> None:
    # 24 tasks; the total is the sum of prime counts below each seeded bound.
    assert "[sink] collected 24 results; total = 11524" in stdout
    assert "[ventilator] dispatched 24 tasks to worker-1, worker-2" in stdout
    assert stdout.count("stopped on the sink's signal") == 2


def check_kvstore(stdout: str) -> None:
    assert "[client] get user:2 from backup-2: bobby (seq 4)" in stdout
    assert "[client] primary is down" in stdout
    assert "[client] promoted backup-1 at seq 4, replicating to backup-2" in stdout
    assert "[client] put cart:1=pears via backup-1: seq 5" in stdout
    assert "[client] get cart:1 from backup-2: pears (seq 6)" in stdout
    final = '{"cart:1": "pears", "user:1": "alice", "user:2": "bobby", "user:3": "carol"}'
    assert f"[backup-1] stopped as primary at seq 6: {final}" in stdout
    assert f"[backup-2] stopped as backup at seq 6: {final}" in stdout
    assert "[primary] stopped as primary at seq 4" in stdout


def check_training(stdout: str) -> None:
    first, last = losses(stdout)
    assert last < first * 0.6, stdout


def check_param_server(stdout: str) -> None:
    check_training(stdout)
    assert "[server] trained 30 steps with 2 workers" in stdout
    assert "[worker-0] rank 0: 30 steps" in stdout
    assert "[worker-1] rank 1: 30 steps" in stdout


def check_ring_allreduce(stdout: str) -> None:
    check_training(stdout)
    assert "ring_allreduce: launcher + 3 ranks started with multiprocessing spawn" in stdout
    assert "3 ranks agree on the final weights" in stdout


def check_wordcount(stdout: str) -> None:
    # 3 seeded shards; the reducer's totals are the sum of the mappers' own counts.
    assert "[reducer] reduced 3 partial results in mapper order: 3871, 4034, 3753 tokens" in stdout
    assert "[reducer] corpus: 11658 tokens, 103 distinct words" in stdout
    assert stdout.count("sent 8 partitions") == 3


CHECKS: dict[str, Callable[[str], None]] = {
    "chat": check_chat,
    "echo_async": check_echo_async,
    "task_pipeline": check_task_pipeline,
    "kvstore": check_kvstore,
    "param_server": check_param_server,
    "ring_allreduce": check_ring_allreduce,
    "wordcount": check_wordcount,
}


def test_every_plain_sample_has_a_check() -> None:
    assert sorted(CHECKS) == sorted(PLAIN_SAMPLES)


@pytest.mark.parametrize("name", PLAIN_SAMPLES)
def test_sample_runs_and_is_deterministic(name: str) -> None:
    first = run_sample(name)
    assert first.returncode == 0, first.stderr
    CHECKS[name](first.stdout)
    second = run_sample(name)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout


def test_param_server_worker_count_is_configurable() -> None:
    result = run_sample("param_server", "--workers", "3", "--steps", "10")
    assert result.returncode == 0, result.stderr
    assert "[server] trained 10 steps with 3 workers" in result.stdout
    assert "[worker-2] rank 2: 10 steps" in result.stdout
    check_training(result.stdout)


def torch_distributed_importable() -> bool:
    probe = "import torch.distributed as d, sys; sys.exit(0 if d.is_available() else 1)"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0


def test_torch_ddp_runs_or_says_why_not() -> None:
    result = run_sample("torch_ddp", timeout=TORCH_RUN_TIMEOUT_S)
    if torch_distributed_importable():
        assert result.returncode == 0, result.stderr
        check_training(result.stdout)
        assert "3 ranks agree on the final weights" in result.stdout
        assert run_sample("torch_ddp", timeout=TORCH_RUN_TIMEOUT_S).stdout == result.stdout
    else:
        assert result.returncode == 3
        assert "torch_ddp: cannot run:" in result.stderr
        assert "install torch" in result.stderr
        assert result.stdout == ""


def resolve(name: str) -> object:
    """Import the longest module prefix of `name` and walk the rest as attributes."""
    parts = name.split(".")
    for split in range(len(parts) - 1, 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[split:]:
            target = getattr(target, attribute)
        return target
    raise LookupError(name)


@pytest.mark.parametrize("name", PLAIN_SAMPLES)
def test_registry_names_real_functions(name: str) -> None:
    info = SAMPLES[name]
    assert info.name == name
    assert importlib.util.find_spec(f"{info.module}.__main__") is not None
    assert info.processes >= 3
    assert info.interesting_queries
    for method in (*info.interesting_queries, *info.never_impacted):
        assert callable(resolve(method)), method
    assert not set(info.interesting_queries) & set(info.never_impacted)


def test_registry_lists_the_demo_subject_first() -> None:
    assert next(iter(SAMPLES)) == DEMO_SAMPLE
    assert SAMPLES[DEMO_SAMPLE].never_impacted


def test_importing_the_registry_imports_no_sample() -> None:
    code = (
        "import sys, sample_systems; "
        "loaded = [m for m in sys.modules if m.startswith('sample_systems.') or m == 'torch']; "
        "print(loaded)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=60
    )
    assert result.stdout.strip() == "[]", result.stderr


def test_a_failing_role_fails_the_launcher_fast_and_nothing_is_left() -> None:
    started = time.monotonic()
    with (
        pytest.raises(SampleError, match="broken: exited with status 1"),
        RoleGroup(timeout_s=30) as group,
    ):
        waiting = group.start("waiting", "http.server", "--bind", "127.0.0.1", "0")
        group.start("broken", "sample_systems.no_such_module")
        group.finish()
    assert time.monotonic() - started < 15
    assert waiting.process.returncode is not None
