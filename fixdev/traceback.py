"""``--traceback LOG``: from a device error's traceback to the line, the why and the fix.

Three steps, each with one home here:

1. **Read the log** (``parse_log``): a terminal paste, a CI log, a Jupyter
   error with ANSI colours, pytest's report; several tracebacks and chained
   exceptions. Each traceback becomes a list of frames (path, line, function,
   the source line the log prints) and the exception text after them.
2. **Recognise the error** (``FAMILIES``): a table, as data, of the messages
   torch has used for device errors over the years, what each says about the
   two devices, and the rule codes whose findings can explain it. The table
   is the only rule knowledge here; a code absent from the registry is not used.
3. **Map and explain** (``analyse``): the innermost frame in a file under
   PATH (never site-packages; paths from another machine match by their
   suffix, and the line the log prints must be the file's line), the engine's
   normal run on that file, and the findings at the failing line or at where
   its values were made (the device-flow analysis says where). Where the
   failing line is inside a library call, the user's frames are walked
   outwards to the one whose line the rules explain. What no rule explains is
   said in plain words, with what to change and where.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterable, Sequence

from .findings import Finding
from .source import LineIndex, Source, SourceError

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
    cell: bool = False  # a Jupyter cell: no file to map to


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


class FileIndex:
    """The Python files under PATH, found by the suffix of a path from any machine."""

    def __init__(self, files: Iterable[Path]) -> None:
        self.by_name: dict[str, list[tuple[Path, list[str]]]] = {}
        for path in files:
            parts = list(path.absolute().parts)
            self.by_name.setdefault(parts[-1], []).append((path, parts))
        self._texts: dict[Path, str | None] = {}

    def text(self, path: Path) -> str | None:
        if path not in self._texts:
            try:
                self._texts[path] = Source.decode(path.read_bytes()).text
            except (OSError, SourceError):
                self._texts[path] = None
        return self._texts[path]

    def map(self, frame: Frame) -> Mapped:
        if frame.cell or is_library(frame.path):
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


def _statement_at(flow, line: int) -> ast.stmt | None:
    """The innermost statement whose own line(s) hold ``line``: a compound
    statement only by its header (``for x in loader:``)."""
    best = None
    stack = list(flow.tree.body)
    while stack:
        node = stack.pop()
        if not isinstance(node, ast.stmt) or not (node.lineno <= line <= (node.end_lineno or node.lineno)):
            continue
        best = node
        children = [child for name in ("body", "orelse", "finalbody", "handlers") for child in getattr(node, name, []) or []]
        for handler in getattr(node, "handlers", []) or []:
            children.extend(handler.body)
        for case in getattr(node, "cases", []) or []:
            children.extend(case.body)
        stack = [child for child in children if isinstance(child, ast.stmt)]
    return best


def _header_nodes(statement: ast.stmt) -> list[ast.AST]:
    """The expressions a statement evaluates itself (not its body's)."""
    if isinstance(statement, (ast.For, ast.AsyncFor)):
        return [statement.target, statement.iter]
    if isinstance(statement, (ast.If, ast.While)):
        return [statement.test]
    if isinstance(statement, (ast.With, ast.AsyncWith)):
        return [item for item in statement.items]
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return list(statement.decorator_list)
    if isinstance(statement, ast.Try):
        return []
    return [statement]


def _expressions(statement: ast.stmt) -> list[ast.expr]:
    found = []
    for root in _header_nodes(statement):
        for node in ast.walk(root):
            if isinstance(node, ast.expr):
                found.append(node)
    return found


def _header_lines(statement: ast.stmt) -> tuple[int, int]:
    nodes = _header_nodes(statement)
    if not nodes or nodes == [statement]:
        return statement.lineno, statement.end_lineno or statement.lineno
    return statement.lineno, max((getattr(n, "end_lineno", None) or statement.lineno) for n in nodes)


def _source(flow, node: ast.AST) -> str:
    try:
        start, end = flow.span(node)
        return " ".join(flow.text[start:end].split())
    except Exception:  # a node without a position
        return ast.unparse(node)


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Facts:
    """Device-flow questions about the failing statement, in plain words."""

    def __init__(self, facts: FileFacts) -> None:
        from .codemods import flow as flow_module

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
        for placement, origin in sorted(where, key=lambda item: _position(item[1])):
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
                return f"comes from the DataLoader (`{_short(_source(self.flow, loop))}`, line {line}) and stays on the CPU"
            return f"comes from `for ... in {_short(_source(self.flow, loop))}` on line {line}, on the CPU"
        if isinstance(origin, ast.Call):
            name = self.flow.qualified_name(origin.func) or ""
            text = _short(_source(self.flow, origin))
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


def _position(node) -> tuple[int, int]:
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
            for node in _expressions(current):
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
    first, last = _header_lines(statement)
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
    statement = _statement_at(facts.flow, line)
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
        for level, related in levels:
            first, last = _header_lines(related)
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
    first, _ = _header_lines(statement)
    for node in _expressions(statement):
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
            other = _short(_source(flow, sink.other))
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
        text = _short(_source(flow, node))
        said = _said_device(report, role)
        if host:
            host_side.append((node, _host_sentence(helper, node, host)))
        elif device and not unknown:
            device_side.append((node, f"`{text}` {helper.device_origin(*device[0])}"))
        elif said is not None and _is_host(said):
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
        names = ", ".join(f"`{_short(_source(flow, node))}`" for node, _ in unknown_side[:3])
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
                why.append(f"one of {names} is on the CPU ({said}); most likely `{_short(_source(flow, node))}`: it is {kept}")
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
                if helper.what(statement.value) is helper.F.What.MODULE or "Parameter" in _source(helper.flow, statement.value).split("(")[0]:
                    return None  # a submodule or a parameter moves with the model
                sets.append((statement, method.name))
    sets.sort(key=lambda item: (item[1] != "__init__", item[0].lineno))
    return (f"self.{target.attr}", sets) if sets else None


def _host_sentence(helper: _Facts, value: ast.expr, origins: list) -> str:
    """``noise` is made by `torch.randn(x.shape)` on line 30 …``: the origin
    bound to the name the line uses comes first (``noise = randn(...) *
    scale`` is about randn), another one is added."""
    flow = helper.flow
    origins = sorted({o for o in origins if o is not None}, key=_position)
    named = [o for o in origins if _bound_name(helper, o, value) is not None]
    origins = named + [o for o in origins if o not in named]
    if not origins:
        return f"`{_short(_source(flow, value))}` is on the CPU"
    subject = _short(_bound_name(helper, origins[0], value) or _source(flow, value))
    sentence = f"`{subject}` {helper.host_origin(origins[0])}"
    for also in origins[1:2]:
        if isinstance(also, ast.AST) and hasattr(also, "lineno"):
            sentence += f" (and from `{_short(_source(flow, also), 40)}`, line {also.lineno}, on the CPU too)"
    return sentence


def _bound_name(helper: _Facts, origin, value: ast.expr) -> str | None:
    """The name a host value has where it was made (``ctx`` for ``ctx =
    torch.zeros(n)``), when the failing expression uses that name."""
    statement = helper.statement_of(origin) if isinstance(origin, ast.AST) else None
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], (ast.Name, ast.Attribute)):
        name = _source(helper.flow, statement.targets[0])
        if any(_source(helper.flow, node) == name for node in ast.walk(value) if isinstance(node, (ast.Name, ast.Attribute))):
            return name
    return None


