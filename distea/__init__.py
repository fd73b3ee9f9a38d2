"""distea: distributed dynamic impact analysis for Python.

Record a run with ``distea run -- python app.py``, then::

    import distea
    run = distea.load(".distea/runs/<id>")      # or distea.load() for the latest
    result = run.impact("pkg.mod.func")
    for process, methods in result.impacted.items(): ...

This module stays light: the tracer lives under ``distea`` and starts inside
every traced process, so the analyzer is imported only when ``load`` is called.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: importing typing would cost every distea run ~4 ms
if TYPE_CHECKING:
    from pathlib import Path

    from distea.analyzer.run import Run

__all__ = ["load"]


def load(run_dir: Path | str | None = None) -> Run:
    """Load a run directory (default: the latest under ``.distea/runs``)."""
    from distea.analyzer.run import Run
    from distea.traceformat import latest_run

    return Run.load(latest_run() if run_dir is None else run_dir)
