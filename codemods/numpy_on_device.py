"""FDV108 numpy-on-device: ``t.numpy()`` of a tensor that may live on a device → ``t.cpu().numpy()``."""

from __future__ import annotations

import ast
import re

import libcst as cst

from fixdev.engine.rule import Invalid, Rule

from fixdev.analysis import file_analysis as analysis
from fixdev.analysis.flow import FOLLOWS_MODULE, HOST, Device, SameAs, What, ast_walk

# Expressions a `.cpu()` can follow without parentheses.
ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript)
# Sinks this rule fixes: a value that may live on a device read as an array,
# and a tensor whose place is not shown ("numpy-relative": `.cpu()` is right
# wherever it lives).
SINK_KINDS = ("numpy", "numpy-relative")
# What code that names or moves to a device holds.
DEVICE_CODE = re.compile(r"\.(?:to|cuda)\s*\(|device")
RELATIVE_MESSAGE = "Tensor that may live on a device (the code does not show where) is read as a NumPy array; copy it to the host first"
# torch.nn.utils.rnn.pack_padded_sequence: its `lengths` (second argument)
# must be a CPU tensor (or a list), as its docstring says, since torch 1.7
PACKING = "pack_padded_sequence"
PACKING_NAME = "torch.nn.utils.rnn.pack_padded_sequence"
PACKING_MESSAGE = "`pack_padded_sequence` takes `lengths` only from the CPU; a tensor that may live on a device raises there: copy it to the host"
# Context managers and decorators under which no tensor records a gradient.
NO_GRAD = frozenset({"no_grad", "inference_mode"})


