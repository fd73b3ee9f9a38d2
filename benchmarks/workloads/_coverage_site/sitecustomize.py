"""Start coverage.py in every process (the directory is put on PYTHONPATH).

coverage.py's documented way to measure subprocesses: ``COVERAGE_PROCESS_START``
names the rc file and ``coverage.process_startup()`` runs at interpreter
start-up (usually from a ``.pth`` file; a ``sitecustomize`` on PYTHONPATH
does the same without writing into site-packages).
"""

try:
    import coverage
except ImportError:
    pass
else:
    coverage.process_startup()
