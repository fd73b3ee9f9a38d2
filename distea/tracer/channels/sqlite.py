"""SQLite databases: named as what the tracer cannot see, not recorded.

``sqlite3`` reads and writes its database files in C (libsqlite3), below
every patch of the files channel: two processes that share a database (a
job table one fills and another polls) hand each other data that nothing
records, and an impact set stops there. Until those reads and writes are
recorded, a process's first connection to each database file is named in
the run's problems (the session's ``unseen`` notes), so that every query
says where it may stop. In-memory databases are private to a process and
are not named.
"""

from __future__ import annotations

import os
import sys

from distea.tracer.channels.patching import Patches
from distea.tracer.session import TracerSession

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from typing import Any

URI_INDEX = 6
"""Where ``connect``'s ``uri`` flag stands among its positional arguments after
``database`` (timeout, detect_types, isolation_level, check_same_thread, factory,
cached_statements, uri)."""


def database_path(database: Any, uri: bool) -> str | None:
    """The file behind a ``connect`` argument, or None for an in-memory database."""
    try:
        name = os.fsdecode(database)
    except TypeError:
        return None  # connect raises its own error
    if uri and name.startswith("file:"):
        name, _, query = name[len("file:"):].partition("?")
        if "mode=memory" in query:
            return None
    if name in ("", ":memory:"):
        return None
    return os.path.abspath(name)


class SqliteChannel:
    """Wraps ``sqlite3.connect`` to note the database files a process opens."""

    def __init__(self) -> None:
        self.patches = Patches()
        self.session: TracerSession | None = None

    def install(self, session: TracerSession) -> None:
        self.session = session
        sqlite3 = sys.modules["sqlite3"]  # installed once the program imported it
        connect = self._wrap(sqlite3.connect)
        for module in (sqlite3, sys.modules.get("sqlite3.dbapi2")):
            if module is not None and hasattr(module, "connect"):
                self.patches.replace(module, "connect", connect)

    def uninstall(self) -> None:
        self.patches.restore()

    def _wrap(self, original: Any) -> Any:
        channel = self

        def connect(database: Any, *args: Any, **kwargs: Any) -> Any:
            connection = original(database, *args, **kwargs)
            try:
                uri = kwargs.get("uri", args[URI_INDEX] if len(args) > URI_INDEX else False)
                channel.note(database_path(database, bool(uri)))
            except Exception:
                if channel.session is not None:
                    channel.session.tracer_error()
            return connection

        return connect

    def note(self, path: str | None) -> None:
        session = self.session
        if path is None or session is None or session.finished:
            return
        session.say_unseen(
            f"SQLite database {path}: read and written in C (libsqlite3), not recorded; "
            "what other processes wrote there and this one read, or the other way "
            "round, is not ordered (an impact set may stop at it)")
