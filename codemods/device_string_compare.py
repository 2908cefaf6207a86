"""FDV114 device-string-compare: ``x.device == "cpu"`` (always False) → ``x.device.type == "cpu"``."""

from __future__ import annotations

import ast
from typing import NamedTuple

import libcst as cst

from fixdev.engine.ast_reuse import remembered
from fixdev.engine.rule import Edit, Invalid, Rule

from fixdev.analysis import file_analysis as analysis
from fixdev.analysis.flow import DEVICE_OBJECT, FOLLOWS_MODULE, SameAs, What, ast_walk

# Device types torch.device accepts (``torch.device("gpu")`` raises).
DEVICE_TYPES = frozenset("cpu cuda mps xpu hpu npu xla meta mtia ipu lazy vulkan".split())
# Words people write for a device that no torch.device is: the comparison is
# still always false, but which type was meant is a guess, so no fix.
NOT_DEVICE_TYPES = frozenset({"gpu"})
EQUALITY = (ast.Eq, ast.NotEq)
MEMBERSHIP = (ast.In, ast.NotIn)
# Expressions ``.type`` can follow without parentheses.
ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript)
# Methods NumPy arrays lack (NumPy >= 2 arrays have ``.device``, which is the
# string "cpu" there, and share ``.shape``, ``.view``, ``.reshape``...): a
# parameter read with one of these is a tensor, so its ``.device`` is a torch.device.
TENSOR_ONLY_METHODS = frozenset("size dim unsqueeze permute numel cuda cpu detach is_cuda masked_fill contiguous expand new_zeros new_ones new_empty new_full element_size".split())


class Site(NamedTuple):
    """One comparison of a ``torch.device`` with strings."""

    compare: ast.Compare
    device: ast.expr  # the side that is (or may be) a torch.device
    strings: tuple[ast.Constant, ...]  # the string literals it is compared with
    wrapped: ast.Call | None  # ``torch.device("cuda")``, when that is the other side
    maybe_string: bool  # the device side may also hold a string (a ``Union[str, torch.device]`` parameter)
    stringified: ast.Call | None = None  # ``str(device)``, when that is the side compared


