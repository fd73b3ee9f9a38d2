"""Bytecode caches for the tracer's own modules, whatever the program's environment says.

Python caches a module's compiled bytecode (``__pycache__``) at its first
import, unless ``PYTHONDONTWRITEBYTECODE`` or ``-B`` says not to, as
containers and CI images often do (and uv installs without bytecode by
default). The tracer runs in every process of a run: without its caches,
each traced process compiled the tracer from source again, about 100 ms.

Two parts:

- the bootstrap hook imports and starts the tracer with
  ``sys.dont_write_bytecode`` off, and puts it back before the program's
  first line: the modules imported at start-up get their caches;
- modules the tracer imports later (a channel once its library is imported,
  the transport at the first flush) may be imported by any thread while the
  program runs, when the flag must stay the program's: so the caches that
  are missing or older than their source are written here
  (:func:`refresh_tracer_code`), once per run, before any traced process
  needs them. ``distea run`` does it itself while a Python command starts
  (``TracerConfig.prepared`` says for which distea, Python and optimisation
  level); otherwise the run's first process (one without a traced parent)
  does it, still at start-up. Nothing is written where the install is
  read-only.

The same call writes the tracer's **start-up image** (:func:`write_image`):
the code of every module a traced process imports to start, in one file,
in an order that executes each module after those it imports. The
bootstrap hook reads it and executes the modules itself (``_preload_tracer``
in ``bootstrap/sitecustomize.py``), so that the import statements that
follow find them all in ``sys.modules``. The modules come out as the import
system makes them (its own spec, loader and module functions), about 2 ms
sooner on this project's 2-core machine: the import system's own work around
each of twenty-odd modules (finders, locks, specs: ~0.1 ms a module) was a
fifth of what tracing added to a process's start. The image is used only
while every source it holds has the size and modification time it was made
from.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from typing import Any

TRACER_DIR = os.path.dirname(os.path.abspath(__file__))
PACKAGE_DIR = os.path.dirname(TRACER_DIR)
IMAGE_FORMAT = "distea-image-3"
"""The first item of an image; the bootstrap hook reads only images that start with it."""


def tracer_sources(tracer_dir: str = TRACER_DIR) -> list[str]:
    """Every source file of ``distea.tracer`` (with the bootstrap hook itself)."""
    sources: list[str] = []
    for folder, _, names in os.walk(tracer_dir):
        if os.path.basename(folder) != "__pycache__":
            sources.extend(os.path.join(folder, n) for n in names if n.endswith(".py"))
    return sources


def refresh_tracer_code() -> None:
    """This distea's bytecode caches and start-up image, for this Python, where missing
    or stale. Call only while no other thread imports (see :func:`write_missing_caches`)."""
    from distea.tracer.channels import CHANNEL_MODULES

    write_missing_caches()
    write_image(["distea.tracer.startup", *(module for module, _ in CHANNEL_MODULES)])


def write_missing_caches(sources: list[str] | None = None) -> int:
    """Compile and cache each source whose cache is missing or stale; how many were written.

    Call only while no other thread runs (it turns ``sys.dont_write_bytecode``
    off for the moment). A source that does not compile, or a cache that
    cannot be written, is left to the import system, as without this.
    """
    SourceFileLoader, MAGIC_NUMBER, cache_from_source = _import_system()
    stale = [source for source in (tracer_sources() if sources is None else sources)
             if not _cache_is_fresh(source, cache_from_source, MAGIC_NUMBER)]
    written = 0
    dont_write_bytecode = sys.dont_write_bytecode
    sys.dont_write_bytecode = False
    try:
        for source in stale:
            try:
                SourceFileLoader("_distea_bytecode", source).get_code("_distea_bytecode")
                written += 1
            except (OSError, SyntaxError, ImportError, ValueError):
                continue
    finally:
        sys.dont_write_bytecode = dont_write_bytecode
    return written


def _cache_is_fresh(source: str, cache_from_source: Any, magic: bytes) -> bool:
    """Whether the import system would take ``source``'s cache as it is: this Python's
    magic number, and the source's mtime and size recorded in its header (PEP 552)."""
    try:
        with open(cache_from_source(source), "rb") as stream:
            header = stream.read(16)
        stat = os.stat(source)
    except (OSError, ValueError, NotImplementedError):
        return False
    if len(header) < 16 or header[:4] != magic:
        return False
    if int.from_bytes(header[4:8], "little"):
        return True  # a hash-based cache: checked by the import system itself
    return (int.from_bytes(header[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF
            and int.from_bytes(header[12:16], "little") == stat.st_size & 0xFFFFFFFF)


def image_path(package_dir: str = PACKAGE_DIR) -> str:
    """Where the start-up image of the distea package in ``package_dir`` is kept, for
    this Python and optimisation level (as bytecode caches are kept apart)."""
    return os.path.join(package_dir, "tracer", "__pycache__",
                        f"startup.{sys.implementation.cache_tag}.opt{sys.flags.optimize}.image")


def write_image(roots: list[str], package_dir: str = PACKAGE_DIR,
                path: str | None = None) -> bool:
    """Write the start-up image of ``roots`` (module names) where it is missing or stale;
    whether it was written.

    The image is ``marshal``'s form of ``(IMAGE_FORMAT, MAGIC_NUMBER,
    [(module name, source path relative to ``package_dir``'s parent, is a
    package, source mtime in ns, source size, marshalled code), ...])``:
    ``roots``, the distea modules they import at their top level, and the
    packages of each, every module after those it needs (:func:`start_up_order`).
    The code is what :func:`image_code` gives. The file is replaced whole,
    so that a process starting meanwhile reads the old image or the new one.
    Where a source cannot be read or compiled, or the image cannot be
    written, nothing is: the tracer is imported as before.
    """
    import marshal

    _, MAGIC_NUMBER, _ = _import_system()
    path = image_path(package_dir) if path is None else path
    base = os.path.dirname(package_dir)
    existing = _image_index(path, MAGIC_NUMBER)
    if existing is not None and all(_unchanged(base, entry) for entry in existing):
        return False  # the common case, once per run: no source parsed
    try:
        order = start_up_order(roots, package_dir)
        index = []
        for name, source in order:
            stat = os.stat(source)
            index.append((name, os.path.relpath(source, base), source.endswith("__init__.py"),
                          stat.st_mtime_ns, stat.st_size))
    except (OSError, SyntaxError, ValueError):
        return False
    if _image_index(path, MAGIC_NUMBER) == index:
        return False
    try:
        modules = [(*entry, marshal.dumps(image_code(entry[0], source)))
                   for entry, (_, source) in zip(index, order, strict=True)]
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = f"{path}.{os.getpid()}.tmp"
        with open(temporary, "wb") as stream:
            stream.write(marshal.dumps((IMAGE_FORMAT, MAGIC_NUMBER, modules)))
        os.replace(temporary, path)
    except (OSError, SyntaxError, ValueError):
        return False
    return True


def image_code(name: str, source: str) -> Any:
    """The code the image holds for distea module ``name``, compiled from its source.

    The tracer's own modules come without docstrings and annotations, which
    no tracer code reads at run time: a quarter less code for every traced
    process to unmarshal and execute at its start (298 → 223 KB: 2.2 → 1.9
    ms for the image's modules, docs/performance.md). The others
    (``distea`` itself, the user's API) keep theirs. Line numbers stay the
    source's, so a traceback through tracer code reads as before.

    ``from __future__ import ...`` becomes what it is to the compiler, a
    flag: executed, the statement imports the ``__future__`` module into
    every traced process, which untraced has none of (~0.1 ms, and one more
    module in ``sys.modules`` than the program would have).
    """
    import ast

    with open(source, "rb") as stream:
        tree = ast.parse(stream.read(), source)
    flags = _future_flags(tree)
    if name.startswith("distea.tracer."):
        _strip_docs_and_annotations(tree)
    return compile(ast.fix_missing_locations(tree), source, "exec", flags=flags,
                   dont_inherit=True)


def _future_flags(tree: Any) -> int:
    """Take the module's ``from __future__`` imports out; the compiler flags they set."""
    import __future__

    import ast

    flags = 0
    body = []
    for statement in tree.body:
        if isinstance(statement, ast.ImportFrom) and statement.module == "__future__":
            for alias in statement.names:
                flags |= getattr(__future__, alias.name).compiler_flag
        else:
            body.append(statement)
    tree.body = body
    return flags


def _strip_docs_and_annotations(tree: Any) -> None:
    import ast

    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            node.returns = None
            arguments = node.args
            for argument in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                             arguments.vararg, arguments.kwarg):
                if argument is not None:
                    argument.annotation = None
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) \
                and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):  # the docstring
                node.body = node.body[1:] or [ast.copy_location(ast.Pass(), first)]
        for field, statements in ast.iter_fields(node):
            if isinstance(statements, list) \
                    and any(isinstance(s, ast.AnnAssign) for s in statements):
                # ``x: T = v`` becomes ``x = v``; ``x: T`` goes (a ``pass`` if nothing is left)
                plain = []
                for statement in statements:
                    if not isinstance(statement, ast.AnnAssign):
                        plain.append(statement)
                    elif statement.value is not None:
                        plain.append(ast.copy_location(
                            ast.Assign(targets=[statement.target], value=statement.value),
                            statement))
                setattr(node, field, plain or [ast.copy_location(ast.Pass(), statements[0])])


