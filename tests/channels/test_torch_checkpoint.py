"""A checkpoint handed from rank 0 to rank 1 through a file, in a two-rank gloo job.

Rank 0 saves with ``torch.save`` (written from C++: recorded when it
returns) under a temporary name and renames it into place; rank 1 waits for
the file and loads it with ``torch.load``. No collective runs after
``init_process_group``, so only the file can carry rank 0's weights to rank
1's parser: the expected impact below is derived from the program alone.
"""

from __future__ import annotations

from tests.channels.test_torch_training import traced_training
from tests.channels.torch_support import torch_or_skip

CHECKPOINT = r'''
import gc
import os
import sys
import time

import torch
import torch.distributed as dist


def say(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def make_weights():
    return {"w": torch.arange(4.0)}


def save_checkpoint(path):
    torch.save(make_weights(), path + ".tmp")
    os.replace(path + ".tmp", path)


def parse_checkpoint(state):
    return float(state["w"].sum())


def load_checkpoint(path):
    deadline = time.monotonic() + 60
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise SystemExit("no checkpoint")
        time.sleep(0.01)
    return parse_checkpoint(torch.load(path))


def warm_up():
    return torch.zeros(1)


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    warm_up()
    path = "ckpt-" + os.environ["TORCHELASTIC_RUN_ID"] + ".pt"  # one per torchrun
    if rank == 0:
        save_checkpoint(path)
    else:
        say(f"rank 1 loaded {load_checkpoint(path)}")
    gc.collect()  # a group left to a reference cycle: gloo aborts at exit
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
'''


def test_rank0_checkpoint_reaches_rank1_through_the_file(program) -> None:
    torch_or_skip()
    run, stdout, _ = traced_training(program, "ckpt.py", CHECKPOINT)
    assert stdout == "rank 1 loaded 6.0\n"
    rank1 = next(k for k, p in run.processes.items() if p.rank == 1)
    impact = run.impact("ckpt.make_weights")
    reached = set(impact.impacted.get(rank1, []))
    assert {"ckpt.load_checkpoint", "ckpt.parse_checkpoint", "ckpt.main"} <= reached
    assert "ckpt.warm_up" not in reached  # ran before the checkpoint existed
    explanation = run.explain("ckpt.make_weights", "ckpt.parse_checkpoint")
    assert any(s.action == "recv" and "file" in s.detail and ".pt" in s.detail
               for s in explanation.steps), explanation.steps
