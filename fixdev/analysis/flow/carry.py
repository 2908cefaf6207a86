"""A function's runs carried from one version of a file to the next (the
language server, through ``fixdev.engine.ast_reuse``).

An editor's keystroke changes one top-level statement; the others keep their
CPython nodes (``ast_reuse.splice``), and a function's symbolic run (its
summary), prepass and tensor evidence made in the version before serve again
when nothing they read has changed:

- the top-level statement holding the function, and every top-level statement
  that binds a name those statements mention, closed over (what the function
  calls, the classes it makes, the globals it reads, the names those read...),
  are the same nodes in both versions (a statement added that binds such a
  name, or one removed, counts as a change);
- every such name the module's prepass binds (and the attributes of it the
  module's code sets) has an equal value in both versions: module-level code
  that moves a model in place, or returns early, changes what functions see
  without binding anything;
- among the definitions of those statements, the same ones are mutually
  recursive (``Mentions.cyclic``), and a class's helpers that only its
  ``__init__`` calls are the same (its facts read who calls its methods);
- the file-level facts are the same: no project, no error's evidence, no star
  import or ``:=`` anywhere, ``set_default_device`` seen or not alike,
  ``meets_devices`` alike; and neither version has met a recursion between
  runs (``FileFlow.compute``'s budget makes those results depend on the order
  of questions).

Everything else (the runs with call sites' arguments, the module's own run,
sinks' sorting, class facts) is computed anew on every version. Names are
over-approximated (every bare name a statement mentions, every name it may
bind), which costs reuse, never correctness. The language server analyses one
version at a time (its lock), so nothing here is locked.
"""

from __future__ import annotations

import ast
import bisect
from collections import deque

from fixdev.engine.ast_reuse import AstReuse, remembered
from fixdev.analysis.flow.syntax import ast_walk

# Results of at most this many versions are kept (each keeps its FileFlow alive).
_VERSIONS = 3
KINDS = ("sym", "pre")
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _names(unit: ast.stmt) -> tuple[frozenset, frozenset, tuple, bool]:
    """(the bare names ``unit`` mentions, the module-level names it may bind,
    its def and class statements at any depth, whether it star-imports)."""
    mentioned: set[str] = set()
    bound: set[str] = set()
    definitions: list[ast.AST] = []
    star = False
    is_def = type(unit) in _DEFS
    if is_def:
        bound.add(unit.name)
    for node in ast_walk(unit):
        kind = type(node)
        if kind is ast.Name:
            mentioned.add(node.id)
            if not is_def and type(node.ctx) is not ast.Load:
                bound.add(node.id)
        elif kind is ast.alias:
            if node.name == "*":
                star = True
            name = node.asname or node.name.split(".")[0]
            mentioned.add(name)
            if not is_def:
                bound.add(name)
        elif kind in _DEFS:
            definitions.append(node)
            if not is_def:
                bound.add(node.name)
        elif kind is ast.Global or kind is ast.Nonlocal:
            mentioned.update(node.names)
            bound.update(node.names)
        elif not is_def:
            for field in ("name", "rest"):  # except E as name; match patterns
                value = getattr(node, field, None)
                if isinstance(value, str):
                    mentioned.add(value)
                    bound.add(value)
    return frozenset(mentioned), frozenset(bound), tuple(definitions), star


class Units:
    """One version's top-level statements: who binds and who mentions which name."""

    def __init__(self, flow) -> None:
        self.flow = flow
        body = flow.tree.body
        self.present = set(body)
        self.names = {unit: remembered("unit names", unit, lambda unit=unit: _names(unit)) for unit in body}
        self.binders: dict[str, list] = {}
        self.starred = False
        for unit, (_mentioned, bound, _definitions, star) in self.names.items():
            self.starred = self.starred or star
            for name in bound:
                self.binders.setdefault(name, []).append(unit)
        self._reads: dict[ast.stmt, tuple[frozenset, frozenset]] = {}
        self._components: dict | None = None
        self._helpers: dict[ast.ClassDef, frozenset] = {}
        self.verdicts: dict = {}  # FileFlow of a version before -> top-level statement -> refusal

    def reads(self, unit: ast.stmt) -> tuple[frozenset, frozenset]:
        """(the top-level statements ``unit``'s runs may depend on: it, those
        binding a name it mentions, and so on; the names they mention)."""
        found = self._reads.get(unit)
        if found is None:
            closure = {unit}
            names: set[str] = set()
            todo = deque([unit])
            while todo:
                mentioned = self.names[todo.popleft()][0]
                names |= mentioned
                for name in mentioned:
                    for binder in self.binders.get(name, ()):
                        if binder not in closure:
                            closure.add(binder)
                            todo.append(binder)
            found = self._reads[unit] = (frozenset(closure), frozenset(names))
        return found

    def unit_of(self, node: ast.AST) -> ast.stmt | None:
        """The top-level statement holding ``node``."""
        i = bisect.bisect_right(self.flow.top_lines(), node.lineno) - 1
        if i < 0:
            return None
        unit = self.flow.tree.body[i]
        return unit if unit.end_lineno >= node.end_lineno else None

    def cyclic(self) -> dict:
        mentions = self.flow.mentions()
        return mentions.cyclic if mentions is not None else {}

    def component(self, definition: ast.AST) -> frozenset:
        """The functions ``definition`` is mutually recursive with (``Mentions.cyclic``)."""
        if self._components is None:
            mentions = self.flow.mentions()
            groups: dict = {}
            for member, root in (mentions.cyclic if mentions is not None else {}).items():
                groups.setdefault(root, set()).add(member)
            self._components = {member: frozenset(groups[root]) for member, root in (mentions.cyclic if mentions is not None else {}).items()}
        return self._components.get(definition, frozenset())

    def called_from_init(self, cls: ast.ClassDef) -> frozenset:
        """The methods of ``cls`` only its ``__init__`` calls (``ClassFacts.attributes``' helpers)."""
        found = self._helpers.get(cls)
        if found is None:
            found = self._helpers[cls] = self._called_from_init(cls)
        return found

    def _called_from_init(self, cls: ast.ClassDef) -> frozenset:
        info = self.flow.index.classes.get(cls)
        mentions = self.flow.mentions()
        init = info.methods.get("__init__") if info is not None else None
        if init is None or mentions is None:
            return frozenset()
        found = set()
        for name in info.methods:
            occurrences = [caller for _, caller, dotted in mentions.occurrences.get(name, ()) if dotted]
            if occurrences and all(caller is not None and caller.node is init for caller in occurrences):
                found.add(name)
        return frozenset(found)


