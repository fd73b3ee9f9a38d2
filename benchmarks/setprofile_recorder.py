"""A plain ``sys.setprofile`` recorder: the pre-3.12 way to do what distea does.

Records, per code object, the first and the latest call counter at which it
was executing (the same facts as distea's compact mode, without
sys.monitoring and without DISABLE: every call and return of every function,
C functions included, goes through the callback). Used as a peer in the
overhead benchmark; it is injected into every process of a workload through
``benchmarks/workloads/_setprofile_site/sitecustomize.py`` (a directory put
on ``PYTHONPATH``), so it reaches subprocesses and multiprocessing children.

    BENCH_SETPROFILE_DIR=out PYTHONPATH=benchmarks/workloads/_setprofile_site:. python app.py

Each process writes ``out/<pid>.json`` at exit (``atexit``; forked children
that end with ``os._exit`` write nothing, which costs them nothing either).
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
from types import FrameType
from typing import Any

OUT_ENV = "BENCH_SETPROFILE_DIR"


class Recorder:
    def __init__(self, out_dir: str) -> None:
        self.out_dir = out_dir
        self.first: dict[Any, int] = {}
        self.last: dict[Any, int] = {}
        self.counter = 0

    def callback(self) -> Any:
        first = self.first
        last = self.last

        def profile(frame: FrameType, event: str, arg: Any) -> None:
            if event == "call" or event == "return":
                code = frame.f_code
                self.counter += 1
                if code not in first:
                    first[code] = self.counter
                last[code] = self.counter

        return profile

    def start(self) -> None:
        profile = self.callback()
        sys.setprofile(profile)
        threading.setprofile(profile)
        atexit.register(self.save)

    def save(self) -> None:
        sys.setprofile(None)
        rows = [[f"{c.co_filename}:{c.co_qualname}", f, self.last[c]]
                for c, f in self.first.items()]
        os.makedirs(self.out_dir, exist_ok=True)
        with open(os.path.join(self.out_dir, f"{os.getpid()}.json"), "w") as fh:
            json.dump(rows, fh)


def start_from_environment() -> Recorder | None:
    out_dir = os.environ.get(OUT_ENV)
    if not out_dir:
        return None
    recorder = Recorder(out_dir)
    recorder.start()
    return recorder
