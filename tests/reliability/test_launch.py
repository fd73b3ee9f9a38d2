"""How ``distea run`` starts the command and what it prints at the end: the command
starts as it would without distea (ignored signals, inherited descriptors), and the
summary's process tree nests each process under the one that started it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

from tests.reliability.helpers import PY
from tests.tracing import DISTEA

SIGNAL_MASKS = ["grep", "-E", "^Sig(Ign|Blk):", "/proc/self/status"]
LIBC_SIGNALS = sum(1 << (n - 1) for n in range(32, signal.SIGRTMIN))
"""glibc's own (32, 33): its posix_spawn leaves them ignored in what it starts (as in
anything Rust's Command starts); glibc programs handle them from their start."""


def masks(status: str) -> dict[str, int]:
    """SigIgn and SigBlk from /proc/PID/status, the C library's own signals left out."""
    fields = dict(line.split(":") for line in status.splitlines())
    return {name: int(value, 16) & ~LIBC_SIGNALS for name, value in fields.items()}


def ignore_sighup() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as nohup starts a command


def test_the_command_ignores_and_blocks_what_it_would_without_distea(tmp_path: Path) -> None:
    """Python ignores SIGPIPE and SIGXFSZ for itself: the command gets them back at their
    defaults; a signal ignored by whoever started distea run (nohup) stays ignored."""
    for preexec in (None, ignore_sighup):
        plain = subprocess.run(SIGNAL_MASKS, capture_output=True, text=True, check=True,
                               preexec_fn=preexec)
        traced = subprocess.run(
            [str(DISTEA), "run", "-q", "-o", str(tmp_path / f"run-{bool(preexec)}"), "--",
             *SIGNAL_MASKS], capture_output=True, text=True, check=True, preexec_fn=preexec)
        assert masks(traced.stdout) == masks(plain.stdout), (traced.stdout, plain.stdout)
    assert masks(plain.stdout)["SigIgn"] & (1 << (signal.SIGHUP - 1))  # nohup's, seen


def test_the_command_inherits_the_descriptors_distea_run_was_given(tmp_path: Path) -> None:
    """A descriptor passed down to distea run (a make jobserver, a status pipe) reaches the
    command as it would without distea."""
    read_end, write_end = os.pipe()
    with os.fdopen(read_end) as pipe:
        try:
            result = subprocess.run(
                [str(DISTEA), "run", "-q", "-o", str(tmp_path / "run"), "--",
                 PY, "-c", f"import os; os.write({write_end}, b'through\\n')"],
                capture_output=True, text=True, pass_fds=(write_end,), timeout=60)
        finally:
            os.close(write_end)
        assert (result.returncode, result.stderr, pipe.read()) == (0, "", "through\n")


def test_summary_nests_each_process_under_its_parent(tmp_path: Path) -> None:
    """Two children started one after the other, each starting a grandchild: the tree
    (rich's guides, as before) and the counts are derived by hand from the program."""
    (tmp_path / "parent.py").write_text(
        "import subprocess, sys\n"
        "def start(n):\n"
        "    subprocess.run([sys.executable, 'child.py', str(n)], check=True)\n"
        "start(1)\nstart(2)\n")
    (tmp_path / "child.py").write_text(
        "import subprocess, sys\n"
        "def grandchild():\n"
        "    subprocess.run([sys.executable, '-c', 'pass'], check=True)\n"
        "grandchild()\n")
    result = subprocess.run([str(DISTEA), "run", "-o", "run", "--", PY, "parent.py"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "FORCE_COLOR": "", "NO_COLOR": "1"})
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert "\x1b[" not in result.stderr  # not a terminal: no styles
    assert lines[0] == ""
    assert lines[1].startswith("distea recorded 5 processes, 4 methods, ")  # <module> + one
    assert lines[1].endswith(" → run")
    pid = r"pid \d+"
    expected = [
        "run",
        rf"└── parent\.py {pid} · main · 2 methods",
        rf"    ├── child\.py {pid} · subprocess · 2 methods",
        rf"    │   └── python -c {pid} · subprocess · 0 methods",
        rf"    └── child\.py {pid} · subprocess · 2 methods",
        rf"        └── python -c {pid} · subprocess · 0 methods",
    ]
    tree = lines[2:2 + len(expected)]
    assert all(re.fullmatch(want, line) for want, line in zip(expected, tree, strict=True)), \
        "\n".join(tree)
    assert lines[-1].startswith("next: distea impact ")
    assert lines[-1].endswith("   or   distea show")
