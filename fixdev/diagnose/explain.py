"""Why a device error happened, from the file it points at.

``analyse(report, index, load)`` takes one recognised error (``traceback.py``
reads it from the log), maps its frames to files under PATH, and answers with
the engine's findings that explain it and plain words: at the failing line,
the values that meet there (the device-flow analysis of ``codemods/flow.py``
says where each was made and where it lives), resolved by the message where
the analysis cannot place them; where the failing line is inside a library
call or gets the value as a parameter, the caller's frame. No rule knowledge:
which findings count is decided by where they are, and the family's codes
only rank them.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from fixdev.engine.findings import Finding
from fixdev.files.notebook import is_notebook
from fixdev.engine.source import LineIndex, Source
from fixdev.diagnose.log import Frame, Report, is_host, short, spoken
from fixdev.diagnose.mapping import FileIndex, Mapped, in_cells
from fixdev.diagnose.statements import header_expressions, header_lines, source_of, statement_at

# ---------------------------------------------------------------------------
# What the file says at the failing line
# ---------------------------------------------------------------------------


@dataclass
class FileFacts:
    """One local file: its text, the engine's findings and the device flow."""

    path: Path
    text: str
    source: Source
    findings: list[Finding]
    flow: Any  # codemods.flow.FileFlow
    lines: LineIndex
    error: str | None = None

    def line_of(self, offset: int) -> int:
        return self.lines.position(offset)[0]


@dataclass
class Explained:
    """What ``--traceback`` says about one report."""

    report: Report
    frame: Frame | None = None
    path: Path | None = None  # the local file
    line: int | None = None
    inner: Frame | None = None  # the innermost frame, where it was raised (a library's)
    status: str = "explained"  # fixed / fixable / explained / stale / unmapped / ambiguous / error
    why: list[str] = field(default_factory=list)
    change: str | None = None
    findings: list[Finding] = field(default_factory=list)  # kept, positions in the original text
    problem: str | None = None
    told: list = field(default_factory=list)  # the evidence the findings were found with (Told.items)
    also: list[Finding] = field(default_factory=list)  # what fails next in the failing line's function (traceback.same_flow)


class _Facts:
    """Device-flow questions about the failing statement, in plain words."""

    def __init__(self, facts: FileFacts) -> None:
        from fixdev.analysis import flow as flow_module

        self.facts = facts
        self.flow = facts.flow
        self.F = flow_module
        self._parents: dict[ast.AST, ast.AST] | None = None

    def parents(self) -> dict[ast.AST, ast.AST]:
        if self._parents is None:
            self._parents = {child: node for node in ast.walk(self.flow.tree) for child in ast.iter_child_nodes(node)}
        return self._parents

    def statement_of(self, node: ast.AST) -> ast.stmt | None:
        parents = self.parents()
        while node is not None and not isinstance(node, ast.stmt):
            node = parents.get(node)
        return node

    def function_of(self, node: ast.AST) -> ast.AST | None:
        parents = self.parents()
        node = parents.get(node)
        while node is not None and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node = parents.get(node)
        return node

    def places(self, node: ast.expr) -> tuple[list, list, list]:
        """(host origins, device placements with origins, unknown) of ``node``."""
        host, device, unknown = [], [], []
        try:
            where = self.flow.where(node)
        except Exception:  # the analysis is best effort here: no facts, no claims
            return host, device, unknown
        for placement, origin in sorted(where, key=lambda item: position_of(item[1])):
            if placement is self.F.HOST:
                host.append(origin)
            elif isinstance(placement, self.F.Device):
                device.append((placement, origin))
            else:
                unknown.append((placement, origin))
        return host, device, unknown

    def what(self, node: ast.expr):
        try:
            return self.flow.what(node)
        except Exception:
            return self.F.What.UNKNOWN

    def host_origin(self, origin: ast.AST | None) -> str:
        """Why a value lives on the host, from where it was made."""
        if origin is None or not hasattr(origin, "lineno"):
            return "stays on the CPU"
        line = origin.lineno
        statement = self.statement_of(origin)
        if isinstance(origin, ast.Name) and isinstance(statement, (ast.For, ast.AsyncFor)):
            loop = statement.iter
            inner = loop
            while isinstance(inner, ast.Call) and inner.args and isinstance(inner.func, ast.Name) and inner.func.id in ("enumerate", "tqdm", "zip", "iter"):
                inner = inner.args[0]
            if self.what(inner) is self.F.What.LOADER or self.what(loop) is self.F.What.LOADER:
                return f"comes from the DataLoader (`{short(source_of(self.flow, loop))}`, line {line}) and stays on the CPU"
            return f"comes from `for ... in {short(source_of(self.flow, loop))}` on line {line}, on the CPU"
        if isinstance(origin, ast.Call):
            name = self.flow.qualified_name(origin.func) or ""
            text = short(source_of(self.flow, origin))
            if name.endswith("from_numpy") or name.endswith("as_tensor"):
                return f"is made from a NumPy array by `{text}` on line {line}, on the CPU"
            if self.what(origin) is self.F.What.MODULE:
                return f"is built by `{text}` on line {line} and never moved to the GPU"
            owner = self.function_of(origin)
            where = f" in `{owner.name}`" if owner is not None and owner.name == "__init__" else ""
            if name.startswith("torch."):
                return f"is made by `{text}` on line {line}{where} without a `device=`, so on the CPU"
            return f"is made by `{text}` on line {line}{where}, on the CPU"
        if isinstance(origin, ast.arg):
            return f"is the parameter `{origin.arg}` (line {line}), on the CPU here"
        if isinstance(origin, ast.Name) and isinstance(statement, ast.Assign):  # a name placed by the error's message
            return f"is set by `{short(source_of(self.flow, statement.value))}` on line {line}, on the CPU"
        return f"is set on line {line}, on the CPU"

    def device_origin(self, placement, origin: ast.AST | None) -> str:
        text = placement.text
        if not text:
            device = "the GPU"
        elif re.match(r"^(?:self\b|next\(self\.)", text):
            device = "the module's device"  # next(self.parameters()).device, self.w.device
        else:
            device = f"`{text}`"
        if origin is None or not hasattr(origin, "lineno"):
            return f"is on {device}"
        if isinstance(origin, ast.Call) and isinstance(origin.func, ast.Attribute) and origin.func.attr in ("to", "cuda", "type_as"):
            return f"was moved to {device} on line {origin.lineno}"
        return f"is on {device} (line {origin.lineno})"


