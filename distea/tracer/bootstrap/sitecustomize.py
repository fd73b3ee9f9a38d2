"""distea's start-up hook, put first on PYTHONPATH by ``distea run``.

Python imports ``sitecustomize`` at start-up in every process that does not
run with -S or -I; this one starts the tracer when ``DISTEA_CONFIG`` is set,
then hands over to the ``sitecustomize`` that would otherwise have run.
It must run on any Python (old ones too), so that a child that cannot be
traced is still reported: it leaves a note in the run directory instead.
"""

import os
import sys


def _note_untraced(reason):
    import json
    try:
        run_dir = json.loads(os.environ["DISTEA_CONFIG"])["run_dir"]
        folder = os.path.join(run_dir, "untraced")
        if not os.path.isdir(folder):
            os.makedirs(folder)
        note = {
            "pid": os.getpid(),
            # sys.argv is still ['-m'] or ['-c'] while site runs: orig_argv names the program
            "argv": list(getattr(sys, "orig_argv", sys.argv)),
            "reason": reason,
            "parent_token": os.environ.get("DISTEA_PARENT_TOKEN"),
        }
        with open(os.path.join(folder, "%d.json" % os.getpid()), "w") as stream:
            json.dump(note, stream)
    except Exception:
        pass


def _import_tracer():
    """The tracer's entry point, from the program's own path or else from distea's own copy.

    A program in an environment without distea (distea installed as a tool)
    gets it from DISTEA_TRACER_PATH, which holds only distea and msgpack and
    is on sys.path only for this import (msgpack is imported with it, not at
    its first use as elsewhere). msgpack's modules are then dropped
    from sys.modules (the tracer keeps its references), so the program's own
    ``import msgpack`` behaves as it would untraced.
    """
    try:
        _preload_tracer(sys.path)
        from distea.tracer.startup import start_from_environment
        if _path_finder().find_spec("msgpack") is None:  # the tracer imports it later
            raise ImportError("No module named 'msgpack'")
        return start_from_environment
    except ImportError:
        extra = os.environ.get("DISTEA_TRACER_PATH")
        if not extra or not os.path.isdir(extra):
            raise
    for name in [n for n in sys.modules if n == "distea" or n.startswith("distea.")]:
        del sys.modules[name]  # a half-imported attempt from the program's path
    sys.path.append(extra)
    try:
        _preload_tracer([extra])
        from distea.tracer.emitter import load_msgpack
        from distea.tracer.startup import start_from_environment

        load_msgpack()  # now, while it can be found (others import it at their first use)
    finally:
        sys.path.remove(extra)
        ours = os.path.join(extra, "msgpack")
        for name in [n for n in sys.modules if n == "msgpack" or n.startswith("msgpack.")]:
            if (getattr(sys.modules[name], "__file__", None) or "").startswith(ours):
                del sys.modules[name]
    return start_from_environment


def _start():
    if sys.version_info < (3, 12):
        _note_untraced("Python %d.%d has no sys.monitoring (needs 3.12+)" % sys.version_info[:2])
        return
    if not _is_main_interpreter():
        # A subinterpreter imports site too. A second tracer there, in the same process,
        # left its idle flusher's thread running when the subinterpreter ended, and the
        # interpreter aborted (CPython's test_importlib; _interpreters.destroy).
        _note_untraced("code ran in a subinterpreter of this process: only each process's "
                       "main interpreter is traced, so what that code did is not observed")
        return
    # The tracer's modules get their bytecode cached even where the program's
    # environment says not to (PYTHONDONTWRITEBYTECODE, -B: containers, CI):
    # else every traced process compiled them from source again, ~100 ms. The
    # program's own setting is back before its first line runs.
    dont_write_bytecode = sys.dont_write_bytecode
    sys.dont_write_bytecode = False
    try:
        _start_tracer()
    finally:
        sys.dont_write_bytecode = dont_write_bytecode


def _is_main_interpreter():
    import _thread

    return getattr(_thread, "_is_main_interpreter", lambda: True)()


def _start_tracer():
    try:
        start_from_environment = _import_tracer()
    except ImportError as exc:
        _note_untraced("cannot import the tracer in %s: %s" % (sys.executable, exc))
        return
    try:
        start_from_environment()
    except Exception as exc:
        _note_untraced("tracer failed to start: %r" % (exc,))


def _path_finder():
    """The import system's own PathFinder (importlib.machinery's, without importing
    importlib.machinery: ~2 ms at start-up)."""
    finders = sys.modules.get("_frozen_importlib_external")
    if finders is not None:
        return finders.PathFinder
    import importlib.machinery

    return importlib.machinery.PathFinder


def _preload_tracer(path):
    """Execute the tracer's start-up modules from their image, if the distea package
    that ``path`` imports has one that its sources still match; the imports
    that follow then find them in ``sys.modules``. ``distea/tracer/bytecode.py``
    writes the image, and says why. The modules are made with the import
    system's own functions (spec, loader, module attributes), one after the
    other in the image's order; one that fails is taken out again, as the
    import system does, and the imports that follow import it as usual."""
    bootstrap = sys.modules.get("_frozen_importlib")
    external = sys.modules.get("_frozen_importlib_external")
    if bootstrap is None or external is None:
        return
    spec = external.PathFinder.find_spec("distea", path)
    if spec is None or not spec.submodule_search_locations:
        return
    package_dir = spec.submodule_search_locations[0]
    base = os.path.dirname(package_dir)
    image = os.path.join(package_dir, "tracer", "__pycache__", "startup.%s.opt%d.image"
                         % (sys.implementation.cache_tag, sys.flags.optimize))
    try:
        import marshal

        with open(image, "rb") as stream:
            image_format, magic, modules = marshal.loads(stream.read())
        if image_format != "distea-image-3" or magic != external.MAGIC_NUMBER:
            return
        for _, relative, _, mtime_ns, size, _ in modules:
            stat = os.stat(os.path.join(base, relative))
            if (stat.st_mtime_ns, stat.st_size) != (mtime_ns, size):
                return  # a source changed since: the import system compiles it
    except (OSError, EOFError, ValueError, TypeError):
        return
    for name, relative, is_package, _, _, code in modules:
        if name in sys.modules:
            continue
        source = os.path.join(base, relative)
        module_spec = external.spec_from_file_location(
            name, source, loader=external.SourceFileLoader(name, source),
            submodule_search_locations=[os.path.dirname(source)] if is_package else None)
        module = bootstrap.module_from_spec(module_spec)
        sys.modules[name] = module
        try:
            exec(marshal.loads(code), module.__dict__)
        except BaseException:
            del sys.modules[name]
            return
        package, _, child = name.rpartition(".")
        if package:
            setattr(sys.modules[package], child, module)


def _chain():
    """Run the next sitecustomize on sys.path, as Python would have without us."""
    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = _path_finder().find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    import importlib.util  # only now: most environments have no other sitecustomize

    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


if os.environ.get("DISTEA_CONFIG"):
    _start()
_chain()
