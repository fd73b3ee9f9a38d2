"""What the launcher tells every traced process, through the environment.

``distea run`` serialises a :class:`TracerConfig` into ``DISTEA_CONFIG``; the
bootstrap hook in each process reads it back. The environment is the one
channel that reaches every descendant (subprocess, multiprocessing spawn,
exec, shell scripts) without touching the program's arguments.
"""

from __future__ import annotations

import os
import sys

CONFIG_ENV = "DISTEA_CONFIG"
PARENT_TOKEN_ENV = "DISTEA_PARENT_TOKEN"
START_METHOD_ENV = "DISTEA_START_METHOD"
TRACER_PATH_ENV = "DISTEA_TRACER_PATH"
"""A directory with only distea and msgpack, for traced Pythons that lack them (see
:func:`distea.launcher.tracer_import_dir`); the start-up hook reads it by this name."""
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""This distea package's folder."""


def tracer_code_id(package_dir: str = PACKAGE_DIR) -> str:
    """Which tracer code a process runs: a distea package, on a Python and at an
    optimisation level (each has bytecode caches and a start-up image of its own)."""
    return f"{package_dir}:{sys.implementation.cache_tag}:{sys.flags.optimize}"


class TracerConfig:
    """The tracer's settings, read once at start-up (immutable).

    A plain class, not a dataclass: ``dataclasses`` imports ``inspect`` (and
    ``ast``, ``dis``, ``tokenize``...), which would cost every traced process
    about 10 ms before the program's first line.
    """

    FIELDS = ("run_dir", "endpoint", "mode", "root", "include", "exclude",
              "flush_timeout_ms", "curve_server_key", "curve_public_key",
              "curve_secret_key", "extra", "prepared")
    """In the order of the constructor's parameters."""
    __slots__ = FIELDS

    run_dir: str
    """Where untraceable children leave a note (the collector owns the rest)."""
    endpoint: str
    """ZeroMQ endpoint of the collector."""
    mode: str
    root: str
    """Code under this directory (outside environments) is in scope."""
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    flush_timeout_ms: int
    """How long a process may wait at exit for its last batch to leave."""
    curve_server_key: str | None
    curve_public_key: str | None
    curve_secret_key: str | None
    extra: dict[str, str]
    prepared: str | None
    """The tracer code (:func:`tracer_code_id`) whose caches and start-up image
    ``distea run`` brings up to date itself while the command starts; the run's first
    process that runs that code leaves them to it, and starts sooner."""

    def __init__(self, run_dir: str, endpoint: str, mode: str = "compact", root: str = ".",
                 include: tuple[str, ...] = (), exclude: tuple[str, ...] = (),
                 flush_timeout_ms: int = 2000, curve_server_key: str | None = None,
                 curve_public_key: str | None = None, curve_secret_key: str | None = None,
                 extra: dict[str, str] | None = None, prepared: str | None = None) -> None:
        values = (run_dir, endpoint, mode, root, include, exclude, flush_timeout_ms,
                  curve_server_key, curve_public_key, curve_secret_key,
                  {} if extra is None else extra, prepared)
        for name, value in zip(self.FIELDS, values, strict=True):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"TracerConfig is immutable (cannot set {name})")

    def _values(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in self.FIELDS}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TracerConfig):
            return NotImplemented
        return self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]  # holds a dict, as the dataclass did

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._values().items())
        return f"TracerConfig({inner})"

    def to_env(self) -> str:
        from distea.jsontext import dumps  # json.dumps's text without json (as the reader)

        values = self._values()
        values["include"] = list(self.include)
        values["exclude"] = list(self.exclude)
        values["extra"] = dict(self.extra)
        return dumps(values)

    @classmethod
    def from_env(
        cls, environ: os._Environ[str] | dict[str, str] | None = None
    ) -> TracerConfig | None:
        raw = (os.environ if environ is None else environ).get(CONFIG_ENV)
        if not raw:
            return None
        values = read_json_object(raw)
        if not isinstance(values, dict):
            raise ValueError(f"{CONFIG_ENV} is not a JSON object")
        values = {k: v for k, v in values.items() if k in cls.FIELDS}  # newer launchers add keys
        values["include"] = tuple(values.get("include", ()))
        values["exclude"] = tuple(values.get("exclude", ()))
        return cls(**values)


class _ScannerSettings:
    """What ``_json.make_scanner`` reads from ``json.JSONDecoder``: plain JSON."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int

    @staticmethod
    def parse_constant(name: str) -> float:
        return float(name)  # NaN, Infinity: as json.loads


def read_json_object(raw: str) -> object:
    """``json.loads(raw)``, without importing ``json``.

    ``json`` imports ``re`` (and ``enum``, ``functools``, ...) to skip
    whitespace: about 4 ms of every traced process's start. Its C scanner
    alone parses the same grammar; the launcher writes the config compactly
    enough for it (:func:`distea.jsontext.dumps`, ``json.dumps``'s text: no
    whitespace around the document).
    Where the C scanner is missing (another Python), ``json`` itself.
    """
    try:
        from _json import make_scanner
    except ImportError:
        import json

        return json.loads(raw)
    text = raw.strip(" \t\n\r")
    scanner = make_scanner(_ScannerSettings())  # type: ignore[arg-type]  # reads only these
    value, end = scanner(text, 0)
    if end != len(text):
        raise ValueError(f"{CONFIG_ENV}: extra data after the JSON value")
    return value
