"""FDV104 cuda-call: ``x.cuda()`` → ``x.to(device)``."""

from __future__ import annotations

import ast

import libcst as cst

from fixdev.engine.rule import Edit, Invalid, Rule

from fixdev.analysis import file_analysis as analysis
from fixdev.analysis.flow import What

KEPT_KEYWORDS = {"non_blocking", "memory_format"}
# Tests that only say a GPU exists, not that the caller's tensors are on it.
AVAILABILITY = frozenset({"torch.cuda.is_available", "torch.backends.mps.is_available"})
# A value moved again where it meets another is where that one is.
MOVED_AGAIN = frozenset({"to", "type_as", "cpu", "cuda", "new_tensor"})
# Factories whose values do not depend on where they are made: `.cuda()` on
# one folds into its `device=` (made there at once, no host copy made first).
# Random factories draw from the device's generator with `device=` (other
# numbers for the same seed), and `as_tensor` may share an array's memory on
# the CPU: those keep `.to(device)`.
FOLDED_FACTORIES = frozenset(f"torch.{name}" for name in "zeros ones full empty arange eye linspace tensor".split())


def _meets_a_parameter(flow, function, is_moved, after: int) -> str | None:
    """The text of a parameter's expression (``x``, ``out["boxes"]``) that
    meets the moved value in ``function`` (after offset ``after``): the two
    sides of an arithmetic operation or comparison, or two arguments of a
    torch function."""
    args = function.args
    own = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)} - {"self", "cls"}
    if not own:
        return None

    def rooted(node):
        while type(node) in (ast.Subscript, ast.Attribute):
            node = node.value
        return type(node) is ast.Name and node.id in own

    def holds_moved(node):
        """The moved value itself, not moved again (``m.to(x.device)``)."""
        stack = [node]
        while stack:
            current = stack.pop()
            if type(current) is ast.Call and type(current.func) is ast.Attribute and current.func.attr in MOVED_AGAIN:
                stack.extend(current.args)
                continue
            if is_moved(current):
                return True
            stack.extend(ast.iter_child_nodes(current))
        return False

    def shown(node):
        """``x`` for ``x[i, :]`` (a tensor's index lives where it does); a
        dict's entry stays whole (``out["boxes"]``)."""
        while type(node) is ast.Subscript and not (type(node.slice) is ast.Constant and isinstance(node.slice.value, str)):
            node = node.value
        return ast.unparse(node)

    arrays = _array_like_parameters(function, own)
    for node in ast.walk(function):
        kind = type(node)
        given_to_torch = False
        if kind is ast.BinOp and type(node.op) not in (ast.Mod,):
            sides = [node.left, node.right]
        elif kind is ast.Compare:
            sides = [node.left, *node.comparators]
        elif kind is ast.Call and (flow.qualified_name(node.func) or "").startswith(("torch.", "torchvision.")):
            sides, given_to_torch = list(node.args), True
        else:
            continue
        if after >= 0 and flow.span(node)[0] < after:
            continue
        for side in sides:
            for inner in ast.walk(side):
                if not (rooted(inner) and type(inner) in (ast.Name, ast.Subscript)):
                    continue
                if not (given_to_torch and inner is side) and _root_name(inner) not in arrays:
                    continue  # maybe a number, which meets a tensor anywhere
                if any(holds_moved(other) for other in sides if other is not side):
                    return shown(inner)
    return None


# What only arrays and tensors have (a number meets a device tensor anywhere).
ARRAY_ATTRIBUTES = frozenset("shape ndim dtype size dim reshape view sum mean softmax unsqueeze squeeze permute float numel device to detach cpu argmax max min".split())


def _root_name(node: ast.expr) -> str | None:
    while type(node) in (ast.Subscript, ast.Attribute):
        node = node.value
    return node.id if type(node) is ast.Name else None


