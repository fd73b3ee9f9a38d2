"""One interceptor module per transport; each implements ``session.Channel``."""
