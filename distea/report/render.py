"""Render a :class:`~distea.report.model.ReportModel` to one self-contained HTML file.

The template (``templates/report.html.j2``) and the assets (``assets/``: the
stylesheet and the script that draws the swimlanes) ship inside the package
and are read with :mod:`importlib.resources`; they are inlined into the page,
with the model as a JSON island, so the file opens offline, anywhere.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import jinja2

from distea.report.model import ReportModel, build_model

if TYPE_CHECKING:
    from distea.analyzer.impact import ImpactResult
    from distea.analyzer.run import Run

ASSETS = ("report.css", "report.js")


def _package_text(*parts: str) -> str:
    return resources.files("distea.report").joinpath(*parts).read_text(encoding="utf-8")


def _environment() -> jinja2.Environment:
    def load(name: str) -> str:
        return _package_text("templates", name)

    return jinja2.Environment(
        loader=jinja2.FunctionLoader(load),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def json_island(obj: object) -> str:
    """JSON that is safe inside ``<script type="application/json">``."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_model(model: ReportModel, *, generated: str = "", version: str = "") -> str:
    """The HTML page for ``model``."""
    template = _environment().get_template("report.html.j2")
    return template.render(
        m=model,
        data=json_island(model.to_json()),
        css=_package_text("assets", "report.css"),
        js=_package_text("assets", "report.js"),
        generated=generated,
        version=version,
    )


def render_report(
    run: Run,
    result: ImpactResult,
    out: Path | str,
    *,
    title: str | None = None,
    generated: str = "",
    version: str = "",
) -> ReportModel:
    """Build the model of ``result`` and write the page to ``out``; returns the model."""
    model = build_model(run, result, title=title)
    html = render_model(model, generated=generated, version=version)
    Path(out).write_text(html, encoding="utf-8")
    return model
