"""What the launcher tells every traced process, through the environment.

``distea run`` serialises a :class:`TracerConfig` into ``DISTEA_CONFIG``; the
bootstrap hook in each process reads it back. The environment is the one
channel that reaches every descendant (subprocess, multiprocessing spawn,
exec, shell scripts) without touching the program's arguments.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields

CONFIG_ENV = "DISTEA_CONFIG"
PARENT_TOKEN_ENV = "DISTEA_PARENT_TOKEN"
START_METHOD_ENV = "DISTEA_START_METHOD"


@dataclass(frozen=True)
class TracerConfig:
    run_dir: str
    """Where untraceable children leave a note (the collector owns the rest)."""
    endpoint: str
    """ZeroMQ endpoint of the collector."""
    mode: str = "compact"
    root: str = "."
    """Code under this directory (outside environments) is in scope."""
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    flush_timeout_ms: int = 2000
    """How long a process may wait at exit for its last batch to leave."""
    curve_server_key: str | None = None
    curve_public_key: str | None = None
    curve_secret_key: str | None = None
    extra: dict[str, str] = field(default_factory=dict)

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(
        cls, environ: os._Environ[str] | dict[str, str] | None = None
    ) -> TracerConfig | None:
        raw = (os.environ if environ is None else environ).get(CONFIG_ENV)
        if not raw:
            return None
        values = json.loads(raw)
        if not isinstance(values, dict):
            raise ValueError(f"{CONFIG_ENV} is not a JSON object")
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in values.items() if k in known}  # newer launchers add keys
        values["include"] = tuple(values.get("include", ()))
        values["exclude"] = tuple(values.get("exclude", ()))
        return cls(**values)
