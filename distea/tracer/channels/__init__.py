"""One interceptor module per transport; each implements ``distea.tracer.seams.Channel``."""

CHANNEL_MODULES = (
    ("distea.tracer.channels.processes", "ProcessChannel"),
    ("distea.tracer.channels.pipes", "PipeChannel"),
    ("distea.tracer.channels.files", "FileChannel"),
    ("distea.tracer.channels.unseen", "UnseenTrafficDetector"),
    ("distea.tracer.channels.signals", "SignalChannel"),
)
"""Channels installed at start-up: they patch what every process has (``os``,
``builtins``, ``_signal``) or watch the whole process (the unseen-traffic detector).
Here, not in ``startup``: ``distea run`` names them to write the start-up image
(``distea.tracer.bytecode.refresh_tracer_code``) without importing the tracer."""

CODE_SUFFIXES = (".py", ".pyc", ".pyw")
"""Python code, which the import system reads at every import (``open_code`` opens it with
``_io.open``): the file and pipe channels hand such an open straight to the original,
before any other look (code, not data; and no FIFO is named so)."""