def start_up_order(roots: list[str], package_dir: str = PACKAGE_DIR) -> list[tuple[str, str]]:
    """(module name, source) of ``roots`` and every distea module they need at import
    time, each after its package and after the distea modules its top level imports
    (imports inside functions, and under ``if TYPE_CHECKING:``, happen later or never)."""
    order: list[tuple[str, str]] = []
    seen: set[str] = set()

    def visit(name: str) -> None:
        if name in seen:
            return
        seen.add(name)
        source = module_source(name, package_dir)
        if source is None:
            return
        package = name.rpartition(".")[0]
        if package:
            visit(package)
        for needed in top_level_imports(source):
            visit(needed)
        order.append((name, source))

    for root in roots:
        visit(root)
    return order


def module_source(name: str, package_dir: str = PACKAGE_DIR) -> str | None:
    """The source file of distea module ``name`` in ``package_dir``, or None."""
    parts = name.split(".")
    if parts[0] != "distea":
        return None
    folder = os.path.join(package_dir, *parts[1:])
    for source in (os.path.join(folder, "__init__.py"), folder + ".py"):
        if os.path.isfile(source):
            return source
    return None


def top_level_imports(source: str) -> list[str]:
    """Every distea module that ``source``'s top level imports, in order (``from
    distea.tracer import minipack`` imports the package and then the module)."""
    import ast

    with open(source, "rb") as stream:
        tree = ast.parse(stream.read(), source)
    names: list[str] = []
    statements = list(tree.body)
    while statements:
        node = statements.pop(0)
        if isinstance(node, ast.If) and not (isinstance(node.test, ast.Name)
                                             and node.test.id == "TYPE_CHECKING"):
            statements[:0] = [*node.body, *node.orelse]
        elif isinstance(node, ast.Try):
            statements[:0] = [*node.body, *node.orelse, *node.finalbody]
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
            names.extend(f"{node.module}.{alias.name}" for alias in node.names)
    return [n for n in names if n == "distea" or n.startswith("distea.")]


