"""Plain containers that may hold layers, and layers built in ``forward``,
read on CPython's tree: the cheap screen of FDV113 (``unregistered-submodule``)
before libcst looks."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from fixdev.analysis import file_analysis as analysis
from fixdev.analysis.ast_screens import has_a_base
from fixdev.analysis.flow import ast_walk

if TYPE_CHECKING:
    from fixdev.engine.rule import Screening


def last_name(func: ast.expr) -> str | None:
    return func.attr if type(func) is ast.Attribute else func.id if type(func) is ast.Name else None


def is_empty(value: ast.expr) -> bool:
    return (type(value) in (ast.List, ast.Tuple) and not value.elts) or (type(value) is ast.Dict and not value.keys) or (
        type(value) is ast.Call and not value.args and not value.keywords
    )


def may_hold(value: ast.expr, lists: set[str], built: set, names: set[str] | None = None) -> bool:
    """A plain container the rule may look at (``UnregisteredSubmodule._holder``), names unresolved:
    each of its elements is a call, or a name or attribute set to one. With
    ``names`` (``builds``'): each such call is one the rule may take for a construction."""

    def element(e: ast.expr) -> bool:
        return _element(e, built, names)

    kind = type(value)
    if kind in (ast.List, ast.Tuple):
        if names is not None:
            return all(element(e) for e in value.elts)
        return not value.elts or any(element(e) for e in value.elts)
    if kind is ast.ListComp:
        return element(value.elt)
    if kind is ast.Dict:
        if names is not None:
            return None not in value.keys and all(element(v) for v in value.values)
        return not value.keys or any(element(v) for v in value.values)
    if kind is ast.DictComp:
        return element(value.value)
    if kind is ast.Call:
        if names is not None and (value.args or not all(k.arg is not None and element(k.value) for k in value.keywords)):
            return False
        return type(value.func) is ast.Name and value.func.id == "dict"
    return kind is ast.Name and value.id in lists


def _element(e: ast.expr, built: set, names: set[str] | None) -> bool:
    """An element the rule may take for a construction (``UnregisteredSubmodule._element``):
    a call, or a name or attribute set to one."""
    kind = type(e)
    if kind is ast.Call:
        return names is None or builds(e, names)
    if kind is ast.IfExp:
        return names is None or (_element(e.body, built, names) and _element(e.orelse, built, names))
    return kind in (ast.Name, ast.Attribute) and last_name(e) in built


def adds_a_construction(call: ast.Call, built: set, names: set[str]) -> bool:
    """``X.append(e)`` / ``X.insert(i, e)`` / ``X.extend([...])`` that may add an
    element the rule takes for a construction (``UnregisteredSubmodule._add_elements``):
    an empty container filled only with other things (``self.info.append(dict(...))``,
    ``shapes.append(4)``) holds nothing the rule reports."""
    if type(call.func) is not ast.Attribute or call.keywords or any(type(a) is ast.Starred for a in call.args):
        return False
    method, args = call.func.attr, call.args
    if method == "append" and len(args) == 1:
        return _element(args[0], built, names)
    if method == "insert" and len(args) == 2:
        return _element(args[1], built, names)
    if method == "extend" and len(args) == 1:
        added = args[0]
        return type(added) in (ast.List, ast.Tuple, ast.ListComp) and not is_empty(added) and may_hold(added, set(), built, names)
    return False


def builds(call: ast.Call, names: set[str]) -> bool:
    """Whether the rule may take ``call`` for a construction (a torch.nn
    layer, a parameter, a tensor factory's call with tensor methods after
    it, a module class of the file): the name at the root of its callee
    (``nn`` of ``nn.Linear(4, 4).cuda``) is in ``names``, the names imports
    bind and the file's classes (a name no import binds has no qualified
    name), or a star import (``*``) may bind it."""
    if "*" in names:
        return True
    func = call.func
    while True:
        kind = type(func)
        if kind is ast.Attribute:
            func = func.value
        elif kind is ast.Call:
            func = func.func
        else:
            return kind is ast.Name and func.id in names


def builds_in_forward(func: ast.expr, layers: frozenset, imported: set[str], module_classes: set[str]) -> bool:
    """Whether a call of ``func`` in ``forward`` may build a layer the rule
    reports (``UnregisteredSubmodule._built_in_forward``): one of ``layers``
    named through an import (``nn.Linear``; a name no import binds, such as
    ``self``, has no qualified name), or a module class of the file by its
    name (a class with a base: ``module_classes``)."""
    if type(func) is ast.Name and func.id in module_classes:
        return True
    if last_name(func) not in layers:
        return False
    while type(func) is ast.Attribute:
        func = func.value
    return type(func) is ast.Name and (func.id in imported or "*" in imported)


def screen_classes(screening: "Screening", layers: frozenset, adds_names: frozenset) -> bool:
    """``UnregisteredSubmodule``'s screen of classes: a module class (one with
    a base) whose ``__init__`` stores a plain container that may hold layers
    and that another method reads, or whose ``forward`` may build a layer
    (``layers``: the parameterised torch.nn layers' names; ``adds_names``:
    the list methods that add elements)."""
    classes = analysis.class_definitions(screening)
    # only a torch import's name (or a star import's) can root a torch.nn layer's, a parameter's or a factory's name
    imported = analysis.torch_imported_names(screening)
    names = imported | {c.name for c in classes}
    # a class with no base (or only `object`) is never a module class (the
    # visit skips it), nor can its name be a module class built in forward
    based = [c for c in classes if has_a_base(c, analysis.imported_names(screening) | names)]
    module_names = {c.name for c in based}
    for node in based:
        for method in node.body:
            if type(method) not in (ast.FunctionDef, ast.AsyncFunctionDef):
                continue
            if method.name == "forward" and any(type(n) is ast.Call and builds_in_forward(n.func, layers, imported, module_names) for n in ast_walk(method)):
                return True
            if method.name != "__init__":
                continue
            # names and attributes __init__ sets to a call: the only ones an element may be
            walked = list(ast_walk(method))  # (walked once: read four times below)
            built = {last_name(t) for n in walked if type(n) is ast.Assign and type(n.value) is ast.Call and builds(n.value, names) for t in n.targets}
            adds = [n for n in walked if type(n) is ast.Call and type(n.func) is ast.Attribute and n.func.attr in adds_names]
            # attributes something that may be a construction is added to in __init__ (an empty list filled there)
            filled = {n.func.value.attr for n in adds if type(n.func.value) is ast.Attribute and adds_a_construction(n, built, names)}
            # local lists (`layers = []; layers.append(Block()); self.layers = layers`)
            added_to = {n.func.value.id for n in adds if type(n.func.value) is ast.Name and adds_a_construction(n, built, names)}
            lists = {t.id: n.value for n in walked if type(n) is ast.Assign and type(n.value) in (ast.List, ast.ListComp) for t in n.targets if type(t) is ast.Name}
            # what another method reads: a container nothing else runs is never reported
            read = {n.attr for m in node.body if m is not method and type(m) in (ast.FunctionDef, ast.AsyncFunctionDef) for n in ast_walk(m) if type(n) is ast.Attribute}
            for n in walked:
                if type(n) is not ast.Assign or not any(type(t) is ast.Attribute and t.attr in read for t in n.targets):
                    continue
                value = n.value
                in_filled = any(type(t) is ast.Attribute and t.attr in filled for t in n.targets)
                if type(value) is ast.Name:
                    value = lists.get(value.id)
                    if value is None:
                        continue
                    in_filled = in_filled or n.value.id in added_to
                # an empty dict is never filled (only a list's append / insert / extend add elements)
                if may_hold(value, set(), built, names) and (not is_empty(value) or type(value) in (ast.List, ast.Tuple) and in_filled):
                    return True
    return False