def _pair(report: Report) -> str:
    devices = report.devices()
    return f"{_spoken(devices[0])} and {_spoken(devices[1])}" if devices else "two devices"


def _unknown_words(helper: _Facts, node: ast.expr, unknown: list, plural: bool = False) -> str:
    """Why the analysis cannot say where a value lives."""
    param = _parameter_origin(unknown)
    if param is not None:
        return f"it is the parameter `{param}`, which comes from the caller"
    they = "they are" if plural else "it is"
    binding = _binding_before(helper, node)
    if binding is not None:
        return f"fixdev cannot see where {they} made (`{_short(_source(helper.flow, binding))}`, line {binding.lineno})"
    return f"fixdev cannot see where {they} made"


def _binding_before(helper: _Facts, node: ast.expr) -> ast.stmt | None:
    """The last statement of the enclosing function, before ``node``'s
    line, that binds ``node``'s name."""
    if not isinstance(node, ast.Name):
        return None
    scope = helper.function_of(node) or helper.flow.tree
    found = None
    for statement in ast.walk(scope):
        if not isinstance(statement, (ast.Assign, ast.For, ast.AnnAssign, ast.AugAssign)) or statement.lineno >= node.lineno:
            continue
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        if any(isinstance(n, ast.Name) and n.id == node.id for target in targets for n in ast.walk(target)):
            if found is None or statement.lineno > found.lineno:
                found = statement
    if isinstance(found, ast.For):
        return None  # its header is the binding; a loop's body is not what made it
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
        target = _source(flow, first)
        host, _, _ = helper.places(first)
        where = f"where it is built (line {host[0].lineno})" if host and hasattr(host[0], "lineno") else f"before line {line}"
        return f"move `{target}` to the GPU {where}: `{target}.to({shown_device})`"
    texts = []
    for node in movable[:3]:
        text = _source(flow, node)
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

    for node in _expressions(statement):
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
    nodes = _expressions(statement)
    subject = None
    if family == "numpy":
        for node in nodes:
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "numpy":
                receiver = _source(flow, node.func.value)
                subject = f"`{receiver}.detach().cpu().numpy()`"
                return [f"`{_short(receiver)}` is on {_spoken(report.roles().get('odd')) or 'the GPU'}"], report.family.change.format(line=line, subject=subject, device="")
        subject = "`.detach().cpu().numpy()`"
    elif family == "deserialize":
        for node in nodes:
            if isinstance(node, ast.Call) and (flow.qualified_name(node.func) or "").endswith("load"):
                subject = f"`torch.load(..., map_location=\"cpu\")` (or the device the program runs on)"
                return [f"`{_short(_source(flow, node))}` loads it"], report.family.change.format(line=line, subject=subject, device="")
        subject = "`map_location=\"cpu\"`"
    elif family in ("no-cuda-build", "no-driver"):
        asks = [n for n in nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "cuda"]
        asks += [n for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith("cuda")]
        subject = '`device = torch.device("cuda" if torch.cuda.is_available() else "cpu")` and `.to(device)`'
        if asks:
            return [f"line {line} asks for CUDA: `{_short(_source(flow, asks[0]))}`"], report.family.change.format(line=line, subject=subject, device="")
        moves = [n for n in nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "to" and n.args]
        if moves:
            target = _short(_source(flow, moves[0].args[0]))
            return [f"line {line} moves to `{target}`, which names CUDA where it is defined"], report.family.change.format(line=line, subject=subject, device="")
    elif family == "index-device":
        for node in nodes:
            if isinstance(node, ast.Subscript):
                table, index = _source(flow, node.value), _source(flow, node.slice)
                subject = f"`{table}[{index}.to({table}.device)]`, or keep `{table}` on the GPU (a buffer)"
                return [f"`{_short(table)}` is indexed with `{_short(index)}`, which is on another device"], report.family.change.format(line=line, subject=subject, device="")
        subject = "`.to(table.device)` on the indices"
    elif family == "data-parallel":
        wrapped = None
        for node in ast.walk(flow.tree):
            if isinstance(node, ast.Call) and (flow.qualified_name(node.func) or "").endswith("DataParallel") and node.args:
                wrapped = node
                break
        other = report.roles().get("other") or "cuda:0"
        if wrapped is not None:
            inner = _source(flow, wrapped.args[0])
            subject = f"wrap `{inner}.to(\"{other}\")` on line {wrapped.lineno}"
            return [f"`{_short(_source(flow, wrapped))}` on line {wrapped.lineno} wraps a model that was not moved to {other}"], report.family.change.format(line=line, subject=subject, device="", other=other)
        subject = f"`model.to(\"{other}\")`"
        return [], report.family.change.format(line=line, subject=subject, device="", other=other)
    try:
        return [], report.family.change.format(line=line, subject=subject or "", device="", other="")
    except (KeyError, IndexError):
        return [], None


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------


