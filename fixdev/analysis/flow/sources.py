"""What may name the device of a value a fix moves (issue 25): not what
the value is made from (``F.pad(audio).cuda()`` is on the CPU because
``audio`` is), a tensor of unknown placement only when the moved value then
meets it, and a flag only when it decides where a model goes."""

from __future__ import annotations

import ast

from fixdev.analysis.flow.index import FUNCTION_DEFS, Scope
from fixdev.analysis.flow.lattice import What
from fixdev.analysis.flow.mentions import header_expressions
from fixdev.analysis.flow.syntax import ast_walk, chain_of

# Attributes and methods that read a tensor's metadata, not its data or device.
TENSOR_METADATA = frozenset("shape size dtype dim ndim numel ndimension".split())


def source_chains(flow, scope: Scope, node: ast.AST) -> frozenset:
    """The names and chains ``node``'s value is computed from: those it
    reads, and, through every assignment of ``scope`` binding one of them
    (any order: more names excluded is the safe side), those its value
    reads, to a fixpoint. ``padded`` of ``padded = F.pad(audio)`` brings
    ``audio``."""
    key = ("sources", node)
    if key in flow.cache:
        return flow.cache[key]

    def read(expr: ast.AST) -> set:
        # not a chain read only for its metadata (``x.size(1)``, ``x.shape``):
        # a size carries no device
        metadata = set()
        for sub in ast_walk(expr):
            if type(sub) is ast.Attribute and sub.attr in TENSOR_METADATA:
                metadata.update(id(part) for part in ast_walk(sub))
        found = set()
        for sub in ast_walk(expr):
            chain = chain_of(sub) if type(sub) in (ast.Name, ast.Attribute) else None
            if chain is not None and type(getattr(sub, "ctx", None)) is ast.Load and id(sub) not in metadata:
                found.add(chain)
        return found

    assigned = _assignments(flow, scope)
    found = read(node)
    pending = list(found)
    while pending:
        chain = pending.pop()
        for value in assigned.get(chain, ()):
            for more in read(value) - found:
                found.add(more)
                pending.append(more)
    result = frozenset(found)
    flow.cache[key] = result
    return result


def _assignments(flow, scope: Scope) -> dict[str, list[ast.AST]]:
    """What each name or chain of ``scope`` is assigned (values, loop
    iterables), found once per scope: asked once per moved value, a walk of
    the whole scope each time made a file's cost grow with the square of its
    findings."""
    key = ("assignments", scope.node)
    if key in flow.cache:
        return flow.cache[key]
    assigned: dict[str, list[ast.AST]] = {}
    for statement in ast_walk(scope.node):
        if type(statement) in FUNCTION_DEFS and statement is not scope.node or type(statement) is ast.ClassDef:
            continue
        if type(statement) in (ast.Assign, ast.AnnAssign, ast.AugAssign) and statement.value is not None:
            targets = statement.targets if type(statement) is ast.Assign else [statement.target]
            for target in targets:
                for sub in ast_walk(target):
                    chain = chain_of(sub) if type(sub) in (ast.Name, ast.Attribute) else None
                    if chain is not None:
                        assigned.setdefault(chain, []).append(statement.value)
        elif type(statement) in (ast.For, ast.AsyncFor, ast.comprehension):
            for sub in ast_walk(statement.target):
                if type(sub) is ast.Name:
                    assigned.setdefault(sub.id, []).append(statement.iter)
    flow.cache[key] = assigned
    return assigned


def meets(scope: Scope, node: ast.AST, statement: ast.stmt, chain: str) -> bool:
    """Whether the value ``node`` becomes once moved (``node.cuda()``,
    or the name that statement binds it to) is an operand beside
    ``chain`` in an operation of that statement or a later one of
    ``scope``: an arithmetic or comparison operator, or a method call on
    one with the other among its arguments (``scores.masked_fill(~mask,
    0)``)."""
    parents = {child: parent for parent in ast_walk(statement) for child in ast.iter_child_nodes(parent)}
    moved = parents.get(node)
    moved = parents.get(moved) if type(moved) is ast.Attribute else None
    if type(moved) is not ast.Call:
        return False
    targets: set[str] = set()
    if type(statement) in (ast.Assign, ast.AnnAssign) and statement.value is moved:
        for target in statement.targets if type(statement) is ast.Assign else [statement.target]:
            if chain_of(target) is not None:
                targets.add(chain_of(target))

    def bare(side: ast.AST) -> ast.AST:
        while type(side) is ast.UnaryOp:
            side = side.operand
        return side

    def is_moved(side: ast.AST) -> bool:
        side = bare(side)
        return side is moved or chain_of(side) in targets

    later = [sub for sub in ast_walk(scope.node) if isinstance(sub, ast.stmt) and sub.lineno > statement.end_lineno]
    for root in [statement, *later]:
        for sub in ast_walk(root) if root is statement else [root]:
            for expression in ([sub] if root is statement else header_expressions(sub)):
                kind = type(expression)
                if kind is ast.BinOp:
                    sides = [expression.left, expression.right]
                elif kind is ast.Compare:
                    sides = [expression.left, *expression.comparators]
                elif kind is ast.Call and type(expression.func) is ast.Attribute and expression.func.attr not in TENSOR_METADATA:
                    sides = [expression.func.value, *expression.args]
                else:
                    continue
                if any(is_moved(side) for side in sides) and any(chain_of(bare(side)) == chain for side in sides):
                    return True
    return False


def flag_places_a_module(flow, chain: str) -> bool:
    """Whether a flag (``args.cuda``, ``use_cuda``: matched by its last
    name, so a function's ``use_cuda`` parameter is its caller's
    ``args.use_cuda``) decides where a model goes: an ``if`` testing it
    moves a module in its body (``if args.cuda: model.cuda()``). A flag
    that only decides where some tensors are kept (``if use_cuda:
    features = features.cuda()``, a feature bank) is not the device of
    the model's inputs (issue 25)."""
    key = ("places a module", chain.rsplit(".", 1)[-1])
    if key in flow.cache:
        return flow.cache[key]
    found = False
    for test_owner in ast_walk(flow.index.tree):
        if type(test_owner) not in (ast.If, ast.IfExp):
            continue
        tested = test_owner.test.values if type(test_owner.test) is ast.BoolOp else [test_owner.test]
        if not any(chain_of(t) is not None and chain_of(t).rsplit(".", 1)[-1] == key[1] for t in tested):
            continue
        body = test_owner.body if type(test_owner) is ast.If else [test_owner.body]
        for statement in body:
            for sub in ast_walk(statement):
                if type(sub) is ast.Call and type(sub.func) is ast.Attribute and sub.func.attr in ("cuda", "to"):
                    receiver = sub.func.value
                    bare = type(statement) is ast.Expr and statement.value is sub  # a bare move does something only to a module
                    if bare or flow.value(receiver).what is What.MODULE:
                        found = True
                        break
            if found:
                break
        if found:
            break
    flow.cache[key] = found
    return found