def position_of(node) -> tuple[int, int]:
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))


def _related_statements(helper: _Facts, statement: ast.stmt, depth: int = 3) -> list[tuple[int, ast.stmt]]:
    """The failing statement (depth 0), then the statements that made the
    host values it uses (depth 1, 2, …): where a fix for this line may land.
    The values the failing line uses directly are followed to where they were
    made even when the analysis cannot place them (``m = self.memory``): the
    error says one of them is on the wrong device."""
    found: list[tuple[int, ast.stmt]] = [(0, statement)]
    seen = {id(statement)}
    frontier = [statement]
    for level in range(1, depth + 1):
        following = []
        for current in frontier:
            for node in header_expressions(current):
                if not isinstance(node, (ast.Name, ast.Attribute, ast.Subscript, ast.Call)):
                    continue
                host, _, unknown = helper.places(node)
                if level == 1:
                    host = host + [origin for _, origin in unknown if not isinstance(origin, ast.arg)]
                for origin in host:
                    origin_statement = helper.statement_of(origin) if isinstance(origin, ast.AST) else None
                    if origin_statement is not None and id(origin_statement) not in seen:
                        seen.add(id(origin_statement))
                        found.append((level, origin_statement))
                        following.append(origin_statement)
        frontier = following
    return found


def _sinks_at(helper: _Facts, statement: ast.stmt) -> list:
    first, last = header_lines(statement)
    try:
        sinks = helper.flow.sinks()
    except Exception:
        return []
    return [sink for sink in sinks if first <= getattr(sink.node, "lineno", 0) <= last]


def related_findings(facts: FileFacts, line: int, codes: Iterable[str], group: str) -> list[Finding]:
    """The engine's findings that explain an error at ``line``: on the line,
    then where its host values were made; for a cuda-only error, every
    finding of the family's codes in the file (each would fail in turn)."""
    helper = _Facts(facts)
    statement = statement_at(facts.flow, line)
    codes = set(codes)
    ranked: dict[Finding, tuple] = {}
    if statement is not None:
        levels = _related_statements(helper, statement)
        for sink in _sinks_at(helper, statement):
            for origin in sink.origins:
                origin_statement = helper.statement_of(origin) if isinstance(origin, ast.AST) else None
                if origin_statement is not None and all(s is not origin_statement for _, s in levels):
                    levels.append((1, origin_statement))
        for acting in _acting_on(helper, statement):
            if all(s is not acting for _, s in levels):
                levels.append((1, acting))
        # a parameter the failing line uses, moved where the method takes it (FDV107's entry move)
        for node in header_expressions(statement):
            if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript, ast.Call)):
                for _, origin in helper.places(node)[2]:
                    if isinstance(origin, ast.arg):
                        for finding in facts.findings:
                            if facts.line_of(finding.start) == origin.lineno and finding not in ranked:
                                ranked[finding] = (1, finding.code not in codes, finding.start)
        for level, related in levels:
            first, last = header_lines(related)
            for finding in facts.findings:
                start, end = facts.line_of(finding.start), facts.line_of(max(finding.start, finding.end - 1))
                if start <= last and end >= first:
                    rank = (level, finding.code not in codes, finding.start)
                    ranked[finding] = min(ranked.get(finding, rank), rank)
    if group == "cuda-only":
        for finding in facts.findings:
            if finding.code in codes and finding not in ranked:
                ranked[finding] = (9, False, finding.start)
    return sorted(ranked, key=lambda f: ranked[f])


def _acting_on(helper: _Facts, statement: ast.stmt) -> list[ast.stmt]:
    """Statements between where a name the failing line reads was bound and
    the failing line that act on that value alone: a bare expression
    (``images.to(device)``, its result dropped) or a rebinding of the name.
    A fix there (a move kept) is a fix for this line."""
    found = []
    first, _ = header_lines(statement)
    for node in header_expressions(statement):
        if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)):
            continue
        binding = _binding_before(helper, node)
        scope = helper.function_of(node) or helper.flow.tree
        start = binding.lineno if binding is not None else getattr(scope, "lineno", 1)
        for other in ast.walk(scope):
            if not isinstance(other, (ast.Expr, ast.Assign)) or not start < other.lineno < first:
                continue
            if isinstance(other, ast.Expr):
                mentions = {n.id for n in ast.walk(other.value) if isinstance(n, ast.Name)}
                acts = node.id in mentions and len(mentions) <= 2  # the value and at most a device name
            else:
                acts = any(isinstance(t, ast.Name) and t.id == node.id for target in other.targets for t in ast.walk(target))
            if acts and other not in found:
                found.append(other)
    return found