Loader = Callable[[Path], FileFacts]


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
        shown = f"the log shows `{_short(m.frame.source or '', 70)}`, the file has `{_short(current, 70) or '(no such line)'}`"
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
                    + (f": `{_short(cells[-1].source)}`" if cells[-1].source else "")
                    + "); --traceback maps .py files only (fixdev --diff NOTEBOOK.ipynb shows the notebook's own findings)"
                )
            else:
                result.problem = f"no frame of the traceback is in a file under PATH (innermost: {frames[-1].path}, line {frames[-1].line})"
        _explain_unmapped(result)
        return result

    family = report.family
    chosen: Mapped | None = None
    chosen_facts: FileFacts | None = None
    for m in user:
        facts = load(m.path)
        if facts.error:
            result.frame, result.path, result.line = m.frame, m.path, m.frame.line
            result.status, result.problem = "error", f"{m.path.as_posix()}: error: {facts.error}"
            return result
        kept = related_findings(facts, m.frame.line, family.codes, family.group)
        at_line = [f for f in kept if facts.line_of(f.start) <= m.frame.line <= facts.line_of(max(f.start, f.end - 1))] if family.group != "cuda-only" else kept
        if kept and (family.group != "cuda-only" or at_line):
            chosen, chosen_facts = m, facts
            result.findings = kept
            break
        if chosen is None:
            chosen, chosen_facts = m, facts  # the innermost, unless an outer frame explains more
            statement = _statement_at(facts.flow, m.frame.line)
            if statement is not None and _explain(report, facts, statement, m.frame.line)[2]:
                chosen = None  # the value came in as a parameter: read the caller
                continue
            break
    if chosen is None:  # walked out of every frame: explain at the innermost
        chosen = user[0]
        chosen_facts = load(chosen.path)
    result.frame, result.path, result.line = chosen.frame, chosen.path, chosen.frame.line
    statement = _statement_at(chosen_facts.flow, chosen.frame.line)
    if statement is not None:
        why, change, _ = _explain(report, chosen_facts, statement, chosen.frame.line)
        result.why.extend(why)
        result.change = change
    inner_user = user[0]
    if inner_user is not chosen:
        result.why.append(f"the error is raised in `{inner_user.frame.function or '?'}` ({inner_user.path.as_posix()}:{inner_user.frame.line}), called from here")
    if family.group == "cuda-only" and len(result.findings) > 1:
        together = "both are" if len(result.findings) == 2 else f"all {len(result.findings)} are"
        result.why.append(f"every line of {chosen.path.as_posix()} that asks for it fails the same way, one after the other: {together} fixed together")
    result.status = "fixable" if any(f.fix for f in result.findings) else "explained"
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
    if report.family.name == "input-weight" and _is_host(roles.get("input")):
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
        # .py files only: a traceback names .py files (a notebook's cells are "Cell In[n]")
        self.index = FileIndex(path for path in files if path.suffix == ".py")
        self.files: dict[Path, _FileFix] = {}
        from .parallel import project_of

        # the files under PATH analysed together, as a run over PATH does
        self.project = project_of(files)

    def load(self, path: Path) -> FileFacts:
        if path in self.files:
            return self.files[path].facts
        from .codemods.flow import FileFlow
        from .config import ConfigError
        from .engine import FixConflictError
        from .registry import SelectionError
        from .runner import engine_for, settings_for

        error, findings, data, source, text = None, [], b"", None, ""
        try:
            data = path.read_bytes()
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

    def explain(self, log_text: str) -> list[Explained]:
        return [analyse(report, self.index, self.load) for report in parse_log(log_text)]

    def fix(self, explained: Sequence[Explained], write: bool) -> None:
        """Apply the kept findings' fixes, file by file, as the engine
        applies any fix (rounds until settled, re-parse check)."""
        from .engine import FixConflictError
        from .runner import engine_for, settings_for
        from .writer import WriteError, write_atomic

        for item in explained:
            if item.path is not None and item.findings:
                entry = self.files[item.path]
                entry.kept.extend(f for f in item.findings if f not in entry.kept)
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

            try:
                outcome = engine_for(settings_for(path, self.overrides), path).fix(original, approve, self.project.for_file(path))
            except FixConflictError as exc:
                entry.error = str(exc)
                continue
            if outcome.text != original:
                entry.fixed, entry.applied = outcome.text, outcome.applied
                if write:
                    try:
                        write_atomic(path, entry.facts.source.encode(outcome.text), expected=entry.data)
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


