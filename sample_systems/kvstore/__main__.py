"""Launch the replicated key-value store: primary, two backups, and a client."""

from __future__ import annotations

import sys

from sample_systems._launch import Role, RoleGroup, run_sample

NODE = "sample_systems.kvstore.node"


def launch() -> list[Role]:
    """Start the backups, then the primary pointing at them, then the client."""
    with RoleGroup() as group:
        backups = [
            group.start(f"backup-{i}", NODE, "--name", f"backup-{i}", "--role", "backup")
            for i in (1, 2)
        ]
        backup_ports = ",".join(str(group.wait_ready(backup)[0]) for backup in backups)
        primary = group.start(
            "primary", NODE, "--name", "primary", "--role", "primary", "--replicas", backup_ports
        )
        (primary_port,) = group.wait_ready(primary)
        group.start(
            "client",
            "sample_systems.kvstore.client",
            "--primary", primary_port,
            "--backups", backup_ports,
        )  # fmt: skip
        return group.finish()


if __name__ == "__main__":
    sys.exit(run_sample("kvstore", launch))