class DeviceStringCompare(Rule):
    """
    ## What it does
    Finds a `torch.device` compared with a string: `x.device == "cpu"`,
    `device != "cuda"`, `x.device in ("cuda", "mps")`, where the device side
    is known to be a `torch.device` object: a tensor's (or a parameter's)
    `.device`, `next(model.parameters()).device`, `torch.device(...)`, a
    Lightning or transformers module's `self.device`, or a name or function
    result that the device-flow analysis shows holds one of these on every
    path (`device = get_device()` where `get_device` returns
    `torch.device(...)`), or a field of a function's parameter
    (`params["device"]`, `args.device`, read in place or through one name)
    where the file is a script (its functions have no callers elsewhere),
    every call of the function passes a name whose field the caller has set,
    before the call, only ever to such a device (`params["device"] =
    get_device()`). Also a parameter annotated with `torch.device`
    (alone or beside `str`), which may hold either, and an attribute
    (`self.device`) that `__init__` alone sets to such a parameter (neither
    one whose annotation also allows `None` nor one that defaults to `None`:
    `torch.device(None)` raises). And
    `t.device == torch.device("cuda")`, a tensor's device compared with a
    device that names no index, and so a device that may carry one: built by
    `torch.device(d)` of something other than a literal without an index
    (`device = torch.device(device)`, `torch.device(f"cuda:{rank}")`), or a
    parameter annotated `torch.device`. `str()` of such a device (or of a
    tensor's) compared with a device type that is not the CPU's (`str(device)
    == "cuda"`, never true for `cuda:0`). It compares the device's type instead:
    `x.device.type == "cpu"`; against a string with an index (`"cuda:1"`),
    it compares with `torch.device("cuda:1")`; `str(device) == "cuda"`
    becomes `device.type == "cuda"`.

    ## Why is this bad?
    A `torch.device` never equals a string: `torch.device("cpu") == "cpu"` is
    `False`, so `==` is always false and `!=` always true, and the branch
    meant for one device runs on every device (a CPU-only cast never runs, a
    host table is never moved to the GPU, a CUDA seed is never set). A
    tensor's device on a GPU always has an index (`cuda:0`), so it never
    equals `torch.device("cuda")` either, and its string is `"cuda:0"`,
    never `"cuda"`. Code that passes a device string
    around gets the comparison right, which is how the habit survives.

    ## Example
    ```python
    table = torch.arange(10.0)
    def shift(x):
        if x.device == "cuda":
            return x + table.to(x.device)
        return x + table
    ```

    ## Use instead
    ```python
    table = torch.arange(10.0)
    def shift(x):
        if x.device.type == "cuda":
            return x + table.to(x.device)
        return x + table
    ```

    ## Fix safety
    Always unsafe (applied with `--unsafe-fixes`): the comparison now gives
    the answer it was meant to, so the other branch runs, on the CPU as on a
    GPU, and that branch may have bugs of its own that never ran before (or
    the author may have come to rely on the branch that did). `.type` also
    matches every index: `x.device.type == "cuda"` holds on `cuda:1`. Where the
    side may be a string (a `Union[str, torch.device]` parameter) the fix
    compares `torch.device(device)`, which accepts both.

    ## When it stays silent
    Where the device side may be a string: a variable holding a string on
    some path (`device = "cuda" if ... else "cpu"`), a configuration value
    (`args.device == "cuda"`, unless the field rule above holds: in a
    library module, where a caller stores the field after the call or sets
    it another way, `update()`s the dict, or where the function is also
    passed on as a value, it does not), a parameter without a device annotation
    or one that may be `None` (`Optional[torch.device]`, `= None`), a
    module's or a batch's own `.device` attribute (its class decides what it
    is), a `.device` of something not shown to be a tensor (NumPy >= 2 arrays
    have a `.device`, the string `"cpu"`), an annotated parameter tested
    first (`isinstance(device, str) and device == "cpu"`). Also for
    comparisons that are already right: `str(x.device) == "cpu"`, `x.device.type == "cuda"`,
    `x.device == torch.device("cuda:0")`, `x.device == torch.device("cpu")`
    (a CPU device has no index), `str(x.device) == "cuda:0"`, and a device
    built without an index (`torch.device("cuda" if ok else "cpu")`), whose
    string is `"cuda"` and which equals `torch.device("cuda")`. Reported without a fix: a string that names
    no device type (`"gpu"`), and a membership test whose strings mix
    device types with indexed devices.
    """

    code = "FDV114"
    name = "device-string-compare"
    # The code misjudges where a value lives, so the branch for the other
    # device runs with it: most often a host value then meets a device one.
    group = "mismatch"
    message = "A `torch.device` never equals a string: the comparison always gives the same answer"
    fix_applicability = "unsafe"
    # Every finding compares with a device string literal (maybe inside torch.device(...)).
    trigger = r"""['"](?:cpu|cuda|mps|xpu|hpu|npu|xla|meta|mtia|ipu|lazy|vulkan|gpu)(?::\d+)?['"]"""

    @classmethod
    def screen(cls, screening) -> bool:
        return bool(_sites(analysis.flow_for(screening)))

    VALID = [
        # a string compared with a string: right
        "import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\nif device == 'cuda':\n    torch.cuda.manual_seed(0)\n",
        "import torch\nif args.device == 'cuda':\n    torch.cuda.manual_seed(0)\n",
        "import torch\nx = torch.zeros(3)\nif str(x.device) == 'cpu':\n    pass\n",
        "import torch\nx = torch.zeros(3)\nif x.device.type == 'cuda':\n    pass\n",
        "import torch\nx = torch.zeros(3)\nif x.device == torch.device('cpu'):\n    pass\n",
        "import torch\nx = torch.zeros(3)\nif x.device == torch.device('cuda:0'):\n    pass\n",
        # built without an index: "cuda" on a GPU, equal to torch.device("cuda")
        "import torch\ndev = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\nok = str(dev) == 'cuda' or dev == torch.device('cuda')\n",
        # a parameter whose only tensor-like use NumPy arrays share
        "import torch\ndef f(a):\n    if a.device == 'cpu':\n        return a.shape\n",
        # a plain module's `.device` is whatever its class sets (often a string)
        "import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, device):\n        super().__init__()\n        self.device = device\n    def forward(self, x):\n        if self.device == 'cuda':\n            return x\n        return x\n",
        # the annotation allows a string, and the comparison runs only on one
        "import torch\nfrom typing import Union\ndef f(device: Union[str, torch.device]):\n    if isinstance(device, str) and device == 'cpu':\n        return 1\n",
        "import torch\ndef f(device: str | torch.device):\n    if isinstance(device, str):\n        if device == 'cpu':\n            return 1\n",
        # the field holds a string: right
        "import torch\ndef train(p):\n    if p['device'] == 'cuda':\n        pass\ndef main():\n    p = {}\n    p['device'] = 'cuda'\n    train(p)\nmain()\n",
        # a library: other callers may pass a string
        "import torch\ndef train(p):\n    if p['device'] == 'cuda':\n        pass\ndef main():\n    p = {}\n    p['device'] = torch.device('cuda')\n    train(p)\n",
        # a parameter that may be None: torch.device(None) raises
        "import torch\nfrom typing import Optional\ndef f(x, device: Optional[torch.device] = None):\n    if device == 'cuda':\n        x = x.pin_memory()\n    return x\n",
        "import torch\ndef f(x, device: torch.device = None):\n    if device == 'cuda':\n        x = x.pin_memory()\n    return x\n",
        # an attribute annotated as a string only
        "import torch\nclass R:\n    def __init__(self, device: str):\n        self.device = device\n    def f(self):\n        return self.device == 'cuda'\n",
        # a string on one path, a torch.device on the other
        "import torch\ndevice = torch.device('cuda') if flag else 'cpu'\nif device == 'cpu':\n    pass\n",
    ]
    INVALID = [
        Invalid(
            "import torch\nx = torch.zeros(3)\nif x.device == 'cpu':\n    pass\n",
            "import torch\nx = torch.zeros(3)\nif x.device.type == 'cpu':\n    pass\n",
        ),
        Invalid(
            "import torch\ndef f(x):\n    if x.dim() == 2 and x.device != 'cuda':\n        x = x.cuda()\n    return x\n",
            "import torch\ndef f(x):\n    if x.dim() == 2 and x.device.type != 'cuda':\n        x = x.cuda()\n    return x\n",
        ),
        Invalid(
            "import torch as T\nx = T.ones(2)\nok = x.device == 'cuda:1'\n",
            "import torch as T\nx = T.ones(2)\nok = x.device == T.device('cuda:1')\n",
        ),
        Invalid(
            "import torch\nx = torch.ones(2)\nok = x.device == torch.device('cuda')\n",
            "import torch\nx = torch.ones(2)\nok = x.device.type == 'cuda'\n",
        ),
        Invalid(
            "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\nif device == 'cuda':\n    torch.cuda.manual_seed(0)\n",
            "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\nif device.type == 'cuda':\n    torch.cuda.manual_seed(0)\n",
        ),
        Invalid(
            "import torch\ndef pick():\n    return torch.device('cuda')\ndev = pick()\nfast = dev in ('cuda', 'mps')\n",
            "import torch\ndef pick():\n    return torch.device('cuda')\ndev = pick()\nfast = dev.type in ('cuda', 'mps')\n",
        ),
        Invalid(
            "import torch\nfrom typing import Union\ndef load(device: Union[str, torch.device] = 'cpu'):\n    if device == 'cpu':\n        return 1\n",
            "import torch\nfrom typing import Union\ndef load(device: Union[str, torch.device] = 'cpu'):\n    if torch.device(device).type == 'cpu':\n        return 1\n",
        ),
        Invalid(
            "import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.lin = nn.Linear(2, 2)\n    def forward(self, x):\n        if 'cpu' == next(self.parameters()).device:\n            x = x.float()\n        return self.lin(x)\n",
            "import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.lin = nn.Linear(2, 2)\n    def forward(self, x):\n        if 'cpu' == next(self.parameters()).device.type:\n            x = x.float()\n        return self.lin(x)\n",
        ),
        # a script's function, given a field every caller set to a torch.device
        Invalid(
            "import torch\ndef train(p):\n    device = p['device']\n    if device == 'cuda':\n        pass\ndef main():\n    p = {}\n    p['device'] = torch.device('cuda')\n    train(p)\nmain()\n",
            "import torch\ndef train(p):\n    device = p['device']\n    if device.type == 'cuda':\n        pass\ndef main():\n    p = {}\n    p['device'] = torch.device('cuda')\n    train(p)\nmain()\n",
        ),
        # an attribute set only in __init__ to a Union[str, torch.device] parameter
        Invalid(
            "import torch\nclass R:\n    def __init__(self, device: str | torch.device):\n        self.device = device\n    def f(self):\n        return self.device == 'cuda'\n",
            "import torch\nclass R:\n    def __init__(self, device: str | torch.device):\n        self.device = device\n    def f(self):\n        return torch.device(self.device).type == 'cuda'\n",
        ),
        Invalid(
            "import torch\ndef gpu_id(rank):\n    dev = torch.device(f'cuda:{rank}')\n    return 0 if str(dev) == 'cuda' else -1\n",
            "import torch\ndef gpu_id(rank):\n    dev = torch.device(f'cuda:{rank}')\n    return 0 if dev.type == 'cuda' else -1\n",
        ),
        Invalid(
            "import torch\ndef pick(name='cuda'):\n    device = torch.device(name)\n    return device == torch.device('cuda')\n",
            "import torch\ndef pick(name='cuda'):\n    device = torch.device(name)\n    return device.type == 'cuda'\n",
        ),
        Invalid("import torch\nx = torch.zeros(3)\nif x.device == 'gpu':\n    pass\n", None),
        Invalid("import torch\nx = torch.zeros(3)\nif x.device in ('cpu', 'cuda:1'):\n    pass\n", None),
    ]

    def visit_Module(self, node: cst.Module) -> None:
        flow = analysis.flow_of(self)
        for site in _sites(flow):
            start, end = flow.span(site.compare)
            fix = self._fix(flow, site)
            message = _message(site)
            if fix is None:
                self.report_at(start, end, message)
                continue
            edits, shown = fix
            self.report_at(start, end, message, fix=edits, fix_message=f"Compare the device, not a string: `{shown}`")

    def _fix(self, flow, site: Site):
        """The edits and the comparison they leave, or None where no fix is sure."""
        values = [s.value for s in site.strings]
        if any(v.partition(":")[0] not in DEVICE_TYPES for v in values):
            return None
        indexed = any(":" in v for v in values)
        torch_device = None
        if site.maybe_string or indexed:
            torch_device = self._torch_device(flow, site.compare)
            if torch_device is None:
                return None
        text = flow.text
        start, end = flow.span(site.device)
        if site.maybe_string:
            prefix, suffix = f"{torch_device}(", ")"  # accepts a string or a device
        elif isinstance(site.device, ATOMS):
            prefix, suffix = "", ""
        else:
            prefix, suffix = "(", ")"
        device_text = prefix + text[start:end] + suffix
        edits = [Edit(start, start, prefix)] if prefix else []
        if site.stringified is not None:
            # `str(device) == "cuda"` → `device.type == "cuda"`: the call goes
            call_start, call_end = flow.span(site.stringified)
            return [Edit(call_start, start, prefix), Edit(end, call_end, suffix + ".type")], _shown(site, f"{device_text}.type")
        if not indexed:
            # compare the type: `x.device.type == "cpu"`; `torch.device("cuda")` becomes its string
            edits.append(Edit(end, end, suffix + ".type"))
            if site.wrapped is not None:
                wrapped_start, wrapped_end = flow.span(site.wrapped)
                literal_start, literal_end = flow.span(site.strings[0])
                edits.append(Edit(wrapped_start, wrapped_end, text[literal_start:literal_end]))
            return edits, _shown(site, f"{device_text}.type")
        if site.wrapped is None and len(site.strings) == 1 and isinstance(site.compare.ops[0], EQUALITY):
            # an index: compare with the device it names
            if suffix:
                edits.append(Edit(end, end, suffix))
            literal_start, literal_end = flow.span(site.strings[0])
            edits.append(Edit(literal_start, literal_end, f"{torch_device}({text[literal_start:literal_end]})"))
            return edits, _shown(site, device_text)
        return None  # membership among indexed devices (or mixed ones): which was meant is not sure

    def _torch_device(self, flow, compare: ast.Compare) -> str | None:
        """How to spell ``torch.device`` at ``compare``, through the file's torch
        import (``T.device`` after ``import torch as T``); None where no import
        is sure to be in reach."""
        facts = analysis.of(self)
        statement = _statement_of(flow, compare)
        node = facts.statement_at(flow.span(statement)[0]) if statement is not None else None
        if node is None:
            return None
        spelled = facts.torch_function("device", self, node)
        if spelled is None or spelled[1]:
            return None
        return spelled[0]