def _finding_words(facts: FileFacts, finding: Finding) -> str:
    line = facts.line_of(finding.start)
    what = finding.fix.message if finding.fix is not None else finding.message
    return f"{finding.code} [{finding.name}]{' [*]' if finding.fix else ''} {what} (line {line})"


def render_full(item: Explained, run: Run) -> str:
    """One report, as the terminal shows it."""
    from .output import display

    out = []
    where = f"{display(item.path)}:{item.line}: " if item.path is not None else ""
    out.append(f"{where}{item.report.exception}")
    frame = item.frame
    if frame is not None:
        mark = f"{frame.path}, line {frame.line}" if frame.cell else f"File \"{frame.path}\", line {frame.line}" + (f", in {frame.function}" if frame.function else "")
        if item.path is not None and _posix(frame.path) != item.path.as_posix():
            mark += f" → {display(item.path)}"
        out.append(f"  frame: {mark}")
    inner = item.inner
    if inner is not None and frame is not None and inner != frame and (inner.cell or is_library(inner.path) or item.path is None):
        out.append(f"  raised in: {inner.path}, line {inner.line}" + (f", in {inner.function}" if inner.function else ""))
    if item.path is not None and item.line is not None and item.status != "stale":
        number = str(item.line)
        gutter = " " * len(number)
        code = run.index.line(item.path, item.line).rstrip()
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


