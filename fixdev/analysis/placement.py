"""Where a name is sure to be bound, and where a new definition can go.

A fix that writes ``x.to(device)`` is only right if ``device`` is bound every
time that line runs. Three questions decide it, each answered here once for
every rule:

- does an existing binding *dominate* the line (it runs first on every path:
  an earlier statement of the same block or of an enclosing one, never one in
  a branch or a ``try`` body the line is outside of)?
- for a line inside a function, is a module-level binding made before any
  code runs that could call the function (only imports, definitions and code
  that mentions none of the file's functions or classes come before it)?
- where may a new definition go: after the import that binds the ``torch``
  name it uses and before the first line that needs it, at the top level; or,
  where ``torch`` is optional or imported locally, inside the function.

When no answer is sure, the rule reports the site without a fix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Iterator

import libcst as cst

from fixdev.engine.ast_reuse import remembered
from fixdev.engine.rule import Edit, Rule, child_nodes, dotted
from fixdev.engine.source import line_start

from fixdev.analysis.flow import LIGHTNING_MODULES, ast_walk

# FileAnalysis (fixdev.analysis.file_analysis) is named in annotations only:
# that module imports this one, and an import back, even for type checkers,
# would make the two a cycle.

DEVICE_NAMES = ("device", "dev")
NEW_DEVICE_NAMES = ("device", "torch_device", "default_device", "fixdev_device")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
FUNCTION_DEFS = (cst.FunctionDef, cst.Lambda)
_BLOCK_STATEMENT = (cst.SimpleStatementLine, cst.BaseCompoundStatement)


def _statement(facts: "FileAnalysis", node: cst.CSTNode) -> cst.CSTNode | None:
    """The block-level statement (a line or a compound statement) holding
    ``node``; None for one in a one-line body (``if c: x = 1``), which runs
    only under its header's condition."""
    while node is not None and not isinstance(node, _BLOCK_STATEMENT):
        if isinstance(node, cst.SimpleStatementSuite):
            return None
        node = facts.parent(node)
    return node


def _position_in_block(facts: "FileAnalysis", statement: cst.CSTNode) -> tuple[cst.CSTNode, int] | None:
    block = facts.parent(statement)
    if isinstance(block, (cst.Module, cst.IndentedBlock)):
        return block, facts.index_in(block.body, statement)
    return None


def dominates(facts: "FileAnalysis", binding: cst.CSTNode, use: cst.CSTNode) -> bool:
    """The statement holding ``binding`` has run whenever ``use`` runs: it
    comes earlier in a block that contains ``use`` (a function defined after
    it can only be called after it, so function boundaries may be crossed)."""
    statement = _statement(facts, binding)
    place = _position_in_block(facts, statement) if statement is not None else None
    if place is None:
        return False
    block, index = place
    current = use
    while current is not None:
        parent = facts.parent(current)
        if parent is block:
            return facts.index_in(block.body, current) > index
        current = parent
    return False


def top_level_index(facts: "FileAnalysis", node: cst.CSTNode) -> int:
    """Index in the module body of the top-level statement holding ``node``."""
    current = node
    while True:
        parent = facts.parent(current)
        if parent is None or isinstance(parent, cst.Module):
            return facts.index_in(facts.module.body, current)
        current = parent


def in_function(facts: "FileAnalysis", node: cst.CSTNode) -> bool:
    return facts.enclosing(node, FUNCTION_DEFS) is not None


# -- code that could call into this file ---------------------------------------


def first_call_into_file(facts: "FileAnalysis") -> int:
    """Index of the first top-level statement that may run a function or class
    of this file (it names one outside a function body); the module's length
    when none does. Until then only imports and foreign code have run, so no
    function of the file has been called."""
    cache = facts.shared
    if "first_call_into_file" not in cache:
        local = _local_callables(facts.module)
        body = facts.module.body
        cache["first_call_into_file"] = next((i for i, s in enumerate(body) if _mentions(s, local)), len(body))
    return cache["first_call_into_file"]