# ---------------------------------------------------------------------------
# Explaining
# ---------------------------------------------------------------------------


def _explain_mismatch(report: Report, facts: FileFacts, statement: ast.stmt, line: int) -> tuple[list[str], str | None, bool]:
    """(why, what to change, walk out): plain words on the values that meet
    at ``statement``. ``walk out``: the host value came in as a parameter of
    the function, so the caller's frame is the one to read."""
    helper = _Facts(facts)
    flow = facts.flow
    why: list[str] = []
    sinks = _sinks_at(helper, statement)
    for sink in sinks[:2]:
        host, _, _ = helper.places(sink.value)  # the sink keeps one origin; where() has them all
        sentence = _host_sentence(helper, sink.value, [*sink.origins, *host])
        if sink.other is not None:
            _, device, _ = helper.places(sink.other)
            other = short(source_of(flow, sink.other))
            if device:
                sentence += f"; `{other}` {helper.device_origin(*device[0])}"
        why.append(sentence)
    if sinks:
        others = [(sink.other, "") for sink in sinks if sink.other is not None]
        return why, _move_change(helper, statement, line, [sink.value for sink in sinks], others), False

    # No meeting the analysis found by itself. The message says two devices
    # meet on this line (and sometimes which value is where): a value the
    # analysis leaves unknown is resolved by it.
    host_side: list[tuple[ast.expr, str]] = []
    device_side: list[tuple[ast.expr, str]] = []
    unknown_side: list[tuple[ast.expr, list]] = []
    for node, role in _operands(helper, statement):
        host, device, unknown = helper.places(node)
        text = short(source_of(flow, node))
        said = _said_device(report, role)
        # on the CPU on one path and moved on another (a module moved to a
        # device the code does not show counts): the run took one of them
        mixed = bool(host) and bool(device or (unknown and any(isinstance(o, ast.expr) and helper.what(o) is helper.F.What.MODULE for o in host)))
        if host and not mixed:
            host_side.append((node, _host_sentence(helper, node, host)))
        elif device and not unknown and not mixed:
            device_side.append((node, f"`{text}` {helper.device_origin(*device[0])}"))
        elif said is not None and is_host(said):
            host_side.append((node, f"`{text}` is on the CPU: {_unknown_words(helper, node, unknown)}, and the error says the {role} is a CPU tensor"))
        elif said is not None:
            device_side.append((node, f"`{text}` is on {said}, as the error says"))
        elif not isinstance(node, ast.Call):
            unknown_side.append((node, unknown))
    device_side.sort(key=lambda item: not isinstance(item[0], (ast.Name, ast.Attribute)))  # `model` reads better than `model(x)`
    change = None
    if not host_side and device_side and unknown_side:
        # Two devices meet here and the only known side is on the GPU: the
        # host side is among the values the analysis cannot place.
        unknown_side.sort(key=lambda item: (item[0].lineno, item[0].col_offset))
        names = ", ".join(f"`{short(source_of(flow, node))}`" for node, _ in unknown_side[:3])
        made = {id(_binding_before(helper, node) or node) for node, _ in unknown_side}
        said = f"the error says this line mixes {_pair(report)} while the other side is on the GPU"
        state = [(node, _plain_state(helper, node)) for node, _ in unknown_side]
        state = [(node, found) for node, found in state if found]
        if len(state) == 1 and (len(made) > 1 or len(unknown_side) == 1):
            # a tensor the module keeps as a plain attribute: the classic culprit
            node, (attribute, sets) = state[0]
            where = ", ".join(f"line {n.lineno} in `{method}`" for n, method in sets[:2])
            kept = f"`{attribute}`, a plain attribute (set on {where}), which stays where it was made when the model moves"
            if len(unknown_side) == 1:
                why.append(f"{names} must be on the CPU ({said}): it is {kept}")
            else:
                why.append(f"one of {names} is on the CPU ({said}); most likely `{short(source_of(flow, node))}`: it is {kept}")
            first, method = sets[0]
            change = (
                f"make `{attribute}` a buffer where it is first set (line {first.lineno} in `{method}`): "
                f"`self.register_buffer(\"{attribute[5:]}\", ..., persistent=False)`; later assignments keep it a buffer, and it moves with the model"
            )
        elif len(made) == 1:  # one value, or parts of one (a batch): all on the CPU
            origins = _unknown_words(helper, unknown_side[0][0], unknown_side[0][1], plural=len(unknown_side) > 1)
            host_side.extend((node, "") for node, _ in unknown_side)
            why.append(f"{names} must be on the CPU: {origins}, and {said}")
        else:
            why.append(f"one of {names} is on the CPU ({said}); fixdev cannot see which")
            device = _device_of(device_side, helper)
            change = f"print each one's `.device` before line {line} and move the one on the CPU to {('`' + device + '`') if device else 'the GPU'}"
    elif not host_side and not device_side and len(unknown_side) > 1:
        # nothing placed on either side (a model moved on one path only, a
        # batch whose dataset moves on one path): say so, claim nothing
        unknown_side.sort(key=lambda item: (item[0].lineno, item[0].col_offset))
        names = ", ".join(f"`{short(source_of(flow, node))}`" for node, _ in unknown_side[:3])
        why.append(f"one of {names} is on the CPU (the error says this line mixes {_pair(report)}); fixdev cannot see which")
        change = f"print each one's `.device` before line {line} and move the one on the CPU to the GPU"
    else:
        why.extend(sentence for _, sentence in host_side[:2])
    why.extend(sentence for _, sentence in device_side[:1])
    walk = bool(host_side) and all(_parameter_origin(helper.places(node)[2]) for node, _ in host_side)
    if change is None:
        change = _move_change(helper, statement, line, [node for node, _ in host_side], device_side)
    return why, change, walk


