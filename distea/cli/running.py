"""``distea run``'s work without click: trace the command, then summarise.

:mod:`distea.cli.run` is the click command; this module holds what it does,
plus a parser for the common form ``distea run [OPTIONS] -- CMD`` that the
console script uses without importing click (see :mod:`distea.cli`). The
parser accepts only forms whose meaning under click is certain, and returns
None for anything else (click then parses, reports errors, prints help):
``tests/reliability/test_quick_run.py`` checks it against click.
"""

from __future__ import annotations

import errno
import os
import sys

from distea.launcher import LaunchError, TraceOptions, die_like, trace_command
from distea.suppressing import suppress

TYPE_CHECKING = False  # not typing's: nothing before the command needs typing (10 ms)

if TYPE_CHECKING:
    from typing import Any

MODES = ("compact", "full")
VALUE_OPTIONS = {
    "-o": "output", "--output": "output", "--mode": "mode", "--include": "include",
    "--exclude": "exclude", "--flush-timeout": "flush_timeout", "--connect": "connect",
    "--key": "key_file", "--connect-timeout": "connect_timeout",
}
"""Options that take a value, as ``distea.cli.run.run`` declares them."""
FLAG_OPTIONS = {"-q": "quiet", "--quiet": "quiet"}


def default_run_args() -> dict[str, Any]:
    return {"output": None, "mode": "compact", "include": (), "exclude": (),
            "flush_timeout": 10.0, "connect": None, "key_file": None,
            "connect_timeout": 10.0, "quiet": False, "command": ()}


def parse_run_args(argv: list[str]) -> dict[str, Any] | None:
    """``run``'s parameters from ``argv`` (``["run", ..., "--", CMD...]``), or None.

    None whenever click might read the line differently or has something to
    say (help, an error): no ``--`` before the command, an unknown option,
    a value that is empty or starts with ``-``, a bad number or mode, shell
    completion.
    """
    if len(argv) < 3 or argv[0] != "run" or "--" not in argv:
        return None
    if any(name.startswith("_") and name.endswith("_COMPLETE") for name in os.environ):
        return None
    end = argv.index("--")
    options, command = argv[1:end], argv[end + 1:]
    if not command:
        return None
    args = default_run_args()
    include: list[str] = []
    exclude: list[str] = []
    i = 0
    while i < len(options):
        token = options[i]
        if token in FLAG_OPTIONS:
            args[FLAG_OPTIONS[token]] = True
            i += 1
            continue
        name, eq, value = token.partition("=")
        if eq and not name.startswith("--"):
            return None  # -o=DIR: click reads "=DIR"
        if name not in VALUE_OPTIONS:
            return None
        if not eq:
            if i + 1 >= len(options):
                return None
            value = options[i + 1]
            i += 1
        i += 1
        if not value or value.startswith("-"):
            return None
        key = VALUE_OPTIONS[name]
        if key in ("flush_timeout", "connect_timeout"):
            try:
                args[key] = float(value)
            except ValueError:
                return None
        elif key == "mode":
            if value not in MODES:
                return None
            args[key] = value
        elif key == "include":
            include.append(value)
        elif key == "exclude":
            exclude.append(value)
        else:
            args[key] = value
    args["include"], args["exclude"] = tuple(include), tuple(exclude)
    args["command"] = tuple(command)
    return args


def run_quickly(args: dict[str, Any]) -> None:
    """:func:`execute` as click's standalone mode would run it (never returns).

    At the end, this process does not tear its interpreter down (about 10 ms
    with ZeroMQ loaded, all of it after the command has ended): once the
    exit handlers have run and the output is flushed, it leaves with
    ``os._exit`` and the same status, unless a thread of someone else's is
    still running (Python would wait for it).
    """
    try:
        execute(**args)
    except (EOFError, KeyboardInterrupt):
        print(file=sys.stderr)
        print("Aborted!", file=sys.stderr)
        sys.exit(1)
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115  # as click does
        sys.exit(1)
    except SystemExit as exc:
        _exit_now(exc)
        raise
    sys.exit(0)


def _exit_now(exc: SystemExit) -> None:
    """``os._exit`` with ``exc``'s status, when nothing else would run at exit."""
    import atexit

    code = exc.code
    if code is None:
        code = 0
    threading = sys.modules.get("threading")  # not imported: no thread Python would wait for
    if not isinstance(code, int) or (threading is not None and threading.active_count() > 1):
        return  # Python prints a message, or waits for the thread: let it
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        return  # let the ordinary exit report it
    os._exit(code)


def execute(output: str | None, mode: str, include: tuple[str, ...], exclude: tuple[str, ...],
            flush_timeout: float, connect: str | None, key_file: str | None,
            connect_timeout: float, quiet: bool, command: tuple[str, ...]) -> None:
    """Trace ``command``, print the summary, exit as the command did (never returns)."""
    if (connect or key_file) and output is not None:
        print("distea: -o does not go with --connect (the collector writes the run)",
              file=sys.stderr)
        sys.exit(2)
    options = TraceOptions(mode=mode, include=include, exclude=exclude,
                           flush_timeout=flush_timeout, connect=connect, key_file=key_file,
                           connect_timeout=connect_timeout)
    try:
        outcome = trace_command(list(command), output, options)
    except LaunchError as exc:
        print(f"distea: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    if outcome.notes or not quiet:
        # only now, and only when there is something to say: the program has run,
        # and with -q the trace reader would only delay the exit
        from distea.cli.summary import Terminal, print_summary

        out = Terminal(sys.stderr)
        for note in outcome.notes:
            out.line(f"{out.yellow('distea:')} {note}")
        if not quiet:
            try:
                print_summary(outcome, out)
            except Exception as exc:  # a summary must never cost the command's exit status
                out.line(f"distea: no summary ({type(exc).__name__}: {exc})")
    with suppress(Exception):  # a speed-up for the next run, never a failure
        cache_own_bytecode()
    if outcome.signal is not None:
        die_like(outcome.signal)
    sys.exit(outcome.exit_code)


def cache_own_bytecode() -> None:
    """Bytecode caches for the modules of distea that this run imported, where missing.

    With ``PYTHONDONTWRITEBYTECODE`` (set in many containers and CI images)
    and an install without bytecode (uv's default), every ``distea run``
    compiled the launcher, the collector and the summary from source again:
    20 to 40 ms of each run on our test machine. As the tracer does for its
    own modules (:mod:`distea.tracer.bytecode`), this writes the caches that
    are missing or older than their source, once the command has ended and
    the summary is printed: only the first run pays, and it pays after the
    command. Nothing is written where the install is read-only, and nothing
    while another thread runs (the writing turns ``sys.dont_write_bytecode``
    off for the moment).
    """
    if not sys.dont_write_bytecode:
        return  # the import system wrote them at import
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    stale: list[str] = []
    for module in list(sys.modules.values()):
        source, cached = getattr(module, "__file__", None), getattr(module, "__cached__", None)
        if not isinstance(source, str) or not isinstance(cached, str) \
                or not source.startswith(package):
            continue
        try:
            if os.stat(cached).st_mtime >= os.stat(source).st_mtime:
                continue  # the exact check (size, mtime in its header) is the writer's
        except OSError:
            pass
        folder = os.path.dirname(cached)
        if os.access(folder if os.path.isdir(folder) else os.path.dirname(folder), os.W_OK):
            stale.append(source)
    import _thread

    if stale and not _thread._count():  # no thread runs but this one
        from distea.tracer.bytecode import write_missing_caches

        write_missing_caches(stale)
