"""Launch the chat sample: one server process and three client processes."""

from __future__ import annotations

import sys

from sample_systems._launch import Role, RoleGroup, run_sample

CLIENTS = ("alice", "bob", "carol")


def launch() -> list[Role]:
    """Start the server, then the clients against its port; wait for all."""
    with RoleGroup() as group:
        server = group.start("server", "sample_systems.chat.server", "--members", len(CLIENTS))
        (port,) = group.wait_ready(server)
        for name in CLIENTS:
            group.start(name, "sample_systems.chat.client", "--port", port, "--name", name)
        return group.finish()


if __name__ == "__main__":
    sys.exit(run_sample("chat", launch))