def _array_like_parameters(function, own: set[str]) -> set[str]:
    """Parameters ``function`` reads as arrays or tensors: an attribute only
    those have (``x.shape``, ``x.softmax(...)``), or an index with a slice or
    several axes (``x[:, 0]``)."""
    found = set()
    for node in ast.walk(function):
        if type(node) is ast.Attribute and node.attr in ARRAY_ATTRIBUTES and type(node.value) is ast.Name and node.value.id in own:
            found.add(node.value.id)
        elif type(node) is ast.Subscript and type(node.value) is ast.Name and node.value.id in own:
            index = node.slice
            if type(index) is ast.Slice or (type(index) is ast.Tuple and any(type(e) is ast.Slice for e in index.elts)):
                found.add(node.value.id)
    return found


def _expects_an_error(facts: "analysis.FileAnalysis", node: cst.CSTNode) -> bool:
    """Inside ``with self.assertRaises...(...)`` or ``with pytest.raises(...)``."""
    block = facts.enclosing(node, cst.With)
    while block is not None:
        for item in block.items:
            if isinstance(item.item, cst.Call):
                name = analysis.last_name(item.item.func) or ""
                if name.startswith("assertRaises") or name == "raises":
                    return True
        block = facts.enclosing(block, cst.With)
    return False


