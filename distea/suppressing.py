"""``contextlib.suppress`` for the modules on ``distea run``'s path, without ``contextlib``.

``contextlib`` imports ``collections`` and ``functools``: about 4 ms of every
``distea run`` on our test machine, for a context manager of a few lines.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: distea run imports this module before the command
if TYPE_CHECKING:
    from types import TracebackType


class suppress:  # named as contextlib's, which it stands in for
    """``with suppress(OSError): ...``: an exception of these types ends the block quietly.

    Unlike ``contextlib.suppress``, an exception group is not split: none of
    the blocks it guards raises one.
    """

    __slots__ = ("exceptions",)

    def __init__(self, *exceptions: type[BaseException]) -> None:
        self.exceptions = exceptions

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> bool:
        return kind is not None and issubclass(kind, self.exceptions)