def _message(site: Site) -> str:
    always = "True" if isinstance(site.compare.ops[0], (ast.NotEq, ast.NotIn)) else "False"
    if site.stringified is not None:
        return f"`str()` of a device with an index is `cuda:0`, never `cuda`: where the device has one, this is always {always}"
    if site.wrapped is not None and not _tensor_side(site):
        return f"A device with an index (`cuda:0`) never equals one without: where it has one, this is always {always}"
    if site.wrapped is not None:
        return f"A tensor's device on a GPU has an index (`cuda:0`) and never equals one without: this is always {always}"
    if site.maybe_string:
        return f"A `torch.device` never equals a string: where it holds one (a parameter, or an attribute set to one, annotated to allow a string), this is always {always}"
    return f"A `torch.device` never equals a string: this is always {always}"


def _tensor_side(site: Site) -> bool:
    """The device side is a tensor's own ``.device`` (always indexed on a GPU)."""
    return type(site.device) is ast.Attribute and site.device.attr == "device"


def _shown(site: Site, device_text: str) -> str:
    """The fixed comparison, for the fix's message."""
    operator = {ast.Eq: "==", ast.NotEq: "!=", ast.In: "in", ast.NotIn: "not in"}[type(site.compare.ops[0])]
    return f"{device_text} {operator} ..."


