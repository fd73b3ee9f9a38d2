"""Skip torch tests where torch does not import, saying why; CI makes them required.

CI installs torch and sets ``DISTEA_REQUIRE_TORCH=1``: there a missing or
broken torch fails the tests instead of skipping them.
"""

from __future__ import annotations

import os

import pytest

REQUIRE_VARIABLE = "DISTEA_REQUIRE_TORCH"


def torch_or_skip() -> None:
    try:
        import torch.distributed as dist
    except Exception as err:  # ImportError, or OSError from a broken install
        reason = f"torch not importable ({err}): `uv pip install torch` to run these tests"
        if os.environ.get(REQUIRE_VARIABLE) == "1":
            pytest.fail(f"{reason} ({REQUIRE_VARIABLE}=1 makes them required)")
        pytest.skip(reason)
    if not dist.is_available():
        pytest.skip("this torch build has no torch.distributed")
