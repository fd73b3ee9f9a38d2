"""Launch the word-count sample: a reducer with one mailbox per mapper, then the mappers.

python -m sample_systems.wordcount [--mappers N]
"""

from __future__ import annotations

import argparse
import sys
from functools import partial

from sample_systems._launch import Role, RoleGroup, run_sample


def launch(mappers: int) -> list[Role]:
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
            )  # fmt: skip
        return group.finish()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mappers", type=int, default=3)
    args = parser.parse_args()
    return run_sample("wordcount", partial(launch, args.mappers))


if __name__ == "__main__":
    sys.exit(main())
