"""Standard exports of a run (``distea export FORMAT``), one module per format.

Every format is an :class:`Exporter`: a name, a file suffix, a one-line
description, and ``export(run, impact)`` returning the file's text. The
impact result is optional; when given, exports mark impacted executions and
the processes' impact starts. All of them read happens-before from the
analyzer (:mod:`distea.exports.timeline`), none recomputes it.

- ``graphml``: the run graph for Gephi / yEd (:mod:`distea.exports.graphml`);
- ``shiviz``: a ShiViz log with vector clocks (:mod:`distea.exports.shiviz`);
- ``perfetto``: Chrome trace / Perfetto JSON with message flow arrows
  (:mod:`distea.exports.perfetto`);
- ``json``: everything in one documented JSON document (:mod:`distea.exports.jsondoc`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from distea.analyzer.impact import ImpactResult
    from distea.analyzer.run import Run


class Exporter(Protocol):
    """One export format."""

    name: str
    suffix: str
    description: str

    def export(self, run: Run, impact: ImpactResult | None = None) -> str:
        """The whole exported file as text."""
        ...


def exporters() -> dict[str, Exporter]:
    """Format name → exporter, in the order ``distea export --help`` lists them."""
    from distea.exports.graphml import GraphMLExporter
    from distea.exports.jsondoc import JSONExporter
    from distea.exports.perfetto import PerfettoExporter
    from distea.exports.shiviz import ShiVizExporter

    found: list[Exporter] = [GraphMLExporter(), ShiVizExporter(), PerfettoExporter(),
                             JSONExporter()]
    return {e.name: e for e in found}


FORMATS = ("graphml", "shiviz", "perfetto", "json")
"""The format names (kept in step with :func:`exporters` by a test)."""


def export(run: Run, fmt: str, impact: ImpactResult | None = None) -> str:
    """Export ``run`` in format ``fmt`` (one of :data:`FORMATS`)."""
    table = exporters()
    if fmt not in table:
        raise ValueError(f"unknown export format {fmt!r}; known: {', '.join(table)}")
    return table[fmt].export(run, impact)
