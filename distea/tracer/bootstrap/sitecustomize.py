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
            "argv": list(sys.argv),
            "reason": reason,
            "parent_token": os.environ.get("DISTEA_PARENT_TOKEN"),
        }
        with open(os.path.join(folder, "%d.json" % os.getpid()), "w") as stream:
            json.dump(note, stream)
    except Exception:
        pass


def _start():
    if sys.version_info < (3, 12):
        _note_untraced("Python %d.%d has no sys.monitoring (needs 3.12+)" % sys.version_info[:2])
        return
    try:
        from distea.tracer.startup import start_from_environment
    except ImportError as exc:
        _note_untraced("cannot import the tracer in %s: %s" % (sys.executable, exc))
        return
    try:
        start_from_environment()
    except Exception as exc:
        _note_untraced("tracer failed to start: %r" % (exc,))


def _chain():
    """Run the next sitecustomize on sys.path, as Python would have without us."""
    import importlib.machinery

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    import importlib.util  # only now: most environments have no other sitecustomize

    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


if os.environ.get("DISTEA_CONFIG"):
    _start()
_chain()
