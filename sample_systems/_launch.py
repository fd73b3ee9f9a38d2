"""Shared launcher plumbing for the sample systems.

Every sample runs its roles as separate OS processes (`python -m
sample_systems.NAME.ROLE ...`) because distea traces each process on its own.
The launcher needs three things, and gets them all from here:

* start a role process with its stdout captured, so that the final summary can
  be printed in a fixed order (children racing to a shared terminal would make
  the output non-deterministic);
* read the one-line announcement a server prints once it has bound its
  OS-chosen ports (``READY <port> ...``), with a deadline;
* wait for every role with a deadline, and kill whatever is still running if
  anything goes wrong, so a bug can never leave processes behind or hang.

Announcements are read byte by byte straight from the pipe's file descriptor:
a buffered reader could swallow later output that `Popen.communicate` (which
reads the raw descriptor) would then never see.
"""

from __future__ import annotations

import os
import select
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import FrameType, TracebackType

READY = "READY"
"""First word of the line a role prints once its ports are bound."""

DEFAULT_TIMEOUT_S = 30.0
"""Deadline for a whole sample; each one normally finishes in a few seconds."""


class SampleError(RuntimeError):
    """A role failed, timed out or announced itself wrongly."""


def announce_ready(*ports: int) -> None:
    """Tell the launcher which ports this role bound (port 0 lets the OS pick)."""
    print(READY, *ports, flush=True)


@dataclass
class Role:
    """One started role process and the name it is reported under."""

    name: str
    process: subprocess.Popen[bytes]
    raw_output: bytearray = field(default_factory=bytearray)

    @property
    def output(self) -> str:
        """Everything the role printed after its announcement."""
        return self.raw_output.decode()


@dataclass
class RoleGroup:
    """The role processes of one sample run; a context manager that reaps them all.

    Leaving the ``with`` block kills any role still running, whether the block
    ended normally or with an exception, so no child can outlive the launcher.
    """

    timeout_s: float = DEFAULT_TIMEOUT_S
    roles: list[Role] = field(default_factory=list)
    deadline: float = 0.0

    def __enter__(self) -> RoleGroup:
        self.deadline = time.monotonic() + self.timeout_s
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        kill_remaining(self.roles)

    def start(self, name: str, module: str, *args: object) -> Role:
        """Start `python -m module args...` as the role called `name`."""
        command = [sys.executable, "-m", module, *(str(arg) for arg in args)]
        process = subprocess.Popen(command, stdout=subprocess.PIPE)
        role = Role(name, process)
        self.roles.append(role)
        return role

    def wait_ready(self, role: Role) -> list[int]:
        """Block until `role` announces its ports; return them."""
        assert role.process.stdout is not None
        line = read_line(role.process.stdout.fileno(), self.deadline)
        words = line.split()
        if not words or words[0] != READY:
            raise SampleError(f"{role.name}: expected a READY line, got {line!r}")
        return [int(word) for word in words[1:]]

    def finish(self) -> list[Role]:
        """Wait for every role to exit successfully, collecting its stdout.

        Fails as soon as any role fails (the others would only wait for it
        until their own timeouts), or when the deadline passes. The pipes are
        drained all along, so a chatty role can never block on a full pipe.
        """
        with selectors.DefaultSelector() as selector:
            for role in self.roles:
                assert role.process.stdout is not None
                selector.register(role.process.stdout.fileno(), selectors.EVENT_READ, role)
            while selector.get_map() or any(r.process.poll() is None for r in self.roles):
                drain_pipes(selector)
                check_exits(self.roles)
                if time.monotonic() > self.deadline:
                    running = [r.name for r in self.roles if r.process.poll() is None]
                    raise SampleError(f"still running at the deadline: {', '.join(running)}")
        check_exits(self.roles)
        return self.roles


def drain_pipes(selector: selectors.BaseSelector) -> None:
    """Move whatever the roles have written into their `output`; drop closed pipes."""
    for key, _ in selector.select(timeout=0.02):
        chunk = os.read(key.fd, 65536)
        if chunk:
            key.data.raw_output += chunk
        else:
            selector.unregister(key.fd)


def check_exits(roles: Sequence[Role]) -> None:
    """Raise if any role has exited with a non-zero status."""
    for role in roles:
        status = role.process.poll()
        if status not in (None, 0):
            raise SampleError(f"{role.name}: exited with status {status}")


def read_line(fd: int, deadline: float) -> str:
    """Read one line from `fd` without buffering past the newline."""
    data = bytearray()
    while not data.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise SampleError("no announcement before the deadline")
        readable, _, _ = select.select([fd], [], [], remaining)
        if not readable:
            continue
        chunk = os.read(fd, 1)
        if not chunk:
            raise SampleError(f"role exited before announcing itself: {bytes(data)!r}")
        data += chunk
    return data.decode().strip()


def kill_remaining(roles: Sequence[Role]) -> None:
    """Kill and reap every role that is still running."""
    for role in roles:
        if role.process.poll() is None:
            role.process.kill()
    for role in roles:
        try:
            role.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            print(f"warning: {role.name} (pid {role.process.pid}) did not die", file=sys.stderr)
        if role.process.stdout is not None:
            role.process.stdout.close()


def print_transcripts(sample: str, roles: Sequence[Role]) -> None:
    """Print each role's captured stdout, role by role, in start order."""
    print(f"{sample}: {len(roles) + 1} processes (launcher + {len(roles)} roles)")
    for role in roles:
        for line in role.output.splitlines():
            print(f"[{role.name}] {line}")


def exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    """Turn SIGTERM into SystemExit so that `RoleGroup.__exit__` reaps the roles."""
    raise SystemExit(128 + signum)


def run_sample(sample: str, launch: Callable[[], Sequence[Role]]) -> int:
    """Run a launcher body, print transcripts, and turn failures into exit status 1."""
    signal.signal(signal.SIGTERM, exit_on_sigterm)
    try:
        roles = launch()
    except SampleError as err:
        print(f"{sample}: FAILED: {err}", file=sys.stderr)
        return 1
    print_transcripts(sample, roles)
    return 0
