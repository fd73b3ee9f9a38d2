"""The tracer's bytecode caches and start-up image are written where missing or stale,
whatever the flag says, and the image imports the tracer as the import system would."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib.util import MAGIC_NUMBER, cache_from_source
from pathlib import Path
from typing import Any

from distea.tracer.bytecode import (
    TRACER_DIR,
    image_path,
    start_up_order,
    tracer_sources,
    write_image,
    write_missing_caches,
)
from distea.tracer.channels import CHANNEL_MODULES


def test_missing_and_stale_caches_are_written_fresh_ones_left(tmp_path: Path,
                                                               monkeypatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    fresh, missing, stale, broken = (tmp_path / f"{n}.py" for n in ("fresh", "missing",
                                                                     "stale", "broken"))
    for source in (fresh, missing, stale):
        source.write_text(f"NAME = {source.stem!r}\n")
    broken.write_text("def (:\n")
    assert write_missing_caches([str(fresh), str(stale)]) == 2
    os.utime(stale, (os.stat(stale).st_atime, os.stat(stale).st_mtime + 10))  # edited later
    fresh_cache = Path(cache_from_source(str(fresh)))
    before = fresh_cache.stat().st_mtime_ns

    written = write_missing_caches([str(fresh), str(missing), str(stale), str(broken)])

    assert written == 2  # missing and stale; the broken one is left to the import system
    assert fresh_cache.stat().st_mtime_ns == before
    for source in (missing, stale):  # what the import system checks (PEP 552)
        header = Path(cache_from_source(str(source))).read_bytes()[:16]
        assert header[:4] == MAGIC_NUMBER
        assert int.from_bytes(header[8:12], "little") == int(source.stat().st_mtime)
    assert not Path(cache_from_source(str(broken))).exists()
    assert sys.dont_write_bytecode is True  # the caller's flag, back


def test_the_sources_are_the_whole_tracer_with_its_bootstrap_hook() -> None:
    sources = {os.path.relpath(s, TRACER_DIR) for s in tracer_sources()}
    assert {"startup.py", "session.py", "zmtp.py", "channels/zmq.py",
            "bootstrap/sitecustomize.py"} <= sources
    assert all(s.endswith(".py") for s in sources)


# -- the start-up image ---------------------------------------------------------------

ROOTS = ["distea.tracer.startup", *(module for module, _ in CHANNEL_MODULES)]

PRELOAD = """
import importlib.util, json, sys
package_parent, bootstrap = sys.argv[1], sys.argv[2]
looked_up = []

class Spy:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.startswith("distea"):
            looked_up.append(name)
        return None

spec = importlib.util.spec_from_file_location("distea_bootstrap", bootstrap)
hook = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hook)  # no DISTEA_CONFIG: it starts nothing
sys.meta_path.insert(0, Spy)
hook._preload_tracer([package_parent])
sys.meta_path.remove(Spy)
"""
DESCRIBE = """
def functions(module):
    found = {}
    for value in vars(module).values():
        for function in [value, *vars(value).values()] if isinstance(value, type) else [value]:
            code = getattr(function, "__code__", None)
            if type(function).__name__ == "function" and code.co_filename == module.__file__:
                found[code.co_qualname] = [code.co_firstlineno, function.__doc__ is not None,
                                           bool(function.__annotations__)]
    return found

def describe(name):
    module = sys.modules[name]
    spec = module.__spec__
    return {"file": module.__file__, "cached": module.__cached__, "package": module.__package__,
            "path": getattr(module, "__path__", None), "origin": spec.origin,
            "locations": spec.submodule_search_locations, "has_location": spec.has_location,
            "loader": type(module.__loader__).__name__,
            "names": sorted(set(vars(module)) - {"__annotations__"}),
            "functions": functions(module), "doc": module.__doc__ is not None}
"""


def copy_of_distea(tmp_path: Path) -> Path:
    """A copy of the distea package (its parent folder is returned), caches left out."""
    parent = tmp_path / "site"
    shutil.copytree(Path(TRACER_DIR).parent, parent / "distea",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return parent


def preload(parent: Path) -> dict[str, Any]:
    """Run the bootstrap hook's preload on the copy in a fresh interpreter: which distea
    modules the finders were asked for meanwhile, and what each loaded module looks like."""
    code = PRELOAD + DESCRIBE + """
