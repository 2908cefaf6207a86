"""Walking CPython's ast cheaply, and reading names and chains from it."""

from __future__ import annotations

import ast
import collections
from typing import Callable, Iterator

from fixdev.engine.ast_reuse import CHILDREN


def imported_name(node: ast.ImportFrom, name: str) -> str:
    """The qualified name ``from M import name`` binds: ``.mod.f`` for both
    ``from .mod import f`` and ``from . import mod`` then ``mod.f``; ``torch``
    for ``torch`` a module of the project re-exports (``from common import
    torch``: no module names another thing ``torch``)."""
    if name == "torch" and node.module != "torch":
        return "torch"
    module = "." * node.level + (node.module or "")
    return f"{module}.{name}" if node.module else module + name


def ast_children(node: ast.AST) -> list[ast.AST]:
    """``ast.iter_child_nodes(node)`` but the load/store markers (``ctx``), as
    a list: a third of the time of that generator, for walks over whole files.
    In the language server, kept by node across versions (``ast_reuse``):
    the list is shared, never to be changed."""
    kept = CHILDREN.get()
    if kept is not None:
        found = kept.get(node)
        if found is None:
            found = kept[node] = _children(node)
        return found
    return _children(node)


def _children(node: ast.AST) -> list[ast.AST]:
    found = []
    kind = type(node)
    fields = _AST_FIELDS.get(kind)
    mixed = kind in _MIXED_LISTS
    for name in fields if fields is not None else _ast_fields(kind):
        value = getattr(node, name, None)
        if type(value) is list:
            if not mixed:
                found.extend(value)
                continue
            for item in value:
                if isinstance(item, ast.AST):
                    found.append(item)
        elif isinstance(value, ast.AST):
            found.append(value)
    return found


# The node types with a list that may hold other than nodes (the grammar's
# ``identifier*`` and lists of optional expressions): names (``global a, b``,
# ``case C(x=1)``'s attributes), ``None`` (``{**d}``'s key, a keyword-only
# parameter without a default). Every other list of a parsed tree holds nodes only.
_MIXED_LISTS = frozenset({ast.Global, ast.Nonlocal, ast.MatchClass, ast.Dict, ast.arguments})


# Nodes with no child node (``ctx`` aside): nearly half of a tree's nodes,
# which walks need not ask for children.
AST_LEAVES = frozenset({ast.Name, ast.Constant})


def ast_walk(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk`` (breadth first), without the load/store markers, on ``ast_children``."""
    todo = collections.deque([node])
    kept = CHILDREN.get()
    if kept is None:
        while todo:
            node = todo.popleft()
            if type(node) not in AST_LEAVES:
                todo.extend(_children(node))
            yield node
        return
    while todo:
        node = todo.popleft()
        if type(node) not in AST_LEAVES:
            found = kept.get(node)
            if found is None:
                found = kept[node] = _children(node)
            todo.extend(found)
        yield node


def ast_statements(body: list[ast.stmt], enter: Callable[[ast.stmt], bool] | None = None) -> Iterator[ast.stmt]:
    """Every statement of ``body`` and of the blocks nested in it, at any
    depth, in no set order, without walking expressions (which hold none: a
    tenth of a tree's nodes). A compound statement ``enter`` refuses is given
    but its blocks are not (a nested function or class, where another scope
    or another ``self`` begins)."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.stmt):
            yield node
            if enter is not None and not enter(node):
                continue
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):  # (handlers and cases hold bodies too)
            stack.extend(getattr(node, field, ()))


_AST_FIELDS: dict[type, tuple[str, ...]] = {}


# Fields that hold no node (identifiers, strings, numbers, flags: ``Name.id``,
# ``Attribute.attr``, ``def``'s ``name``), nor ``ctx``: a walk need not read
# them. (``TypeAlias.name``, from Python 3.12, is an expression.)
_NO_NODE_FIELDS = frozenset({"ctx", "id", "attr", "name", "arg", "asname", "module", "level", "kind", "conversion", "is_async", "simple", "type_comment", "tag"})


def _ast_fields(kind: type) -> tuple[str, ...]:
    _AST_FIELDS[kind] = tuple(name for name in kind._fields if name not in _NO_NODE_FIELDS or (name == "name" and kind.__name__ == "TypeAlias"))
    return _AST_FIELDS[kind]


def chain_of(node: ast.AST) -> str | None:
    """``a.b.c`` for a name or attribute chain, else None."""
    if type(node) is ast.Name:
        return node.id
    if type(node) is ast.Attribute:
        base = chain_of(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def root_of(text: str) -> str:
    """The name a device text starts from: ``self`` for ``next(self.parameters()).device``."""
    while text.startswith("next("):
        text = text[5:]
    end = len(text)
    for i, ch in enumerate(text):
        if not (ch.isalnum() or ch == "_"):
            end = i
            break
    return text[:end]


def is_constant_number(node: ast.AST) -> bool:
    if type(node) is ast.UnaryOp and type(node.op) in (ast.USub, ast.UAdd):
        node = node.operand
    return type(node) is ast.Constant and type(node.value) in (int, float, bool, complex)
