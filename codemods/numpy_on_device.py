"""FDV108 numpy-on-device: ``t.numpy()`` of a tensor that may live on a device → ``t.cpu().numpy()``."""

from __future__ import annotations

import ast

import libcst as cst

from fixdev.rule import Invalid, Rule

from . import analysis
from .flow import FOLLOWS_MODULE, What

# Expressions a `.cpu()` can follow without parentheses.
ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript)
# Context managers and decorators under which no tensor records a gradient.
NO_GRAD = frozenset({"no_grad", "inference_mode"})


class NumpyOnDevice(Rule):
    """
    ## What it does
    Finds `t.numpy()`, `np.array(t)` and `np.asarray(t)` (also
    `np.asanyarray`, `np.copy`) where the device-flow analysis shows `t` may
    live on a device: it was moved there (`.to(device)`, `.cuda()`, on some
    path), made there (`device=`), or is the output or a parameter of a
    model that was. It copies the tensor to the host first:
    `t.cpu().numpy()`, `np.array(t.cpu())`; and `t.detach().cpu().numpy()`
    where `t` may require grad: it comes from a model (its output or a
    parameter), from a `requires_grad=True` factory or from something the
    analysis does not show to be a plain tensor, it was not detached on the
    way (`.detach()`, `.data`), and the read is not inside `torch.no_grad()`
    or `torch.inference_mode()` (a `with` block or a decorator).

    ## Why is this bad?
    NumPy arrays live in host memory. On a GPU, `t.numpy()` raises
    `TypeError: can't convert cuda:0 device type tensor to numpy. Use
    Tensor.cpu() to copy the tensor to host memory first.` (and
    `np.array(t)` raises the same). Code written and tested on a CPU never
    sees it.

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
    the tensor (on a GPU it could not before).

    ## When it stays silent
    When `t` is known to live on the host (a factory without `device=`, a
    loader batch, `.cpu()`), and when where `t` lives is not known (a
    function's parameter, a call into another file): most `.numpy()` calls
    read host tensors. Also where the read runs only without CUDA (the
    `else` of `if torch.cuda.is_available():` or of `if args.cuda:`, the body
    of `if not ...`), and for `t.numpy(force=True)`. Reported without a
    fix: values that may be a list or another container rather than one
    tensor (`np.array([a, b])`).
    """

    code = "FDV108"
    name = "numpy-on-device"
    group = "mismatch"
    message = "Tensor that may live on a device is read as a NumPy array; copy it to the host first"
    trigger = (r"\.numpy\s*\(|\b(?:array|asarray|asanyarray|copy)\s*\(", r"\.(?:to|cuda)\s*\(|device")

    VALID = [
        "import torch\nx = torch.randn(3)\na = x.numpy()\n",
        "import torch\ndef f(t):\n    return t.numpy()\n",
        "import torch\nx = torch.randn(3, device='cuda')\na = x.cpu().numpy()\n",
        "import torch\nfrom torch.utils.data import DataLoader\nfor x, y in DataLoader(ds):\n    a = x.numpy()\n",
        "import torch\nx = torch.randn(3).cuda()\na = x.numpy(force=True)\n",
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
    ]

    def visit_Module(self, node: cst.Module) -> None:
        flow = analysis.flow_of(self)
        for sink in flow.sinks():
            if sink.kind != "numpy":
                continue
            call = sink.node
            if any(keyword.arg == "force" for keyword in call.keywords):
                continue  # numpy(force=True) copies to the host itself
            value = sink.value
            start, end = flow.span(call)
            if runs_only_without_cuda(self, flow, call):
                continue
            if flow.what(value) is not What.TENSOR:
                self.report_at(start, end, "Value that may hold tensors on a device is read as a NumPy array; copy them to the host first")
                continue
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
                    self.report_at(start, end)
                    continue
                edits = [self.insert(dot, move)]
            self.report_at(start, end, fix=edits, fix_message=f"Copy to the host first: `{move[1:]}`")


def runs_only_without_cuda(rule: Rule, flow, node: ast.AST) -> bool:
    """``node`` runs only where CUDA is not in use, so nothing there is on a
    GPU (the flow joins both branches): in the ``else`` (or ``elif``) of an
    ``if`` that tests for CUDA (``torch.cuda.is_available()``, ``args.cuda``,
    ``x.is_cuda``...), or under ``if not`` such a test."""
    parents = analysis.ast_parents(flow)
    statement = node
    while statement is not None and not isinstance(statement, ast.stmt):
        statement = parents.get(statement)
    facts = analysis.of(rule)
    child = facts.statement_at(flow.span(statement)[0]) if statement is not None else None
    block = facts.parent(child) if child is not None else None
    while block is not None:
        if isinstance(block, cst.If):
            test = block.test
            if child is block.orelse and not isinstance(test, cst.BooleanOperation) and analysis._tests_for_cuda(facts, test):
                return True
            if child is block.body and isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not) and analysis._tests_for_cuda(facts, test.expression):
                return True
        if isinstance(block, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        child, block = block, facts.parent(block)
    return False


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
    while isinstance(receiver, (ast.Call, ast.Attribute, ast.Subscript)):
        func = receiver.func if isinstance(receiver, ast.Call) else receiver
        if isinstance(func, ast.Attribute) and func.attr in ("detach", "data", "detach_"):
            return False
        receiver = func.value if isinstance(func, ast.Attribute) else getattr(func, "value", None)
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