def _local_callables(module: cst.Module) -> set[str]:
    """Names of functions and classes defined outside any function."""
    names: set[str] = set()
    stack: list[cst.CSTNode] = list(module.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            names.add(node.name.value)
            if isinstance(node, cst.FunctionDef):
                continue
        stack.extend(child_nodes(node))
    return names


def _mentions(statement: cst.CSTNode, names: set[str]) -> bool:
    """``statement`` reads one of ``names`` in code that runs when the
    statement runs: function and lambda bodies run later, so they are skipped,
    and so are a class's bases (making a class calls none of their methods)."""
    stack: list[cst.CSTNode] = [statement]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.FunctionDef):
            stack.extend(node.decorators)
            stack.append(node.params)
            continue
        if isinstance(node, cst.Lambda):
            stack.append(node.params)
            continue
        if isinstance(node, cst.ClassDef):
            stack.extend(node.decorators)
            stack.append(node.body)
            continue
        if isinstance(node, cst.Attribute):
            stack.append(node.value)  # .attr is not a name
            continue
        if isinstance(node, cst.Arg):
            stack.append(node.value)  # keyword= is not a name
            continue
        if isinstance(node, cst.Param):
            stack.extend(n for n in (node.annotation, node.default) if n is not None)
            continue
        if isinstance(node, cst.Name) and node.value in names:
            return True
        stack.extend(child_nodes(node))
    return False


# -- bindings -------------------------------------------------------------------


def own_statements(body: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Nodes that bind names in ``body``'s own scope: nested functions and
    classes (their names only), assignments, loops, imports, ``with``,
    walrus, ``except ... as``, ``global``/``nonlocal``."""
    stack = [body]
    while stack:
        node = stack.pop()
        for child in reversed(child_nodes(node)):
            kind = type(child)  # (exact types: isinstance on libcst's ABC-based nodes is slow)
            if kind in _DEFINITIONS:
                yield child
                continue
            if kind in _OWN_SCOPES:
                continue
            if kind in _BINDERS:
                yield child
            stack.append(child)


_DEFINITIONS = frozenset({cst.FunctionDef, cst.ClassDef})
_OWN_SCOPES = frozenset({cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp})
_BINDERS = frozenset({cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For, cst.Import, cst.ImportFrom, cst.With, cst.NamedExpr, cst.ExceptHandler, cst.Global, cst.Nonlocal})
_BINDING_KINDS = _DEFINITIONS | _BINDERS  # (libcst's node classes have no subclasses)


def bound_names(node: cst.CSTNode) -> set[str]:
    """Names one statement from ``own_statements`` binds in its scope."""
    if type(node) not in _BINDING_KINDS:
        return set()  # (asked of every node of a file: exact types first, isinstance on libcst's nodes is slow)
    if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
        return {node.name.value}
    if isinstance(node, cst.Import):
        return {(a.asname.name.value if a.asname else (dotted(a.name) or "").split(".")[0]) for a in node.names}
    if isinstance(node, cst.ImportFrom):
        if isinstance(node.names, cst.ImportStar):
            return set()
        return {(a.asname.name.value if a.asname else a.name.value) for a in node.names if isinstance(a.name, cst.Name)}
    if isinstance(node, (cst.Global, cst.Nonlocal)):
        return {item.name.value for item in node.names}
    if isinstance(node, cst.Assign):
        targets: list[cst.CSTNode] = [t.target for t in node.targets]
    elif isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.For, cst.NamedExpr)):
        targets = [node.target]
    elif isinstance(node, cst.With):
        targets = [item.asname.name for item in node.items if item.asname is not None]
    elif isinstance(node, cst.ExceptHandler) and node.name is not None:
        targets = [node.name.name]
    else:
        return set()
    return {name for target in targets for name in _target_names(target)}


def _target_names(target: cst.CSTNode) -> Iterator[str]:
    if isinstance(target, cst.Name):
        yield target.value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _target_names(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from _target_names(target.value)


def binding_counts(facts: "FileAnalysis") -> dict[str, int]:
    """Name → how many statements, parameters or comprehensions of the whole
    file bind it; kept in ``facts.shared``."""
    if "binding_counts" not in facts.shared:
        counts: dict[str, int] = {}
        for node in facts.index_order():
            if isinstance(node, cst.Param):
                names = {node.name.value}
            elif isinstance(node, cst.CompFor):
                names = set(_target_names(node.target))
            else:
                names = bound_names(node)
            for name in names:
                counts[name] = counts.get(name, 0) + 1
        facts.shared["binding_counts"] = counts
    return facts.shared["binding_counts"]


def name_reads(facts: "FileAnalysis") -> dict[str, list[cst.Name]]:
    """Name → the places the file reads it (not ``x.NAME``, ``NAME=`` keywords,
    or where it is bound by an assignment); kept in ``facts.shared``."""
    if "name_reads" not in facts.shared:
        reads: dict[str, list[cst.Name]] = {}
        for node in facts.index_order():
            if not isinstance(node, cst.Name):
                continue
            parent = facts.parent(node)
            if isinstance(parent, cst.Attribute) and parent.attr is node:
                continue
            if isinstance(parent, cst.Arg) and parent.keyword is node:
                continue
            if isinstance(parent, (cst.AssignTarget, cst.ImportAlias, cst.AsName, cst.FunctionDef, cst.ClassDef, cst.Param)):
                continue
            reads.setdefault(node.value, []).append(node)
        facts.shared["name_reads"] = reads
    return facts.shared["name_reads"]


def parameter_names(func: cst.FunctionDef) -> list[str]:
    params = func.params
    names = [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]
    names += [p.name.value for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)]
    return names


def _bindings_of(scope: cst.CSTNode, name: str) -> list[cst.CSTNode]:
    body = scope.body if isinstance(scope, cst.FunctionDef) else scope
    return [node for node in own_statements(body) if name in bound_names(node)]


def binds_in_body(scope: cst.CSTNode, name: str) -> bool:
    """A statement of ``scope``'s own body binds ``name`` (a parameter
    reassigned, a local)."""
    return bool(_bindings_of(scope, name))


def binds(scope: cst.CSTNode, name: str) -> bool:
    """``name`` is a local of ``scope`` (a parameter or bound in its body)."""
    if isinstance(scope, cst.FunctionDef) and name in parameter_names(scope):
        return True
    return bool(_bindings_of(scope, name))


def _declared_global_anywhere(facts: "FileAnalysis", name: str) -> bool:
    return name in _declarations(facts)[cst.Global]


def declared_global_or_nonlocal(facts: "FileAnalysis", name: str) -> bool:
    """Some function of the file declares ``name`` ``global`` or ``nonlocal``."""
    declared = _declarations(facts)
    return name in declared[cst.Global] or name in declared[cst.Nonlocal]


def _declarations(facts: "FileAnalysis") -> dict[type, set[str]]:
    """The names the file's ``global`` and ``nonlocal`` statements declare, by kind: one walk per file."""
    if "declarations" not in facts.shared:
        found: dict[type, set[str]] = {cst.Global: set(), cst.Nonlocal: set()}
        for node in facts.index_order():
            if type(node) in found:
                found[type(node)].update(item.name.value for item in node.names)
        facts.shared["declarations"] = found
    return facts.shared["declarations"]


