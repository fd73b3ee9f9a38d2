"""Process lifecycle as message passing: spawn/fork/exec → child start, exit → wait.

- Spawns (``subprocess``, multiprocessing spawn/forkserver, ``posix_spawn``)
  all reach ``_posixsubprocess.fork_exec`` or ``os.posix_spawn*``; the
  wrapper records a ``proc`` send and hands the child its token in the
  environment it is started with.
- ``os.fork`` is handled by the session's at-fork hooks.
- ``exec*`` of a new image: the old image records the send and ends its
  trace; the new one, traced again through the environment, receives it.
- ``os._exit`` flushes first: forked multiprocessing children end that way
  and would otherwise lose everything since their last flush.
- ``wait*`` returning a child's pid is the receive of that child's ``exit``.
- A Python child started with ``-I``, ``-S`` or ``-E`` ignores the
  environment that carries the tracer: recorded as untraced with the reason.
- A child that is not Python (``redis-server``, a database, a shell) is
  recorded as untraced too, named by its executable, so that ``distea show``
  can say what the program started besides Python processes. The record
  also carries its spawn token and, for ``subprocess`` children, the pipes
  its stdin, stdout and stderr are (the pipe channel's names): the analyzer
  orders what a traced process reads from such a child after the child's
  spawn and the traced writes to its stdin (:mod:`distea.analyzer.children`).
"""

from __future__ import annotations

import _thread
import os
import stat
from posix import fstat  # not os.fstat: a program may mock that one, and see our calls

from distea.tracer.channels.importhooks import IMPORT_HOOKS
from distea.tracer.channels.patching import Patches
from distea.tracer.channels.pipes import pipe_name
from distea.tracer.config import (
    CONFIG_ENV,
    PARENT_TOKEN_ENV,
    START_METHOD_ENV,
    TRACER_PATH_ENV,
)
from distea.tracer.session import ENDING_AT_ONCE, HOST, TracerSession
from distea.wire import NOT_PYTHON

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

UNTRACEABLE_FLAGS = {"-I": "isolated mode (-I)", "-S": "site disabled (-S)",
                     "-E": "environment ignored (-E)"}
PTY_MAKERS = ("openpty", "forkpty")
PTY_NOTE = ("a pseudo-terminal (os.openpty, pty.fork): the bytes through it are not "
            "recorded (its line discipline rewrites them); what the processes at its two "
            "ends hand each other is not ordered (an impact set may stop at it)")
"""A pseudo-terminal's two ends are character devices whose bytes the line discipline
rewrites (``\n`` → ``\r\n``, echo): no offsets could pair them. Named instead."""
EXEC_NAMES = ("execv", "execve")
WAIT_NAMES = ("waitpid", "wait", "wait3", "wait4")
STD_FDS_AT = (0, 3, 5, 7)
"""Where ``fork_exec``'s arguments after ``env`` hold the child's stdin, stdout and stderr
descriptors (``p2cread``, ``c2pwrite``, ``errwrite``; -1: inherited) and the pipe on
which its forked process reports a failed ``exec`` (``errpipe_write``), in 3.12 and
3.13."""
SPAWN_LOCK = _thread.allocate_lock()
"""Held while a spawn's variables stand in this process's C environment (:func:`inheriting`)."""
SPAWN_LOCK_WAIT_S = 1.0
"""A ``preexec_fn`` that spawns, in a child forked while the lock was held, waits no longer."""


def _is_python(argv: Sequence[Any]) -> bool:
    name = os.path.basename(os.fsdecode(argv[0])) if argv else ""
    return name.startswith("python")


def untraceable_reason(argv: Sequence[Any]) -> str | None:
    """Why a Python command line will not load the tracer, or None."""
    if not _is_python(argv):
        return None
    for arg in argv[1:]:
        text = os.fsdecode(arg)
        if not text.startswith("-") or text.startswith("--"):
            break
        for flag, reason in UNTRACEABLE_FLAGS.items():
            if flag[1] in text[1:] and not text.startswith(("-c", "-m", "-W", "-X")):
                return reason
    return None


def _can_exec(path: Any) -> bool:
    try:
        return os.path.isfile(path) and os.access(path, os.X_OK)
    except (TypeError, ValueError, OSError):
        return True


