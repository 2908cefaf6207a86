"""Reading a device error's log: a terminal paste, a CI log, a Jupyter error
with ANSI colours, pytest's report; several tracebacks and chained
exceptions. Each traceback becomes a ``Report``: its frames (path, line,
function, the source line the log prints) and the exception after them,
recognised against ``FAMILIES``, a table, as data, of the messages torch has
used for device errors over the years, what each says about the two devices,
and the rule codes whose findings can explain it (the only rule knowledge
here; a code absent from the registry is not used)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence


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


def spoken(device: str | None) -> str | None:
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


def is_host(device: str | None) -> bool:
    return device == "cpu"


def short(text: str, limit: int = 60) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis, for sentences."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
                return (first, second) if not is_host(first) else (second, first)
        if roles.get("odd"):
            return (roles["odd"], "cpu")
        return None

    def meaning(self) -> str:
        values = {k: (spoken(v) if k not in ("argument", "method") else v) or "?" for k, v in self.roles().items()}
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
    return bool(_LIBRARY.search(posix(path)))


def posix(path: str) -> str:
    return path.replace("\\", "/")


def path_parts(path: str) -> list[str]:
    return [part for part in posix(path).split("/") if part not in ("", ".", "~")]


