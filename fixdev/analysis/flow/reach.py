"""A device variable or flag in reach of a statement (``Reach``, the last step of ``FileFlow.device_at``): one watched run per scope, not one per finding.

``device_at`` asks, for the statement a fix goes in, which device-valued
names are bound there and whether the roots of the config chains and flags the
scope reads (``args.device``, ``if args.cuda:``) are bound. That is the
interpreter's state at the statement. Asked once per finding, a run per
question made a file of n findings cost n runs over the whole scope, and each
answer read every key of the state and every value the run recorded: n² on a
generated file of 45,000 ``x = torch.zeros(3).cuda()`` lines. Here one run
watches every statement of the scope and keeps, for each, only the part of the
state the answer reads: the device-valued keys in the state's own order (ties
go to the first), the roots those keys hang from, ``self.device``, and the
roots the scope's candidates need. To find the device-valued keys without
reading the whole state at every statement, the run's states are ``Tracked``
dicts that keep them as they are written. What does not depend on the state
(the config chains the run recorded, the module's device names, the flags) is
read once per scope.
"""

from __future__ import annotations

import ast

from fixdev.analysis.flow.interpreter import Run
from fixdev.analysis.flow.lattice import MAYBE_UNBOUND, What, kinds_of
from fixdev.analysis.flow.syntax import chain_of, root_of
from fixdev.analysis.flow.sources import flag_places_a_module
from fixdev.analysis.flow.vocabulary import CONFIG_NAMES, DEVICE_NAMES

_DEVICE = What.DEVICE
_EMPTY: dict = {}  # the part of the state most statements keep: nothing (shared, never written)


class Tracked(dict):
    """A state that knows which of its keys hold a device, in the state's own
    order (``devices``), so a statement's device names are read without
    reading the whole state. A key overwritten from another value to a device
    keeps its older place in the state: then ``devices`` is out of order until
    ``ordered()`` reads the state once."""

    __slots__ = ("devices", "unordered")

    @classmethod
    def of(cls, state: dict) -> "Tracked":
        """A tracked copy of ``state``."""
        copy = cls(state)  # dict's own copy: it does not call __setitem__
        if type(state) is cls:
            copy.devices = dict(state.devices)
            copy.unordered = state.unordered
        else:
            copy.devices = {k: None for k, v in state.items() if v.what is _DEVICE}
            copy.unordered = False
        return copy

    def __setitem__(self, key, value) -> None:
        devices = self.devices
        if value.what is _DEVICE:
            if key not in devices:
                if key in self:
                    self.unordered = True
                devices[key] = None
        elif key in devices:
            del devices[key]
        dict.__setitem__(self, key, value)

    def __delitem__(self, key) -> None:
        dict.__delitem__(self, key)
        self.devices.pop(key, None)

    def pop(self, key, *default):
        self.devices.pop(key, None)
        return dict.pop(self, key, *default)

    def _untracked_write(self, *args, **kwargs):
        raise TypeError("a Tracked state is written by item only (the interpreter's way), so that its device keys stay known")

    update = setdefault = popitem = clear = __ior__ = _untracked_write

    def ordered(self) -> dict:
        if self.unordered:
            self.devices = {k: None for k, v in self.items() if v.what is _DEVICE}
            self.unordered = False
        return self.devices


class Single:
    """Watches one statement: the whole state there, joined over every time
    the run reaches it (the state the answer reads, where ``Reach`` cannot
    tell it from one visit)."""

    tracked = None

    def __init__(self, statement: ast.stmt) -> None:
        self.statement = statement
        self.watched: dict | None = None

    def at(self, run, statement: ast.stmt, state: dict, in_loop: bool) -> None:
        if statement is self.statement:
            self.watched = run.join(self.watched, dict(state))


class _Every:
    """Watches every statement of the run's scope (``Reach``'s run)."""

    tracked = staticmethod(Tracked.of)

    def __init__(self, extras: tuple[str, ...]) -> None:
        self.extras = extras
        self.parts: dict[ast.stmt, dict] = {}
        self.whole: dict[ast.stmt, dict] = {}
        self.revisited: set[ast.stmt] = set()

    def at(self, run, statement: ast.stmt, state: dict, in_loop: bool) -> None:
        if in_loop:
            # reached on every pass to the loop's fixpoint: the answer reads the
            # join of those states, and which keys it needs is known only once
            # they are all seen, so the whole state is kept, joined as it comes
            self.whole[statement] = run.join(self.whole.get(statement), dict(state))
            return
        if statement in self.parts:
            self.revisited.add(statement)  # outside loops a statement runs once; if not, ask again alone
            return
        if type(state) is Tracked:
            keys = state.ordered()
        else:  # a state the interpreter made without ``Run.copy``: read it whole (same answer, slower)
            keys = [k for k, v in state.items() if v.what is _DEVICE]
        if not keys and not self.extras:
            self.parts[statement] = _EMPTY
            return
        part = {k: state[k] for k in keys}
        for key in keys:
            if "." in key:
                root = root_of(key)
                if root not in part and root in state:
                    part[root] = state[root]
        for key in self.extras:
            if key not in part and key in state:
                part[key] = state[key]
        self.parts[statement] = part or _EMPTY


def _named(text: str) -> int:
    return 0 if root_of(text) in DEVICE_NAMES or text.rsplit(".", 1)[-1] in DEVICE_NAMES else 1


