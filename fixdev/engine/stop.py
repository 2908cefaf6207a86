"""Stopping an analysis nobody waits for any more: the language server's,
when a newer change of the document comes while it runs.

``stoppable(superseded)`` makes ``checkpoint()`` raise ``Superseded`` once
``superseded()`` is true. The engine calls ``checkpoint`` only between its
steps (after CPython's parse, between the rules' screens, before libcst's
parse, every few hundred nodes of the rules' visit), never inside a rule,
a screen or the flow: what an analysis stopped there leaves behind (the
statements parsed, the flow's facts computed so far) is what an analysis
asking fewer questions leaves, and the next version reuses it as such.
Outside ``stoppable`` (the command line) ``checkpoint`` does nothing."""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator


class Superseded(BaseException):
    """The analysis was stopped: its text is no longer the document's. A
    BaseException, so that the runner's guard against a rule's bug (an
    ``Exception`` costs one file, reported as an error) lets it through."""


_SUPERSEDED: ContextVar["Callable[[], bool] | None"] = ContextVar("fixdev_superseded", default=None)


@contextmanager
def stoppable(superseded: Callable[[], bool]) -> Iterator[None]:
    token = _SUPERSEDED.set(superseded)
    try:
        yield
    finally:
        _SUPERSEDED.reset(token)


def current() -> "Callable[[], bool] | None":
    return _SUPERSEDED.get()


def checkpoint() -> None:
    superseded = _SUPERSEDED.get()
    if superseded is not None and superseded():
        raise Superseded