def _sites(flow) -> list[Site]:
    """Every comparison of a torch.device with device strings, in source order."""
    found = []
    torch_names = None
    for node in _compares(flow):
        op = node.ops[0]
        left, right = node.left, node.comparators[0]
        if isinstance(op, EQUALITY):
            pairs = [(left, right), (right, left)]
        elif isinstance(op, MEMBERSHIP):
            pairs = [(left, right)]
        else:
            continue
        for device, other in pairs:
            strings, wrapped = _device_strings(flow, other, membership=isinstance(op, MEMBERSHIP))
            if strings is None:
                continue
            if torch_names is None:
                torch_names = _torch_names(flow.tree)
            if _is_str_call(flow, device):
                # str(device) == "cuda": "cuda:0" for a device with an index
                if wrapped is not None or not _unindexed_accelerators(strings):
                    continue
                indexable = _indexable_device(flow, device.args[0], torch_names)
                if indexable is not None:
                    found.append(Site(node, device.args[0], strings, None, indexable, device))
                    break
                continue
            if wrapped is not None:
                # torch.device("cuda") vs a tensor's device: unequal only because of the index
                kind = strings[0].value.partition(":")
                if kind[0] == "cpu" or kind[2]:
                    continue
                indexable = _indexable_device(flow, device, torch_names)
                if indexable is None:
                    continue
                found.append(Site(node, device, strings, wrapped, indexable))
                break
            if _device_object(flow, device):
                found.append(Site(node, device, strings, None, False))
                break
            if _device_annotated_parameter(flow, device, torch_names) or _device_annotated_attribute(flow, device, torch_names):
                found.append(Site(node, device, strings, None, True))
                break
    return sorted(found, key=lambda s: (s.compare.lineno, s.compare.col_offset))