def _unchanged(base: str, entry: tuple[str, str, bool, int, int]) -> bool:
    """Whether an image entry's source still has the size and mtime it was made from."""
    try:
        stat = os.stat(os.path.join(base, entry[1]))
    except OSError:
        return False
    return (stat.st_mtime_ns, stat.st_size) == (entry[3], entry[4])


def _import_system() -> tuple[Any, bytes, Any]:
    """The import system's source loader, magic number and ``cache_from_source``, from
    the module it runs on (``importlib.machinery`` and ``importlib.util`` re-export
    them, for ~3 ms of imports in the first process of every run)."""
    external = sys.modules.get("_frozen_importlib_external")
    if external is None:
        from importlib import machinery, util

        return machinery.SourceFileLoader, util.MAGIC_NUMBER, util.cache_from_source
    return external.SourceFileLoader, external.MAGIC_NUMBER, external.cache_from_source


def _image_index(path: str, magic: bytes) -> list[tuple[str, str, bool, int, int]] | None:
    """What an image at ``path`` holds, without the code; None if this Python cannot
    read it."""
    import marshal

    try:
        with open(path, "rb") as stream:
            image_format, image_magic, modules = marshal.loads(stream.read())
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if image_format != IMAGE_FORMAT or image_magic != magic:
        return None
    return [tuple(module[:5]) for module in modules]
