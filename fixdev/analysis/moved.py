"""Whether the code moves a new tensor itself before it meets anything.

A factory without ``device=`` makes a host tensor; that is a bug only where
the tensor meets a value on a device. Code that moves it first
(``torch.randn(x.shape).to(x.device)``, or ``noise = noise.cuda()`` under
``if x.is_cuda:`` on the next line that touches it) already handles the
device, and a rewrite there changes what the code does besides the device
(the random generator a draw comes from, the dtype). ``moved_before_use``
answers that question for one expression, on the rule's libcst tree, with the
device flow saying what each step does to where the value lives:

- a step that keeps it on the host (arithmetic with numbers, ``.float()``,
  ``.to(dtype)``, ``torch.cat`` of host tensors, a number written into it) is
  followed further;
- a move (``.cuda()``, ``.type_as(y)``, ``.to(d)`` where the flow puts the
  result on a device or beside another value, ``.to(device=...)``) ends the
  walk: moved;
- a plain ``name = ...`` binding follows the name through the statements
  after it in its block: the first that read it must move every read (an
  ``if`` counts when every branch that reads it moves it, or when the one
  that moves it runs only with CUDA: the other path is the CPU one, where
  the host tensor is right);
- anything else (meeting another value, being returned, passed to a call,
  stored elsewhere, read in a loop) is a use before a move.

A name still unmoved when its function's body ends was never used; one bound
in a nested block or at module level may be read where the walk does not
look, so it counts as used.
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import islice

import libcst as cst

from fixdev.analysis import file_analysis as analysis, placement
from fixdev.analysis.flow import HOST, Device, SameAs, What
from fixdev.engine.rule import child_nodes

MOVED, USED, UNTOUCHED = "moved", "used", "untouched"
# Parts of an expression that are not expressions themselves: the walk goes
# through them to the expression that holds them.
_WRAPPERS = (cst.Arg, cst.Element, cst.StarredElement, cst.DictElement, cst.Index, cst.SubscriptElement, cst.Slice)


def moved_before_use(rule, expr: cst.BaseExpression, owner: str | None = None) -> bool:
    """``expr`` (a host tensor) is moved before it meets anything. ``owner``:
    the source of a tensor whose device a ``.to(owner)`` takes, when the flow
    does not know it is one (a parameter used for its shape)."""
    walk = _Walk(rule, owner)
    fate = walk.fate(expr)
    if fate is MOVED:
        return True
    if isinstance(fate, tuple):
        statement, name = fate
        return walk.after_binding(statement, name)
    return False


class _Walk:
    def __init__(self, rule, owner: str | None) -> None:
        self.rule = rule
        self.facts = analysis.of(rule)
        self.flow = analysis.flow_of(rule)
        self.owner = owner

    # -- one expression ---------------------------------------------------------------

    def fate(self, expr: cst.CSTNode):
        """MOVED, USED, or (the assignment, the name) the value is bound to."""
        facts, current = self.facts, expr
        while True:
            parent = facts.parent(current)
            if isinstance(parent, cst.Attribute):
                call = facts.parent(parent)
                if parent.value is current and isinstance(call, cst.Call) and call.func is parent:
                    if self._moves(call, parent.attr.value):
                        return MOVED
                    if self._on_host(call):
                        current = call
                        continue
                return USED  # an attribute read (`.data`), or a method whose result is not known to stay on the host
            holder = parent
            while isinstance(holder, _WRAPPERS):
                holder = facts.parent(holder)
            if _copied_in_place(holder, parent):
                return MOVED  # dst.copy_(value): copy_ copies across devices
            if isinstance(holder, cst.BaseExpression) and not isinstance(holder, cst.Lambda) and (self._on_host(holder) or self._with_numbers(holder, current)):
                current = holder
                continue
            if isinstance(holder, (cst.Assign, cst.AnnAssign)) and holder.value is current:
                targets = [t.target for t in holder.targets] if isinstance(holder, cst.Assign) else [holder.target]
                if len(targets) == 1 and isinstance(targets[0], cst.Name):
                    return holder, targets[0].value
            return USED

    def _on_host(self, node: cst.CSTNode) -> bool:
        """The flow shows ``node``'s value on the host and nowhere else: the
        value inside it has met nothing on a device."""
        return on_host(self.rule, node)

    def _with_numbers(self, holder: cst.CSTNode, operand: cst.CSTNode) -> bool:
        """``holder`` is arithmetic or a comparison of ``operand`` with numbers
        only (``t > p`` for a parameter ``p: float``): the result stays
        where ``operand`` is."""
        if isinstance(holder, cst.UnaryOperation):
            others = []
        elif isinstance(holder, cst.BinaryOperation):
            others = [holder.left, holder.right]
        elif isinstance(holder, cst.Comparison):
            others = [holder.left, *(c.comparator for c in holder.comparisons)]
        else:
            return False
        if not any(other is operand for other in others) and not isinstance(holder, cst.UnaryOperation):
            return False
        return all(other is operand or self._number(other) or self._scalar_parameter(holder, other) for other in others)

    def _scalar_parameter(self, node: cst.CSTNode, value: cst.BaseExpression) -> bool:
        """``value`` names a parameter of the function around ``node``
        annotated as a number (``p: float``) that the function never rebinds."""
        if not isinstance(value, cst.Name):
            return False
        func = self.facts.enclosing(node, cst.FunctionDef)
        if func is None:
            return False
        params = func.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.name.value == value.value:
                annotation = param.annotation.annotation if param.annotation is not None else None
                if annotation is None or analysis.last_name(annotation) not in ("float", "int"):
                    return False
                return not placement.scope_bindings(self.facts, func)[1].get(value.value)
        return False

    def _moves(self, call: cst.Call, method: str) -> bool:
        """``call`` (a method of the value) puts it on a device or where
        another value lives."""
        if method in ("cuda", "type_as"):
            return True
        if method not in ("to", "type"):
            return False
        found = self.flow.node_at(*self.rule.span(call))
        if found is not None:
            places = self.flow.where(found)
            if places and all(isinstance(p, (Device, SameAs)) for p, _ in places):
                return True
        if method != "to":
            return False
        device = analysis.keyword(call, "device")
        if device is not None:
            return analysis.string_of(device.value) != "cpu"
        first = next((a for a in call.args if a.keyword is None and not a.star), None)
        if first is None:
            return False
        value = analysis.string_of(first.value)
        if value is not None:
            return value.startswith("cuda")
        text = self.rule.code_of(first.value)
        if self.owner is not None and text in (self.owner, f"{self.owner}.device"):
            return True  # x.to(owner): the tensor the shape came from
        found = self.flow.node_at(*self.rule.span(first.value))
        return found is not None and self.flow.what(found) in (What.TENSOR, What.DEVICE)

    # -- the statements after a binding ---------------------------------------------------

    def after_binding(self, assign: cst.CSTNode, name: str) -> bool:
        line = self.facts.parent(assign)
        block = self.facts.parent(line)
        if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1 or not isinstance(block, (cst.IndentedBlock, cst.Module)):
            return False
        # only the later statements that read the name: each finding reading
        # every statement after its binding made a module of n findings cost n²
        body = block.body
        later = _readers(self.facts, block).get(name, [])
        start = bisect_right(later, self.facts.index_in(body, line))
        result = self._block((body[i] for i in islice(later, start, None)), name)
        if result is MOVED:
            return True
        # never read unmoved: fine where the name dies with the function
        return result is UNTOUCHED and isinstance(block, cst.IndentedBlock) and isinstance(self.facts.parent(block), cst.FunctionDef)

    def _block(self, statements, name: str) -> str:
        for statement in statements:
            if not _mentions(statement, name):
                continue
            result = self._statement(statement, name)
            if result is not UNTOUCHED:
                return result
        return UNTOUCHED

    def _statement(self, statement: cst.CSTNode, name: str) -> str:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                result = self._small(small, name)
                if result is not UNTOUCHED:
                    return result
            return UNTOUCHED
        if isinstance(statement, cst.If):
            return self._if(statement, name)
        if isinstance(statement, cst.With) and not any(_mentions(item, name) for item in statement.items):
            return self._block(statement.body.body, name)
        return USED  # a loop, try, def, class ... that reads it: not followed

    def _if(self, statement: cst.If, name: str) -> str:
        if _mentions(statement.test, name) and not self._reads_moved(statement.test, name):
            return USED
        body = self._block(statement.body.body, name)
        orelse = statement.orelse
        if isinstance(orelse, cst.If):
            other = self._if(orelse, name)
        elif isinstance(orelse, cst.Else):
            other = self._block(orelse.body.body, name)
        else:
            other = UNTOUCHED
        if USED in (body, other):
            return USED
        if body is MOVED and other is MOVED:
            return MOVED
        # only one path moves it: right when that path is the one with CUDA
        if body is MOVED and analysis.cuda_test(statement.test, True):
            return MOVED
        if other is MOVED and not isinstance(orelse, cst.If) and analysis.cuda_test(statement.test, False):
            return MOVED
        return UNTOUCHED if MOVED not in (body, other) else USED

    def _small(self, small: cst.CSTNode, name: str) -> str:
        """A simple statement that mentions ``name``."""
        rebinds = False
        if isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
            for target in targets:
                if isinstance(target, cst.Name) and target.value == name:
                    if isinstance(small, cst.AugAssign):
                        return UNTOUCHED if self._number(small.value) else USED  # noise *= 0.5 keeps it on the host
                    rebinds = True
                elif isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name) and target.value.value == name:
                    # a number written into it (f[i] = 1): it meets nothing
                    if not self._number(small.value) or (isinstance(small, cst.Assign) and len(small.targets) > 1):
                        return USED
                elif _mentions(target, name):
                    return USED
            value = small.value
            if value is not None and _mentions(value, name):
                for read in _reads(value, name):
                    fate = self.fate(read)
                    if fate is MOVED:
                        continue
                    if isinstance(fate, tuple) and fate[0] is small and fate[1] == name:
                        return UNTOUCHED  # noise = noise * std: still the host value, followed further
                    return USED
            return MOVED if rebinds else UNTOUCHED
        return UNTOUCHED if self._reads_moved(small, name) else USED

    def _reads_moved(self, node: cst.CSTNode, name: str) -> bool:
        return all(self.fate(read) is MOVED for read in _reads(node, name))

    def _number(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, (cst.Integer, cst.Float)):
            return True
        if isinstance(value, cst.UnaryOperation) and isinstance(value.expression, (cst.Integer, cst.Float)):
            return True
        found = self.flow.node_at(*self.rule.span(value))
        return found is not None and self.flow.what(found) is What.SCALAR


def on_host(rule, node: cst.CSTNode) -> bool:
    """The flow shows ``node``'s value on the host and nowhere else."""
    flow = analysis.flow_of(rule)
    found = flow.node_at(*rule.span(node))
    if found is None:
        return False
    places = flow.where(found)
    return bool(places) and all(p is HOST for p, _ in places)