def _is_str_call(flow, node: ast.expr) -> bool:
    """``str(x)``: one positional argument."""
    return (
        type(node) is ast.Call and type(node.func) is ast.Name and node.func.id == "str" and len(node.args) == 1
        and not node.keywords and type(node.args[0]) is not ast.Starred
    )


def _unindexed_accelerators(strings: tuple[ast.Constant, ...]) -> bool:
    """Device types without an index, one of them not the CPU's (``"cuda"``,
    ``("cuda", "mps")``): what ``str()`` of a device with an index never is.
    (``str(x.device) == "cpu"`` is right: the CPU's device has no index.)"""
    kinds = [s.value.partition(":") for s in strings]
    return all(k[0] in DEVICE_TYPES and not k[1] for k in kinds) and any(k[0] not in ("cpu", "meta") for k in kinds)


def _indexable_device(flow, node: ast.expr, torch_names: tuple[set[str], set[str]]) -> bool | None:
    """Whether ``node`` is a torch.device that may carry an index (``cuda:0``),
    and so may be unequal to ``torch.device("cuda")`` and ``str()`` to
    ``"cuda"``: None where the code does not show that; False for a device
    object (a tensor's ``.device``, ``torch.device(d)`` of something other
    than an unindexed literal, directly or through the names bound to it);
    True for a parameter annotated ``torch.device`` (maybe beside ``str``),
    which may also hold a string (the fix then compares ``torch.device(d)``)."""
    if _tensor_device(flow, node):
        return False
    if _built_with_an_index(flow, node):
        return False
    if _device_annotated_parameter(flow, node, torch_names):
        return True
    return None


def _built_with_an_index(flow, node: ast.expr) -> bool:
    """``torch.device(d)`` where ``d`` is not a literal without an index (a
    parameter, ``f"cuda:{rank}"``), or a name the flow shows holds a
    torch.device on every path whose bindings in its function that make one
    all are such calls (``device = torch.device(device)``)."""
    if type(node) is ast.Call:
        return _device_of_anything(flow, node)
    if type(node) is not ast.Name:
        return False
    value = flow.value(node)
    if not (value.what is What.DEVICE and value.ref == DEVICE_OBJECT):
        return False
    scope = flow.function_at(flow.span(node)[0]) or flow.tree
    made = []
    for inner in ast_walk(scope):
        if type(inner) in (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr, ast.For, ast.With):
            targets = inner.targets if type(inner) is ast.Assign else [getattr(inner, "target", None)]
            if any(type(t) is ast.Name and t.id == node.id for t in targets):
                bound = getattr(inner, "value", None)
                if bound is None or type(inner) not in (ast.Assign, ast.AnnAssign):
                    return False
                bound_value = flow.value(bound)
                if bound_value.what is What.DEVICE and bound_value.ref == DEVICE_OBJECT:
                    if not _device_of_anything(flow, bound):
                        return False
                    made.append(bound)
            elif any(type(t) is ast.Name and t.id == node.id and type(t.ctx) is ast.Store for t in ast_walk(inner)):
                return False  # unpacked, or bound some other way
    return bool(made)


def _device_of_anything(flow, call: ast.expr) -> bool:
    """``torch.device(x)`` of one argument that is not a literal (nor a choice
    of literals) without an index: ``torch.device(device)``."""
    if type(call) is not ast.Call or len(call.args) != 1 or call.keywords or flow.qualified_name(call.func) != "torch.device":
        return False
    arg = call.args[0]
    literals = [arg.body, arg.orelse] if type(arg) is ast.IfExp else [arg]
    if all(type(a) is ast.Constant for a in literals):
        return any(type(a.value) is str and ":" in a.value for a in literals)
    return type(arg) is not ast.Starred


def _device_strings(flow, node: ast.expr, membership: bool) -> tuple[tuple[ast.Constant, ...] | None, ast.Call | None]:
    """The device string literals ``node`` is: one literal, or (for ``in``) a
    tuple, list or set of them; or ``torch.device("<literal>")``."""
    if membership:
        if type(node) not in (ast.Tuple, ast.List, ast.Set) or not node.elts:
            return None, None
        if all(_is_device_literal(e) for e in node.elts):
            return tuple(node.elts), None
        return None, None
    if _is_device_literal(node):
        return (node,), None
    if type(node) is ast.Call and len(node.args) == 1 and not node.keywords and _is_device_literal(node.args[0]):
        if flow.qualified_name(node.func) == "torch.device":
            return (node.args[0],), node
    return None, None


def _is_device_literal(node: ast.expr) -> bool:
    if type(node) is not ast.Constant or type(node.value) is not str:
        return False
    kind, colon, index = node.value.partition(":")
    return (kind in DEVICE_TYPES or kind in NOT_DEVICE_TYPES) and (not colon or index.isdigit())