class CudaCall(Rule):
    """
    ## What it does
    Rewrites `X.cuda()` to `X.to(device)`. Inside an `nn.Module`'s method that
    has a tensor parameter `x`, the device is `x.device` (not when `X` is made
    from `x`: `F.pad(x).cuda()` is where `x` is, so the module's own device);
    elsewhere a tensor the line works with that is on the device or that the
    moved value then meets, never one `X` is made from; else a `--cuda` flag
    only when it decides where a model goes (`if args.cuda: model.cuda()`);
    else a device already bound wherever the line runs (a `device`/`dev` parameter, a
    name bound once to `torch.device(...)` or a `"cuda"`/`"cpu"` string by a
    statement that always runs first, `self.device`). A module-level device
    counts inside a function only when it is bound unconditionally before any
    code that could call the function. When there is none, one definition is
    added: `device = torch.device("cuda" if torch.cuda.is_available() else
    "cpu")` (named `torch_device` or so when the file already uses `device`),
    just after the module's `import torch` (and the imports that follow it);
    where torch is optional (`try: import torch / except ImportError`) or
    imported only inside functions, at the start of the function instead, so
    importing the module never starts to require torch.
    On a factory whose values do not depend on the device (`torch.zeros`,
    `ones`, `full`, `empty`, `arange`, `eye`, `linspace`, `tensor`), the move
    folds into it: `torch.zeros(2).cuda()` becomes `torch.zeros(2,
    device=device)`.
    A bare statement `x.cuda()` on something not known to be a module becomes
    `x = x.to(device)`: a tensor's `.cuda()` returns a copy, so the bare call
    did nothing.

    ## Why is this bad?
    `.cuda()` fails outright on a machine without CUDA (`Torch not compiled
    with CUDA enabled`), and scattering it through code is how half of a
    program ends up on the GPU and half on the CPU.

    ## Example
    ```python
    model = Net().cuda()
    x = x.cuda(non_blocking=True)
    ```

    ## Use instead
    ```python
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Net().to(device)
    x = x.to(device, non_blocking=True)
    ```

    ## Fix safety
    On a machine with CUDA the code does what it did (the default CUDA device);
    without CUDA it now runs on the CPU instead of failing. `non_blocking=` and
    `memory_format=` are kept. `.cuda()` always returns a new tensor, but
    `.to(device)` on the CPU returns the tensor itself: where the result (or a
    view of it) is later written in place (`add_`, `zero_`, `x[i] = ...`,
    `+=`, `out=`), the fix writes `.to(device, copy=True)`, so the write never
    lands in the original. Unsafe (the fix may change more than the device)
    where such a write is not in this function (the result is returned and
    written by the caller) and so gets no `copy=True`: on the CPU the caller's
    write would then alias the tensor that was moved. A device taken from a
    device variable or flag the program defines follows that choice (another
    GPU, or the CPU where the program says so), not the default CUDA device.

    ## When it stays silent
    `X.cuda(0)`, `X.cuda(device=k)` and other explicit devices are reported
    without a fix: which device is meant is the user's choice. Also reported
    without a fix: a module-level line that runs before `import torch`, or a
    function that code before `import torch` may call (no definition could
    come first), and a one-line function body. Calls with
    `*args`/`**kwargs` are reported without a fix. A `cuda()` function of an
    imported module (`tvm.target.cuda()`), or a name that may come from a
    `from X import *` (the file does not bind it before the star import), may
    not be a tensor's method: silent.
    Inside `with self.assertRaises(...)` or `with pytest.raises(...)` the code
    tests `.cuda()` itself: silent. One exception to the silence under a CUDA
    test, reported without a fix: in a library (a module of a package, one
    other files import, or one whose top level only defines things), `T =
    T.cuda()` right under `if torch.cuda.is_available():` (the block moves
    tensors only, no model), where `T` (a local, or a plain class's
    `self.X` set in `__init__`) then meets a parameter of the function it
    meets in (an arithmetic operation, a comparison, a torch function's
    arguments), not moved again there (`T.to(x.device)`), a parameter that
    function reads as an array or tensor (`x.shape`, `x.softmax()`,
    `x[:, 0]`, or given to the torch function itself; a number meets a
    tensor anywhere). A GPU being
    there says nothing about where the caller's tensor is (a model kept on
    the CPU on a GPU machine): the fix is to move `T` to that value's device
    where they meet, which needs that value to be a tensor, so it is left to
    the reader. Inside the body of an `if` that tests for
    CUDA (`if torch.cuda.is_available():`, `if args.cuda:`, `if use_gpu:`,
    `if train_on_gpu:`, `if torch.cuda.device_count() > 1:`, `if x.is_cuda:`,
    `if device.type == "cuda":`; any flag or name that says cuda or gpu, and
    not cpu or no_cuda) the call runs only where CUDA is meant to be: silent.
    """

    code = "FDV104"
    name = "cuda-call"
    group = "cuda-only"
    message = "`.cuda()` ties the code to CUDA; use `.to(device)`"
    trigger = r"\.cuda\s*\("

    @classmethod
    def screen(cls, screening) -> bool:
        """A call ``X.cuda(...)`` in the code (the trigger also matches one
        in a docstring or a comment)."""
        return any(type(call.func) is ast.Attribute for call in analysis.calls_named(screening, "cuda"))

    VALID = [
        # a script that moves its own tensors the same way
        "import torch\nx = torch.ones(2)\nif torch.cuda.is_available():\n    x = x.cuda()\nprint(x + x)\n",
        # it meets what may be a number (nothing shows an array)
        "import torch\ndef f(out, k):\n    t = torch.arange(k)\n    if torch.cuda.is_available():\n        t = t.cuda()\n    return out * t\n",
        # moved again where it meets the caller's value
        "import torch\ndef f(out, k):\n    t = torch.arange(k)\n    if torch.cuda.is_available():\n        t = t.cuda()\n    return out * t.to(out.device)\n",
        "import torch\ndef move(x, device):\n    \"\"\"Moves x, like x.cuda() would.\"\"\"\n    return x.to(device)  # not x.cuda()\n",
        "import torch\nx = x.to(device)\n",
        "import torch\nok = torch.cuda.is_available()\n",
        "import torch\nx = torch.ones(3, device='cuda')\n",
        "def cuda():\n    pass\ncuda()\n",
        "import tvm\ntarget = tvm.target.cuda()\n",
        "import torch\nmodel = Net()\nif args.cuda:\n    model.cuda()\n",
        "import torch\nif torch.cuda.is_available() and not args.no_cuda:\n    x = x.cuda()\n",
        "import pytest\ndef test_cuda(m):\n    with pytest.raises(ValueError):\n        m.cuda()\n",
    ]
    INVALID = [
        # a library's helper: "a GPU exists" is not where the caller's tensor is
        Invalid("import torch\ndef f(out, k):\n    t = torch.arange(k)\n    if torch.cuda.is_available():\n        t = t.cuda()\n    return out[:, 0] * t\n", None),
        Invalid(
            "import torch\nmodel = Net().cuda()\n",
            'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\nmodel = Net().to(device)\n',
        ),
        Invalid(
            "import torch\ndevice = torch.device('cuda')\nx = torch.ones(3)\nx.cuda()\n",
            "import torch\ndevice = torch.device('cuda')\nx = torch.ones(3)\nx = x.to(device)\n",
        ),
        Invalid(
            "def step(batch, device):\n    return batch.cuda(non_blocking=True)\n",
            "def step(batch, device):\n    return batch.to(device, non_blocking=True)\n",
        ),
        Invalid(
            "import torch.nn as nn\nclass M(nn.Module):\n    def forward(self, x):\n        return x * self.scale(x.shape).cuda()\n",
            "import torch.nn as nn\nclass M(nn.Module):\n    def forward(self, x):\n        return x * self.scale(x.shape).to(x.device)\n",
        ),
        Invalid(
            "import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\nmodel.cuda()\n",
            'import torch\nimport torch.nn as nn\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\nmodel = nn.Linear(2, 2)\nmodel.to(device)\n',
        ),
        Invalid("import torch\nx = x.cuda(1)\ny = y.cuda(device=k)\n", None),
        # a factory whose values do not depend on the device: made there at once
        Invalid(
            "import torch\ndef run(device):\n    return torch.zeros(2, dtype=torch.long).cuda(), torch.randn(2).cuda()\n",
            "import torch\ndef run(device):\n    return torch.zeros(2, dtype=torch.long, device=device), torch.randn(2).to(device)\n",
        ),
        # written in place later: .to() on the CPU would return the original itself
        Invalid(
            "def step(batch, device):\n    x = batch.cuda()\n    x[0] = 0\n    return x\n",
            "def step(batch, device):\n    x = batch.to(device, copy=True)\n    x[0] = 0\n    return x\n",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not (isinstance(node.func, cst.Attribute) and node.func.attr.value == "cuda"):
            return
        if self.qualified_names(node.func.value):
            return  # tvm.target.cuda(), torch.cuda: a function of an imported module, not a value's method
        if _expects_an_error(analysis.of(self), node):
            return  # a test of .cuda() itself (assertRaises / pytest.raises)
        if analysis.cuda_guarded(analysis.of(self), node):
            # `if args.cuda: model.cuda()` runs only where CUDA is meant to be;
            # but "wherever there is a GPU" is not where a caller's tensor is
            met = self._availability_meets_caller(node)
            if met is not None:
                moved, caller = met
                self.report(
                    node,
                    f"`{moved}` goes to the GPU whenever one is available, but it meets `{caller}`, which lives wherever the caller put it:"
                    f" move it to that value's device where they meet (`.to({caller}.device)`)",
                )
            return
        positional = [a for a in node.args if a.keyword is None]
        keywords = {a.keyword.value for a in node.args if a.keyword is not None}
        if positional or not keywords <= KEPT_KEYWORDS:
            self.report(node, "`.cuda()` with an explicit device: move with `.to(...)` to the device you mean")
            return
        chosen = analysis.device_expression(self, node, moved=node.func.value)
        if chosen is None:
            self.report(node, "`.cuda()` ties the code to CUDA; no place to define a device that is sure to run before this line")
            return
        device, edits = chosen
        receiver = node.func.value
        if not node.args and self._folds(receiver):
            edits.append(self.replace(node, analysis.with_keyword_argument(receiver, "device", device)))
            self.report(node, fix=edits, fix_message=f"Make it there: `device={device}`")
            return
        start, end = self.span(node.func.attr)[0], self.span(node)[1]
        moved = [device]
        if analysis.what_of(self, receiver) is not What.MODULE and analysis.written_in_place(self, node):
            moved.append("copy=True")  # .cuda() copies; .to() on the CPU would hand back the original to be written
        edits.append(Edit(start, end, analysis.call_text(self, "to", moved, node.args)))
        statement = self.parent(node)
        if isinstance(statement, cst.Expr) and analysis.is_name_chain(receiver):
            if analysis.what_of(self, receiver) is not What.MODULE:
                edits.append(self.insert(self.span(node)[0], f"{self.code_of(receiver)} = "))
        self.report(node, fix=edits, fix_message=f"Use `.to({device})`")

    def _availability_meets_caller(self, node: cst.Call) -> tuple[str, str] | None:
        """``T = T.cuda()`` right under ``if torch.cuda.is_available():``, in a
        library (its callers choose devices), where ``T`` (a local, or
        ``self.X`` of a plain class, set in ``__init__``) later meets a
        parameter of the function it meets in, in an arithmetic operation, a
        comparison or a torch function's arguments: the (moved name, the
        parameter's expression), else None."""
        facts = analysis.of(self)
        statement = self.parent(node)
        if not isinstance(statement, cst.Assign) or len(statement.targets) != 1 or statement.value is not node:
            return None
        target = statement.targets[0].target
        receiver = self.code_of(node.func.value)
        if self.code_of(target) != receiver:
            return None
        line = facts.parent(statement)
        block = facts.parent(facts.parent(line)) if line is not None else None
        if not (isinstance(block, cst.If) and isinstance(block.test, cst.Call) and self.qualified_names(block.test.func) & AVAILABILITY):
            return None
        # the guard moves tensors only: one that also moves a model places everything on purpose
        for other in block.body.body:
            moved = other.body[0] if isinstance(other, cst.SimpleStatementLine) and len(other.body) == 1 else None
            if not (isinstance(moved, cst.Assign) and isinstance(moved.value, cst.Call) and isinstance(moved.value.func, cst.Attribute)):
                return None
            if analysis.what_of(self, moved.value.func.value) is not What.TENSOR:
                return None
        flow = analysis.flow_of(self)
        if not flow.library_like():
            return None
        start = self.span(node)[0]
        function = flow.function_at(start)
        if function is None:
            return None
        if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
            cls = next((c for c in flow.index.classes if function in c.body), None)
            if cls is None or flow.index.classes[cls].is_module or function.name != "__init__":
                return None  # a module's own tensors follow the module: FDV103's
            places = [m for m in cls.body if type(m) in (ast.FunctionDef, ast.AsyncFunctionDef) and m is not function]
            is_moved = lambda n: type(n) is ast.Attribute and n.attr == target.attr.value and type(n.value) is ast.Name and n.value.id == "self"  # noqa: E731
        elif isinstance(target, cst.Name):
            places = [function]
            is_moved = lambda n: type(n) is ast.Name and n.id == receiver  # noqa: E731
        else:
            return None
        for method in places:
            found = _meets_a_parameter(flow, method, is_moved, after=start if method is function else -1)
            if found is not None:
                return receiver, found
        return None

    def _folds(self, receiver: cst.BaseExpression) -> bool:
        """``torch.zeros(2)`` in ``torch.zeros(2).cuda()``: a factory whose values
        do not depend on the device, with no ``device=`` and no ``*args`` or
        ``**kwargs`` (which may hold one)."""
        if not isinstance(receiver, cst.Call) or not self.qualified_names(receiver.func) & FOLDED_FACTORIES:
            return False
        return all(arg.star == "" and (arg.keyword is None or arg.keyword.value != "device") for arg in receiver.args)