class NumpyOnDevice(Rule):
    """
    ## What it does
    Finds `t.numpy()`, `np.array(t)` and `np.asarray(t)` (also
    `np.asanyarray`, `np.copy`, and any other NumPy function given the tensor
    first, which reads it as an array: `np.isnan(t)`, `np.where(a == b)`) where
    the device-flow analysis shows `t` may live on a device: it was moved
    there (`.to(device)`, `.cuda()`, on some path), made there (`device=`), or
    is the output or a parameter of a model that was. Also where the code
    shows `t` is a tensor but not where it lives (annotated `Tensor`, made by
    a torch operation or a model from values the code does not place, a
    parameter or local name used as only a tensor is: `x.size(0)`,
    `x.unsqueeze(1)`, passed first to a torch operation), in a file that
    meets devices (a library, or code that names or moves to one): the copy
    is right wherever it lives. It copies the tensor to the host first:
    `t.cpu().numpy()`, `np.array(t.cpu())`; and `t.detach().cpu().numpy()`
    where `t` may require grad: it comes from a model (its output or a
    parameter), from a `requires_grad=True` factory or from something the
    analysis does not show to be a plain tensor, it was not detached on the
    way (`.detach()`, `.data`, also where its name is bound), and the read is not inside `torch.no_grad()`
    or `torch.inference_mode()` (a `with` block or a decorator).

    Also the other host-only read: `nn.utils.rnn.pack_padded_sequence(x,
    lengths)`, whose `lengths` must be a CPU tensor (or a list) since torch
    1.7, where `lengths` is a tensor the flow shows may live on a device, or,
    in a file that meets devices, a tensor whose place is not shown (made by
    a torch operation, a parameter annotated `torch.Tensor`):
    `pack_padded_sequence(x, lengths.cpu(), ...)`, right wherever it lives.

    ## Why is this bad?
    NumPy arrays live in host memory. On a GPU, `t.numpy()` raises
    `TypeError: can't convert cuda:0 device type tensor to numpy. Use
    Tensor.cpu() to copy the tensor to host memory first.` (and
    `np.array(t)` raises the same). Code written and tested on a CPU never
    sees it. `pack_padded_sequence` given lengths on a GPU raises
    `'lengths' argument should be a 1D CPU int64 tensor, but got 1D cuda:0
    Long tensor`.

    ## Example
    ```python
    model = Net().to(device)
    with torch.no_grad():
        scores = model(images.to(device))
        predictions = scores.argmax(1).numpy()
    ```

    ## Use instead
    ```python
    model = Net().to(device)
    with torch.no_grad():
        scores = model(images.to(device))
        predictions = scores.argmax(1).cpu().numpy()
    ```

    ## Fix safety
    On the host `t.cpu()` is `t` itself and `t.detach()` shares its memory,
    so a CPU run is unchanged, and the array still shares memory with the
    tensor. On a GPU the array is a copy: writing into it no longer changes
    the tensor (on a GPU it could not before). `lengths.cpu()` is what
    packing reads on the host anyway (it copies them to int64 itself).

    ## When it stays silent
    When `t` is known to live on the host (a factory without `device=`, a
    loader batch, `.cpu()`, on some path), and when the code does not show
    `t` is a tensor: a parameter or attribute whose only sign is this read
    (`def f(t): return t.numpy()`: it may be any array-like), one used only
    with methods NumPy arrays share (`x.reshape`, `x.view`, `x.T`, `x.max()`),
    one whose kind the code tests (`isinstance(x, torch.Tensor)`: the other
    branch reads lists or arrays, even where every caller in the run passes a
    tensor; a read in the arm where the test shows a tensor is still fixed), a
    call into another file. Also in a script that runs
    on the CPU only (it names no device, moves nothing, and no other file
    imports it), where the read runs only without CUDA (the
    `else` of `if torch.cuda.is_available():` or of `if args.cuda:`, the body
    of `if not ...`, `t.numpy() if not train_on_gpu else ...`), where the
    code already copies the value back wherever CUDA is in use (`if
    train_on_gpu: p = p.cpu()` before the read), and for
    `t.numpy(force=True)`. Reported without a
    fix: values that may be a list or another container rather than one
    tensor (`np.array([a, b])`). Packing lengths that are a list, a tensor
    shown on the host, or a parameter the code does not show is a tensor.
    """

    code = "FDV108"
    name = "numpy-on-device"
    group = "mismatch"
    message = "Tensor that may live on a device is read as a NumPy array; copy it to the host first"
    # Fast ones first. Every read is `.numpy()` or a function of numpy, which
    # the file imports by name (names from other star imports are not known);
    # the file moves tensors or names a device, or defines functions or
    # classes (a library, whose callers choose devices: "numpy-relative").
    trigger = (
        r"numpy|pack_padded_sequence",
        r"\.(?:to|cuda)\b|device|\bdef\b|\bclass\b",
        r"\.numpy\s*\(|\b(?:np|numpy)\.\w+\s*\(|\b(?:array|asarray|asanyarray|copy)\s*\(|pack_padded_sequence\s*\(",
    )

    @classmethod
    def screen(cls, screening) -> bool:
        if not DEVICE_CODE.search(screening.text) and not analysis.flow_for(screening).meets_devices():
            return False  # a script on the CPU only: no device to read from
        return PACKING in screening.text or analysis.has_sink(screening, *SINK_KINDS)

    VALID = [
        "import torch\nx = torch.randn(3)\na = x.numpy()\n",
        "import torch\ndef f(t):\n    return t.numpy()\n",
        "import torch\nfrom torch.nn.utils.rnn import pack_padded_sequence\ndef pack(x, lengths):\n    return pack_padded_sequence(x.to('cuda'), lengths)\n",
        "import torch\nx = torch.randn(3, device='cuda')\na = x.cpu().numpy()\n",
        "import torch\nfrom torch.utils.data import DataLoader\nfor x, y in DataLoader(ds):\n    a = x.numpy()\n",
        "import torch\nx = torch.randn(3).cuda()\na = x.numpy(force=True)\n",
        # shown a tensor by nothing but the read, or by methods NumPy arrays share
        "import numpy as np, torch\ndef f(x):\n    return np.histogram(x.reshape(-1))\n",
        "import numpy as np, torch\ndef f(x):\n    if isinstance(x, torch.Tensor):\n        x.unsqueeze(0)\n    return np.asarray(x)\n",
        # annotated a tensor of another library: the file's imports say which `Tensor`
        "import tensorflow as tf, torch\nfrom torch.nn.utils.rnn import pack_padded_sequence\ndef pack(x, lengths: tf.Tensor):\n    return pack_padded_sequence(x.to('cuda'), lengths)\n",
        # the array arm of a kind test, though the one caller here passes a tensor
        "import numpy as np, torch\ndef f(b):\n    return b.clone() if isinstance(b, torch.Tensor) else np.copy(b)\ndef g(v):\n    return f(torch.tensor(v).view(1, 4))\n",
        (
            "import torch\nx = torch.randn(3)\nif torch.cuda.is_available():\n    x = x.cuda()\ny = x * 2\n"
            "if torch.cuda.is_available():\n    a = y.cpu().numpy()\nelse:\n    a = y.numpy()\n"
        ),
    ]
    INVALID = [
        Invalid(
            "import torch\ndevice = torch.device('cuda')\nx = torch.randn(3).to(device)\na = x.numpy()\n",
            "import torch\ndevice = torch.device('cuda')\nx = torch.randn(3).to(device)\na = x.cpu().numpy()\n",
        ),
        Invalid(
            "import numpy as np, torch, torch.nn as nn\nmodel = nn.Linear(4, 2).cuda()\nout = model(torch.randn(1, 4).cuda())\na = np.array(out)\n",
            "import numpy as np, torch, torch.nn as nn\nmodel = nn.Linear(4, 2).cuda()\nout = model(torch.randn(1, 4).cuda())\na = np.array(out.detach().cpu())\n",
        ),
        Invalid(
            "import torch, torch.nn as nn\nmodel = nn.Linear(4, 2).cuda()\nwith torch.no_grad():\n    a = model(torch.randn(1, 4).cuda()).numpy()\n",
            "import torch, torch.nn as nn\nmodel = nn.Linear(4, 2).cuda()\nwith torch.no_grad():\n    a = model(torch.randn(1, 4).cuda()).cpu().numpy()\n",
        ),
        Invalid(
            "import numpy as np, torch\nx = torch.randn(3, device='cuda')\na = np.asarray(x + 1)\n",
            "import numpy as np, torch\nx = torch.randn(3, device='cuda')\na = np.asarray((x + 1).cpu())\n",
        ),
        Invalid("import numpy as np, torch\nx = torch.randn(3, device='cuda')\na = np.array([x, x])\n", None),
        Invalid(
            "import torch\nfrom torch.nn.utils.rnn import pack_padded_sequence\ndef pack(x: torch.Tensor, lengths: torch.Tensor):\n    return pack_padded_sequence(x, lengths, batch_first=True)\n",
            "import torch\nfrom torch.nn.utils.rnn import pack_padded_sequence\ndef pack(x: torch.Tensor, lengths: torch.Tensor):\n    return pack_padded_sequence(x, lengths.cpu(), batch_first=True)\n",
        ),
        # a tensor whose place the code does not show: .cpu() is right wherever it lives
        Invalid(
            "import torch\ndef features(z: torch.Tensor):\n    return z.detach().numpy()\n",
            "import torch\ndef features(z: torch.Tensor):\n    return z.detach().cpu().numpy()\n",
        ),
        Invalid(
            "import torch\ndef f(v):\n    return v.detach().numpy() if torch.is_tensor(v) else v\n",
            "import torch\ndef f(v):\n    return v.detach().cpu().numpy() if torch.is_tensor(v) else v\n",
        ),
        Invalid(
            "import numpy as np, torch\ndef has_nan(scores):\n    return np.isnan(torch.softmax(scores, -1).max())\n",
            "import numpy as np, torch\ndef has_nan(scores):\n    return np.isnan(torch.softmax(scores, -1).max().cpu())\n",
        ),
    ]

    def visit_Module(self, node: cst.Module) -> None:
        flow = analysis.flow_of(self)
        for sink in flow.sinks():
            if sink.kind not in SINK_KINDS:
                continue
            call = sink.node
            if any(keyword.arg == "force" for keyword in call.keywords):
                continue  # numpy(force=True) copies to the host itself
            value = sink.value
            start, end = flow.span(call)
            if runs_only_without_cuda(self, flow, call) or _moved_to_host_under_cuda_test(self, flow, sink):
                continue
            if flow.what(value) is not What.TENSOR:
                self.report_at(start, end, "Value that may hold tensors on a device is read as a NumPy array; copy them to the host first")
                continue
            message = RELATIVE_MESSAGE if sink.kind == "numpy-relative" else None
            move = ".detach().cpu()" if _may_require_grad(flow, sink) else ".cpu()"
            if call.args and call.args[0] is value:  # np.array(t)
                value_start, value_end = flow.span(value)
                if isinstance(value, ATOMS):
                    edits = [self.insert(value_end, move)]
                else:
                    edits = [self.insert(value_start, "("), self.insert(value_end, ")" + move)]
            else:  # t.numpy(): the move goes before the dot
                dot = _dot_before(flow.text, flow.span(call.func)[1] - len(call.func.attr))
                if dot is None:
                    self.report_at(start, end, message)
                    continue
                edits = [self.insert(dot, move)]
            self.report_at(start, end, message, fix=edits, fix_message=f"Copy to the host first: `{move[1:]}`")
        if PACKING in flow.text:
            self._packed_lengths(flow)

    def _packed_lengths(self, flow) -> None:
        """``pack_padded_sequence(x, lengths)`` where ``lengths`` is a tensor
        that may live on a device: the flow shows it there, or shows it is a
        tensor but not where it lives, in a file that meets devices (then as
        for ``.numpy()``, ``.cpu()`` is right wherever it lives). A list, or
        a tensor shown on the host, is left alone."""
        for call in analysis.calls_named(self.context, PACKING):
            if flow.qualified_name(call.func) != PACKING_NAME:
                continue
            lengths = call.args[1] if len(call.args) > 1 and type(call.args[1]) is not ast.Starred else next((k.value for k in call.keywords if k.arg == "lengths"), None)
            if lengths is None or type(call.args[0] if call.args else None) is ast.Starred:
                continue
            value = flow.value(lengths)
            places = [p for p, _ in value.places]
            if not places or all(p is HOST for p in places):
                continue
            if value.what is not What.TENSOR and not _shown_tensor_parameter(flow, lengths, places):
                continue
            if not any(isinstance(p, Device) for p in places) and not flow.meets_devices():
                continue
            if runs_only_without_cuda(self, flow, call):
                continue
            start, end = flow.span(lengths)
            if isinstance(lengths, ATOMS):
                edits = [self.insert(end, ".cpu()")]
            else:
                edits = [self.insert(start, "("), self.insert(end, ").cpu()")]
            self.report_at(start, end, PACKING_MESSAGE, fix=edits, fix_message="Copy the lengths to the host: `.cpu()`")