class Carried:
    """The results kept: ``(kind, function node) -> (result, the FileFlow that made or checked it)``."""

    def __init__(self) -> None:
        self.results: dict[tuple, tuple] = {}
        self.flows: deque = deque()

    def give(self, flow, key: tuple, result) -> None:
        if flow.tangled:
            return
        if not self.flows or self.flows[-1] is not flow:
            if flow in self.flows:
                self.flows.remove(flow)
            self.flows.append(flow)
            while len(self.flows) > _VERSIONS:
                dropped = self.flows.popleft()
                for k in [k for k, (_, f) in self.results.items() if f is dropped]:
                    del self.results[k]
        self.results[key] = (result, flow)

    def take(self, flow, key: tuple):
        """``(result,)`` when the result kept for ``key`` holds in ``flow``, else None."""
        entry = self.results.get(key)
        if entry is None or flow.tangled:
            return None
        return (entry[0],) if refusal(entry[1], flow, key) is None else None


def refusal(before, flow, key: tuple) -> str | None:
    """Why a run of ``key`` made in ``before`` may not hold in ``flow`` (None: it holds)."""
    if before is flow or before.tangled:
        return "tangled"
    if not hasattr(key[1], "lineno"):
        return "module"  # (a module's own tree is new in every version)
    now = units(flow)
    unit = now.unit_of(key[1])
    if unit is None:
        return "changed"
    verdicts = now.verdicts.setdefault(before, {})
    if unit in verdicts:
        return verdicts[unit]
    verdict = _refusal(before, flow, unit)
    if verdict != "busy":
        verdicts[unit] = verdict
    return verdict


def _refusal(before, flow, unit: ast.stmt) -> str | None:
    """``refusal`` of what ``before`` computed in the top-level statement ``unit``."""
    if not _alike(before, flow):
        return "file"
    now, then = units(flow), units(before)
    if unit not in then.present:
        return "changed"
    depends, names = now.reads(unit)
    if not all(d in then.present for d in depends):
        return "reads a change"
    depends_then, names_then = then.reads(unit)
    if not all(d in now.present for d in depends_then):
        return "read a change"
    module = flow.index.module
    read = (names | names_then) & (module.locals | before.index.module.locals)
    if read:
        prepass_then = before.cache.get(("pre", before.tree))
        if not isinstance(prepass_then, dict):
            return "no prepass"
        if ("pre", flow.tree) not in flow.cache and ("pre", flow.tree) in flow._active:  # (FileFlow.compute's stack)
            return "busy"  # asked while the module's prepass is made: it cannot be read yet
        prepass_now = flow.module_prepass()
        # a name, and the attributes of it the module's code sets (`model.device`)
        for name in prepass_then.keys() | prepass_now.keys():
            if name.split(".", 1)[0] in read and prepass_then.get(name) != prepass_now.get(name):
                return f"global {name}"
    definitions = frozenset(d for statement in depends for d in now.names[statement][2])
    for definition in definitions:
        # recursion among them found or lost (a call within a component has no summary)
        if (definition in now.cyclic()) != (definition in then.cyclic()) or now.component(definition) & definitions != then.component(definition) & definitions:
            return "recursion"
        if type(definition) is ast.ClassDef and now.called_from_init(definition) != then.called_from_init(definition):
            return "helpers"
    return None


def _alike(before, flow) -> bool:
    """The file-level facts the runs read are the same in both versions."""
    if before.project is not None or flow.project is not None or before.evidence_places or flow.evidence_places:
        return False
    if before.index.default_device_set != flow.index.default_device_set:
        return False
    if units(before).starred or units(flow).starred:
        return False
    return before.meets_devices() == flow.meets_devices()


def carried(reuse: AstReuse | None, flow) -> Carried | None:
    """The results kept for ``flow``'s versions, when the language server's
    reuse is active and nothing file-wide rules carrying out."""
    if reuse is None or not flow.parsed or flow.project is not None or flow.evidence_places:
        return None
    if flow.text is not None and ":=" in flow.text:
        return None  # (the index finds walrus targets in the text, strings too)
    found = reuse.memo.get(("flow carried",))
    if found is None:
        found = reuse.memo[("flow carried",)] = Carried()
    return found


def through(carried: Carried | None, flow, key: tuple, make):
    """The result kept for ``key`` where it holds in ``flow``, else ``make()``; kept either way."""
    if carried is None:
        return make()
    kept = carried.take(flow, key)
    result = kept[0] if kept is not None else make()
    carried.give(flow, key, result)
    return result


def units(flow) -> Units:
    if flow.carry_units is None:
        flow.carry_units = Units(flow)
    return flow.carry_units