def _spawn_std_fds(file_actions: Any) -> list[int | None]:
    """The parent's descriptors that a ``posix_spawn`` child gets as 0, 1 and 2: its own
    0, 1 and 2 unless a file action replaces them (None: not a descriptor of ours)."""
    fds: list[int | None] = [0, 1, 2]
    for action in file_actions or ():
        if action and action[0] == os.POSIX_SPAWN_DUP2 and action[2] in (0, 1, 2):
            fds[action[2]] = action[1]
        elif action and action[0] in (os.POSIX_SPAWN_OPEN, os.POSIX_SPAWN_CLOSE) and \
                action[1] in (0, 1, 2):
            fds[action[1]] = None
    return fds


def _pipe_names(fds: Sequence[Any]) -> list[str | None]:
    """The pipe channel name of each of the child's descriptors 0, 1, 2 (and its
    exec-error pipe) that is a pipe, else None; ``fds`` as ``fork_exec`` takes them,
    where -1 means inherited: the parent's own 0, 1 or 2 (None: not a descriptor of
    ours)."""
    names: list[str | None] = []
    for std, fd in enumerate(fds):
        fd = std if fd == -1 else fd
        try:
            st = fstat(fd) if isinstance(fd, int) and fd >= 0 else None
        except OSError:
            st = None
        names.append(pipe_name(st.st_ino) if st is not None and stat.S_ISFIFO(st.st_mode)
                     else None)
    return names


def _decoded(argv: Sequence[Any]) -> list[str]:
    return [os.fsdecode(a) for a in argv]


def _with_variables(env: list[bytes], variables: dict[str, str]) -> list[bytes]:
    """The program's ``fork_exec`` environment list with ``variables`` set, and the
    tracer's own where it lacks them (:func:`tracing_variables`)."""
    given = dict(os.fsdecode(e).partition("=")[::2] for e in env)
    variables = {**variables, **tracing_variables(given)}
    ours = tuple(f"{name}=".encode()
                 for name in (PARENT_TOKEN_ENV, START_METHOD_ENV, *variables))
    items = [e for e in env if not e.startswith(ours)]
    items.extend(os.fsencode(f"{name}={value}") for name, value in variables.items())
    return items


def inheriting(variables: dict[str, str], spawn: Any, *args: Any, **kwargs: Any) -> Any:
    """``spawn(*args, **kwargs)`` of a child that inherits this process's environment,
    with ``variables`` put in it (``os.putenv``) for the child alone and taken out again.

    The child gets the environment as it is, ``os.putenv`` made outside ``os.environ``
    and a ``preexec_fn``'s own included; a list built from ``os.environ`` replaced it
    (CPython's ``test_os.test_putenv_unsetenv`` and ``test_subprocess.test_preexec``
    failed traced). One spawn at a time puts its variables there (``SPAWN_LOCK``), so
    that no child takes another one's token.
    """
    locked = SPAWN_LOCK.acquire(timeout=SPAWN_LOCK_WAIT_S)
    try:
        for name, value in variables.items():
            os.putenv(name, value)
        try:
            return spawn(*args, **kwargs)
        finally:
            for name in variables:
                os.unsetenv(name)
    finally:
        if locked:
            SPAWN_LOCK.release()


def tracing_variables(given: Mapping[str, str]) -> dict[str, str]:
    """What an environment the program gave a child lacks to trace it: this process's
    ``DISTEA_CONFIG`` (and ``DISTEA_TRACER_PATH``), and the start-up hook's directory
    first on ``PYTHONPATH``. Nothing where it names a run already. A child started
    with ``env={}`` or a few chosen variables was not traced, and its messages had
    no recorded end there, said only as "left no exit record (killed?)"."""
    config = os.environ.get(CONFIG_ENV)
    if not config or CONFIG_ENV in given or not all(isinstance(k, str) for k in given):
        return {}  # bytes names (os.posix_spawn takes them too): left as they are
    out = {CONFIG_ENV: config}
    if TRACER_PATH_ENV in os.environ:
        out[TRACER_PATH_ENV] = os.environ[TRACER_PATH_ENV]
    hook = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep)
            if entry.rstrip(os.sep).endswith(os.path.join("tracer", "bootstrap"))]
    path = [entry for entry in given.get("PYTHONPATH", "").split(os.pathsep) if entry]
    if hook and hook[0] not in path:
        out["PYTHONPATH"] = os.pathsep.join([hook[0], *path])
    return out


