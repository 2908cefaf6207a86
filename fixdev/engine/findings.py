"""What rules produce, as plain data: findings, fixes and text edits. Kept
free of libcst so that results can be cached and printed without it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True, order=True)
class Edit:
    """Replace ``text[start:end]`` with ``content`` (an insertion when start == end)."""

    start: int
    end: int
    content: str


SAFE = "safe"  # only the device changes: --apply applies it
UNSAFE = "unsafe"  # something else may change too (dtype, RNG stream, state-dict keys, aliasing): --unsafe-fixes
APPLICABILITIES = (SAFE, UNSAFE)


@dataclass(frozen=True)
class Fix:
    """Edits that fix one finding, and whether applying them can change more
    than the device (Ruff's applicability: ``safe`` or ``unsafe``)."""

    edits: tuple[Edit, ...]
    message: str
    applicability: str = SAFE

    @property
    def safe(self) -> bool:
        return self.applicability == SAFE


@dataclass(frozen=True)
class Finding:
    code: str
    name: str
    message: str
    start: int  # character offsets in the text the rule saw
    end: int
    fix: Fix | None = None
    # Where the value a downstream fix moves was made (spans in the same
    # text), when the finding is about a value rather than its making: a
    # finding at each of them whose fix makes the value on the device is the
    # same bug, fixed at its source (one fix per value).
    origins: tuple[tuple[int, int], ...] = ()
    # This finding's fix makes the value made at its span on the device it meets.
    places_value: bool = False


def apply_edits(text: str, edits: Iterable[Edit]) -> str:
    pieces, last = [], 0
    for edit in sorted(edits):
        pieces.append(text[last : edit.start])
        pieces.append(edit.content)
        last = edit.end
    pieces.append(text[last:])
    return "".join(pieces)
