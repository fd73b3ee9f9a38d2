"""Every function distea replaces passes for the original: pickle, names, signature.

dask's ``c.run(os._exit, 0)`` pickles ``os._exit`` and failed traced
("not the same object as posix._exit"). These tests take every patch that a
traced process holds (``distea.tracer.channels.patching.held``, after the
libraries with deferred channels are imported) and check each replacement
like a program would: its names (the original's, or for a method inherited
from a base that was left alone, where it was put), ``__wrapped__``, ``inspect.signature``; a
pickle round trip in the traced process; its pickle loaded by an untraced
process gives the original; the original's pickle, made untraced, loaded by
a traced process gives the replacement. Then a program ships ``os._exit``
to a spawned worker with pickle: the same exit status traced and untraced.
"""

from __future__ import annotations

import importlib
import json
import pickle
import sys
import textwrap
from pathlib import Path
from typing import Any

from tests.channels.support import run_both
from tests.tracing import run_traced

LIBRARIES = "import ssl, zmq, multiprocessing.connection, asyncio, signal, subprocess"

PROBE = textwrap.dedent(f'''\
    import inspect, json, pickle, sys
    {LIBRARIES}
    from distea.tracer.channels.patching import held

    def where(owner):
        if isinstance(owner, type):
            return ["class", owner.__module__, owner.__qualname__]
        return ["module", owner.__name__]

    mode, path = sys.argv[1], sys.argv[2]
    rows, problems = [], []
    for owner, name, original in held():
        current = getattr(owner, name)
        label = ".".join(where(owner)[1:]) + "." + name
        if current is original:
            continue  # a later patch put the original back (nothing to check)
        if not callable(original):
            continue  # not a function: the pipes channel rebuilds sys.stdout and friends
        # a method inherited from a base class it was not patched on is named after
        # where it was put (the base stays untouched); every other keeps the original's
        put = (where(owner)[1], ".".join(where(owner)[2:] + [name]))
        named = (getattr(current, "__module__", None), getattr(current, "__qualname__", None))
        if named != put and named != (getattr(original, "__module__", None) or named[0],
                                      getattr(original, "__qualname__", None) or named[1]):
            problems.append(f"{{label}}: named {{named}}")
        for attr in ("__name__", "__doc__"):
            want = getattr(original, attr, None)
            if want is not None and getattr(current, attr, None) != want:
                problems.append(f"{{label}}: {{attr}} {{getattr(current, attr, None)!r}}")
        if inspect.unwrap(current) is not inspect.unwrap(original):
            problems.append(f"{{label}}: __wrapped__ does not lead to the original")
        try:
            want_sig = inspect.signature(original)
        except (ValueError, TypeError):
            want_sig = None
        if want_sig is not None and inspect.signature(current) != want_sig:
            problems.append(f"{{label}}: signature {{inspect.signature(current)}}")
        try:
            if pickle.loads(pickle.dumps(current)) is not current:
                problems.append(f"{{label}}: unpickles to another object")
        except Exception as exc:
            problems.append(f"{{label}}: {{exc}}")
            continue
        rows.append({{"owner": where(owner), "name": name, "label": label,
                      "pickle": pickle.dumps(current).hex()}})
    if mode == "load":  # pickles of the originals, made by an untraced process
        originals = {{".".join(where(o)[1:]) + "." + n: (getattr(o, n), orig)
                     for o, n, orig in held()}}
        for row in json.loads(open(path + ".untraced").read()):
            loaded = pickle.loads(bytes.fromhex(row["pickle"]))
            # the replacement; or, for a method a base class holds (pickled as the
            # base's attribute, which stays untouched), the original itself
            if loaded not in originals[row["label"]]:
                problems.append(f"{{row['label']}}: an untraced pickle loads as {{loaded!r}}")
    with open(path, "w") as out:
        json.dump({{"rows": rows, "problems": problems}}, out)
''')


def resolve(row: dict[str, Any]) -> Any:
    owner: Any = importlib.import_module(row["owner"][1])
    if row["owner"][0] == "class":
        for step in row["owner"][2].split("."):
            owner = getattr(owner, step)
    return owner


