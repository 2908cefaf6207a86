"""``--traceback LOG``: from a device error's traceback to the line, the why and the fix.

The steps, each with one home:

1. **Read the log** (``parse_log``): a terminal paste, a CI log, a Jupyter
   error with ANSI colours, pytest's report; several tracebacks and chained
   exceptions. Each traceback becomes a list of frames (path, line, function,
   the source line the log prints) and the exception text after them.
2. **Recognise the error** (``FAMILIES``): a table, as data, of the messages
   torch has used for device errors over the years, what each says about the
   two devices, and the rule codes whose findings can explain it. The table
   is the only rule knowledge here; a code absent from the registry is not used.
3. **Map** (``FileIndex``): frames to files under PATH (never
   site-packages; paths from another machine match by their suffix, and the
   line the log prints must be the file's line). ``explain.py`` then runs the
   engine on the file and says why, with the findings that fix it.
4. **Run** (``run``): the errors, explained, and the kept findings' fixes
   applied as the engine applies any fix; printed in every mode and format.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from .findings import Finding
from .notebook import is_notebook
from .source import LineIndex, Source, SourceError

if TYPE_CHECKING:  # explain.py imports this module; it is loaded when a run needs it
    from .explain import Explained, FileFacts

# ---------------------------------------------------------------------------
# The error families
# ---------------------------------------------------------------------------

# Rule codes by what they explain. Codes other helpers may add later are
# listed too: the registry decides which exist.
_MISMATCH = ("FDV107", "FDV101", "FDV102", "FDV103", "FDV106", "FDV111", "FDV112")
_CUDA_ONLY = ("FDV104", "FDV109", "FDV110")


@dataclass(frozen=True)
class Family:
    """One wording of one kind of device error.

    ``group``: ``"mismatch"`` (values on two devices meet at the failing line:
    the findings there, or where those values were made, explain it),
    ``"cuda-only"`` (code that needs CUDA on a machine without it: every
    finding of the family's codes in the file fails the same way, one after
    the other), ``"host-read"`` (a device tensor read on the host).
    Named groups of ``pattern``: ``a``/``b`` (two devices, no roles),
    ``odd``/``other`` (the device of ``argument`` / of the other tensors),
    ``input``/``weight`` (tensor types), ``argument``, ``method``."""

    name: str
    title: str
    pattern: re.Pattern
    group: str
    codes: tuple[str, ...]
    meaning: str  # what the message says, in plain words
    change: str  # what to change when no rule's fix applies; {line}, {subject}, {device}


def _family(name: str, title: str, pattern: str, group: str, codes: tuple[str, ...], meaning: str, change: str) -> Family:
    return Family(name, title, re.compile(pattern), group, codes, meaning, change)


_MOVE = "move {subject} to {device} before line {line}"
FAMILIES: tuple[Family, ...] = (
    _family(
        "same-device", "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
        r"Expected all tensors to be on the same device, but found at least two devices, (?P<a>[\w:]+)(?:,| and) (?P<b>[\w:]+)!"
        r"(?: \(when checking argument for argument (?P<argument>\w+) in method (?P<method>[\w.]+)\))?",
        "mismatch", _MISMATCH,
        "one operation got tensors on two devices, {a} and {b}", _MOVE,
    ),
    _family(
        "same-device", "Expected all tensors to be on the same device, but got index is on cpu, different from other tensors on cuda:0",
        r"Expected all tensors to be on the same device, but got (?P<argument>\w+) is on (?P<odd>[\w:]+), "
        r"different from other tensors on (?P<other>[\w:]+)(?: \(when checking argument in method (?P<method>[\w.]+)\))?",
        "mismatch", _MISMATCH,
        "the argument `{argument}` is on {odd} while the other tensors are on {other}", _MOVE,
    ),
    _family(
        "same-device", "Unhandled FakeTensor Device Propagation for aten.add.Tensor, found two different devices cuda:0, cpu",
        r"Unhandled FakeTensor Device Propagation for (?P<method>[\w.]+), found two different devices (?P<a>[\w:]+), (?P<b>[\w:]+)",
        "mismatch", _MISMATCH,
        "one operation got tensors on two devices, {a} and {b}", _MOVE,
    ),
    _family(
        "backend", "Expected object of backend CPU but got backend CUDA for argument #2 'weight'",
        r"Expected object of backend (?P<other>\w+) but got backend (?P<odd>\w+) for argument #\d+ '(?P<argument>\w+)'",
        "mismatch", _MISMATCH,
        "the operation runs on {other} but its argument `{argument}` is on {odd}", _MOVE,
    ),
    _family(
        "device-type", "Expected object of device type cuda but got device type cpu for argument #1 'self' in call to _th_addmm",
        r"Expected object of device type (?P<other>\w+) but got device type (?P<odd>\w+) for argument #\d+ '(?P<argument>\w+)'"
        r"(?: in call to (?P<method>\w+))?",
        "mismatch", _MISMATCH,
        "the operation runs on {other} but its argument `{argument}` is on {odd}", _MOVE,
    ),
    _family(
        "tensor-type", "Expected object of type torch.cuda.FloatTensor but found type torch.FloatTensor for argument #2 'other'",
        r"Expected object of type (?P<other>torch\.[\w.]+) but found type (?P<odd>torch\.[\w.]+) for argument #\d+ '(?P<argument>\w+)'",
        "mismatch", _MISMATCH,
        "the operation runs on {other} but its argument `{argument}` is on {odd}", _MOVE,
    ),
    _family(
        "input-weight", "Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same",
        r"Input type \((?P<input>torch\.[\w.]+)\) and weight type \((?P<weight>torch\.[\w.]+)\) should be the same"
        r"(?: or input should be a MKLDNN tensor and weight is a dense tensor)?",
        "mismatch", _MISMATCH,
        "a layer's input is on {input} while its weights are on {weight}", _MOVE,
    ),
    _family(
        "numpy", "can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first.",
        r"can't convert (?P<odd>(?:cuda|mps|xpu)(?::\d+)?) device type tensor to numpy",
        "host-read", ("FDV108",),
        "`.numpy()` reads host memory, and this tensor is on {odd}",
        "copy it to the host first on line {line}: {subject}",
    ),
    _family(
        "deserialize", "Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False",
        r"Attempting to deserialize object on (?:a CUDA device|CUDA device \d+) but torch\.cuda\.(?:is_available\(\) is False|device_count\(\) is \d+)",
        "cuda-only", ("FDV105",),
        "the checkpoint was saved from a GPU, and `torch.load` puts its tensors back on that GPU, which this machine lacks",
        "pass `map_location` to `torch.load` on line {line}: {subject}",
    ),
    _family(
        "legacy-type", "type torch.cuda.FloatTensor not available. Torch not compiled with CUDA enabled.",
        r"type (?P<odd>torch\.cuda\.\w+) not available",
        "cuda-only", _CUDA_ONLY,
        "this torch is a CPU-only build, and the code makes a `{odd_raw}`",
        "make the tensor with a factory and `device=` on line {line}: {subject}",
    ),
    _family(
        "no-cuda-build", "Torch not compiled with CUDA enabled",
        r"Torch not compiled with CUDA enabled",
        "cuda-only", _CUDA_ONLY,
        "this torch is a CPU-only build, and the code asks for CUDA",
        "choose the device at run time instead of CUDA on line {line}: {subject}",
    ),
    _family(
        "no-driver", "Found no NVIDIA driver on your system",
        r"Found no NVIDIA driver on your system",
        "cuda-only", _CUDA_ONLY,
        "this machine has no NVIDIA driver (no GPU), and the code asks for CUDA",
        "choose the device at run time instead of CUDA on line {line}: {subject}",
    ),
    _family(
        "index-device", "indices should be either on cpu or on the same device as the indexed tensor (cpu)",
        r"indices should be either on cpu or on the same device as the indexed tensor \((?P<other>[\w:]+)\)",
        "mismatch", ("FDV111", "FDV103", "FDV102", "FDV107"),
        "a tensor on {other} is indexed with indices on another device",
        "put the indices on the indexed tensor's device on line {line}: {subject}",
    ),
    _family(
        "data-parallel", "module must have its parameters and buffers on device cuda:0 (device_ids[0]) but found one of them on device: cpu",
        r"module must have its parameters and buffers on device (?P<other>[\w:]+) \(device_ids\[0\]\) but found one of them on device: (?P<odd>[\w:]+)",
        "mismatch", _MISMATCH,
        "`DataParallel` runs the model on {other}, but a parameter or buffer of it is on {odd}",
        "move the model to {other} before wrapping it in `DataParallel`: {subject}",
    ),
)


def known_families() -> str:
    """The families, one example wording a line, for the 'unrecognised' message."""
    seen, lines = set(), []
    for family in FAMILIES:
        if family.name not in seen or family.name == "same-device":
            seen.add(family.name)
            if "FakeTensor" not in family.title:
                lines.append(f"  {family.name}: {family.title}")
    return "\n".join(lines)


def _device(word: str | None) -> str | None:
    """``CPU``, ``torch.FloatTensor`` → ``cpu``; ``CUDA``, ``torch.cuda.HalfTensor`` → ``cuda``."""
    if word is None:
        return None
    if word.startswith("torch."):
        parts = word.split(".")
        return parts[1] if len(parts) > 2 else "cpu"
    return word.lower() if word.isupper() else word


def _spoken(device: str | None) -> str | None:
    """``cpu`` → the CPU, ``cuda:0`` → the GPU (cuda:0): for sentences."""
    if device is None:
        return None
    if device == "cpu":
        return "the CPU"
    if device == "cuda":
        return "the GPU"
    if device.startswith("cuda:"):
        return f"the GPU ({device})"
    return device


def _is_host(device: str | None) -> bool:
    return device == "cpu"


# ---------------------------------------------------------------------------
# Reading the log
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Frame:
    path: str  # as the log names it; for a notebook cell, "Cell In[4]"
    line: int
    function: str | None
    source: str | None  # the failing source line the log prints, stripped
    cell: bool = False  # a Jupyter cell: mapped to a notebook's code cell by its execution count

    @property
    def execution_count(self) -> int | None:
        """7 for ``Cell In[7]`` and ``<ipython-input-7-3f2a>``; None otherwise."""
        found = re.match(r"^(?:Cell In ?\[\s*(\d+)\s*\]|<ipython-input-(\d+)-)", self.path) if self.cell else None
        return int(found.group(1) or found.group(2)) if found else None


@dataclass
class Report:
    """One recognised device error: its message and the frames that led there
    (outermost first)."""

    family: Family
    match: re.Match
    exception: str  # the one line: "RuntimeError: Input type (...) ..."
    frames: list[Frame]

    def roles(self) -> dict[str, str | None]:
        groups = self.match.groupdict()
        return {key: _device(value) if key not in ("argument", "method") else value for key, value in groups.items()}

    def devices(self) -> tuple[str, str] | None:
        """The two devices the message names, the host one second when it says."""
        roles = self.roles()
        pairs = [(roles.get("a"), roles.get("b")), (roles.get("other"), roles.get("odd")), (roles.get("weight"), roles.get("input"))]
        for first, second in pairs:
            if first and second:
                return (first, second) if not _is_host(first) else (second, first)
        if roles.get("odd"):
            return (roles["odd"], "cpu")
        return None

    def meaning(self) -> str:
        values = {k: (_spoken(v) if k not in ("argument", "method") else v) or "?" for k, v in self.roles().items()}
        values.update({f"{k}_raw": v for k, v in self.match.groupdict().items()})
        try:
            return self.family.meaning.format(**values)
        except (KeyError, IndexError):
            return self.family.meaning


_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_TIMESTAMP = re.compile(r"^\ufeff?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ")  # GitHub Actions raw logs
_PYTEST_E = re.compile(r"^E {1,7}")
_TRACEBACK_START = re.compile(r"Traceback \(most recent call last\)|^_{3,} .+ _{3,}$|^={3,} FAILURES ={3,}$")
_PY_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+)(?:, in (?P<function>.+?))?\s*$')
_IPY_FRAME = re.compile(r"^File (?P<path>\S.*?):(?P<line>\d+)(?:, in (?P<function>[^\s(]+)(?:\(.*\))?)?\s*$")
_IPY_CELL = re.compile(r"^(?:Cell In ?\[(?P<cell>[^\]]*)\], line (?P<line>\d+)|(?P<old><ipython-input-[^>]*>) in (?P<function>\S+?)(?:\(.*\))?)\s*$")
_IPY_OLD_FRAME = re.compile(r"^(?P<path>(?:[~/.]|[A-Za-z]:\\)\S*\.py) in (?P<function>[\w.<>]+)(?:\(.*\))?\s*$")
_IPY_CONTEXT = re.compile(r"^\s*(?P<arrow>-*>)?\s*(?P<line>\d+)(?: (?P<code>.*))?$")
# --tb=short: "path:12: in func"; --tb=long: "path:12:" (then "path:12: RuntimeError" last)
_PYTEST_FRAME = re.compile(r"^(?P<path>[^\s:][^:]*?\.py):(?P<line>\d+):(?: in (?P<function>\S+)| (?P<exception>[\w.]+))?\s*$")
_PYTEST_SOURCE = re.compile(r"^>\s+(?P<code>.*)$")
_CARETS = re.compile(r"^\s*[\^~]+\s*$")


def decode_log(data: bytes) -> str:
    """A log's text: UTF-8 (a BOM dropped), or UTF-16 with its BOM, as
    PowerShell's ``2> error.log`` writes it; undecodable bytes replaced."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", "replace")
    return data.decode("utf-8-sig", "replace")


