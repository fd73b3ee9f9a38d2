"""Client: writes and reads through the primary, stops it, fails over, and carries on.

The client doubles as the cluster's operator: it stops the primary, waits
until the primary is really unreachable (a tiny failure detector), promotes
the first backup, and points it at the remaining backup.
"""

from __future__ import annotations

import argparse
import socket
import time

from sample_systems.kvstore.protocol import Connection

DOWN_TIMEOUT_S = 10.0


class Cluster:
    """Connections to the nodes by name, and which one is the primary."""

    def __init__(self, ports: dict[str, int], primary: str) -> None:
        self.ports = ports
        self.primary = primary
        self.connections: dict[str, Connection] = {}

    def node(self, name: str) -> Connection:
        if name not in self.connections:
            self.connections[name] = Connection(self.ports[name])
        return self.connections[name]

    def forget(self, name: str) -> None:
        self.connections.pop(name).close()

    def close(self) -> None:
        for name in list(self.connections):
            self.forget(name)


def put(cluster: Cluster, key: str, value: str) -> None:
    """Write through the primary."""
    reply = cluster.node(cluster.primary).call({"op": "put", "key": key, "value": value})
    if not reply["ok"]:
        raise RuntimeError(reply["error"])
    print(f"put {key}={value} via {cluster.primary}: seq {reply['seq']}")


def get(cluster: Cluster, key: str, node: str) -> str | None:
    """Read from any node (backups included, which shows replication worked)."""
    reply = cluster.node(node).call({"op": "get", "key": key})
    print(f"get {key} from {node}: {reply['value']} (seq {reply['seq']})")
    return reply["value"]


def stop_node(cluster: Cluster, name: str) -> None:
    """Ask a node to shut down, and drop our connection to it."""
    cluster.node(name).call({"op": "stop"})
    cluster.forget(name)


def wait_until_down(port: int) -> None:
    """Failure detection: poll until connecting to `port` is refused."""
    deadline = time.monotonic() + DOWN_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            probe = socket.create_connection(("127.0.0.1", port), timeout=1.0)
        except ConnectionRefusedError:
            return  # nothing listens any more
        except OSError:
            pass  # reset or timed out: the node is going away; look again
        else:
            probe.close()  # still listening (shutting down, or alive)
        time.sleep(0.02)
    raise TimeoutError(f"node on port {port} is still up")


def failover(cluster: Cluster, new_primary: str, backups: list[str]) -> None:
    """Stop the primary, wait for it to go, and promote `new_primary`."""
    old = cluster.primary
    stop_node(cluster, old)
    wait_until_down(cluster.ports[old])
    print(f"{old} is down")
    replica_ports = [cluster.ports[name] for name in backups]
    reply = cluster.node(new_primary).call({"op": "promote", "replicas": replica_ports})
    cluster.primary = new_primary
    print(f"promoted {new_primary} at seq {reply['seq']}, replicating to {', '.join(backups)}")


def run_workload(cluster: Cluster) -> None:
    """Writes and reads before and after the failover."""
    put(cluster, "user:1", "alice")
    put(cluster, "user:2", "bob")
    put(cluster, "cart:1", "apples")
    get(cluster, "user:1", "primary")
    put(cluster, "user:2", "bobby")
    get(cluster, "user:2", "backup-2")
    failover(cluster, "backup-1", ["backup-2"])
    put(cluster, "cart:1", "pears")
    put(cluster, "user:3", "carol")
    get(cluster, "user:2", "backup-1")
    get(cluster, "cart:1", "backup-2")
    get(cluster, "user:3", "backup-2")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--primary", type=int, required=True)
    parser.add_argument("--backups", required=True, help="two comma-separated ports")
    args = parser.parse_args()
    backup_1, backup_2 = (int(port) for port in args.backups.split(","))
    ports = {"primary": args.primary, "backup-1": backup_1, "backup-2": backup_2}
    cluster = Cluster(ports, primary="primary")
    try:
        run_workload(cluster)
        stop_node(cluster, "backup-1")
        stop_node(cluster, "backup-2")
    finally:
        cluster.close()


if __name__ == "__main__":
    main()
