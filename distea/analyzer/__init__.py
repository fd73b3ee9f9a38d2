"""Offline analysis of a run directory: matching, happens-before, impact.

Start from :func:`distea.load`, which returns a :class:`distea.analyzer.run.Run`.
"""