def _shown_tensor_parameter(flow, node: ast.AST, places: list) -> bool:
    """``node`` is a parameter, still the caller's value, that its function's
    code shows is a tensor by more than a read as an array (annotated, used
    as only a tensor is), and whose kind it does not test."""
    if type(node) is not ast.Name or not all(type(p) is SameAs and p.text == node.id for p in places):
        return False
    scope = flow.index.scope_at(flow.row_column(flow.span(node)[0]))
    if scope is None or scope.kind != "function" or node.id in flow.kind_tested(scope):
        return False
    args = scope.node.args
    arg = next((a for a in (*args.posonlyargs, *args.args, *args.kwonlyargs) if a.arg == node.id), None)
    if arg is not None and flow.annotation_what(arg.annotation, scope) is What.TENSOR:
        return True  # `lengths: torch.Tensor` (read through the file's imports: not `tf.Tensor`)
    return node.id in flow.evidenced_tensors(scope, reads=False)


def runs_only_without_cuda(rule: Rule, flow, node: ast.AST) -> bool:
    """``node`` runs only where CUDA is not in use, so nothing there is on a
    GPU (the flow joins both branches): in the ``else`` (or ``elif``) of an
    ``if`` that tests for CUDA (``torch.cuda.is_available()``, ``args.cuda``,
    ``train_on_gpu``, ``x.is_cuda``...), under ``if not`` such a test, or in
    the matching branch of a conditional expression (``a.numpy() if not
    train_on_gpu else a.cpu().numpy()``)."""
    facts = analysis.of(rule)
    child = _cst_node(facts, flow, node)
    return child is not None and analysis.runs_without_cuda(facts, child)


