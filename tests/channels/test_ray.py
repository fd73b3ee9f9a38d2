"""Ray: tasks, an actor called from a task, a driver function -> task -> actor chain.

One program (``ray_app/app.py``, ``ray.init(num_cpus=2)``, no dashboard), run
untraced and under ``distea run``; Ray is slow to start on a loaded machine,
so this is the only Ray run of the suite. Expected sets are worked out by
hand from the program's order: ``dependent()`` runs after ``chain()`` has
returned, so the tasks of the chain and of ``squares()`` are not in its
impact, and everything it submits is; ``combine`` is handed the value of
``Seeder.seed``'s ref by Ray, so it is in the impact of ``Seeder.seed``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import distea
from tests.channels.support import PY, Traced
from tests.tracing import run_traced

ray = pytest.importorskip("ray", reason="ray is not installed (no wheel for this platform)")

APP = Path(__file__).parent / "ray_app"
UNTRACED_OUTPUT = "squares [0, 1, 4]\nchain 40\ndependent 26\ntotal 40\n"


@pytest.mark.timeout(240)
def test_ray_tasks_and_actors_are_edges(tmp_path: Path) -> None:
    app = shutil.copytree(APP, tmp_path / "app", ignore=shutil.ignore_patterns("__pycache__"))
    # the program's untraced output is deterministic and known: one Ray run is
    # spared (Ray takes ~15 s to start on a loaded 2-core machine)
    result = run_traced([PY, "app.py"], app, tmp_path / "run", timeout=200).result
    assert (result.returncode, result.stdout) == (0, UNTRACED_OUTPUT), result.stderr
    run = distea.load(tmp_path / "run")
    traced = Traced(run, result.stdout)
    # Ray ends its workers with SIGKILL: what they did must be there all the same
    (driver,) = [p for p in run.processes.values() if p.argv[-1] == "app.py"]
    assert driver.complete
    kinds = run.matching.by_kind
    # 3 squares, Counter(), forward, its Counter.add, Seeder(), seed, combine, the last add
    assert kinds["ray"].external == kinds["ray"].ambiguous == 0
    submissions = [s for s, r in traced.edges("ray") if s.channel.endswith(">")]
    assert len(submissions) == 10
    workers = [k for k, p in run.processes.items() if "default_worker.py" in " ".join(p.argv)]
    ran = {name for k in workers for name in run.executions[k]}
    assert {"app.square", "app.Counter.__init__", "app.Counter.add", "app.add_to",
            "app.forward", "app.scale", "app.combine", "app.Seeder.seed"} <= ran

    assert {"app.square"} <= traced.impacted("app.squares")
    assert {"app.forward", "app.scale", "app.Counter.add", "app.add_to"} <= traced.impacted(
        "app.chain")
    after_chain = traced.impacted("app.dependent")
    assert {"app.combine", "app.Seeder.seed", "app.Counter.add"} <= after_chain
    assert not {"app.forward", "app.scale", "app.square"} & after_chain
    # combine gets seed's value from Ray (a ref argument), never through a ray.get
    assert "app.combine" in traced.impacted("app.Seeder.seed")

    explanation = run.explain("app.chain", "app.add_to")
    assert explanation.impacted
    assert sum("ray" in step.detail for step in explanation.steps) >= 2, explanation.steps
