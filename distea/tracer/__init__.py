"""The tracer: runs inside every traced process.

It imports only the standard library, msgpack and zmq (never the analyzer,
the report or the CLI) so that it starts fast and cannot drag a user's
process into distea's own dependencies.
"""