def _spawn_method(argv: list[str]) -> str | None:
    """multiprocessing's children say what started them on their command line."""
    joined = " ".join(argv)
    if "multiprocessing.forkserver" in joined:
        return "forkserver"
    if "multiprocessing.spawn" in joined or "--multiprocessing-fork" in joined:
        return "spawn"
    return None


class ProcessChannel:
    def __init__(self) -> None:
        self.patches = Patches()
        self.session: TracerSession | None = None

    def install(self, session: TracerSession) -> None:
        self.session = session
        # _posixsubprocess is an extension module that most processes never load:
        # patched once it is imported, before subprocess binds its fork_exec
        IMPORT_HOOKS.when_imported("_posixsubprocess", self._patch_fork_exec)
        for name in ("posix_spawn", "posix_spawnp"):
            if hasattr(os, name):
                self.patches.replace(os, name, self._wrap_posix_spawn(getattr(os, name)))
        for name in EXEC_NAMES:
            self.patches.replace(os, name, self._wrap_exec(getattr(os, name)))
        for name in WAIT_NAMES:
            if hasattr(os, name):
                self.patches.replace(os, name, self._wrap_wait(getattr(os, name), name))
        self.patches.replace(os, "_exit", self._wrap_exit(os._exit))
        self.patches.replace(os, "system", self._wrap_system(os.system))
        for name in PTY_MAKERS:
            if hasattr(os, name):
                self.patches.replace(os, name, self._wrap_pty_maker(getattr(os, name)))

    def _patch_fork_exec(self, _posixsubprocess: Any) -> None:
        original_fork_exec = self.patches.replace(
            _posixsubprocess, "fork_exec", self._wrap_fork_exec(_posixsubprocess.fork_exec))
        subprocess = __import__("sys").modules.get("subprocess")
        if subprocess is not None and getattr(subprocess, "_fork_exec", None) is original_fork_exec:
            self.patches.replace(subprocess, "_fork_exec", _posixsubprocess.fork_exec)

    def uninstall(self) -> None:
        IMPORT_HOOKS.forget("_posixsubprocess", self._patch_fork_exec)
        self.patches.restore()

    def _announce(self, argv: list[str]) -> dict[str, str]:
        """Record a spawn; return the variables to add to the child's environment."""
        session = self.session
        if session is None or session.finished:
            return {}
        reason = untraceable_reason(argv)
        if reason is not None:
            session.untraced(None, argv, reason)
        variables = {PARENT_TOKEN_ENV: session.spawn_token({"argv": argv[:8]})}
        method = _spawn_method(argv)
        if method:
            variables[START_METHOD_ENV] = method
        return variables

    def _wrap_fork_exec(self, original: Any) -> Any:
        def fork_exec(args: Any, executable_list: Any, close_fds: Any, pass_fds: Any,
                      cwd: Any, env: Any, *rest: Any) -> Any:
            variables: dict[str, str] = {}
            failed = False
            try:
                variables = self._announce(_decoded(args))
                if variables and env is not None:
                    env = _with_variables(env, variables)
            except Exception:
                failed = True
            # arguments that fork_exec rejects (CPython's test_subprocess passes some on
            # purpose) raise here: the program's error, not the tracer's
            if variables and env is None:
                pid = inheriting(variables, original, args, executable_list, close_fds,
                                 pass_fds, cwd, None, *rest)
            else:
                pid = original(args, executable_list, close_fds, pass_fds, cwd, env, *rest)
            if failed and self.session is not None:
                self.session.tracer_error()
            self._note_not_python(pid, args, variables.get(PARENT_TOKEN_ENV),
                                  [rest[k] for k in STD_FDS_AT if k < len(rest)])
            return pid

        return fork_exec

    def _note_not_python(self, pid: Any, argv: Sequence[Any], token: str | None = None,
                         std_fds: Sequence[Any] = ()) -> None:
        """A started child that is not Python: named in the run, never traced; with the
        token of its spawn and the pipes of its standard streams (stdin, stdout, stderr)."""
        session = self.session
        try:
            if session is not None and not session.finished and argv and not _is_python(argv):
                args = _decoded(argv)
                extra: dict[str, Any] = {"token": token} if token else {}
                pipes = _pipe_names(std_fds)
                if any(pipes):
                    extra["pipes"] = pipes
                session.untraced(int(pid), args[:8],
                                 f"{NOT_PYTHON} ({os.path.basename(args[0])})", extra)
        except Exception:
            if session is not None:
                session.tracer_error()

    def _wrap_system(self, original: Any) -> Any:
        """``os.system`` runs ``/bin/sh -c COMMAND`` from C, with the process's own
        environment: the spawn's token goes in as the command's first words
        (``export DISTEA_PARENT_TOKEN=...;``), which the shell then hands to the
        Python programs it starts. Without it they started as unrelated roots: what
        the parent passed on their command line reached them unrecorded."""
        channel = self

        def system(command: Any) -> Any:
            token = None
            try:
                command, token = channel._with_token(command)
            except Exception:
                if channel.session is not None:
                    channel.session.tracer_error()
            status = original(command)
            session = channel.session
            if token is not None and session is not None and not session.finished:
                # the exit status came back (system(3) waited in C): the end of what
                # the spawn started, paired with their exits by the analyzer
                session.recv("exit", token, 0, 1, {"call": "system"})
            return status

        return system

    def _with_token(self, command: Any) -> tuple[Any, str | None]:
        """``command`` (str or bytes) preceded by the export of a new spawn's token, and
        the token (None: nothing recorded)."""
        if not isinstance(command, str | bytes):
            return command, None  # os.system raises its own TypeError
        text = command if isinstance(command, str) else os.fsdecode(command)
        argv = ["/bin/sh", "-c", text]
        token = self._announce(argv).get(PARENT_TOKEN_ENV)
        if token is None or "'" in token:
            return command, None
        session = self.session
        assert session is not None
        session.untraced(None, argv[:8], f"{NOT_PYTHON} (sh)", {"token": token})
        prefix = f"export {PARENT_TOKEN_ENV}='{token}'; "
        return (prefix + command if isinstance(command, str)
                else os.fsencode(prefix) + command), token

    def _wrap_pty_maker(self, original: Any) -> Any:
        """``os.openpty``/``os.forkpty`` (``pty.fork``, ``pty.spawn``): said, not recorded."""
        channel = self

        def make_pty(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            session = channel.session
            if session is not None and not session.finished:
                session.say_unseen(PTY_NOTE)
            return result

        return make_pty

    def _wrap_posix_spawn(self, original: Any) -> Any:
        def posix_spawn(path: Any, argv: Any, env: Any, *args: Any, **kwargs: Any) -> Any:
            variables: dict[str, str] = {}
            try:
                variables = self._announce(_decoded(argv))
                if variables and env is not None:
                    env = {**env, **tracing_variables(env), **variables}
            except Exception:
                if self.session is not None:
                    self.session.tracer_error()
            if variables and env is None:
                pid = inheriting(variables, original, path, argv, None, *args, **kwargs)
            else:
                pid = original(path, argv, env, *args, **kwargs)
            self._note_not_python(pid, argv, variables.get(PARENT_TOKEN_ENV),
                                  _spawn_std_fds(kwargs.get("file_actions")))
            return pid

        return posix_spawn

    def _wrap_exec(self, original: Any) -> Any:
        def execv(path: Any, args: Any, *env_args: Any) -> Any:
            session = self.session
            # An exec that is bound to fail (``execvp`` tries every PATH entry) must
            # not end the trace of a process that goes on.
            if session is not None and not session.finished and _can_exec(path):
                try:
                    token = session.spawn_token({"exec": _decoded(args)[:8]})
                    if env_args:
                        env_args = ({**env_args[0], **tracing_variables(env_args[0]),
                                     PARENT_TOKEN_ENV: token, START_METHOD_ENV: "exec"},)
                    else:
                        os.environ[PARENT_TOKEN_ENV] = token
                        os.environ[START_METHOD_ENV] = "exec"
                    session.finish("exec")
                except Exception:
                    session.tracer_error()
            return original(path, args, *env_args)

        return execv

    def _wrap_wait(self, original: Any, name: str) -> Any:
        def wait(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            session = self.session
            pid = result[0]
            if pid > 0 and session is not None and not session.finished:
                session.guarded(lambda: session.recv("exit", f"{HOST}:{pid}",
                                                     0, 1, {"call": name}))
            return result

        return wait

    def _wrap_exit(self, original: Any) -> Any:
        def _exit(status: int) -> None:
            if self.session is not None:
                self.session.finish(ENDING_AT_ONCE)
            original(status)

        return _exit
