"""The failing statement in a file's device flow: the statement at a line
(a compound one by its header only), the expressions its header evaluates and
its source in one line."""

from __future__ import annotations

import ast


def statement_at(flow, line: int) -> ast.stmt | None:
    """The innermost statement whose own line(s) hold ``line``: a compound
    statement only by its header (``for x in loader:``)."""
    best = None
    stack = list(flow.tree.body)
    while stack:
        node = stack.pop()
        if not isinstance(node, ast.stmt) or not (node.lineno <= line <= (node.end_lineno or node.lineno)):
            continue
        best = node
        children = [child for name in ("body", "orelse", "finalbody", "handlers") for child in getattr(node, name, []) or []]
        for handler in getattr(node, "handlers", []) or []:
            children.extend(handler.body)
        for case in getattr(node, "cases", []) or []:
            children.extend(case.body)
        stack = [child for child in children if isinstance(child, ast.stmt)]
    return best


def scope_path(tree: ast.Module, line: int) -> tuple[str, ...]:
    """The names of the defs and classes around ``line``, outermost first, up
    to the innermost function (``("Net", "forward")``; ``()`` at module level
    or in a class body outside its methods): the same in a file before and
    after a fix, where line numbers are not."""
    path: list[str] = []
    upto = 0  # the length of ``path`` at its innermost function
    node: ast.AST = tree
    while True:
        inner = next((c for c in _defs_in(node) if c.lineno <= line <= (c.end_lineno or c.lineno)), None)
        if inner is None:
            return tuple(path[:upto])
        path.append(inner.name)
        if not isinstance(inner, ast.ClassDef):
            upto = len(path)
        node = inner


def _defs_in(node: ast.AST):
    """The defs and classes in ``node``'s body, in compound statements too,
    not inside another def or class."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield child
        elif isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)):
            yield from _defs_in(child)


def header_nodes(statement: ast.stmt) -> list[ast.AST]:
    """The expressions a statement evaluates itself (not its body's)."""
    if isinstance(statement, (ast.For, ast.AsyncFor)):
        return [statement.target, statement.iter]
    if isinstance(statement, (ast.If, ast.While)):
        return [statement.test]
    if isinstance(statement, (ast.With, ast.AsyncWith)):
        return [item for item in statement.items]
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return list(statement.decorator_list)
    if isinstance(statement, ast.Try):
        return []
    return [statement]


def header_expressions(statement: ast.stmt) -> list[ast.expr]:
    found = []
    for root in header_nodes(statement):
        for node in ast.walk(root):
            if isinstance(node, ast.expr):
                found.append(node)
    return found


def header_lines(statement: ast.stmt) -> tuple[int, int]:
    nodes = header_nodes(statement)
    if not nodes or nodes == [statement]:
        return statement.lineno, statement.end_lineno or statement.lineno
    return statement.lineno, max((getattr(n, "end_lineno", None) or statement.lineno) for n in nodes)


def source_of(flow, node: ast.AST) -> str:
    try:
        start, end = flow.span(node)
        return " ".join(flow.text[start:end].split())
    except Exception:  # a node without a position
        return ast.unparse(node)