def clean(text: str) -> list[str]:
    """The log as a terminal shows it: no colours, no CI timestamps, a line
    rewritten with carriage returns (progress bars) read as its last state."""
    lines = []
    for raw in text.replace("\r\n", "\n").split("\n"):
        line = _ANSI.sub("", raw.rsplit("\r", 1)[-1] if "\r" in raw.rstrip("\r") else raw.rstrip("\r"))
        lines.append(_TIMESTAMP.sub("", line).rstrip())
    return lines


@dataclass
class _Block:
    frames: list[Frame] = field(default_factory=list)
    text: list[str] = field(default_factory=list)  # exception text lines, not frames or source


def _blocks(lines: Sequence[str]) -> list[_Block]:
    """Split the log into tracebacks: each a run of frames and the exception
    text after them."""
    blocks = [_Block()]
    pending_source: str | None = None  # pytest's "> code" line, before its location line
    i = 0

    def start() -> _Block:
        block = _Block()
        blocks.append(block)
        return block

    block = blocks[0]
    while i < len(lines):
        line = lines[i]
        i += 1
        if _TRACEBACK_START.search(line):
            block = start()
            pending_source = None
            continue
        frame_match = _PY_FRAME.match(line)
        if frame_match:
            if block.text:  # frames after an exception: a new traceback with no header
                block = start()
            source = None
            if i < len(lines) and lines[i].startswith(" ") and not _PY_FRAME.match(lines[i]) and not _CARETS.match(lines[i]) and lines[i].strip():
                source = lines[i].strip()
                i += 1
                while i < len(lines) and _CARETS.match(lines[i]):
                    i += 1
            block.frames.append(Frame(frame_match["path"], int(frame_match["line"]), frame_match["function"], source))
            continue
        ipython = _IPY_FRAME.match(line) or _IPY_CELL.match(line) or _IPY_OLD_FRAME.match(line)
        if ipython:
            if block.text:
                block = start()
            groups = ipython.groupdict()
            number = int(groups["line"]) if groups.get("line") else None
            source = None
            while i < len(lines):  # the numbered context lines; the arrow marks the failing one
                context = _IPY_CONTEXT.match(lines[i])
                if not context or not lines[i].strip():
                    break
                if context["arrow"]:
                    number = int(context["line"])
                    source = (context["code"] or "").strip() or None
                i += 1
            if number is not None:
                cell = groups.get("cell") is not None or groups.get("old") is not None
                path = f"Cell In[{groups['cell']}]" if groups.get("cell") is not None else groups.get("old") or groups["path"]
                block.frames.append(Frame(path, number, groups.get("function"), source, cell=cell))
            continue
        pytest_source = _PYTEST_SOURCE.match(line)
        if pytest_source:
            pending_source = pytest_source["code"].strip()
            continue
        pytest_frame = _PYTEST_FRAME.match(line)
        if pytest_frame:
            # pytest prints a test's frames and its E lines in one section,
            # the last location after the exception: one traceback per section
            source = pending_source
            pending_source = None
            if i < len(lines) and lines[i].startswith("    ") and not lines[i].startswith("E ") and lines[i].strip():
                source = lines[i].strip()  # --tb=short: the line follows its location
                i += 1
            frame = Frame(pytest_frame["path"], int(pytest_frame["line"]), pytest_frame["function"], source)
            if not block.frames or block.frames[-1] != frame:
                block.frames.append(frame)
            continue
        if line.strip():
            block.text.append(_PYTEST_E.sub("", line).strip())
    return [b for b in blocks if b.frames or b.text]


