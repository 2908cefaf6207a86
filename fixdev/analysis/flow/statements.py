"""The interpreter's statements: assignment, branches and loops (joined, iterated to a fixpoint), with, try, return, imports and match."""

from __future__ import annotations

import ast
from fixdev.analysis.flow.lattice import MAX_ITERATIONS
from fixdev.analysis.flow.lattice import MAYBE_UNBOUND, SCALAR_VALUE, UNKNOWN_PLACES, UNKNOWN_VALUE, Value, What, join
from fixdev.analysis.flow.syntax import chain_of, imported_name, ast_walk
from fixdev.analysis.flow.vocabulary import MOVES, TRANSPARENT_DECORATORS
from fixdev.analysis.flow import calls, sinks


def s_expr(run, node: ast.Expr, state: dict) -> dict:
    value = node.value
    if type(value) is ast.Call and type(value.func) is ast.Attribute and value.func.attr in MOVES:
        calls.discarded_move(run, value, state)
    else:
        run.ev(value, state)
    return state


def s_assign(run, node: ast.Assign, state: dict) -> dict:
    value = run.ev(node.value, state)
    for target in node.targets:
        run.bind(target, value, state)
    return state


def s_annassign(run, node: ast.AnnAssign, state: dict) -> dict:
    if node.value is not None:
        value = run.ev(node.value, state)
        if value.what is What.UNKNOWN and value.places == UNKNOWN_PLACES:
            what = run.flow.annotation_what(node.annotation, run.scope)
            if what is not What.UNKNOWN:
                value = value.but(what=what)
        run.bind(node.target, value, state)
    return state


def s_augassign(run, node: ast.AugAssign, state: dict) -> dict:
    left = run.load_target(node.target, state)
    right = run.ev(node.value, state)
    result = sinks.combine(run, node, [(node.target, left), (node.value, right)], state)
    if result.what is What.SCALAR and left.what is not What.SCALAR:
        result = left if left.what in (What.TENSOR, What.ARRAY) else UNKNOWN_VALUE
    run.bind(node.target, result, state, settle=False)
    return state


def s_if(run, node: ast.If, state: dict) -> dict | None:
    run.ev(node.test, state)
    run.note_flag(node.test)
    taken = run.block(node.body, run.copy(state))
    skipped = run.block(node.orelse, state)
    return run.join(taken, skipped)


def s_for(run, node: ast.For, state: dict) -> dict | None:
    element = run.element(run.ev(node.iter, state))
    target = node.target

    def enter(body_state: dict) -> dict:
        run.bind(target, element, body_state)
        return body_state

    return loop(run, node, state, enter, None)


def s_while(run, node: ast.While, state: dict) -> dict | None:
    run.note_flag(node.test)
    forever = type(node.test) is ast.Constant and bool(node.test.value)

    def enter(body_state: dict) -> dict:
        run.ev(node.test, body_state)
        return body_state

    return loop(run, node, state, enter, forever)


def loop(run, node: ast.AST, entry: dict, enter, forever: bool | None) -> dict | None:
    head = entry
    breaks: list = []
    for iteration in range(MAX_ITERATIONS + 1):
        run._loops.append(([], []))
        end = run.block(node.body, enter(run.copy(head)))
        breaks, continues = run._loops.pop()
        back = end
        for other in continues:
            back = run.join(back, other)
        new_head = run.join(entry, back)
        if new_head == head:
            break
        if iteration == MAX_ITERATIONS - 1:
            # widen: what still changes becomes unknown, then one more pass
            new_head = run.own({k: (v if head.get(k) == v else UNKNOWN_VALUE.but(flags=v.flags & MAYBE_UNBOUND)) for k, v in new_head.items()})
        head = new_head
    if forever:
        after = None
    else:
        if type(node) is ast.While:
            run.ev(node.test, head)
        after = run.block(node.orelse, run.copy(head)) if node.orelse else head
    for other in breaks:
        after = run.join(after, other)
    return after


def s_with(run, node: ast.With, state: dict) -> dict | None:
    sets_default = 0
    for item in node.items:
        value = run.ev(item.context_expr, state)
        if value.what is What.DEVICE:
            sets_default += 1  # `with torch.device("cuda"):` moves factories
        if item.optional_vars is not None:
            run.bind(item.optional_vars, UNKNOWN_VALUE, state)
    run._default_device += sets_default
    state = run.block(node.body, state)
    run._default_device -= sets_default
    return state


def s_try(run, node: ast.Try, state: dict) -> dict | None:
    before = run.copy(state)
    after_body = run.block(node.body, state)
    # an exception may come anywhere in the body: approximated by its start and end
    raised = run.join(before, after_body)
    outcomes = [run.block(node.orelse, after_body) if after_body is not None else None]
    for handler in node.handlers:
        if handler.type is not None:
            run.ev(handler.type, raised)
        entered = run.copy(raised)
        if handler.name:
            entered[handler.name] = UNKNOWN_VALUE
        outcomes.append(run.block(handler.body, entered))
    after = None
    for outcome in outcomes:
        after = run.join(after, outcome)
    if node.finalbody:
        finished = run.block(node.finalbody, run.copy(after if after is not None else raised))
        return finished if after is not None else None
    return after


def s_return(run, node: ast.Return, state: dict) -> None:
    value = run.ev(node.value, state) if node.value is not None else SCALAR_VALUE
    run.returns = join(run.returns, value)
    run.exits = run.join(run.exits, state)
    return None


def s_raise(run, node: ast.Raise, state: dict) -> None:
    if node.exc is not None:
        run.ev(node.exc, state)
    return None


def s_break(run, node: ast.Break, state: dict) -> None:
    if run._loops:
        run._loops[-1][0].append(state)
    return None


def s_continue(run, node: ast.Continue, state: dict) -> None:
    if run._loops:
        run._loops[-1][1].append(state)
    return None


def s_assert(run, node: ast.Assert, state: dict) -> dict:
    run.ev(node.test, state)
    return state


def s_delete(run, node: ast.Delete, state: dict) -> dict:
    for target in node.targets:
        chain = chain_of(target)
        if chain is not None:
            state.pop(chain, None)
            run.kill(chain, state)
    return state


def s_function(run, node: ast.AST, state: dict) -> dict:
    transparent = all(run.flow.qualified(d, run.scope) in TRANSPARENT_DECORATORS for d in node.decorator_list)
    state[node.name] = Value(What.UNKNOWN, ref=node if transparent else None)
    return state


def s_class(run, node: ast.ClassDef, state: dict) -> dict:
    state[node.name] = Value(What.UNKNOWN, ref=node)
    return state


def s_import(run, node: ast.Import, state: dict) -> dict:
    for alias in node.names:
        if alias.asname:
            state[alias.asname] = run.flow.module_ref(alias.name)
        else:
            name = alias.name.split(".")[0]
            state[name] = run.flow.module_ref(name)
    return state


def s_importfrom(run, node: ast.ImportFrom, state: dict) -> dict:
    for alias in node.names:
        if alias.name != "*":
            state[alias.asname or alias.name] = run.flow.module_ref(imported_name(node, alias.name))
    return state


def s_match(run, node: ast.Match, state: dict) -> dict | None:
    run.ev(node.subject, state)
    after = state  # no case may match
    for case in node.cases:
        entered = run.copy(state)
        for sub in ast_walk(case.pattern):
            name = getattr(sub, "name", None) or getattr(sub, "rest", None)
            if isinstance(name, str):
                entered[name] = UNKNOWN_VALUE
        if case.guard is not None:
            run.ev(case.guard, entered)
        after = run.join(after, run.block(case.body, entered))
    return after