def render_concise(item: Explained) -> str:
    where = f"{item.path.as_posix()}:{item.line}" if item.path is not None else (item.frame.path + f":{item.frame.line}" if item.frame else "-")
    codes = ", ".join(sorted({f.code for f in item.findings if f.fix}))
    tail = f" [fix: {codes}]" if codes else f" [{item.status}]"
    return f"{where}: {item.report.family.name}: {item.report.exception}{tail}\n"


def as_json(explained: Sequence[Explained], run: Run) -> list[dict]:
    from .output import display, unified_diff

    items = []
    for item in explained:
        facts = run.files[item.path].facts if item.path is not None and item.path in run.files else None
        entry = run.files.get(item.path) if item.path is not None else None
        findings = []
        if facts is not None:
            index = facts.lines
            for finding in item.findings:
                row, column = index.position(finding.start)
                end_row, end_column = index.position(finding.end)
                findings.append(
                    {
                        "code": finding.code,
                        "name": finding.name,
                        "message": finding.message,
                        "filename": display(item.path),
                        "location": {"row": row, "column": column},
                        "end_location": {"row": end_row, "column": end_column},
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
                "diff": unified_diff(item.path, entry.facts.text, entry.fixed) if entry is not None and entry.fixed is not None else None,
            }
        )
    return items


def _loc(index: LineIndex, offset: int) -> dict[str, int]:
    row, column = index.position(offset)
    return {"row": row, "column": column}


def run(log_text: str, paths: Sequence[Path], mode: str, overrides, fmt: str, quiet: bool, exit_zero: bool, color: bool,
        echo: Callable[..., None], excludes: Sequence[str] = (), source: str = "the log") -> int:
    """Print what ``--traceback`` says and return the exit code."""
    import json

    from .output import display, unified_diff

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
            echo(render_full(item, job) if fmt == "full" else render_concise(item), nl=False, err=to_err)
        if fmt == "full":
            for path, entry in job.files.items():
                if entry.fixed is not None:
                    echo(unified_diff(path, entry.facts.text, entry.fixed, color), nl=False, color=color)
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
