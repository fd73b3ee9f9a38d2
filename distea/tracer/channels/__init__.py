"""One interceptor module per transport; each implements ``distea.tracer.seams.Channel``."""
