"""Launch the asyncio echo sample: one server process and two client processes."""

from __future__ import annotations

import sys

from sample_systems._launch import Role, RoleGroup, run_sample

CLIENTS = ("client-1", "client-2")


def launch() -> list[Role]:
    """Start the server, then both clients against its port; wait for all."""
    with RoleGroup() as group:
        server = group.start(
            "server", "sample_systems.echo_async.server", "--clients", len(CLIENTS)
        )
        (port,) = group.wait_ready(server)
        for name in CLIENTS:
            group.start(name, "sample_systems.echo_async.client", "--port", port, "--name", name)
        return group.finish()


if __name__ == "__main__":
    sys.exit(run_sample("echo_async", launch))
