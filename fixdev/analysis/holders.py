"""Plain containers that may hold layers, read on CPython's tree: the
cheap screen of FDV113 (``unregistered-submodule``) before libcst looks."""

from __future__ import annotations

import ast


def last_name(func: ast.expr) -> str | None:
    return func.attr if type(func) is ast.Attribute else func.id if type(func) is ast.Name else None


def is_empty(value: ast.expr) -> bool:
    return (type(value) in (ast.List, ast.Tuple) and not value.elts) or (type(value) is ast.Dict and not value.keys) or (
        type(value) is ast.Call and not value.args and not value.keywords
    )


def may_hold(value: ast.expr, lists: set[str], built: set) -> bool:
    """A plain container the rule may look at (``UnregisteredSubmodule._holder``), names unresolved:
    one of its elements is a call, or a name or attribute set to one."""

    def element(e: ast.expr) -> bool:
        kind = type(e)
        return kind is ast.Call or kind is ast.IfExp or (kind in (ast.Name, ast.Attribute) and last_name(e) in built)

    kind = type(value)
    if kind in (ast.List, ast.Tuple):
        return not value.elts or any(element(e) for e in value.elts)
    if kind is ast.ListComp:
        return element(value.elt)
    if kind is ast.Dict:
        return not value.keys or any(element(v) for v in value.values)
    if kind is ast.DictComp:
        return element(value.value)
    if kind is ast.Call:
        return type(value.func) is ast.Name and value.func.id == "dict"
    return kind is ast.Name and value.id in lists