def _moved_to_host_under_cuda_test(rule: Rule, flow, sink) -> bool:
    """The code already copies the value to the host wherever CUDA is in use:
    before the read, its function holds ``if train_on_gpu: p = p.cpu()``, and
    the value read is ``p``, or a name bound from ``p`` after that
    (``p, top_ch = p.topk(k)``) and not rebound from anything else. The flow
    joins the two ``if``s that test the same flag (one moved the input to the
    GPU, one moves the result back) as if either could run alone."""
    value = sink.value
    if not isinstance(value, ast.Name):
        return False
    parents = analysis.ast_parents(flow)
    scope = parents.get(sink.node)
    while scope is not None and not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.Module)):
        scope = parents.get(scope)
    if scope is None or isinstance(scope, ast.Lambda):
        return False
    facts = analysis.of(rule)
    read_at = flow.span(sink.node)[0]
    moved: dict[str, int] = {}  # name -> where its move to the host ends
    for statement in _own_statements(scope):
        if not isinstance(statement, ast.If) or flow.span(statement)[1] > read_at:
            continue
        test = _cst_node(facts, flow, statement.test)
        if test is None or not analysis.cuda_test(test, True):
            continue
        for inner in statement.body:
            if isinstance(inner, ast.Assign) and len(inner.targets) == 1 and isinstance(inner.targets[0], ast.Name) and _to_host(inner.value):
                moved[inner.targets[0].id] = flow.span(statement)[1]
    if not moved:
        return False
    # names bound after a move, from the moved name (`p, top_ch = p.topk(k)`)
    held = dict(moved)
    for statement in _own_statements(scope):
        start = flow.span(statement)[0]
        if start >= read_at or not isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            continue
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        names = {n.id for t in targets for n in ast_walk(t) if isinstance(n, ast.Name)}
        reads = {n.id for n in ast_walk(statement.value) if isinstance(n, ast.Name)} if statement.value is not None else set()
        for name in names:
            if any(held.get(r, read_at) < start for r in reads):
                held.setdefault(name, start)
            elif name in held and held[name] < start:
                del held[name]  # rebound from something else
    return value.id in held and held[value.id] < read_at