print(json.dumps({"looked_up": looked_up,
                  "loaded": {n: describe(n) for n in sys.modules if n.startswith("distea")}}))
"""
    bootstrap = parent / "distea" / "tracer" / "bootstrap" / "sitecustomize.py"
    result = subprocess.run([sys.executable, "-c", code, str(parent), str(bootstrap)],
                            capture_output=True, text=True, check=True, cwd=parent,
                            env={**os.environ, "DISTEA_CONFIG": ""})
    return json.loads(result.stdout)


def test_the_image_executes_every_start_up_module_after_what_it_imports(tmp_path: Path) -> None:
    parent = copy_of_distea(tmp_path)
    package = str(parent / "distea")
    assert write_image(ROOTS, package) is True
    assert write_image(ROOTS, package) is False  # fresh: left as it is

    preloaded = preload(parent)

    # the oracle: the same modules imported by the import system, in another interpreter
    normal = subprocess.run(
        [sys.executable, "-c", "import json, sys\n" + DESCRIBE + "\n".join(
            f"import {root}" for root in ROOTS) + """
print(json.dumps({n: describe(n) for n in sys.modules if n.startswith("distea")}))"""],
        capture_output=True, text=True, check=True, cwd=parent,
        env={**os.environ, "DISTEA_CONFIG": "", "PYTHONPATH": str(parent)})
    assert preloaded["looked_up"] == []  # no module was imported before the ones it needs
    imported = json.loads(normal.stdout)
    assert set(preloaded["loaded"]) == {name for name, _ in start_up_order(ROOTS, package)}
    assert set(imported) == set(preloaded["loaded"])
    for name, module in preloaded["loaded"].items():
        # the tracer's own code comes without docstrings and annotations (bytecode.image_code);
        # the rest as imported, line numbers included
        # (and none has ``annotations``: a ``from __future__`` import is a compiler flag there)
        stripped = name.startswith("distea.tracer.")
        names = [n for n in imported[name]["names"] if n != "annotations"]
        want = {**imported[name], "doc": imported[name]["doc"] and not stripped, "names": names,
                "functions": {qualname: [line, doc and not stripped, annotated and not stripped]
                              for qualname, (line, doc, annotated)
                              in imported[name]["functions"].items()}}
        assert module == want, name
    assert any(doc for _, doc, _ in imported["distea.tracer.session"]["functions"].values())
    assert imported["distea"]["functions"]["load"][1:] == [True, True]


def test_an_image_whose_sources_changed_or_that_is_damaged_is_not_used(tmp_path: Path) -> None:
    parent = copy_of_distea(tmp_path)
    package = str(parent / "distea")
    write_image(ROOTS, package)
    session = parent / "distea" / "tracer" / "session.py"
    session.write_text(session.read_text() + "\n# edited\n")

    assert preload(parent)["loaded"] == {}
    assert write_image(ROOTS, package) is True  # stale: written again
    assert "distea.tracer.session" in preload(parent)["loaded"]

    Path(image_path(package)).write_bytes(b"\xe3not an image")
    assert preload(parent)["loaded"] == {}


def test_the_order_follows_top_level_imports_only(tmp_path: Path) -> None:
    package = tmp_path / "distea"
    (package / "tracer").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "tracer" / "__init__.py").write_text("")
    (package / "tracer" / "a.py").write_text(
        "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    import distea.tracer.c\n"
        "from distea.tracer import b\n"
        "def later():\n    import distea.tracer.c\n")
    (package / "tracer" / "b.py").write_text("try:\n    import distea.wire\nexcept ImportError:\n"
                                             "    pass\n")
    (package / "tracer" / "c.py").write_text("")
    (package / "wire.py").write_text("")

    order = [name for name, _ in start_up_order(["distea.tracer.a"], str(package))]

    assert order == ["distea", "distea.tracer", "distea.wire", "distea.tracer.b",
                     "distea.tracer.a"]