def _device_object(flow, node: ast.expr) -> bool:
    """``node`` holds a torch.device object on every path: the flow says so
    (``torch.device(...)``, a tensor's ``.device``, through names and function
    results), or it is the ``.device`` of a parameter its function reads as a
    tensor with a method NumPy arrays lack."""
    value = flow.value(node)
    if value.what is What.DEVICE and value.ref == DEVICE_OBJECT:
        return True
    return _tensor_parameter_device(flow, node) or _field_given_a_device(flow, node)


def _field_given_a_device(flow, node: ast.expr) -> bool:
    """``device = params["device"]`` (or ``params.device``, or the field read
    in place) where ``params`` is a parameter of a function of a script (no
    other file calls it), every call of that function in the file passes a
    name for it, and each caller stores a ``torch.device`` in that field
    before the call, on every store: what the field holds when read."""
    if type(node) is ast.Name:
        function = flow.function_at(flow.span(node)[0])
        if function is None:
            return False
        bound = [
            s for s in ast_walk(function)
            if type(s) in (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.With, ast.NamedExpr) and any(
                type(t) is ast.Name and t.id == node.id and type(t.ctx) is ast.Store for t in ast_walk(s)
            )
        ]
        if len(bound) != 1 or type(bound[0]) is not ast.Assign or len(bound[0].targets) != 1 or type(bound[0].targets[0]) is not ast.Name:
            return False
        if node.id in _parameters(function):
            return False
        node = bound[0].value
    field = _field(node)
    if field is None:
        return False
    holder, key = field
    function = flow.function_at(flow.span(node)[0])
    if function is None or type(function) is not ast.FunctionDef or function not in flow.tree.body or flow.library_like():
        return False
    arguments = [*function.args.posonlyargs, *function.args.args]
    position = next((i for i, a in enumerate(arguments) if a.arg == holder), None)
    if position is None or _rebinds(function, holder):
        return False
    for inner in ast_walk(function):
        if type(inner) in (ast.Subscript, ast.Attribute) and type(inner.ctx) is not ast.Load and _field(inner) == (holder, key):
            return False  # the function sets the field itself
        if type(inner) is ast.Call and type(inner.func) is ast.Attribute and inner.func.attr in ("update", "setdefault") and type(inner.func.value) is ast.Name and inner.func.value.id == holder:
            return False
    calls, other_uses = [], 0
    for inner in ast_walk(flow.tree):
        if type(inner) is ast.Name and inner.id == function.name and type(inner.ctx) is ast.Load:
            other_uses += 1
        if type(inner) is ast.Call and type(inner.func) is ast.Name and inner.func.id == function.name:
            calls.append(inner)
    if not calls or other_uses != len(calls):
        return False  # passed on as a value, or never called here: its callers are elsewhere
    for call in calls:
        given = call.args[position] if position < len(call.args) and not any(type(a) is ast.Starred for a in call.args[: position + 1]) else next(
            (k.value for k in call.keywords if k.arg == holder), None
        )
        if type(given) is not ast.Name or not _stores_a_device(flow, call, given.id, key):
            return False
    return True


def _field(node: ast.expr) -> tuple[str, str] | None:
    """``(name, key)`` of ``name["key"]`` or ``name.key``."""
    if type(node) is ast.Subscript and type(node.value) is ast.Name and type(node.slice) is ast.Constant and type(node.slice.value) is str:
        return node.value.id, node.slice.value
    if type(node) is ast.Attribute and type(node.value) is ast.Name:
        return node.value.id, node.attr
    return None


def _stores_a_device(flow, call: ast.Call, name: str, key: str) -> bool:
    """In the function (or module) holding ``call``, ``name``'s field ``key``
    is stored before the call, only ever as a torch.device, and ``name`` is
    not bound again after the first such store."""
    scope = flow.function_at(flow.span(call)[0]) or flow.tree
    stores, bound_after = [], False
    for inner in ast_walk(scope):
        if type(inner) is ast.Assign:
            for target in inner.targets:
                if _field(target) == (name, key):
                    stores.append(inner)
        elif type(inner) is ast.Call and type(inner.func) is ast.Attribute and inner.func.attr in ("update", "setdefault", "__setitem__") and type(inner.func.value) is ast.Name and inner.func.value.id == name:
            return False  # filled some other way too
        elif type(inner) in (ast.AugAssign, ast.AnnAssign, ast.Delete) and any(_field(t) == (name, key) for t in ast_walk(inner) if type(t) in (ast.Subscript, ast.Attribute)):
            return False
    if not stores or any((s.lineno, s.col_offset) > (call.lineno, call.col_offset) for s in stores):
        return False
    first = min((s.lineno, s.col_offset) for s in stores)
    for inner in ast_walk(scope):
        if type(inner) is ast.Name and inner.id == name and type(inner.ctx) is ast.Store and first < (inner.lineno, inner.col_offset) < (call.lineno, call.col_offset):
            bound_after = True
    if bound_after:
        return False
    for store in stores:
        value = flow.value(store.value)
        if not (value.what is What.DEVICE and value.ref == DEVICE_OBJECT):
            return False
    return True


