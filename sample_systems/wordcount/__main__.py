"""Launch the word-count sample: a reducer with one mailbox per mapper, then the mappers.

python -m sample_systems.wordcount [--mappers N] [--documents D]

D documents per mapper's shard (default 150); the benchmarks use more so that
the mappers' work, not process start-up, dominates the run time.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial

from sample_systems._launch import Role, RoleGroup, run_sample
from sample_systems.wordcount.corpus import DOCUMENTS_PER_SHARD


def launch(mappers: int, documents: int) -> list[Role]:
    """Start the reducer, then mapper k against mailbox port k; wait for all."""
    with RoleGroup() as group:
        reducer = group.start("reducer", "sample_systems.wordcount.reducer", "--mappers", mappers)
        ports = group.wait_ready(reducer)
        for index, port in enumerate(ports):
            group.start(
                f"mapper-{index}",
                "sample_systems.wordcount.mapper",
                "--name", f"mapper-{index}",
                "--index", index,
                "--port", port,
                "--documents", documents,
            )  # fmt: skip
        return group.finish()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mappers", type=int, default=3)
    parser.add_argument("--documents", type=int, default=DOCUMENTS_PER_SHARD)
    args = parser.parse_args()
    return run_sample("wordcount", partial(launch, args.mappers, args.documents))


if __name__ == "__main__":
    sys.exit(main())