def _sole_device_binding(facts: "FileAnalysis", scope: cst.CSTNode, use: cst.CSTNode, module_scope: bool) -> str | None:
    """A name bound in ``scope`` by exactly one statement, ``NAME = <device>``,
    that is sure to have run when ``use`` runs."""
    for node, name in _device_bindings(facts, scope):
        if module_scope and _declared_global_anywhere(facts, name):
            continue  # a function may rebind it
        if bound_when_run(facts, node, use):
            return name
    return None


def _device_bindings(facts: "FileAnalysis", scope: cst.CSTNode) -> list[tuple[cst.Assign, str]]:
    """The statements ``NAME = <device>`` of ``scope``, each the one binding
    of its name there, in order: once per scope (fixes ask again and again)."""
    key = ("device_bindings", scope)
    if key not in facts.shared:
        statements, bindings = scope_bindings(facts, scope)
        found = []
        for node in statements:
            if not (isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)):
                continue
            name = node.targets[0].target.value
            if len(bindings[name]) == 1 and is_device_value(facts, node.value):
                found.append((node, name))
        facts.shared[key] = found
    return facts.shared[key]


def scope_bindings(facts: "FileAnalysis", scope: cst.CSTNode) -> tuple[list[cst.CSTNode], dict[str, list[cst.CSTNode]]]:
    """``own_statements`` of ``scope``, and those binding each name: one walk
    per scope and file (fixes ask for a device in reach again and again)."""
    key = ("scope_bindings", scope)
    if key not in facts.shared:
        statements = _own_statement_list(scope)
        bindings: dict[str, list[cst.CSTNode]] = {}
        for node in statements:
            for name in bound_names(node):
                bindings.setdefault(name, []).append(node)
        facts.shared[key] = (statements, bindings)
    return facts.shared[key]