def _rank(rank: int, text: str, value) -> int:
    _, device, _ = kinds_of(value)
    return rank + (0 if device else 4) + _named(text)


class Reach:
    """The device in reach of each statement of one scope. ``run`` is the
    scope's main run; ``module_run`` and ``module_state`` (the module's main
    run and prepass state) are None for the module itself."""

    def __init__(self, flow, scope, run, module_run, module_state: dict | None) -> None:
        # the flow is not kept: the flow's cache holds this object, and a
        # cycle would leave the file's trees to the cycle collector
        self.scope, self.run = scope, run
        # The candidates that do not come from the state, in the order the
        # answer considers them (the first of the lowest rank wins), each with
        # what it needs of the state: ("absent", key), ("reach", root) or None.
        later: list[tuple[int, str, tuple | None]] = []
        if scope.cls is not None and scope.self_name == "self":
            attribute = flow.classes.attributes(scope.cls).get("device")
            if attribute is not None and attribute.what is What.DEVICE:
                later.append((_rank(0, "self.device", attribute), "self.device", ("absent", "self.device")))
        sources = [(run, False)] + ([(module_run, True)] if module_run is not None else [])
        for source, global_only in sources:
            for node, value in source.values.items():
                if type(node) is not ast.Attribute or value.what is not What.DEVICE or type(node.ctx) is not ast.Load:
                    continue
                chain = chain_of(node)
                if chain is None or root_of(chain) not in CONFIG_NAMES:
                    continue
                if global_only and flow.scope_home(scope, root_of(chain)) is not flow.index.tree:
                    continue
                later.append((_rank(2, chain, value), chain, ("reach", root_of(chain))))
        if module_state is not None:
            # bound once at module level: needs nothing of this state, so only the best counts
            best = None
            for name, value in module_state.items():
                if value.what is What.DEVICE and "." not in name and flow.index.module.counts.get(name, 0) == 1 and flow.scope_home(scope, name) is flow.index.tree:
                    candidate = (_rank(8, name, value), name, None)
                    if best is None or candidate[0] < best[0]:
                        best = candidate
            if best is not None:
                later.append(best)
        flags = list(run.flag_tests)
        if module_run is not None:
            flags += [t for t in module_run.flag_tests if flow.scope_home(scope, root_of(chain_of(t))) is flow.index.tree]
        for test in flags:
            chain = chain_of(test)
            # a flag is the device only where it places a module (issue 25: a
            # --use_cuda that only keeps a feature bank on the CPU is not)
            if chain is not None and flag_places_a_module(flow, chain):
                later.append((16, f'"cuda" if {chain} else "cpu"', ("reach", root_of(chain))))
        # the same text at the same rank under the same need answers the same: keep the first
        self.later = list(dict.fromkeys(later))
        # whether a root outside this scope's locals is in reach does not depend on the state
        self.outside: dict[str, bool] = {}
        extras = {"self.device"} if scope.cls is not None and scope.self_name == "self" else set()
        for _, _, need in self.later:
            if need is not None and need[0] == "reach":
                root = need[1]
                if root in scope.locals:
                    extras.add(root)
                elif root not in self.outside:
                    self.outside[root] = flow.scope_home(scope, root) is flow.index.tree and flow.index.module.counts.get(root, 0) >= 1
        self._extras = tuple(sorted(extras))
        self._watcher: _Every | None = None

    def device(self, flow, statement: ast.stmt) -> str | None:
        """Source text of the device in reach at ``statement``, or None."""
        state = self._state_at(flow, statement)
        scope = self.scope
        best: tuple[int, str] | None = None
        for name, value in state.items():
            if value.what is not What.DEVICE or value.flags & MAYBE_UNBOUND:
                continue
            root = root_of(name)
            if "." not in name and scope.counts.get(name, 0) != 1:
                continue
            if "." in name and (state.get(root) is None and root != scope.self_name):
                continue
            rank = _rank(0, name, value)
            if best is None or rank < best[0]:
                best = (rank, name)
        for rank, text, need in self.later:
            if best is not None and rank >= best[0]:
                continue
            if need is not None:
                kind, key = need
                if kind == "absent" and key in state:
                    continue
                if kind == "reach" and not self._in_reach(state, key):
                    continue
            best = (rank, text)
        return None if best is None else best[1]

    def _in_reach(self, state: dict, root: str) -> bool:
        if root in self.scope.locals:
            value = state.get(root)
            return value is not None and not value.flags & MAYBE_UNBOUND
        return self.outside[root]

    def _state_at(self, flow, statement: ast.stmt) -> dict:
        """The part of the state at ``statement`` the answer reads (all of it
        where only a run of its own can tell)."""
        if self._watcher is None:
            run = self.run
            self._watcher = _Every(self._extras)
            Run(flow, self.scope, run.params, record=False, summaries=True, in_init=run.in_init, watch=self._watcher).run()
        watcher = self._watcher
        if statement in watcher.revisited:
            run = self.run
            alone = Single(statement)
            Run(flow, self.scope, run.params, record=False, summaries=True, in_init=run.in_init, watch=alone).run()
            return alone.watched or {}
        found = watcher.parts.get(statement)
        if found is not None:
            return found
        return watcher.whole.get(statement) or {}
