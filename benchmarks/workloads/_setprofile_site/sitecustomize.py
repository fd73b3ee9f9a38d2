"""Start benchmarks.setprofile_recorder in every process (the directory is put on PYTHONPATH)."""

try:
    from benchmarks.setprofile_recorder import start_from_environment
except ImportError:  # the repository root is not on the path: record nothing
    pass
else:
    start_from_environment()