def _tensor_device(flow, node: ast.expr) -> bool:
    """``node`` is a tensor's own ``.device`` (a device with an index on a GPU)."""
    if type(node) is not ast.Attribute or node.attr != "device":
        return False
    base = flow.value(node.value)
    return base.what is What.TENSOR or bool(base.flags & FOLLOWS_MODULE) or _tensor_parameter_device(flow, node)


def _tensor_parameter_device(flow, node: ast.expr) -> bool:
    if type(node) is not ast.Attribute or node.attr != "device" or type(node.value) is not ast.Name:
        return False
    name = node.value.id
    function = flow.function_at(flow.span(node)[0])
    if function is None or name not in _parameters(function):
        return False
    # still the parameter's own value where it is compared (the function may rebind it later)
    placements = flow.value(node.value).placements
    if not placements or not all(type(p) is SameAs and p.text == name for p in placements):
        return False
    for inner in ast_walk(function):
        if type(inner) is ast.Attribute and inner.attr in TENSOR_ONLY_METHODS and type(inner.value) is ast.Name and inner.value.id == name:
            return True
    return name in flow.tensor_parameters(function) and _passed_to_a_module(flow, function, name)


def _passed_to_a_module(flow, function, name: str) -> bool:
    """``self.layer(name)``: a module's input, a tensor."""
    for inner in ast_walk(function):
        if type(inner) is ast.Call and inner.args and type(inner.args[0]) is ast.Name and inner.args[0].id == name:
            if flow.what(inner.func) is What.MODULE:
                return True
    return False


def _device_annotated_parameter(flow, node: ast.expr, torch_names: tuple[set[str], set[str]]) -> bool:
    """A parameter annotated with ``torch.device`` (maybe beside ``str``, not
    ``None`` nor defaulting to it: ``torch.device(None)`` raises), never
    rebound in its function: it may hold a string or a device."""
    if type(node) is not ast.Name:
        return False
    function = flow.function_at(flow.span(node)[0])
    if function is None:
        return False
    arg = _parameters(function).get(node.id)
    if arg is None or arg.annotation is None or _rebinds(function, node.id) or _known_string(flow, node):
        return False
    if _may_be_none(function, arg):
        return False
    return any(_names_torch_device(part, torch_names) for part in _annotation_parts(arg.annotation))


def _device_annotated_attribute(flow, node: ast.expr, torch_names: tuple[set[str], set[str]]) -> bool:
    """``self.X`` that ``__init__`` alone sets, to a parameter annotated with
    ``torch.device`` (maybe beside ``str``, not ``None``: ``torch.device(None)``
    raises) that it does not rebind: it may hold a string or a device."""
    if not (type(node) is ast.Attribute and type(node.value) is ast.Name):
        return False
    method = flow.function_at(flow.span(node)[0])
    cls = next((c for c in flow.index.classes if method in c.body), None) if method is not None else None
    if cls is None:
        return False
    positional = [*method.args.posonlyargs, *method.args.args]
    if not positional or positional[0].arg != node.value.id or method.decorator_list:
        return False
    info = flow.index.classes[cls]
    init = info.methods.get("__init__")
    if init is None or info.stores.get(node.attr) != {"__init__"} or node.attr in info.methods:
        return False
    init_self = [*init.args.posonlyargs, *init.args.args]
    if not init_self:
        return False
    stores = [
        s for s in ast_walk(init)
        if type(s) is ast.Assign and any(type(t) is ast.Attribute and t.attr == node.attr and type(t.value) is ast.Name and t.value.id == init_self[0].arg for t in s.targets)
    ]
    if len(stores) != 1 or len(stores[0].targets) != 1 or type(stores[0].value) is not ast.Name:
        return False
    arg = _parameters(init).get(stores[0].value.id)
    if arg is None or arg.annotation is None or _rebinds(init, arg.arg):
        return False
    parts = _annotation_parts(arg.annotation)
    if _may_be_none(init, arg) or _known_string(flow, node):
        return False
    return any(_names_torch_device(part, torch_names) for part in parts)