def _plain_state(helper: _Facts, node: ast.expr) -> tuple[str, list] | None:
    """``("self.h", [(assignment, method), ...])`` when ``node`` reads a
    tensor the module keeps as a plain attribute (``h = self.h`` or
    ``self.h`` itself), with where the class sets it; else None."""
    target = node
    if isinstance(node, ast.Name):
        binding = _binding_before(helper, node)
        target = binding.value if isinstance(binding, ast.Assign) else None
    if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"):
        return None
    cls = helper.parents().get(helper.function_of(target))
    if not isinstance(cls, ast.ClassDef):
        return None
    sets = []
    for method in cls.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for statement in ast.walk(method):
            if isinstance(statement, ast.Assign) and any(
                isinstance(t, ast.Attribute) and t.attr == target.attr and isinstance(t.value, ast.Name) and t.value.id == "self" for t in statement.targets
            ):
                if helper.what(statement.value) is helper.F.What.MODULE or "Parameter" in source_of(helper.flow, statement.value).split("(")[0]:
                    return None  # a submodule or a parameter moves with the model
                sets.append((statement, method.name))
    sets.sort(key=lambda item: (item[1] != "__init__", item[0].lineno))
    return (f"self.{target.attr}", sets) if sets else None


def _host_sentence(helper: _Facts, value: ast.expr, origins: list) -> str:
    """``noise` is made by `torch.randn(x.shape)` on line 30 …``: the origin
    bound to the name the line uses comes first (``noise = randn(...) *
    scale`` is about randn), another one is added."""
    flow = helper.flow
    origins = sorted({o for o in origins if o is not None}, key=position_of)
    named = [o for o in origins if _bound_name(helper, o, value) is not None]
    origins = named + [o for o in origins if o not in named]
    if not origins:
        return f"`{short(source_of(flow, value))}` is on the CPU"
    subject = short(_bound_name(helper, origins[0], value) or source_of(flow, value))
    sentence = f"`{subject}` {helper.host_origin(origins[0])}"
    for also in origins[1:2]:
        if isinstance(also, ast.AST) and hasattr(also, "lineno"):
            sentence += f" (and from `{short(source_of(flow, also), 40)}`, line {also.lineno}, on the CPU too)"
    return sentence


def _bound_name(helper: _Facts, origin, value: ast.expr) -> str | None:
    """The name a host value has where it was made (``ctx`` for ``ctx =
    torch.zeros(n)``), when the failing expression uses that name."""
    statement = helper.statement_of(origin) if isinstance(origin, ast.AST) else None
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], (ast.Name, ast.Attribute)):
        name = source_of(helper.flow, statement.targets[0])
        if any(source_of(helper.flow, node) == name for node in ast.walk(value) if isinstance(node, (ast.Name, ast.Attribute))):
            return name
    return None


def _pair(report: Report) -> str:
    devices = report.devices()
    return f"{spoken(devices[0])} and {spoken(devices[1])}" if devices else "two devices"


def _unknown_words(helper: _Facts, node: ast.expr, unknown: list, plural: bool = False) -> str:
    """Why the analysis cannot say where a value lives."""
    param = _parameter_origin(unknown)
    if param is not None:
        return f"it is the parameter `{param}`, which comes from the caller"
    they = "they are" if plural else "it is"
    binding = _binding_before(helper, node)
    if isinstance(binding, (ast.For, ast.AsyncFor)):
        header = f"for {source_of(helper.flow, binding.target)} in {source_of(helper.flow, binding.iter)}"
        return f"fixdev cannot see where {they} made (`{short(header)}`, line {binding.lineno})"
    if binding is not None:
        return f"fixdev cannot see where {they} made (`{short(source_of(helper.flow, binding))}`, line {binding.lineno})"
    return f"fixdev cannot see where {they} made"


def _binding_before(helper: _Facts, node: ast.expr) -> ast.stmt | None:
    """The last statement of the enclosing function, before ``node``'s
    line, that binds ``node``'s name."""
    if not isinstance(node, ast.Name):
        return None
    scope = helper.function_of(node) or helper.flow.tree
    found = None
    for statement in ast.walk(scope):
        if not isinstance(statement, (ast.Assign, ast.For, ast.AsyncFor, ast.AnnAssign, ast.AugAssign)) or statement.lineno >= node.lineno:
            continue
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        if any(isinstance(n, ast.Name) and n.id == node.id for target in targets for n in ast.walk(target)):
            if found is None or statement.lineno > found.lineno:
                found = statement
    return found


def _move_change(helper: _Facts, statement: ast.stmt, line: int, host: list[ast.expr], device_side) -> str | None:
    """What to write where no rule's fix applies: move the host values."""
    flow = helper.flow
    movable = [node for node in host if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript))]
    if not movable:
        return None
    try:
        device = flow.device_at(movable[0]) or _device_of(device_side, helper)
    except Exception:
        device = _device_of(device_side, helper)
    shown_device = device or "device"
    first = movable[0]
    if helper.what(first) is helper.F.What.MODULE:
        target = source_of(flow, first)
        host, _, _ = helper.places(first)
        where = f"where it is built (line {host[0].lineno})" if host and hasattr(host[0], "lineno") else f"before line {line}"
        return f"move `{target}` to the GPU {where}: `{target}.to({shown_device})`"
    texts = []
    for node in movable[:3]:
        text = source_of(flow, node)
        if text not in texts:
            texts.append(text)
    names = ", ".join(texts)
    moves = ", ".join(f"{text}.to({shown_device})" for text in texts)
    where = f"`{device}`" if device else "the device the other tensors are on"
    return f"move {', '.join(f'`{t}`' for t in texts)} to {where} before line {line}: `{names} = {moves}`"


