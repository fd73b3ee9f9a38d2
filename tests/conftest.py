"""Shared fixtures."""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


@pytest.fixture
def program(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write a Python program into ``tmp_path/app``; returns its path."""

    def write(name: str, source: str) -> Path:
        path = tmp_path / "app" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
        return path

    return write


@pytest.fixture(autouse=True)
def no_tracer_left_behind() -> Iterator[None]:
    """No test may leave a distea sys.monitoring tool or a patched socket behind."""
    import socket

    before_send = socket.socket.send
    yield
    for tool in range(6):
        assert sys.monitoring.get_tool(tool) != "distea", f"tool {tool} still registered"
    assert socket.socket.send is before_send, "socket.socket.send left patched"
    assert "DISTEA_CONFIG" not in os.environ