def parse_log(text: str) -> list[Report]:
    """Every recognised device error in the log, once each, in log order."""
    reports: list[Report] = []
    seen: set[tuple] = set()
    for block in _blocks(clean(text)):
        for index, line in enumerate(block.text):
            for family in FAMILIES:
                match = family.pattern.search(line)
                if match is None:
                    continue
                exception = _exception_line(block.text, index, match)
                key = (family.name, match.group(0), tuple(block.frames))
                if key not in seen:
                    seen.add(key)
                    reports.append(Report(family, match, exception, list(block.frames)))
                break
    # A message also printed on its own (pytest's summary, a print(exc)) is
    # the same error as the traceback that carries it.
    framed = {(r.family.name, r.match.group(0)) for r in reports if r.frames}
    return [r for r in reports if r.frames or (r.family.name, r.match.group(0)) not in framed]


def exception_lines(text: str) -> list[str]:
    """The exceptions a log shows (``ModuleNotFoundError: ...``), for saying
    what it holds when none is a device error."""
    found = []
    for block in _blocks(clean(text)):
        for line in block.text:
            if re.match(r"^(?:[\w.]+\.)?\w+(?:Error|Exception)\b:?", line) and line not in found:
                found.append(line)
    return found


def _exception_line(text: Sequence[str], index: int, match: re.Match) -> str:
    """``RuntimeError: <message>``: the exception's type, where the log gives
    it on that line, and the message from the family's match to the line's end."""
    line = text[index]
    head = line[: match.start()]
    kind = re.match(r"^(?:[\w.]+\.)?(\w+(?:Error|Exception|Warning))\s*:\s*", head)
    message = line[match.start() :].strip()
    return f"{kind.group(1)}: {message}" if kind else message