def _device_of(device_side, helper: _Facts) -> str | None:
    for node, _ in device_side:
        _, device, _ = helper.places(node)
        for placement, _origin in device:
            if placement.text:
                return placement.text
    return None


def _parameter_origin(unknown) -> str | None:
    for placement, origin in unknown:
        if isinstance(origin, ast.arg):
            return origin.arg
    return None


def _said_device(report: Report, role: str) -> str | None:
    roles = report.roles()
    if role == "input":
        return roles.get("input")
    if role == "module":
        return roles.get("weight")
    return None


def _moved_callable(helper: _Facts, func: ast.expr) -> bool:
    """An object of a class the analysis cannot see, that was moved to a
    device: a module, for this purpose."""
    if not isinstance(func, (ast.Name, ast.Attribute)):
        return False
    host, device, unknown = helper.places(func)
    return bool(device) and not host and not unknown


def _operands(helper: _Facts, statement: ast.stmt) -> list[tuple[ast.expr, str]]:
    """The values that meet at the statement: a module call's module and
    input, the operands of arithmetic, torch functions and indexing."""
    found: list[tuple[ast.expr, str]] = []
    seen: set[int] = set()

    def add(node: ast.expr, role: str) -> None:
        if id(node) not in seen and isinstance(node, (ast.Name, ast.Attribute, ast.Subscript, ast.Call)):
            seen.add(id(node))
            found.append((node, role))

    for node in header_expressions(statement):
        if isinstance(node, ast.Call) and (helper.what(node.func) is helper.F.What.MODULE or _moved_callable(helper, node.func)):
            add(node.func, "module")
            for arg in node.args[:1]:
                add(arg, "input")
        elif isinstance(node, ast.BinOp) or isinstance(node, ast.Compare):
            for side in (getattr(node, "left", None), getattr(node, "right", None), *getattr(node, "comparators", [])):
                if side is not None and helper.what(side) in (helper.F.What.TENSOR, helper.F.What.UNKNOWN):
                    add(side, "operand")
        elif isinstance(node, ast.Subscript) and helper.what(node.value) is helper.F.What.TENSOR:
            add(node.value, "operand")
            add(node.slice, "operand")
        elif isinstance(node, ast.Call):
            name = helper.flow.qualified_name(node.func) or ""
            if name.startswith("torch.") or (isinstance(node.func, ast.Attribute) and helper.what(node.func.value) is helper.F.What.TENSOR):
                if isinstance(node.func, ast.Attribute) and not name.startswith("torch."):
                    add(node.func.value, "operand")
                for arg in node.args:
                    targets = arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [arg]
                    for element in targets:
                        if helper.what(element) in (helper.F.What.TENSOR, helper.F.What.UNKNOWN):
                            add(element, "operand")
    return found


# Families whose message says more than "two devices meet": explained by
# what the line does (reads .numpy(), loads, asks for CUDA, wraps a model).
_OWN_WORDS = frozenset({"numpy", "deserialize", "no-cuda-build", "no-driver", "legacy-type", "data-parallel"})


def _explain(report: Report, facts: FileFacts, statement: ast.stmt, line: int) -> tuple[list[str], str | None, bool]:
    if report.family.name not in _OWN_WORDS:
        why, change, walk = _explain_mismatch(report, facts, statement, line)
        if why or change or report.family.name != "index-device":
            return why, change, walk
    why, change = _explain_other(report, facts, statement, line)
    return why, change, False


def _explain_other(report: Report, facts: FileFacts, statement: ast.stmt, line: int) -> tuple[list[str], str | None]:
    """Plain words and what to change for errors other than a mismatch."""
    flow = facts.flow
    family = report.family.name
    nodes = header_expressions(statement)
    subject = None
    if family == "numpy":
        for node in nodes:
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "numpy":
                receiver = source_of(flow, node.func.value)
                subject = f"`{receiver}.detach().cpu().numpy()`"
                return [f"`{short(receiver)}` is on {spoken(report.roles().get('odd')) or 'the GPU'}"], report.family.change.format(line=line, subject=subject, device="")
        subject = "`.detach().cpu().numpy()`"
    elif family == "deserialize":
        for node in nodes:
            if isinstance(node, ast.Call) and (flow.qualified_name(node.func) or "").endswith("load"):
                subject = "`torch.load(..., map_location=\"cpu\")` (or the device the program runs on)"
                return [f"`{short(source_of(flow, node))}` loads it"], report.family.change.format(line=line, subject=subject, device="")
        subject = "`map_location=\"cpu\"`"
    elif family in ("no-cuda-build", "no-driver"):
        asks = [n for n in nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "cuda"]
        asks += [n for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith("cuda")]
        subject = '`device = torch.device("cuda" if torch.cuda.is_available() else "cpu")` and `.to(device)`'
        if asks:
            return [f"line {line} asks for CUDA: `{short(source_of(flow, asks[0]))}`"], report.family.change.format(line=line, subject=subject, device="")
        moves = [n for n in nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "to" and n.args]
        if moves:
            target = short(source_of(flow, moves[0].args[0]))
            return [f"line {line} moves to `{target}`, which names CUDA where it is defined"], report.family.change.format(line=line, subject=subject, device="")
    elif family == "index-device":
        for node in nodes:
            if isinstance(node, ast.Subscript):
                table, index = source_of(flow, node.value), source_of(flow, node.slice)
                subject = f"`{table}[{index}.to({table}.device)]`, or keep `{table}` on the GPU (a buffer)"
                return [f"`{short(table)}` is indexed with `{short(index)}`, which is on another device"], report.family.change.format(line=line, subject=subject, device="")
        subject = "`.to(table.device)` on the indices"
    elif family == "data-parallel":
        wrapped = None
        for node in ast.walk(flow.tree):
            if isinstance(node, ast.Call) and (flow.qualified_name(node.func) or "").endswith("DataParallel") and node.args:
                wrapped = node
                break
        other = report.roles().get("other") or "cuda:0"
        if wrapped is not None:
            inner = source_of(flow, wrapped.args[0])
            subject = f"wrap `{inner}.to(\"{other}\")` on line {wrapped.lineno}"
            return [f"`{short(source_of(flow, wrapped))}` on line {wrapped.lineno} wraps a model that was not moved to {other}"], report.family.change.format(line=line, subject=subject, device="", other=other)
        subject = f"`model.to(\"{other}\")`"
        return [], report.family.change.format(line=line, subject=subject, device="", other=other)
    try:
        return [], report.family.change.format(line=line, subject=subject or "", device="", other="")
    except (KeyError, IndexError):
        return [], None