def _may_be_none(function, arg: ast.arg) -> bool:
    """The parameter may hold ``None``: its annotation allows it (``Optional``,
    ``| None``) or its default is ``None`` (``device: torch.device = None``).
    The fix's ``torch.device(device)`` would raise there."""
    if any(type(p) is ast.Constant and p.value is None for p in _annotation_parts(arg.annotation)) or _mentions_optional(arg.annotation):
        return True
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    defaults = dict(zip([a.arg for a in positional[len(positional) - len(args.defaults):]], args.defaults))
    defaults.update((a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None)
    default = defaults.get(arg.arg)
    return type(default) is ast.Constant and default.value is None


def _mentions_optional(annotation: ast.expr) -> bool:
    if type(annotation) is ast.Constant and type(annotation.value) is str:
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return False
    return any((type(n) is ast.Name and n.id == "Optional") or (type(n) is ast.Attribute and n.attr == "Optional") for n in ast_walk(annotation))


def _known_string(flow, node: ast.Name | ast.Attribute) -> bool:
    """The comparison runs only where ``isinstance(name, str)`` holds: in the
    body of an ``if`` (or conditional expression) testing it, or after it in an
    ``and``. There the string comparison is right."""
    parents = analysis.ast_parents(flow)
    text = node.id if type(node) is ast.Name else ast.unparse(node)
    child, current = node, parents.get(node)
    while current is not None and not isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        if type(current) in (ast.If, ast.IfExp) and child is not current.test and _tests_str(current.test, text):
            in_body = child in current.body if type(current) is ast.If else child is current.body
            if in_body:
                return True
        if type(current) is ast.BoolOp and type(current.op) is ast.And:
            earlier = current.values[: current.values.index(child)] if child in current.values else []
            if any(_tests_str(value, text) for value in earlier):
                return True
        child, current = current, parents.get(current)
    return False


def _tests_str(test: ast.expr, name: str) -> bool:
    """``isinstance(name, str)`` (alone or in an ``and``)."""
    if type(test) is ast.BoolOp and type(test.op) is ast.And:
        return any(_tests_str(value, name) for value in test.values)
    if type(test) is not ast.Call or type(test.func) is not ast.Name or test.func.id != "isinstance" or len(test.args) != 2:
        return False
    target, kinds = test.args
    kinds = kinds.elts if type(kinds) is ast.Tuple else [kinds]
    named = target.id == name if type(target) is ast.Name else type(target) is ast.Attribute and ast.unparse(target) == name
    return named and any(type(k) is ast.Name and k.id == "str" for k in kinds)


def _parameters(function) -> dict[str, ast.arg]:
    args = function.args
    return {a.arg: a for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}


def _rebinds(function, name: str) -> bool:
    """``name`` is assigned (or declared global) anywhere in ``function``'s body."""
    for statement in function.body:
        for inner in ast_walk(statement):
            if type(inner) is ast.Name and inner.id == name and type(inner.ctx) is not ast.Load:
                return True
            if type(inner) in (ast.Global, ast.Nonlocal) and name in inner.names:
                return True
    return False


def _annotation_parts(annotation: ast.expr) -> list[ast.expr]:
    """The alternatives of ``Union[a, b]``, ``Optional[a]``, ``a | b``, a string annotation."""
    if type(annotation) is ast.Constant and type(annotation.value) is str:
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return []
    if type(annotation) is ast.BinOp and type(annotation.op) is ast.BitOr:
        return _annotation_parts(annotation.left) + _annotation_parts(annotation.right)
    if type(annotation) is ast.Subscript:
        head = annotation.value
        last = head.attr if type(head) is ast.Attribute else head.id if type(head) is ast.Name else None
        if last in ("Union", "Optional"):
            inner = annotation.slice
            elements = inner.elts if type(inner) is ast.Tuple else [inner]
            return [part for element in elements for part in _annotation_parts(element)]
        return []
    return [annotation]


def _names_torch_device(node: ast.expr, torch_names: tuple[set[str], set[str]]) -> bool:
    """``torch.device`` through the file's imports (``import torch as t``:
    ``t.device``; ``from torch import device``: ``device``)."""
    modules, devices = torch_names
    if type(node) is ast.Attribute and node.attr == "device" and type(node.value) is ast.Name:
        return node.value.id in modules
    return type(node) is ast.Name and node.id in devices


def _compares(flow) -> list[ast.Compare]:
    """The file's comparisons of two operands, a statement at a time (kept
    across versions by the language server), each statement's breadth first."""
    return [
        node
        for statement in flow.tree.body
        for node in remembered("compares", statement, lambda statement=statement: [n for n in ast_walk(statement) if type(n) is ast.Compare and len(n.ops) == 1])
    ]


def _torch_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """Names the module's imports bind to ``torch`` and to ``torch.device``."""
    modules, devices = set(), set()
    for statement in tree.body:
        found = remembered("torch names", statement, lambda statement=statement: _statement_torch_names(statement))
        modules |= found[0]
        devices |= found[1]
    return modules, devices


def _statement_torch_names(statement: ast.stmt) -> tuple[frozenset, frozenset]:
    modules, devices = set(), set()
    for node in ast_walk(statement):
        if type(node) is ast.Import:
            for alias in node.names:
                if alias.name == "torch" or (alias.asname is None and alias.name.startswith("torch.")):
                    modules.add(alias.asname or "torch")
        elif type(node) is ast.ImportFrom and node.module == "torch" and not node.level:
            devices.update(alias.asname or alias.name for alias in node.names if alias.name == "device")
    return frozenset(modules), frozenset(devices)


def _statement_of(flow, node: ast.AST) -> ast.stmt | None:
    parents = analysis.ast_parents(flow)
    while node is not None and not isinstance(node, ast.stmt):
        node = parents.get(node)
    return node