# ---------------------------------------------------------------------------
# Mapping frames to files under PATH
# ---------------------------------------------------------------------------

_LIBRARY = re.compile(r"(?:^|/)(?:site-packages|dist-packages)/|/lib/python\d[\d.]*/|^<|^/usr/lib/|/\.venv/|/venv/")


def is_library(path: str) -> bool:
    return bool(_LIBRARY.search(_posix(path)))


def _posix(path: str) -> str:
    return path.replace("\\", "/")


def _parts(path: str) -> list[str]:
    return [part for part in _posix(path).split("/") if part not in ("", ".", "~")]


@dataclass
class Mapped:
    frame: Frame
    path: Path | None  # the local file; None when none matches
    problem: str | None = None  # "stale: ..." / "ambiguous: ..."
    line: int | None = None  # a notebook's cell: the line in the program its code cells make

    @property
    def at(self) -> int:
        """The failing line in the text the engine reads (a notebook's program)."""
        return self.line if self.line is not None else self.frame.line


class FileIndex:
    """The Python files under PATH, found by the suffix of a path from any machine."""

    def __init__(self, files: Iterable[Path], notebooks: Iterable[Path] = ()) -> None:
        self.by_name: dict[str, list[tuple[Path, list[str]]]] = {}
        self.notebooks = list(notebooks)
        self._cells: dict[Path, tuple | None] = {}
        for path in files:
            parts = list(path.absolute().parts)
            self.by_name.setdefault(parts[-1], []).append((path, parts))
        self._texts: dict[Path, str | None] = {}

    def text(self, path: Path) -> str | None:
        """The file's text; a notebook's: the program its code cells make."""
        if path not in self._texts:
            if is_notebook(path):
                cells = self.cells(path)
                self._texts[path] = cells[0].code if cells is not None else None
                return self._texts[path]
            try:
                self._texts[path] = Source.decode(path.read_bytes()).text
            except (OSError, SourceError):
                self._texts[path] = None
        return self._texts[path]

    def cells(self, path: Path) -> tuple | None:
        """(the notebook, execution count -> cell number) of a notebook under
        PATH; None for one that cannot be read (its run says why)."""
        if path not in self._cells:
            import json

            from .notebook import Notebook, NotebookError, decode

            try:
                raw = decode(path.read_bytes()).text
                notebook = Notebook.from_json(raw)
                counts = {}
                for number, cell in enumerate(json.loads(raw)["cells"], 1):
                    count = cell.get("execution_count") if cell.get("cell_type") == "code" else None
                    if type(count) is int:
                        counts.setdefault(count, number)
                self._cells[path] = (notebook, counts)
            except (OSError, SourceError, NotebookError, ValueError, RecursionError):
                self._cells[path] = None
        return self._cells[path]

    def map_cell(self, frame: Frame) -> Mapped:
        """A ``Cell In[7]`` frame: the code cell whose execution count is 7 in
        a notebook under PATH, whose line is the line the log shows."""
        from .notebook import CellIndex

        count = frame.execution_count
        found = []  # (notebook path, cell number, program line, agrees)
        for path in self.notebooks if count is not None else ():
            cells = self.cells(path)
            number = cells[1].get(count) if cells is not None else None
            if number is None:
                continue
            notebook = cells[0]
            lines = notebook.cells[number - 1].text.splitlines()
            agrees = 1 <= frame.line <= len(lines) and (frame.source is None or _same_code(lines[frame.line - 1], frame.source))
            firsts = {cell: first for first, cell in CellIndex(notebook.code).marks}
            if number in firsts:  # not a cell left out (another language, a syntax error)
                found.append((path, number, firsts[number] + frame.line - 1, agrees, lines))
        agreeing = [item for item in found if item[3]]
        if len(agreeing) == 1:
            path, number, line, _, _ = agreeing[0]
            return Mapped(frame, path, line=line)
        if len(agreeing) > 1:
            names = ", ".join(f"{p.as_posix()} (cell {n})" for p, n, *_ in agreeing[:3])
            return Mapped(frame, None, problem=f"ambiguous: {frame.path} could be {names}; pass the notebook you mean as PATH")
        if found:
            path, number, _, _, lines = found[0]
            current = lines[frame.line - 1].strip() if 1 <= frame.line <= len(lines) else ""
            shown = f"the log shows `{_short(frame.source or '', 70)}`, the cell has `{_short(current, 70) or '(no such line)'}`"
            where = f"line {frame.line} of cell {number} of {path.as_posix()} ({frame.path})" if len(found) == 1 else f"line {frame.line} of every notebook cell run as {frame.path}"
            return Mapped(frame, None, problem=f"stale: {where} is not the line the log shows: {shown}; the notebook changed since the error; nothing fixed")
        return Mapped(frame, None)

    def map(self, frame: Frame) -> Mapped:
        if frame.cell:
            return self.map_cell(frame)
        if is_library(frame.path):
            return Mapped(frame, None)
        wanted = _parts(frame.path)
        if not wanted:
            return Mapped(frame, None)
        candidates = self.by_name.get(wanted[-1], [])
        if not candidates:
            return Mapped(frame, None)

        def score(parts: list[str]) -> int:
            n = 0
            while n < min(len(parts), len(wanted)) and parts[-1 - n] == wanted[-1 - n]:
                n += 1
            return n

        scored = sorted(((score(parts), path) for path, parts in candidates), key=lambda item: -item[0])
        best = [path for value, path in scored if value == scored[0][0]]
        if frame.source is not None:
            agreeing = [path for path in best if self.line_matches(path, frame)]
            if len(agreeing) == 1:
                return Mapped(frame, agreeing[0])
            if not agreeing and len(best) == 1:
                return Mapped(frame, best[0], problem="stale")
            if not agreeing:
                return Mapped(frame, None, problem=f"stale in every file that could be {frame.path}")
            best = agreeing
        if len(best) > 1:
            names = ", ".join(p.as_posix() for p in best[:3])
            return Mapped(frame, None, problem=f"ambiguous: {frame.path} could be {names}; pass the one you mean as PATH")
        return Mapped(frame, best[0])

    def line_matches(self, path: Path, frame: Frame) -> bool:
        text = self.text(path)
        if text is None:
            return False
        lines = text.splitlines()
        if not 1 <= frame.line <= len(lines):
            return False
        return _same_code(lines[frame.line - 1], frame.source or "")

    def find(self, path: Path, source: str) -> int | None:
        """The line of ``path`` nearest the top that is ``source``, if any."""
        if not source:
            return None
        for number, line in enumerate((self.text(path) or "").splitlines(), 1):
            if _same_code(line, source):
                return number
        return None

    def line(self, path: Path, number: int) -> str:
        text = self.text(path) or ""
        lines = text.splitlines()
        return lines[number - 1] if 1 <= number <= len(lines) else ""


