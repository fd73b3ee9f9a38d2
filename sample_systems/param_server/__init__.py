"""Parameter server: data-parallel logistic regression over ZeroMQ (the demo subject)."""
