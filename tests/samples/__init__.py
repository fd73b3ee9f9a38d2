"""End-to-end tests: each sample system traced by the real ``distea run``.

Expected impact sets are derived by hand from the samples' code.
"""