def _same_code(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def changed_lines(old: str, new: str) -> set[int]:
    """Lines of ``new`` that are not lines of ``old`` (1-based)."""
    changed: set[int] = set()
    matcher = difflib.SequenceMatcher(a=old.splitlines(), b=new.splitlines(), autojunk=False)
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            changed.update(range(j1 + 1, j2 + 1))
    return changed


# ---------------------------------------------------------------------------
# From a log to output: what ``fixdev --traceback LOG [PATH...]`` does
# ---------------------------------------------------------------------------


@dataclass
class _FileFix:
    facts: FileFacts
    data: bytes
    kept: list[Finding] = field(default_factory=list)
    fixed: str | None = None
    applied: list[Finding] = field(default_factory=list)
    error: str | None = None


class Run:
    """One ``--traceback`` run: the log, the files under PATH, the engine."""

    def __init__(self, paths: Sequence[Path], overrides, excludes: Sequence[str] = ()) -> None:
        from .discovery import Missing, discover

        self.overrides = overrides
        found = list(discover(paths, excludes))
        self.missing = [item for item in found if isinstance(item, Missing)]
        files = [item for item in found if not isinstance(item, Missing)]
        # a traceback names .py files, and a notebook's cells by their execution count ("Cell In[n]")
        self.index = FileIndex((path for path in files if path.suffix == ".py"), (path for path in files if is_notebook(path)))
        self.files: dict[Path, _FileFix] = {}
        from .parallel import project_of

        # the files under PATH analysed together, as a run over PATH does
        self.project = project_of(files)
        self.told_facts: dict[tuple, FileFacts] = {}  # (path, evidence) -> the file as the error's message places it

    def load(self, path: Path, told: Sequence[tuple] = ()) -> FileFacts:
        """The file's findings and flow; with ``told`` (``explain.Told.items``),
        as the error's message places values the analysis could not."""
        if told:
            return self._load_told(path, tuple(told))
        if path in self.files:
            return self.files[path].facts
        from .codemods.flow import FileFlow
        from .config import ConfigError
        from .explain import FileFacts
        from .engine import FixConflictError
        from .registry import SelectionError
        from .runner import engine_for, settings_for

        error, findings, data, source, text = None, [], b"", None, ""
        try:
            data = path.read_bytes()
            if is_notebook(path):  # the engine reads the program its code cells make, as for --apply nb.ipynb
                from .notebook import Notebook, decode

                source = decode(data)
                text = Notebook.from_json(source.text).code
            else:
                source = Source.decode(data)
                text = source.text
            findings = engine_for(settings_for(path, self.overrides), path).lint(text, self.project.for_file(path))
        except OSError as exc:
            error = f"cannot read: {exc.strerror or exc}"
        except (SourceError, ConfigError, SelectionError, FixConflictError) as exc:
            error = str(exc)
        except RecursionError:
            error = "code is nested too deeply to analyse"
        except Exception as exc:  # a bug in a rule costs this file, not the run
            error = f"internal error, file left unchanged ({type(exc).__name__}: {exc}); please report it"
        facts = FileFacts(path, text, source, findings, FileFlow(text, project=self.project.for_file(path)), LineIndex(text), error)
        self.files[path] = _FileFix(facts, data)
        return facts

    def _load_told(self, path: Path, told: tuple) -> FileFacts:
        from .codemods.flow import Evidence, FileFlow
        from .explain import FileFacts
        from .runner import engine_for, settings_for

        key = (path, told)
        if key not in self.told_facts:
            plain = self.load(path)
            evidence = Evidence(self.project.for_file(path), plain.text, told)
            try:
                findings = engine_for(settings_for(path, self.overrides), path).lint(plain.text, evidence, triggers=False)
            except Exception:  # the plain run read this file; evidence that breaks a rule is dropped
                return plain
            self.told_facts[key] = FileFacts(path, plain.text, plain.source, findings, FileFlow(plain.text, project=evidence), plain.lines, plain.error)
        return self.told_facts[key]

    def fix(self, explained: Sequence[Explained], write: bool) -> None:
        """Apply the kept findings' fixes, file by file, as the engine
        applies any fix (rounds until settled, re-parse check)."""
        from .engine import FixConflictError
        from .runner import engine_for, settings_for
        from .writer import WriteError, write_atomic

        told: dict[Path, list[tuple]] = {}  # what the messages placed, per file, for the engine's flow
        for item in explained:
            if item.path is not None and item.findings:
                entry = self.files[item.path]
                entry.kept.extend(f for f in item.findings if f not in entry.kept)
                told.setdefault(item.path, []).extend(t for t in item.told if t not in told.get(item.path, ()))
        for path, entry in self.files.items():
            if not entry.kept or entry.facts.error:
                continue
            original = entry.facts.text
            wanted = {(f.code, f.start, f.end) for f in entry.kept}
            changed_cache: dict[str, set[int]] = {}

            def approve(text: str, finding: Finding, original=original, wanted=wanted, cache=changed_cache) -> bool:
                if text == original:
                    return (finding.code, finding.start, finding.end) in wanted
                # A later round: a fix on code an approved fix just wrote
                # composes with it (torch.zeros(x.shape).cuda()); others wait.
                if text not in cache:
                    cache.clear()
                    cache[text] = changed_lines(original, text)
                line = LineIndex(text).position(finding.start)[0]
                return line in cache[text]

            project = self.project.for_file(path)
            if told.get(path):
                from .codemods.flow import Evidence

                # the first round's text only: positions in later rounds' text say nothing
                project = Evidence(project, original, _consistent(told[path]))
            try:
                outcome = engine_for(settings_for(path, self.overrides), path).fix(original, approve, project, triggers=not told.get(path))
            except FixConflictError as exc:
                entry.error = str(exc)
                continue
            except Exception as exc:  # a bug in a rule costs this file, not the run (as in load)
                entry.error = f"internal error, file left unchanged ({type(exc).__name__}: {exc}); please report it"
                continue
            if outcome.text != original:
                entry.fixed, entry.applied = outcome.text, outcome.applied
                if write:
                    try:
                        written = outcome.text
                        if is_notebook(path):  # only the changed cells' sources, as --apply writes a notebook
                            from .notebook import Notebook

                            notebook = Notebook.from_json(entry.facts.source.text)
                            written = notebook.to_json(notebook.changed_sources(outcome.text))
                        write_atomic(path, entry.facts.source.encode(written), expected=entry.data)
                    except (WriteError, SourceError) as exc:
                        entry.error = str(exc)
        for item in explained:
            if item.path is None or item.status not in ("fixable", "explained"):
                continue
            entry = self.files[item.path]
            if entry.error:
                item.status, item.problem = "error", f"{item.path.as_posix()}: error: {entry.error}"
            elif write and any(f in entry.applied for f in item.findings):
                item.status = "fixed"


def _consistent(told: Sequence[tuple]) -> list[tuple]:
    """Several errors' evidence for one file: an expression two of them
    place apart is placed by neither."""
    places: dict[tuple, set[str]] = {}
    for span, placement, _origin in told:
        places.setdefault(tuple(span), set()).add(placement)
    return [item for item in told if len(places[tuple(item[0])]) == 1]


def _finding_words(facts: FileFacts, finding: Finding) -> str:
    what = finding.fix.message if finding.fix is not None else finding.message
    return f"{finding.code} [{finding.name}]{' [*]' if finding.fix else ''} {what} ({_line_words(facts.path, facts.text, facts.line_of(finding.start))})"


def _cell_row(path: Path, text: str, line: int) -> tuple[int | None, int]:
    """(cell, row) of ``line`` of a notebook's program; (None, line) for a file."""
    if not is_notebook(path) or not text:
        return None, line
    from .notebook import CellIndex

    index = CellIndex(text)
    cell, row, _ = index.locate(index.lines.starts[min(line, len(index.lines.starts)) - 1])
    return cell, row


def _line_words(path: Path, text: str, line: int) -> str:
    cell, row = _cell_row(path, text, line)
    return f"line {row}" if cell is None else f"line {row} of cell {cell}"


def _where(run: "Run", path: Path, line: int) -> str:
    """``train.py:12``, or ``nb.ipynb:cell 3:4`` in a notebook."""
    from .output import display

    cell, row = _cell_row(path, run.index.text(path) or "", line)
    return f"{display(path)}:{row}" if cell is None else f"{display(path)}:cell {cell}:{row}"


def render_full(item: Explained, run: Run) -> str:
    """One report, as the terminal shows it."""
    from .output import display

    out = []
    where = f"{_where(run, item.path, item.line)}: " if item.path is not None else ""
    out.append(f"{where}{item.report.exception}")
    frame = item.frame
    if frame is not None:
        mark = f"{frame.path}, line {frame.line}" if frame.cell else f"File \"{frame.path}\", line {frame.line}" + (f", in {frame.function}" if frame.function else "")
        if item.path is not None and _posix(frame.path) != item.path.as_posix():
            cell = _cell_row(item.path, run.index.text(item.path) or "", item.line or 1)[0]
            mark += f" → {display(item.path)}" + (f" (cell {cell})" if cell is not None else "")
        out.append(f"  frame: {mark}")
    inner = item.inner
    if inner is not None and frame is not None and inner != frame and (inner.cell or is_library(inner.path) or item.path is None):
        out.append(f"  raised in: {inner.path}, line {inner.line}" + (f", in {inner.function}" if inner.function else ""))
    if item.path is not None and item.line is not None and item.status != "stale":
        number = str(_cell_row(item.path, run.index.text(item.path) or "", item.line)[1])
        gutter = " " * len(number)
        code = run.index.line(item.path, item.line).rstrip()
        if is_notebook(item.path):
            from .notebook import CellIndex

            text = run.index.text(item.path) or ""
            code = CellIndex(text).shown_line(LineIndex(text).offset(item.line, 1)).rstrip()
        out.extend([f"  {gutter} |", f"  {number} | {code}", f"  {gutter} |"])
    elif frame is not None and frame.source:
        out.append(f"    {frame.source}")
    out.append(f"  error: {item.report.meaning()}")
    for sentence in item.why:
        out.append(f"  why: {sentence}")
    if item.problem:
        out.append(f"  note: {item.problem}")
    facts = run.files[item.path].facts if item.path is not None and item.path in run.files else None
    fixes = [f for f in item.findings if f.fix is not None]
    if facts is not None:
        for finding in item.findings:
            out.append(f"  {'fix' if finding.fix else 'finding'}: {_finding_words(facts, finding)}")
    if not fixes and item.change and item.status not in ("stale", "error", "ambiguous"):
        out.append(f"  change: {item.change}")
    return "\n".join(out) + "\n\n"


def render_concise(item: Explained, run: "Run") -> str:
    where = _where(run, item.path, item.line) if item.path is not None else (item.frame.path + f":{item.frame.line}" if item.frame else "-")
    codes = ", ".join(sorted({f.code for f in item.findings if f.fix}))
    tail = f" [fix: {codes}]" if codes else f" [{item.status}]"
    return f"{where}: {item.report.family.name}: {item.report.exception}{tail}\n"


def as_json(explained: Sequence[Explained], run: Run) -> list[dict]:
    from .output import code_diff, display, index_for

    items = []
    for item in explained:
        facts = run.files[item.path].facts if item.path is not None and item.path in run.files else None
        entry = run.files.get(item.path) if item.path is not None else None
        findings = []
        if facts is not None:
            index = index_for(item.path, facts.text)  # a notebook's positions are its cells'
            for finding in item.findings:
                findings.append(
                    {
                        "code": finding.code,
                        "name": finding.name,
                        "message": finding.message,
                        "filename": display(item.path),
                        "location": _loc(index, finding.start),
                        "end_location": _loc(index, finding.end),
                        "fix": None
                        if finding.fix is None
                        else {
                            "applicability": finding.fix.applicability,
                            "message": finding.fix.message,
                            "applied": bool(entry and finding in entry.applied and item.status == "fixed"),
                            "edits": [
                                {"content": e.content, "location": _loc(index, e.start), "end_location": _loc(index, e.end)} for e in finding.fix.edits
                            ],
                        },
                    }
                )
        frame = item.frame
        items.append(
            {
                "error": item.report.exception,
                "family": item.report.family.name,
                "devices": list(item.report.devices() or ()),
                "meaning": item.report.meaning(),
                "frame": None
                if frame is None
                else {"log_path": frame.path, "line": frame.line, "function": frame.function, "source": frame.source, "file": display(item.path) if item.path else None},
                "status": item.status,
                "explanation": item.why,
                "change": item.change if not any(f.fix for f in item.findings) else None,
                "problem": item.problem,
                "findings": findings,
                "diff": code_diff(item.path, entry.facts.text, entry.fixed) if entry is not None and entry.fixed is not None else None,
            }
        )
    return items


def _loc(index, offset: int) -> dict[str, int]:
    from .output import _location

    return _location(index, offset)


def run(log_text: str, paths: Sequence[Path], mode: str, overrides, fmt: str, quiet: bool, exit_zero: bool, color: bool,
        echo: Callable[..., None], excludes: Sequence[str] = (), source: str = "the log") -> int:
    """Print what ``--traceback`` says and return the exit code."""
    import json

    from .output import code_diff, display

    from .explain import analyse

    reports = parse_log(log_text)
    if not reports:
        shown = exception_lines(log_text)
        said = f" (it shows: {_short(shown[-1], 100)})" if shown else ""
        echo(f"fixdev: error: no device error recognised in the log{said}. Known error families:\n" + known_families(), err=True)
        return 2
    job = Run(paths, overrides, excludes)
    for missing in job.missing:
        echo(f"{display(missing.path)}: error: {missing.message}", err=True)
    explained = [analyse(report, job.index, job.load) for report in reports]
    if mode != "check":
        job.fix(explained, write=mode == "apply")
    else:
        job.fix(explained, write=False)
    to_err = mode != "check"
    if fmt == "json":
        echo(json.dumps(as_json(explained, job), indent=2))
    else:
        for item in explained:
            echo(render_full(item, job) if fmt == "full" else render_concise(item, job), nl=False, err=to_err)
        if fmt == "full":
            for path, entry in job.files.items():
                if entry.fixed is not None:
                    echo(code_diff(path, entry.facts.text, entry.fixed, color), nl=False, color=color)
    if not quiet and fmt != "json":
        echo(_summary(explained, job, mode, source), err=True)
    if job.missing or any(item.status in ("stale", "error", "ambiguous") for item in explained):
        return 2
    if exit_zero:
        return 0
    if mode == "apply":
        return 0 if all(item.status == "fixed" for item in explained) else 1
    return 1


def _summary(explained: Sequence[Explained], job: Run, mode: str, source: str) -> str:
    n = len(explained)
    fixed_files = sum(1 for entry in job.files.values() if entry.fixed is not None)
    with_fix = sum(1 for item in explained if item.status in ("fixable", "fixed"))
    failed = sum(1 for item in explained if item.status in ("stale", "error", "ambiguous"))
    errors = "1 device error" if n == 1 else f"{n} device errors"
    verb = {"check": "fixable with --apply", "diff": "would be fixed", "apply": "fixed"}[mode]
    files = f" in {fixed_files} file{'s' if fixed_files != 1 else ''}" if fixed_files else ""
    tail = f"; {failed} not processed (see the notes)" if failed else ""
    return f"{errors} in {source}: {with_fix} {verb}{files}; {n - with_fix - failed} without a fix{tail}."
