"""``contextlib.suppress`` without ``contextlib``, for ``distea run``'s path and the tracer.

``contextlib`` imports ``collections`` and ``functools``: about 4 ms of every
``distea run`` on our test machine, and ~2 ms of a traced process's start-up,
for a context manager of a few lines.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: distea run and every traced process import this module
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
