"""Where names are mentioned in a file's text (strings and comments left out), for the questions a walk would answer slowly."""

from __future__ import annotations

import ast
import bisect
import re
from typing import Iterator
from fixdev.analysis.flow.index import Scope


# ---------------------------------------------------------------------------
# The file: lazy runs, summaries, contexts, class facts, and the query API
# ---------------------------------------------------------------------------

_IDENTIFIER = re.compile(r"[^\W\d]\w*")
# A comment or a string literal (leftmost first, so a `#` in a string is in the string).
# Each string's body is matched as runs of plain characters between escapes
# (and lone quotes, in a triple-quoted one): the same matches as trying an
# escape, a character and the closing quotes at every character, three times faster.
STRINGS_AND_COMMENTS = re.compile(
    r"#[^\r\n]*"
    r"|'''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*'''"
    r'|"""[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*"""'
    r"|'[^'\\\r\n]*(?:\\.[^'\\\r\n]*)*'"
    r'|"[^"\\\r\n]*(?:\\.[^"\\\r\n]*)*"',
    re.DOTALL,
)
_KEYWORD_OR_TARGET = re.compile(r"[ \t]*=(?!=)")


def _find_names(text: str, names: set[str]) -> Iterator[tuple[str, int]]:
    """Where each of ``names`` occurs as a whole identifier: a search per name
    when there are few (C-speed scanning), one pass over every identifier else."""
    if len(names) > 40:
        for match in _IDENTIFIER.finditer(text):
            if match.group() in names:
                yield match.group(), match.start()
        return
    found = []
    for name in names:
        at = text.find(name)
        while at >= 0:
            end = at + len(name)
            before = text[at - 1] if at else " "
            after = text[end] if end < len(text) else " "
            if not (before.isalnum() or before == "_" or after.isalnum() or after == "_"):
                found.append((at, name))
            at = text.find(name, end)
    for at, name in sorted(found):
        yield name, at


def _may_name_a_definition(scope: Scope, name: str) -> bool:
    """Whether a bare ``name`` in ``scope`` may refer to a def or class statement:
    the scope it resolves to has one of that name."""
    current: Scope | None = scope
    while current is not None:
        if name in current.locals or (current.kind == "class" and name in current.counts):
            return name in current.defs
        current = current.outer if current.kind != "class" else current.parent
    return False


def _after_dot(text: str, start: int) -> bool:
    i = start - 1
    while i >= 0 and text[i] in " \t":
        i -= 1
    return i >= 0 and text[i] == "."




def header_expressions(statement: ast.stmt) -> Iterator[ast.AST]:
    """The expressions of a statement's own line(s): a compound statement's
    header, not its body."""
    stack = []
    for field, value in ast.iter_fields(statement):
        if field in ("body", "orelse", "finalbody", "handlers", "cases", "decorator_list"):
            continue
        if isinstance(value, list):
            stack.extend(v for v in value if isinstance(v, ast.AST))
        elif isinstance(value, ast.AST):
            stack.append(value)
    while stack:
        node = stack.pop()
        if type(node) is ast.Lambda:
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def is_parenthesized(text: str, start: int, end: int) -> bool:
    """Whether the parenthesis at ``start`` closes at ``end - 1``."""
    depth = 0
    for i in range(start, end):
        ch = text[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i == end - 1
    return False


class Mentions:
    """Where the names of the file's functions and classes occur in its code,
    found by searching the text (no walk over the tree), strings and comments
    left out. An occurrence after a dot (``obj.name``) can only be a method; a
    bare one only a function or class. A keyword argument or an assignment
    target (``name=``) refers to none. What is left over-approximates who
    refers to whom, which keeps what is built on it safe: contexts (every
    occurrence must be a use a run has seen) and recursion (functions that
    reach themselves through the names they mention)."""

    def __init__(self, flow: "FileFlow") -> None:  # facts.py's, which imports this module
        index = flow.index
        text = flow.text
        by_name: dict[str, list[ast.AST]] = {}
        for node in index.definitions:
            by_name.setdefault(node.name, []).append(node)
        headers = {flow.name_offset(node) for node in index.definitions}
        # name -> [(offset, scope (None: a class body, which no run sees), after a dot)]
        self.occurrences: dict[str, list[tuple[int, Scope | None, bool]]] = {}
        self.edges: dict[ast.AST, set] = {}  # scope -> the definitions it mentions
        # else only in their own headers (a substring count can only say "more": then the search below finds none)
        wanted = {name for name, nodes in by_name.items() if text.count(name) > len(nodes)}
        if wanted:
            literals = [(m.start(), m.end()) for m in STRINGS_AND_COMMENTS.finditer(text)]
            literal_starts = [start for start, _ in literals]
            for name in wanted:
                self.occurrences[name] = []
            for name, start in _find_names(text, wanted):
                if start in headers:
                    continue
                i = bisect.bisect_right(literal_starts, start) - 1
                if i >= 0 and start < literals[i][1]:
                    continue  # in a string or a comment
                if _KEYWORD_OR_TARGET.match(text, start + len(name)):
                    continue
                dotted = _after_dot(text, start)
                scope = index.scope_at(flow.row_column(start))
                if not dotted and not _may_name_a_definition(scope, name):
                    continue  # a local of that name hides the definitions
                self.occurrences[name].append((start, scope if scope.kind != "class" else None, dotted))
                while scope.kind == "class":
                    scope = scope.parent
                targets = self.edges.setdefault(scope.node, set())
                for node in by_name[name]:
                    if (index.scopes[node].cls is not None) != dotted:
                        continue  # a method is reached after a dot; a function or class by its bare name
                    targets.add(node)
                    info = index.classes.get(node)
                    if info is not None and "__init__" in info.methods:
                        targets.add(info.methods["__init__"])
        self.cyclic = self._cyclic()

    def _cyclic(self) -> dict:
        """Functions that reach themselves through their callers, each mapped
        to its component: the strongly connected components (Tarjan's,
        iterative) of size > 1, and functions that call themselves."""
        edges = self.edges
        number: dict = {}
        low: dict = {}
        on_stack: set = set()
        stack: list = []
        cyclic: dict = {}
        counter = 0
        for start in list(edges):
            if start in number:
                continue
            work = [(start, iter(edges.get(start, ())))]
            number[start] = low[start] = counter
            counter += 1
            stack.append(start)
            on_stack.add(start)
            while work:
                node, children = work[-1]
                advanced = False
                for child in children:
                    if child not in number:
                        number[child] = low[child] = counter
                        counter += 1
                        stack.append(child)
                        on_stack.add(child)
                        work.append((child, iter(edges.get(child, ()))))
                        advanced = True
                        break
                    if child in on_stack:
                        low[node] = min(low[node], number[child])
                if advanced:
                    continue
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == number[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member is node:
                            break
                    if len(component) > 1 or node in edges.get(node, ()):
                        for member in component:
                            cyclic[member] = node
        return cyclic
