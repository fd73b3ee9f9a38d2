"""Reversible monkey-patching shared by the channel interceptors.

Every patch keeps the original so uninstall restores the program's world
exactly (tests assert that nothing is left patched).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs every traced process ~5 ms at start-up
if TYPE_CHECKING:
    from typing import Any


class Patches:
    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any]] = []

    def replace(self, owner: Any, name: str, replacement: Any) -> Any:
        """Set ``owner.name`` to ``replacement``; return the original."""
        original = getattr(owner, name)
        self._saved.append((owner, name, original))
        setattr(owner, name, replacement)
        return original

    def restore(self) -> None:
        while self._saved:
            owner, name, original = self._saved.pop()
            setattr(owner, name, original)