def _copied_in_place(holder: cst.CSTNode, arg: cst.CSTNode) -> bool:
    """``arg`` is the source of ``dst.copy_(...)``, which copies across devices."""
    return (
        isinstance(holder, cst.Call)
        and isinstance(holder.func, cst.Attribute)
        and holder.func.attr.value == "copy_"
        and bool(holder.args)
        and holder.args[0] is arg
        and arg.keyword is None
    )


def _reads(node: cst.CSTNode, name: str) -> list[cst.Name]:
    """The ``Name`` nodes reading ``name`` in ``node`` (not ``x.name``, not
    ``name=`` keywords)."""
    found, stack = [], [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Attribute):
            stack.append(current.value)
        elif isinstance(current, cst.Arg):
            stack.append(current.value)
        elif isinstance(current, cst.Name):
            if current.value == name:
                found.append(current)
        else:
            stack.extend(child_nodes(current))
    return found


def _mentions(node: cst.CSTNode, name: str) -> bool:
    return bool(_reads(node, name))


def _readers(facts, block: cst.CSTNode) -> dict[str, list[int]]:
    """Name → the indexes, in order, of the statements of ``block`` that read
    it (as ``_reads`` finds reads), made once per block."""
    memo = facts.shared.setdefault("moved readers", {})
    entry = memo.get(id(block))
    if entry is None:
        readers: dict[str, list[int]] = {}
        for i, statement in enumerate(block.body):
            for name in _read_names(statement):
                readers.setdefault(name, []).append(i)
        entry = memo[id(block)] = (block, readers)  # the block kept, so its id is not reused
    return entry[1]


def _read_names(node: cst.CSTNode) -> set[str]:
    """The names ``_reads`` would find read in ``node``."""
    found, stack = set(), [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Attribute):
            stack.append(current.value)
        elif isinstance(current, cst.Arg):
            stack.append(current.value)
        elif isinstance(current, cst.Name):
            found.add(current.value)
        else:
            stack.extend(child_nodes(current))
    return found