def _own_statement_list(scope: cst.CSTNode) -> list[cst.CSTNode]:
    """``list(own_statements(...))`` of a function's body or the module, kept
    by node across versions (the language server); the module's put together
    from its statements' in the order one walk of it gives them: first its
    own binding statements (last first), then what each statement holds."""
    if isinstance(scope, cst.FunctionDef):
        return remembered("own statements", scope, lambda: list(own_statements(scope.body)))
    if not isinstance(scope, cst.Module):
        return list(own_statements(scope))
    found = [s for s in reversed(scope.body) if type(s) in _BINDING_KINDS]
    for statement in scope.body:
        if type(statement) not in _DEFINITIONS:
            found += remembered("own statements", statement, lambda statement=statement: list(own_statements(statement)))
    return found


def is_device_value(facts: "FileAnalysis", expr: cst.BaseExpression) -> bool:
    """``expr`` is written as a device: ``"cuda"``, ``"cpu:0"``,
    ``torch.device(...)``, or a conditional between two of them."""
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return isinstance(value, str) and value.split(":")[0] in ("cuda", "cpu", "mps", "xpu")
    if isinstance(expr, cst.IfExp):
        return is_device_value(facts, expr.body) and is_device_value(facts, expr.orelse)
    if isinstance(expr, cst.Call):
        return "torch.device" in facts.qnames(expr.func)
    return False


def _has_device_property(facts: "FileAnalysis", cls: cst.ClassDef) -> bool:
    """A Lightning module: ``self.device`` is always bound."""
    return any(facts.qnames(b.value) & LIGHTNING_MODULES for b in cls.bases)


def _sets_self_device(facts: "FileAnalysis", cls: cst.ClassDef) -> bool:
    """The class's ``__init__`` binds ``self.device = <device>``."""
    for init in cls.body.body:
        if isinstance(init, cst.FunctionDef) and init.name.value == "__init__":
            for node in scope_bindings(facts, init)[0]:
                if isinstance(node, cst.Assign) and len(node.targets) == 1 and is_device_value(facts, node.value):
                    target = node.targets[0].target
                    if isinstance(target, cst.Attribute) and target.attr.value == "device" and isinstance(target.value, cst.Name) and target.value.value == "self":
                        return True
    return False


def bound_when_run(facts: "FileAnalysis", binding: cst.CSTNode, use: cst.CSTNode) -> bool:
    """The statement holding ``binding`` has run whenever ``use`` runs: it
    dominates ``use``, or it is an unconditional top-level statement, ``use``
    is in a function, and nothing before the binding could call that function."""
    if dominates(facts, binding, use):
        return True
    statement = _statement(facts, binding)
    if statement is None or facts.parent(statement) is not facts.module or not in_function(facts, use):
        return False
    return facts.index_in(facts.module.body, statement) <= first_call_into_file(facts)


def existing_device(facts: "FileAnalysis", node: cst.CSTNode, module_level: bool = True) -> str | None:
    """Source text of a device already bound wherever ``node`` runs: a
    ``device``/``dev`` parameter, a name bound once to a device that is sure to
    be bound (see ``dominates``) and not shadowed on the way, ``self.device``
    set in a module's ``__init__``; with ``module_level``, also a module-level
    one (see ``first_call_into_file``)."""
    scopes: list[cst.FunctionDef] = []
    func = facts.enclosing(node, cst.FunctionDef)
    while func is not None:
        scopes.append(func)
        func = facts.enclosing(func, cst.FunctionDef)

    def shadowed(name: str, inner: list[cst.FunctionDef]) -> bool:
        return any(name in parameter_names(scope) or name in scope_bindings(facts, scope)[1] for scope in inner)

    for depth, func in enumerate(scopes):
        for name in parameter_names(func):
            if name in DEVICE_NAMES and not shadowed(name, scopes[:depth]):
                return name
        found = _sole_device_binding(facts, func, node, module_scope=False)
        if found and not shadowed(found, scopes[:depth]):
            return found
        method = facts.enclosing_method(func.body)
        if method is not None and (_has_device_property(facts, method[0]) or _sets_self_device(facts, method[0])):
            return "self.device"
    if not module_level:
        return None
    found = _sole_device_binding(facts, facts.module, node, module_scope=True)
    if found and not shadowed(found, scopes):
        return found
    return None


