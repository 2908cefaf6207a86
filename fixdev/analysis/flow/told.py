"""What a device error's message says about expressions of one text, from
outside its code (``fixdev --traceback``): ``Evidence``, which a ``FileFlow``
takes as its project view and uses where its own analysis cannot place a
value."""

from __future__ import annotations

import ast
from typing import Iterable

from fixdev.analysis.flow.lattice import HOST, Device
from fixdev.analysis.flow.syntax import ast_walk


class Evidence:
    """What a device error's message says about expressions of one text, from
    outside its code (``fixdev --traceback``): ``told`` holds ``(span,
    placement, origin)`` items; ``span`` and ``origin`` are ast positions
    ``(type name, lineno, col_offset, end_lineno, end_col_offset)``
    (``origin``: the name or parameter that made the value, where a fix goes;
    None: the expression itself); ``placement`` is ``"host"`` or ``"device"``.
    A ``FileFlow`` made with it as ``project`` places each of those
    expressions so wherever the analysis could not (its value is on no known
    side), and nothing else; for another text it is ignored. It travels
    as the project facts do (``project`` is their view, or None), so rules ask
    their flow as always and never know where a fact came from."""

    def __init__(self, project, text: str, told: Iterable[tuple]) -> None:
        self.project = project
        self.text = text
        self.told = tuple(told)

    def call(self, name: str, node: ast.Call):
        return self.project.call(name, node) if self.project is not None else None

    def used(self) -> tuple:
        return self.project.used() if self.project is not None else ()

    def resolve(self, flow: "FileFlow") -> dict[tuple, tuple]:
        """``{(node type, positions): (placement, origin node)}`` for ``flow``'s tree."""
        if flow.text != self.text or not self.told:
            return {}
        nodes = {(type(n).__name__, n.lineno, n.col_offset, n.end_lineno, n.end_col_offset): n for n in ast_walk(flow.tree) if isinstance(n, (ast.expr, ast.arg))}
        found: dict[tuple, tuple] = {}
        for span, placement, origin in self.told:
            node = nodes.get(tuple(span))
            if node is None:
                continue
            made = nodes.get(tuple(origin)) if origin is not None else node
            found[(type(node), *span[1:])] = (HOST if placement == "host" else Device(None), made if made is not None else node)
        return found
