"""What a value is and where it may live: the lattice the analysis computes in (``What``, placements, ``Value``, join), and the values it builds from parts."""

from __future__ import annotations

import ast
import enum
from dataclasses import dataclass
from typing import Iterable, Iterator, NamedTuple


# ---------------------------------------------------------------------------
# The lattice
# ---------------------------------------------------------------------------


class What(enum.Enum):
    MODULE = "module"  # an nn.Module instance
    TENSOR = "tensor"
    BATCH = "batch"  # a tuple, list or dict of tensors (a loader's batch), with parts
    ARRAY = "array"  # a NumPy array
    DEVICE = "device"  # names a device: torch.device(...), "cuda", x.device
    LOADER = "loader"  # iterating it yields batches
    SCALAR = "scalar"  # a number, string, None, dtype, shape: lives nowhere
    UNKNOWN = "unknown"


class _Named:
    """A placement without parameters."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


HOST = _Named("Host")
UNKNOWN = _Named("Unknown")


@dataclass(frozen=True, slots=True)
class Device:
    """On a device other than the host, named by ``text`` (source of an
    expression, such as ``device`` or ``x.device``; None where nothing in reach
    names it, as after ``.cuda()``). ``home`` is the scope whose names ``text``
    uses: None for text valid anywhere, the ``ast.Module`` for module-level
    names, a ``ClassDef`` for ``self``-based text, a function for its locals."""

    text: str | None
    home: ast.AST | None = None

    def __repr__(self) -> str:
        return f"Device({self.text})"


@dataclass(frozen=True, slots=True)
class SameAs:
    """Wherever ``text`` lives (a parameter, or ``x`` for ``x.device`` when ``x``'s
    place is not known): not known to be on a device."""

    text: str
    home: ast.AST | None = None

    def __repr__(self) -> str:
        return f"SameAs({self.text})"


class Parts(NamedTuple):
    """The inside of a batch, a container or an iterable."""

    elem: "Value"  # any element: iteration, an index not known
    items: tuple = ()  # ((key, Value), ...): known positions (int) or keys (str)


class Instance:
    """The ``ref`` of an instance of a class of this file (``self`` included)."""

    __slots__ = ("cls",)

    def __init__(self, cls: ast.ClassDef) -> None:
        self.cls = cls

    def __eq__(self, other: object) -> bool:
        return type(other) is Instance and other.cls is self.cls

    def __hash__(self) -> int:
        return id(self.cls)


# Value.flags
ZERO_DIM = 1  # may be a 0-dim tensor: a host one combines with device tensors legally
PARAM_FREE = 2  # a module without parameters or buffers: passes its input's device through
MAYBE_UNBOUND = 4  # a name not bound on every path to this point
MOVES_INPUTS = 8  # DataParallel and friends: moves host inputs itself
FOLLOWS_MODULE = 16  # an nn.Parameter or buffer: moves with the module that owns it
_JOIN_ALL = ZERO_DIM | PARAM_FREE | MOVES_INPUTS | FOLLOWS_MODULE  # kept when both sides have it

PENDING = "pending"  # origin of a loader batch's part until a name is bound to it
MAX_PLACES = 8
# Bounds that keep the interpretation finite and cheap: passes over a loop
# body before it is taken as settled, nesting of containers tracked, calls
# of the file's functions inlined within each other.
MAX_ITERATIONS = 4
MAX_PARTS_DEPTH = 3
MAX_INLINE_DEPTH = 2


_SAME = object()  # (``Value.but``: a field not changed)


class Value:
    """What a value is and where it may live. ``parts``: a ``Parts`` for
    batches, containers and iterables; for modules, the frozenset of nodes that
    made the object (to move aliases in place). ``ref``: what a name refers to:
    a qualified name (``"torch.zeros"``), a function or class of this file, an
    ``Instance`` of a class of this file, or ``("instance", qualified name)``
    for an object an imported class made (``nn.Linear(...)``)."""

    __slots__ = ("what", "places", "parts", "ref", "flags")

    def __init__(self, what: What, places: frozenset = frozenset(), parts=None, ref=None, flags: int = 0) -> None:
        self.what = what
        self.places = places
        self.parts = parts
        self.ref = ref
        self.flags = flags

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(other) is not Value:
            return False
        return (
            self.what is other.what
            and self.flags == other.flags
            and self.places == other.places
            and self.parts == other.parts
            and self.ref == other.ref
        )

    def __hash__(self) -> int:
        return hash((self.what, self.places, self.flags))

    def __repr__(self) -> str:
        places = ", ".join(sorted(repr(p) for p, _ in self.places))
        return f"Value({self.what.name}, {{{places}}})"

    def but(self, *, what=_SAME, places=_SAME, parts=_SAME, ref=_SAME, flags=_SAME) -> "Value":
        """This value with the fields given changed."""
        return Value(
            self.what if what is _SAME else what,
            self.places if places is _SAME else places,
            self.parts if parts is _SAME else parts,
            self.ref if ref is _SAME else ref,
            self.flags if flags is _SAME else flags,
        )

    @property
    def placements(self) -> frozenset:
        return frozenset(p for p, _ in self.places)


NO_PLACES: frozenset = frozenset()
UNKNOWN_PLACES = frozenset({(UNKNOWN, None)})
UNKNOWN_VALUE = Value(What.UNKNOWN, UNKNOWN_PLACES)
SCALAR_VALUE = Value(What.SCALAR)
ARRAY_VALUE = Value(What.ARRAY)  # host memory, but not an operand torch checks devices of
DTYPE = "<dtype>"
DTYPE_VALUE = Value(What.SCALAR, ref=DTYPE)  # x.dtype: `.to(x.dtype)` does not move
NOTHING = Value(What.SCALAR)  # the element of an empty container
TENSORISH = (What.TENSOR, What.BATCH, What.UNKNOWN)


def capped(places: frozenset) -> frozenset:
    if len(places) <= MAX_PLACES:
        return places
    return UNKNOWN_PLACES | frozenset(p for p in places if p[0] is HOST)


def join(a: Value | None, b: Value | None) -> Value | None:
    """The least value that may be either."""
    if a is b or b is None:
        return a
    if a is None:
        return b
    # a value or None (or a number): what the value is, where it lives
    if a.what is What.SCALAR and a.parts is None and not a.places and b.what is not What.SCALAR:
        return b if not a.flags & MAYBE_UNBOUND or b.flags & MAYBE_UNBOUND else b.but(flags=b.flags | MAYBE_UNBOUND)
    if b.what is What.SCALAR and b.parts is None and not b.places and a.what is not What.SCALAR:
        return a if not b.flags & MAYBE_UNBOUND or a.flags & MAYBE_UNBOUND else a.but(flags=a.flags | MAYBE_UNBOUND)
    what = a.what if a.what is b.what else What.UNKNOWN
    places = a.places if a.places == b.places else capped(a.places | b.places)
    parts = None
    if isinstance(a.parts, Parts) and isinstance(b.parts, Parts):
        parts = _join_parts(a.parts, b.parts)
    elif isinstance(a.parts, frozenset) and isinstance(b.parts, frozenset):
        parts = a.parts | b.parts
    ref = a.ref if a.ref == b.ref else None
    flags = (a.flags & b.flags & _JOIN_ALL) | ((a.flags | b.flags) & MAYBE_UNBOUND)
    return Value(what, places, parts, ref, flags)


def _join_parts(a: Parts, b: Parts) -> Parts:
    if a == b:
        return a
    elem = b.elem if a.elem is NOTHING else a.elem if b.elem is NOTHING else join(a.elem, b.elem)
    theirs = dict(b.items)
    items = tuple((key, join(value, theirs[key])) for key, value in a.items if key in theirs)
    return Parts(elem, items)


def join_all(values: Iterable[Value | None]) -> Value | None:
    result = None
    for value in values:
        result = join(result, value)
    return result


def join_states(a: dict | None, b: dict | None, untracked=None) -> dict | None:
    """States are dicts from a name (or a ``self.x`` chain) to its Value; None
    is a point no path reaches. A name one side lacks is not bound on that
    path; an attribute chain one side lacks was not assigned there, and holds
    what ``untracked(chain)`` says (unknown without it)."""
    if a is None:
        return b
    if b is None or a is b:
        return a
    result = {}
    for key, value in a.items():
        other = b.get(key)
        if other is None:
            result[key] = _one_sided(key, value, untracked)
        elif other is value:
            result[key] = value
        else:
            result[key] = join(value, other)
    for key, value in b.items():
        if key not in a:
            result[key] = _one_sided(key, value, untracked)
    return result


def _one_sided(key: str, value: Value, untracked) -> Value:
    if "." in key:
        return join(value, untracked(key) if untracked is not None else UNKNOWN_VALUE)
    return value if value.flags & MAYBE_UNBOUND else value.but(flags=value.flags | MAYBE_UNBOUND)


def kinds_of(value: Value) -> tuple[bool, bool, bool]:
    """(may be on the host, may be on a device, may be elsewhere: unknown)."""
    host = device = other = False
    for placement, _ in value.places:
        if placement is HOST:
            host = True
        elif type(placement) is Device:
            device = True
        else:
            other = True
    return host, device, other


def apart(host_side: Value, device_side: Value) -> bool:
    """A finding: ``host_side`` (a tensor, a batch, or a module never moved)
    may be on the host and is on no device (and is not a 0-dim tensor, which
    combines legally); ``device_side`` is on a device on some path and never
    somewhere unknown. A side on the host on one path and on a device on
    another was moved under a condition: if both sides vary they may vary
    together (``if args.cuda:`` moving both), so nothing fires; if only the
    device side varies, its device path fails whatever the condition is. So the
    device side may also be on the host only where the host side is on the host
    on every path."""
    if host_side.flags & ZERO_DIM or (host_side.what not in TENSORISH and host_side.what is not What.MODULE):
        return False
    if device_side.what not in TENSORISH and device_side.what is not What.MODULE:
        return False
    h_host, h_device, h_other = kinds_of(host_side)
    if not h_host or h_device:
        return False
    d_host, d_device, d_other = kinds_of(device_side)
    return d_device and not d_other and not (d_host and h_other)




def parts_depth(value: Value) -> int:
    depth = 0
    while isinstance(value.parts, Parts) and depth <= MAX_PARTS_DEPTH:
        depth += 1
        value = value.parts.elem
    return depth


def container_value(what_of_elements: list[Value], items: tuple, elem: Value) -> Value:
    """A tuple, list or dict value: a BATCH when every element is a tensor or batch."""
    places = frozenset()
    for element in what_of_elements:
        if element.what in TENSORISH:
            places |= element.places
    if what_of_elements and all(e.what in (What.TENSOR, What.BATCH) for e in what_of_elements):
        what = What.BATCH
    elif all(e.what is What.SCALAR for e in what_of_elements):
        what = What.SCALAR
    else:
        what = What.UNKNOWN
    return Value(what, capped(places), Parts(elem, items))


def settle_pending(value: Value, origin: ast.AST) -> Value:
    """A loader batch's part gets the binding it is first bound to as origin."""
    for _, o in value.places:
        if o is PENDING:
            break
    else:
        return value
    places = frozenset((p, origin if o is PENDING else o) for p, o in value.places)
    return value.but(places=places)


def settled_origins(places: frozenset, node: ast.AST) -> tuple:
    return tuple(sorted({node if o is PENDING else o for p, o in places if p is HOST and o is not None}, key=position_of))


def position_of(node: ast.AST) -> tuple[int, int]:
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))


def spread_inputs(inputs: list[tuple[ast.AST, Value]]) -> Iterator[tuple[ast.AST, Value]]:
    """A module's inputs, with the tensors of a tuple or list argument one by
    one (``lstm(x, (h0, c0))``): each must be on the module's device."""
    for node, value in inputs:
        parts = value.parts if isinstance(value.parts, Parts) else None
        if parts is not None and parts.items and value.what is not What.LOADER:
            elements = node.elts if type(node) in (ast.Tuple, ast.List) and len(node.elts) == len(parts.items) else None
            for i, (_, part) in enumerate(parts.items):
                yield (elements[i] if elements is not None else node), part
        else:
            yield node, value


def host_loader() -> Value:
    tensor = Value(What.TENSOR, frozenset({(HOST, PENDING)}))
    batch = Value(What.BATCH, frozenset({(HOST, PENDING)}), Parts(tensor))
    return Value(What.LOADER, NO_PLACES, Parts(batch))