def name_bound_at(facts: "FileAnalysis", name: str, node: cst.CSTNode) -> bool:
    """``name`` refers, where ``node`` runs, to a binding sure to have run:
    a parameter of an enclosing function, or the one statement that binds it
    in the nearest scope that does, when that statement dominates ``node``
    (for a module-level binding seen from a function: see ``bound_when_run``)."""
    scope = facts.enclosing(node, cst.FunctionDef)
    while scope is not None:
        if name in parameter_names(scope):
            return True
        bindings = scope_bindings(facts, scope)[1].get(name, [])
        if bindings:
            return len(bindings) == 1 and not isinstance(bindings[0], (cst.Global, cst.Nonlocal)) and dominates(facts, bindings[0], node)
        scope = facts.enclosing(scope, cst.FunctionDef)
    bindings = scope_bindings(facts, facts.module)[1].get(name, [])
    return len(bindings) == 1 and not _declared_global_anywhere(facts, name) and bound_when_run(facts, bindings[0], node)


def expression_bound_at(facts: "FileAnalysis", expression: str, node: cst.CSTNode) -> bool:
    """Every variable ``expression`` (a device's source text) reads is bound
    where ``node`` runs (see ``name_bound_at``)."""
    import ast

    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError:
        return False
    names = {n.id for n in ast_walk(tree) if isinstance(n, ast.Name)} - {"next", "iter", "str", "int"}
    return all(name_bound_at(facts, name, node) for name in names)


# -- new definitions ------------------------------------------------------------------


def free_name(facts: "FileAnalysis", candidates: Iterable[str] = NEW_DEVICE_NAMES) -> str:
    """The first candidate the file never uses as a variable (a keyword
    argument such as ``device=`` or an attribute ``x.device`` is not one)."""
    used = facts.identifiers()
    return next(name for name in candidates if name not in used)


@dataclass(frozen=True)
class TorchBinding:
    """How ``torch`` is reached: its name, and the statement that binds it."""

    alias: str
    statement: cst.CSTNode  # the SimpleStatementLine of the import


def _torch_imports(body_owner: cst.CSTNode) -> list[TorchBinding]:
    """The ``import torch`` statements of a function's or the module's own
    scope, in order; kept by node across versions (the language server), the
    module's a top-level statement at a time."""
    if isinstance(body_owner, cst.Module):
        return [
            binding
            for statement in body_owner.body
            if type(statement) not in _DEFINITIONS  # (a def's own scope is not the module's)
            for binding in remembered("torch imports", statement, lambda statement=statement: _torch_imports_of(statement))
        ]
    return remembered("torch imports", body_owner, lambda: _torch_imports_of(body_owner.body if isinstance(body_owner, cst.FunctionDef) else body_owner))


def _torch_imports_of(body: cst.CSTNode) -> list[TorchBinding]:
    found = []
    for node in own_statements(body):
        if isinstance(node, cst.Import):
            for alias in node.names:
                if dotted(alias.name) == "torch":
                    found.append(TorchBinding(alias.asname.name.value if alias.asname else "torch", node))
                elif alias.asname is None and (dotted(alias.name) or "").startswith("torch."):
                    found.append(TorchBinding("torch", node))  # import torch.nn binds torch
    return found


def module_torch_imports(facts: "FileAnalysis") -> list[TorchBinding]:
    """Every ``import torch`` of the module scope, conditional ones included."""
    if "module_torch_imports" not in facts.shared:
        facts.shared["module_torch_imports"] = _torch_imports(facts.module)
    return facts.shared["module_torch_imports"]


def imports_torch_anywhere(facts: "FileAnalysis") -> bool:
    if "imports_torch_anywhere" not in facts.shared:
        facts.shared["imports_torch_anywhere"] = bool(module_torch_imports(facts)) or any(_torch_imports(f) for f in facts.functions())
    return facts.shared["imports_torch_anywhere"]