# ---------------------------------------------------------------------------
# The message as evidence for the analysis
# ---------------------------------------------------------------------------


@dataclass
class Told:
    """What the message says about the failing line, for the flow
    (``codemods.flow.Evidence``): ``items`` are ``(span, placement,
    origin)``; ``said`` the same in words; ``parameter``: the value the
    message places came in as this parameter of the function, so the
    caller's frame is where to say it."""

    items: list = field(default_factory=list)
    said: list[str] = field(default_factory=list)
    parameter: tuple[ast.AST, ast.arg] | None = None  # (function, parameter)
    placement: str | None = None  # where the parameter's value is, then


def _span(node: ast.AST) -> tuple:
    return (type(node).__name__, node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)


def _side(helper: _Facts, node: ast.expr) -> str | None:
    """``"host"``/``"device"`` where the analysis places ``node`` on one side
    only, ``"unknown"`` where on neither, None where on both (a branch) or
    where it does not count (a module without parameters, a 0-dim tensor)."""
    value = helper.flow.value(node) if _safe(helper, node) else None
    if value is None or value.flags & (helper.F.PARAM_FREE | helper.F.ZERO_DIM):
        return None
    host, device, _ = helper.places(node)
    if host and device:
        return None
    return "host" if host else "device" if device else "unknown"


def _safe(helper: _Facts, node: ast.expr) -> bool:
    try:
        helper.flow.value(node)
        return True
    except Exception:  # best effort: no facts, no evidence
        return False


def _origin(helper: _Facts, node: ast.expr, line: int) -> tuple[ast.AST | None, ast.arg | None]:
    """(where the value of ``node`` was bound, the parameter it is): for a
    name bound once in its function, before ``line``, by an assignment or a
    loop (its target); the parameter when that binding is one. Else (None, None):
    the place is told, where it came from is not."""
    if not isinstance(node, ast.Name):
        return None, None
    scope = helper.function_of(node) or helper.flow.tree
    sites: list[ast.AST] = []
    for other in ast.walk(scope):
        if isinstance(other, ast.Name) and other.id == node.id and not isinstance(other.ctx, ast.Load):
            sites.append(other)
        elif isinstance(other, ast.arg) and other.arg == node.id:
            sites.append(other)
        elif isinstance(other, (ast.Global, ast.Nonlocal)) and node.id in other.names:
            return None, None
        elif isinstance(other, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name.split(".")[0]) == node.id for a in other.names):
            return None, None
    if len(sites) != 1 or sites[0].lineno >= line:
        return None, None
    site = sites[0]
    if isinstance(site, ast.arg):
        return site, site
    statement = helper.statement_of(site)
    if isinstance(statement, (ast.Assign, ast.For, ast.AsyncFor)):
        return site, None
    return None, None


def _setting(helper: _Facts, node: ast.expr, line: int) -> bool:
    """``args.scale``, or a name bound once to it or to a number: a setting,
    not a tensor the analysis missed."""
    origin, _ = _origin(helper, node, line)
    statement = helper.statement_of(origin) if origin is not None else None
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and statement.targets[0] is origin:
        node = statement.value
    if isinstance(node, (ast.Constant, ast.UnaryOp, ast.BinOp)) and all(isinstance(n, ast.Constant) for n in ast.walk(node) if isinstance(n, ast.expr) and not isinstance(n, (ast.UnaryOp, ast.BinOp))):
        return True
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return isinstance(node, ast.Name) and node.id in helper.F.CONFIG_NAMES


