"""The HTML impact report: one self-contained file (``distea report``).

:mod:`distea.report.model` builds the view model from a Run and an impact
result; :mod:`distea.report.render` fills the jinja2 template with it and
inlines the bundled assets. See docs/report.md for how to read the page.
"""

from distea.report.model import ReportModel, build_model
from distea.report.render import render_model, render_report

__all__ = ["ReportModel", "build_model", "render_model", "render_report"]