def unconditional_torch(facts: "FileAnalysis") -> TorchBinding | None:
    """The first ``import torch [as t]`` that is a statement of the module
    body itself (not inside ``try``/``if``), if any."""
    for binding in module_torch_imports(facts):
        line = facts.parent(binding.statement)
        if facts.parent(line) is facts.module:
            return TorchBinding(binding.alias, line)
    return None


def _end_of_import_run(facts: "FileAnalysis", block: cst.CSTNode, index: int) -> int:
    """Index after the run of import-only lines starting at ``index``."""
    body = block.body
    while index < len(body) and _is_import_line(body[index]):
        index += 1
    return index


def _is_import_line(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body)


def _is_docstring(statement: cst.CSTNode) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def lines_before(rule: "Rule", block: cst.CSTNode, index: int, lines: list[str]) -> Edit:
    """Insert ``lines`` as statements of ``block`` (the module or an indented
    block) before its statement ``index``, indented like its statements: on
    the line after statement ``index - 1`` (so comments above the next
    statement stay with it), or at the start of the first statement's line."""
    text, newline = rule.context.text, rule.context.module.default_newline
    body = block.body
    if not body:
        return rule.insert(len(text), "".join(line + newline for line in lines))
    neighbour = body[index - 1] if index > 0 else body[0]
    start = rule.span(neighbour)[0]
    line_begin = line_start(text, start)
    indent = text[line_begin:start]
    if index == 0:
        return rule.insert(line_begin, "".join(indent + line + newline for line in lines))
    match = _LINE_BREAK.search(text, rule.span(neighbour)[1])
    if match is None:  # the previous statement ends the file, without a line break
        return rule.insert(len(text), "".join(newline + indent + line for line in lines))
    return rule.insert(match.end(), "".join(indent + line + newline for line in lines))


def after_leading_imports(facts: "FileAnalysis") -> int:
    """Index of the first module statement after the docstring and the
    leading import lines (``__future__`` imports stay first)."""
    body = facts.module.body
    index = 1 if body and _is_docstring(body[0]) else 0
    return _end_of_import_run(facts, facts.module, index)


def imported_module(facts: "FileAnalysis") -> bool:
    """The file is a library module (in a package, or imported by another
    file of the run: ``Project.imported``); False for a file checked with no
    run around it (stdin), which is taken for a script."""
    project = facts.project
    return bool(project is not None and getattr(project, "imported", None) is not None and project.imported())


def main_block(facts: "FileAnalysis", node: cst.CSTNode) -> cst.If | None:
    """The top-level ``if __name__ == "__main__":`` whose body holds ``node``."""
    child, block = node, facts.parent(node)
    while block is not None and not isinstance(block, cst.Module):
        if isinstance(block, cst.If) and child is block.body and facts.parent(block) is facts.module and _tests_main(block.test):
            return block
        child, block = block, facts.parent(block)
    return None


def _tests_main(test: cst.BaseExpression) -> bool:
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.Equal)):
        return False
    sides = [test.left, test.comparisons[0].comparator]
    names = [s.value for s in sides if isinstance(s, cst.Name)]
    strings = [s.evaluated_value for s in sides if isinstance(s, cst.SimpleString)]
    return names == ["__name__"] and strings == ["__main__"]


def runs_at_import(facts: "FileAnalysis", node: cst.CSTNode) -> bool:
    """``node`` runs when the module is imported: not inside a function's or
    lambda's body (a parameter default or decorator runs with the ``def``),
    nor in the ``if __name__ == "__main__":`` block."""
    child, block = node, facts.parent(node)
    while block is not None and not isinstance(block, cst.Module):
        if isinstance(block, (cst.FunctionDef, cst.Lambda)) and child is block.body:
            return False
        child, block = block, facts.parent(block)
    return main_block(facts, node) is None