def test_every_patch_pickles_and_introspects_like_the_original(tmp_path: Path) -> None:
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    out = tmp_path / "patches.json"
    first = run_traced([sys.executable, str(script), "list", str(out)], tmp_path, tmp_path / "r1")
    assert first.result.returncode == 0, first.result.stderr
    found = json.loads(out.read_text())
    assert found["problems"] == []
    labels = {row["label"] for row in found["rows"]}
    for name in ("os._exit", "os.read", "os.write", "os.readv", "os.sendfile", "os.waitpid",
                 "socket.socket.send",
                 "socket.socket.sendall", "socket.socket.recv", "signal.set_wakeup_fd",
                 "ssl.SSLSocket.send", "zmq.sugar.socket.Socket.send",
                 "multiprocessing.connection.Connection._send_bytes"):
        assert any(label.endswith(name) for label in labels), (name, sorted(labels))
    # here, untraced: each traced pickle loads as the original, and back
    untraced_rows = []
    for row in found["rows"]:
        original = getattr(resolve(row), row["name"])
        assert pickle.loads(bytes.fromhex(row["pickle"])) is original, row["label"]
        untraced_rows.append({**row, "pickle": pickle.dumps(original).hex()})
    (tmp_path / "patches.json.untraced").write_text(json.dumps(untraced_rows))
    second = run_traced([sys.executable, str(script), "load", str(out)], tmp_path, tmp_path / "r2")
    assert second.result.returncode == 0, second.result.stderr
    assert json.loads(out.read_text())["problems"] == []


SHIP_EXIT = '''\
import multiprocessing as mp
import os


def worker(conn):
    function, args = conn.recv()  # unpickled here, in the spawned child
    function(*args)


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    child = ctx.Process(target=worker, args=(there,))
    child.start()
    here.send((os._exit, (3,)))  # pickled by reference, like dask's c.run(os._exit, 0)
    child.join()
    print("worker exit status", child.exitcode)
'''


def test_os_exit_shipped_to_a_worker_with_pickle(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    script = work / "ship_exit.py"
    script.write_text(SHIP_EXIT)
    traced = run_both(script)
    assert traced.stdout == "worker exit status 3\n"
    assert traced.errors() == 0


def test_replaced_builtins_stay_builtins_to_the_program(program) -> None:
    """A builtin kept as a class attribute does not bind (CPython's test_tempfile), nor
    warns that it will, it shows as the builtin does (in ``repr``, and in asyncio's
    account of a callback: ``functools.partial`` would show as one there), is one to
    ``inspect`` (CPython's test_signal checks the ``__module__`` of every routine that is
    not a builtin) and ``os`` still lists what a replaced function supports (shutil's
    safe rmtree)."""
    from tests.channels.support import run_both

    script = program("builtins_kept.py", '''
import os, shutil, warnings
from asyncio.format_helpers import _format_callback
warnings.simplefilter("error")

class Keeper:
    close = os.close
    read = os.read

fd = os.open(__file__, os.O_RDONLY)
print(Keeper().read(fd, 6))
Keeper().close(fd)
print(shutil._use_fd_functions, os.open in os.supports_dir_fd)
print(repr(os.read), repr(Keeper.close))
print(_format_callback(os.write, (1, b""), {}))
import inspect, signal
print(inspect.isbuiltin(os.read), inspect.isbuiltin(signal.set_wakeup_fd), os.read.__class__)
''')
    traced = run_both(script)  # the same output untraced, asyncio's line included
    assert traced.stdout.startswith("b'\\nimpor'\nTrue True\n"
                                    "<built-in function read> <built-in function close>\n"
                                    "write("), traced.stdout
    assert traced.stdout.endswith("\nTrue True <class 'builtin_function_or_method'>\n")


def test_a_replaced_mmap_shows_as_the_c_type(program) -> None:
    """The shared-memory channel's ``mmap`` subclass is the C type to ``repr`` (CPython's
    ``test_mmap.test_repr`` matched ``<mmap.mmap closed=...``; the subclass read
    ``<mmap closed=...``), and a program's own subclass keeps its own name."""
    from tests.channels.support import run_both

    script = program("mapped.py", '''
import mmap
class Mine(mmap.mmap):
    pass
m, own = mmap.mmap(-1, 64), Mine(-1, 64)
print(repr(m).split(" length")[0], repr(own).split(" length")[0])
m.close()
print(repr(m))
''')
    traced = run_both(script)  # the same output untraced
    assert traced.stdout == ("<mmap.mmap closed=False, access=ACCESS_DEFAULT, "
                             "<Mine closed=False, access=ACCESS_DEFAULT,\n"
                             "<mmap.mmap closed=True>\n")