def _own_statements(scope: ast.AST):
    """The statements of a function (or module), nested blocks included, not
    those of functions or classes inside it."""
    stack = list(reversed(scope.body))
    while stack:
        statement = stack.pop()
        yield statement
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody", "handlers"):
            stack.extend(reversed([s for s in getattr(statement, field, []) if isinstance(s, (ast.stmt, ast.excepthandler))]))


def _to_host(value: ast.AST) -> bool:
    """``x.cpu()``, ``x.to("cpu")``, ``x.data.cpu()``."""
    if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Attribute):
        return False
    if value.func.attr == "cpu":
        return True
    return value.func.attr == "to" and len(value.args) == 1 and isinstance(value.args[0], ast.Constant) and value.args[0].value == "cpu"


def _cst_node(facts, flow, node: ast.AST) -> cst.CSTNode | None:
    """The libcst node spanning what ``node`` spans (the innermost one), found
    from the statement holding it."""
    parents = analysis.ast_parents(flow)
    statement = node
    while statement is not None and not isinstance(statement, ast.stmt):
        statement = parents.get(statement)
    if statement is None:
        return None
    current = facts.statement_at(flow.span(statement)[0])
    if current is None:
        return None
    start, end = flow.span(node)
    while True:
        inner = next((c for c in current.children if facts.start(c) <= start and end <= facts.end(c) and facts.end(c) > facts.start(c)), None)
        if inner is None:
            return current
        current = inner