def evidence(report: Report, facts: FileFacts, line: int) -> Told:
    """What ``report``'s message places at ``line`` that the analysis leaves
    unplaced: the receiver of ``.numpy()`` is on a device; of the values two
    devices meet with (a module and its input, the operands of an operation),
    the only one not placed is on the side the placed ones are not (the input
    on the host where the module is on a device). Nothing when more than one
    value is unplaced, when no value is placed, or where the message and the
    analysis disagree."""
    told = Told()
    if facts.error or facts.flow is None:
        return told
    statement = statement_at(facts.flow, line)
    if statement is None:
        return told
    helper = _Facts(facts)
    name = report.family.name
    if name == "numpy":
        receivers = [n.func.value for n in header_expressions(statement) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "numpy" and not n.args]
        if len(receivers) == 1 and _side(helper, receivers[0]) == "unknown":
            node = receivers[0]
            told.items.append((_span(node), "device", None))
            told.said.append(f"fixdev cannot place `{short(source_of(facts.flow, node))}` by itself; the error's message says where it is")
        return told
    devices = report.devices()
    if report.family.group != "mismatch" or name in ("data-parallel", "index-device") or devices is None or not is_host(devices[1]) or is_host(devices[0]):
        return told
    sides: dict[str, list[tuple[ast.expr, str]]] = {"host": [], "device": [], "unknown": []}
    for node, role in _operands(helper, statement):
        side = _side(helper, node)
        if side is not None:
            sides[side].append((node, role))
    unknown = sides["unknown"]
    if len(unknown) != 1 or bool(sides["host"]) == bool(sides["device"]):
        return told
    node, role = unknown[0]
    if role == "operand" and _setting(helper, node, line):
        return told  # `x * args.scale`: most likely a number, and the tensor on the CPU is one the line hides
    placement = "device" if sides["host"] else "host"
    said = _said_device(report, role)
    if said is not None and is_host(said) != (placement == "host"):
        return told  # the message's roles and the analysis disagree: say nothing
    if not _place(told, helper, node, line, placement):
        return told
    where = "on the CPU" if placement == "host" else f"on {spoken(devices[0])}"
    told.said.append(f"fixdev cannot place `{short(source_of(facts.flow, node))}` by itself; the error says it is {where} at line {line}")
    return told


def _place(told: Told, helper: _Facts, node: ast.expr, line: int, placement: str) -> bool:
    """Tell that ``node`` (at ``line``) is on ``placement``: where it was made,
    or where it is if made there. A parameter's value is the caller's to place:
    ``told`` then names the function and parameter, and this is False."""
    origin, parameter = _origin(helper, node, line)
    if parameter is not None:
        function = helper.function_of(node)
        if function is not None:
            told.parameter, told.placement = (function, parameter), placement
        return False
    told.items.append((_span(node), placement, _span(origin) if origin is not None else None))
    return True


def argument_evidence(facts: FileFacts, line: int, function: ast.AST, parameter: ast.arg, placement: str | None) -> Told:
    """The caller's side of a walk out: the message placed ``parameter`` of
    ``function`` (an inner frame's), so the argument the call at ``line``
    passes for it is there too, when one call on the line can be that
    function (by its name; ``forward`` by a module called) and its argument
    is not placed by the analysis."""
    told = Told()
    statement = statement_at(facts.flow, line) if not facts.error and facts.flow is not None else None
    if statement is None or placement is None:
        return told
    helper = _Facts(facts)
    params = [*function.args.posonlyargs, *function.args.args]
    method = bool(params) and params[0].arg in ("self", "cls")
    calls = []
    for node in header_expressions(statement):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if function.name in ("forward", "__call__"):
            if helper.what(func) is helper.F.What.MODULE or _moved_callable(helper, func):
                calls.append((node, 1))
        elif called == function.name:
            calls.append((node, 1 if method and isinstance(func, ast.Attribute) else 0))
    if len(calls) != 1:
        return told
    call, shift = calls[0]
    argument = next((k.value for k in call.keywords if k.arg == parameter.arg), None)
    if argument is None and parameter in params and not any(isinstance(a, ast.Starred) for a in call.args):
        index = params.index(parameter) - shift
        argument = call.args[index] if 0 <= index < len(call.args) else None
    if argument is None or _side(helper, argument) != "unknown":
        return told
    if not _place(told, helper, argument, line, placement):
        return told
    where = "on the CPU" if placement == "host" else "on the GPU"
    told.said.append(f"fixdev cannot place `{short(source_of(facts.flow, argument))}` by itself; the error says it is {where} where `{function.name}` uses it as `{parameter.arg}`")
    return told


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------


Loader = Callable[..., FileFacts]  # load(path) / load(path, told): the file, with the message's evidence


