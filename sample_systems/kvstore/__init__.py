"""Replicated key-value store: primary/backup replication with a client-driven failover."""
