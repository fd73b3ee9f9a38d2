"""End-to-end tests: each sample system traced by the real ``distea run``, with hand-derived impact sets."""