def define_device(rule: "Rule", facts: "FileAnalysis", node: cst.CSTNode) -> tuple[str, list[Edit]] | None:
    """A new ``NAME = torch.device("cuda" if ... else "cpu")`` that is bound
    wherever ``node`` runs, and the edits that add it; None where no place is
    sure (the rule then reports without a fix).

    - ``torch`` imported unconditionally at the top level: just after that
      import's run of import lines, provided ``node`` comes later (module
      level) or nothing before that point could call its function;
    - ``torch`` optional (``try``/``if``) or imported only in functions: at the
      start of the function holding ``node`` (after a local ``import torch``
      when it has one; with an ``import torch`` of its own when no module-level
      binding reaches it); module-level code gets no fix;
    - no ``import torch`` at all: ``import torch`` and the definition after
      the leading imports;
    - in a module others import (``imported_module``), never at module level,
      where importing would query CUDA ("poisons fork": a process forked
      afterwards cannot use CUDA): at the start of the function holding
      ``node``, or of the ``__main__`` block; none for other code that runs
      at import.
    """
    name = free_name(facts)
    if imported_module(facts):
        main = main_block(facts, node)
        if main is not None and not in_function(facts, node):
            return _block_definition(rule, facts, node, main, name)
        if runs_at_import(facts, node):
            return None
        return _function_definition(rule, facts, node, name)
    torch = unconditional_torch(facts)
    if torch is not None:
        index = _end_of_import_run(facts, facts.module, facts.index_in(facts.module.body, torch.statement))
        # a blank line between the imports and the code, as a careful hand writes it
        return _module_definition(rule, facts, node, index, ["", _definition(name, torch.alias)], name)
    if not imports_torch_anywhere(facts):
        index = after_leading_imports(facts)
        return _module_definition(rule, facts, node, index, ["import torch", "", _definition(name, "torch")], name)
    return _function_definition(rule, facts, node, name)


def _definition(name: str, torch: str) -> str:
    return f'{name} = {torch}.device("cuda" if {torch}.cuda.is_available() else "cpu")'


def _module_definition(rule: "Rule", facts: "FileAnalysis", node: cst.CSTNode, index: int, lines: list[str], name: str) -> tuple[str, list[Edit]] | None:
    if in_function(facts, node):
        if index > first_call_into_file(facts):
            return None  # the function may run before the definition
    elif top_level_index(facts, node) < index:
        return None  # the line runs before the import the definition needs
    return name, [lines_before(rule, facts.module, index, lines)]


def _function_definition(rule: "Rule", facts: "FileAnalysis", node: cst.CSTNode, name: str) -> tuple[str, list[Edit]] | None:
    func = facts.enclosing(node, cst.FunctionDef)
    if func is None or not isinstance(func.body, cst.IndentedBlock) or facts.enclosing(node, cst.Lambda) is not None:
        return None
    body = func.body.body
    local = [b for b in _torch_imports(func) if facts.parent(facts.parent(b.statement)) is func.body and dominates(facts, b.statement, node)]
    if local:
        line = facts.parent(local[0].statement)
        index = _end_of_import_run(facts, func.body, body.index(line))
        return name, [lines_before(rule, func.body, index, [_definition(name, local[0].alias)])]
    index = 1 if _is_docstring(body[0]) else 0
    while index < len(body) and _is_scope_declaration(body[index]):
        index += 1
    module_torch = module_torch_imports(facts)
    alias = module_torch[0].alias if module_torch else "torch"
    if index == len(body) or binds(func, alias):
        return None  # torch is bound in the function, but not before this line
    if module_torch:
        # an optional module-level torch (try/except ImportError): used only
        # where it is needed, when the function runs
        return name, [lines_before(rule, func.body, index, [_definition(name, alias)])]
    return name, [lines_before(rule, func.body, index, ["import torch", _definition(name, "torch")])]


def _block_definition(rule: "Rule", facts: "FileAnalysis", node: cst.CSTNode, block: cst.If, name: str) -> tuple[str, list[Edit]] | None:
    """The definition first in the ``__main__`` block holding ``node``, with
    the module's unconditional ``import torch`` (None without one: no place is sure)."""
    torch = unconditional_torch(facts)
    if torch is None or not isinstance(block.body, cst.IndentedBlock) or top_level_index(facts, block) < facts.module.body.index(torch.statement):
        return None
    return name, [lines_before(rule, block.body, 0, [_definition(name, torch.alias)])]


def _is_scope_declaration(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(isinstance(s, (cst.Global, cst.Nonlocal)) for s in statement.body)