def _dot_before(text: str, name_start: int) -> int | None:
    """Offset of the ``.`` in ``t.numpy`` / ``t . numpy``, given where ``numpy`` starts."""
    i = name_start - 1
    while i >= 0 and text[i] in " \t\r\n\\":
        i -= 1
    return i if i >= 0 and text[i] == "." else None


def _may_require_grad(flow, sink) -> bool:
    """The value may record a gradient: it comes from a model (its output, a
    parameter), a ``requires_grad=True`` factory or something the flow does
    not show to be a plain tensor, it was not detached on
    the way (``.detach()``, ``.data``), and the read is not under
    ``torch.no_grad()`` / ``inference_mode()`` (a ``with`` block or a
    decorator of its function)."""
    receiver = sink.value
    if _detached_chain(receiver):
        return False
    while isinstance(receiver, (ast.Call, ast.Attribute, ast.Subscript)):
        receiver = receiver.func.value if isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute) else getattr(receiver, "value", None)
    if isinstance(receiver, ast.Name) and _detached_where_bound(flow, sink.node, receiver.id):
        return False
    if _under_no_grad(flow, sink.node):
        return False
    if flow.value(sink.value).flags & FOLLOWS_MODULE:
        return True
    for origin in sink.origins:
        if flow.what(origin) is not What.TENSOR:
            return True  # a module's move (its outputs live where it does), or not known
        if isinstance(origin, ast.Call):
            if flow.what(origin.func) is What.MODULE:
                return True
            if any(k.arg == "requires_grad" and not (isinstance(k.value, ast.Constant) and not k.value.value) for k in origin.keywords):
                return True
    return False


def _detached_chain(value: ast.AST) -> bool:
    """A method chain with ``.detach()`` or ``.data`` in it (``out.detach().argmax(1)``)."""
    while isinstance(value, (ast.Call, ast.Attribute, ast.Subscript)):
        func = value.func if isinstance(value, ast.Call) else value
        if isinstance(func, ast.Attribute) and func.attr in ("detach", "data", "detach_"):
            return True
        value = func.value if isinstance(func, ast.Attribute) else getattr(func, "value", None)
    return False


def _detached_where_bound(flow, read: ast.AST, name: str) -> bool:
    """Every binding of ``name`` in the scope of ``read`` is a plain
    assignment of a detached chain (``scores = net(x).detach()``); a parameter,
    a loop variable or any other binding may hold a tensor that records a
    gradient."""
    parents = analysis.ast_parents(flow)
    scope = parents.get(read)
    while scope is not None and not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.Module)):
        scope = parents.get(scope)
    if scope is None or isinstance(scope, ast.Lambda):
        return False
    if not isinstance(scope, ast.Module) and name in {a.arg for a in ast_walk(scope.args) if isinstance(a, ast.arg)}:
        return False
    found = False
    for statement in _own_statements(scope):
        for node in ast_walk(statement) if not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else ():
            if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, (ast.Store, ast.Del)):
                assigned = parents.get(node)
                if not (isinstance(assigned, ast.Assign) and assigned.targets == [node] and _detached_chain(assigned.value)):
                    return False
                found = True
            elif isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
                return False
    return found


def _under_no_grad(flow, node: ast.AST) -> bool:
    parents = analysis.ast_parents(flow)
    current = parents.get(node)
    while current is not None:
        if isinstance(current, (ast.With, ast.AsyncWith)) and any(_names_no_grad(item.context_expr) for item in current.items):
            return True
        if isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return any(_names_no_grad(decorator) for decorator in getattr(current, "decorator_list", ()))
        current = parents.get(current)
    return False


def _names_no_grad(expression: ast.AST) -> bool:
    """``torch.no_grad()``, ``torch.no_grad``, ``torch.inference_mode()``."""
    if isinstance(expression, ast.Call):
        expression = expression.func
    name = expression.attr if isinstance(expression, ast.Attribute) else expression.id if isinstance(expression, ast.Name) else None
    return name in NO_GRAD