def analyse(report: Report, index: FileIndex, load: Loader) -> Explained:
    """Map one report to a local file and line, and explain it."""
    result = Explained(report)
    frames = list(report.frames)
    if frames:
        result.inner = frames[-1]
    mapped = [index.map(frame) for frame in reversed(frames)]  # innermost first
    user = [m for m in mapped if m.path is not None]
    problems = [m for m in mapped if m.problem]
    stale = [m for m in user if m.problem == "stale"]
    if stale:
        m = stale[0]
        result.frame, result.path, result.line, result.status = m.frame, m.path, m.frame.line, "stale"
        current = index.line(m.path, m.frame.line).strip()
        shown = f"the log shows `{short(m.frame.source or '', 70)}`, the file has `{short(current, 70) or '(no such line)'}`"
        moved = index.find(m.path, m.frame.source or "")
        if moved:
            result.problem = (
                f"line {m.frame.line} of {m.path.as_posix()} changed since the error: {shown} (now line {moved}); "
                "nothing fixed (run the code again for a fresh traceback)"
            )
        else:
            result.problem = (
                f"line {m.frame.line} of {m.path.as_posix()} is not the line the log shows: {shown}; the file changed since "
                "the error, or another file of that name ran; nothing fixed"
            )
        return result
    if not user:
        result.status = "unmapped"
        if problems:
            result.status, result.problem = ("stale" if problems[0].problem.startswith("stale") else "ambiguous"), problems[0].problem
            result.frame = problems[0].frame
        elif not frames:
            result.problem = "the log has no traceback for this error, only its message: paste the whole traceback"
        else:
            cells = [f for f in frames if f.cell]
            result.frame = cells[-1] if cells else frames[-1]
            if cells:
                result.problem = (
                    f"the failing line is in a notebook cell ({cells[-1].path}, line {cells[-1].line}"
                    + (f": `{short(cells[-1].source)}`" if cells[-1].source else "")
                    + "); no notebook under PATH has a code cell run as "
                    + f"In[{cells[-1].execution_count if cells[-1].execution_count is not None else ' '}], and no code cell without an execution count "
                    + "(a notebook saved with its outputs cleared) holds that line as its line there (pass the notebook as PATH)"
                )
            else:
                result.problem = f"no frame of the traceback is in a file under PATH (innermost: {frames[-1].path}, line {frames[-1].line})"
        _explain_unmapped(result)
        return result

    # The innermost user frame, unless no finding explains it there and the
    # caller is where to look: the value came in as a parameter (a
    # mismatch), or the code that asks for CUDA is further out.
    family = report.family
    chosen: Mapped | None = None
    said: dict[int, Told] = {}  # id(mapped frame) -> what the message told the analysis there
    told_facts: dict[int, FileFacts] = {}
    passed: tuple | None = None  # (function, parameter, placement): an inner frame's value came from this frame's call
    walked: list[Mapped] = []
    for m in user:
        facts = load(m.path)
        if facts.error:
            result.frame, result.path, result.line = m.frame, m.path, m.at
            result.status, result.problem = "error", f"{m.path.as_posix()}: error: {facts.error}"
            return result
        told = evidence(report, facts, m.at) if passed is None else argument_evidence(facts, m.at, *passed)
        walked = walked if passed is not None else []  # the inner frames the value was passed down to
        passed = (*told.parameter, told.placement) if told.parameter is not None else None
        kept = related_findings(facts, m.at, family.codes, family.group)
        if told.items and not any(f.fix for f in kept):
            # the message places what the analysis could not: used where a rule's fix follows from it,
            # here or where the value meets the device in the frames it was passed down to
            with_told = load(m.path, told.items)
            kept_told = []
            for line in [m.at] + [w.at for w in reversed(walked) if w.path == m.path]:
                kept_told.extend(f for f in related_findings(with_told, line, family.codes, family.group) if f not in kept_told)
            if any(f.fix for f in kept_told):
                facts, kept = with_told, kept_told
                told_facts[id(m)], said[id(m)] = with_told, told
        if kept:
            chosen, result.findings = m, kept
            break
        walked = walked + [m] if passed is not None else []
        if family.group != "cuda-only":
            statement = statement_at(facts.flow, m.at)
            if statement is None or not _explain(report, facts, statement, m.at)[2]:
                chosen = m  # the frame where the value did not come from a caller
                break
    if chosen is None:  # no frame explained further out: what the innermost does
        chosen = user[0] if family.group == "cuda-only" else user[-1]
    chosen_facts = told_facts.get(id(chosen)) or load(chosen.path)
    result.frame, result.path, result.line = chosen.frame, chosen.path, chosen.at
    statement = statement_at(chosen_facts.flow, chosen.at)
    if statement is not None:
        why, change, _ = _explain(report, chosen_facts, statement, chosen.at)
        result.why.extend(why)
        result.change = change
    if id(chosen) in said:
        result.why.extend(said[id(chosen)].said)
        result.told = said[id(chosen)].items
    inner_user = user[0]
    if inner_user is not chosen:
        result.why.append(f"the error is raised in `{inner_user.frame.function or '?'}` ({inner_user.path.as_posix()}:{inner_user.frame.line}), called from here")
    if family.group == "cuda-only" and len(result.findings) > 1:
        together = "both are" if len(result.findings) == 2 else f"all {len(result.findings)} are"
        result.why.append(f"every line of {chosen.path.as_posix()} that asks for it fails the same way, one after the other: {together} fixed together")
    result.status = "fixable" if any(f.fix for f in result.findings) else "explained"
    if is_notebook(chosen.path):
        result.why = [in_cells(chosen_facts.text, sentence) for sentence in result.why]
        result.change = in_cells(chosen_facts.text, result.change) if result.change else result.change
    return result


def _explain_unmapped(result: Explained) -> None:
    """What to change, from the failing line the log prints alone (a
    notebook cell, a file not under PATH): no analysis, only the message."""
    frame, report = result.frame, result.report
    if frame is None or not frame.source:
        return
    try:
        tree = ast.parse(frame.source.strip())
    except SyntaxError:
        return
    where = f"{'in that cell ' if frame.cell else ''}on line {frame.line}"
    roles = report.roles()
    if report.family.name == "input-weight" and is_host(roles.get("input")):
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.args and not isinstance(n.func, ast.Attribute)]
        if calls:
            argument = ast.unparse(calls[0].args[0])
            result.change = f"move `{argument}` to the model's device {where}: `{argument}.to(device)`"
    elif report.family.group == "cuda-only":
        result.change = f'choose the device at run time {where}: `device = torch.device("cuda" if torch.cuda.is_available() else "cpu")` and `.to(device)`'
    elif report.family.name == "numpy":
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "numpy"]
        if calls:
            receiver = ast.unparse(calls[0].func.value)
            result.change = f"copy it to the host first {where}: `{receiver}.detach().cpu().numpy()`"


