"""FDV104 cuda-call: ``x.cuda()`` → ``x.to(device)``."""

from __future__ import annotations

import ast

import libcst as cst

from fixdev.engine.rule import Edit, Invalid, Rule

from fixdev.analysis.ast_screens import may_meet_a_caller, surely_cuda_guarded
from fixdev.analysis import availability, file_analysis as analysis, placement
from fixdev.analysis.cuda_only import decorated_cuda_only
from fixdev.analysis.flow import What

KEPT_KEYWORDS = {"non_blocking", "memory_format"}
# Factories whose values do not depend on where they are made: `.cuda()` on
# one folds into its `device=` (made there at once, no host copy made first).
# Random factories draw from the device's generator with `device=` (other
# numbers for the same seed), and `as_tensor` may share an array's memory on
# the CPU: those keep `.to(device)`.
FOLDED_FACTORIES = frozenset(f"torch.{name}" for name in "zeros ones full empty arange eye linspace tensor".split())


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


def _in_a_cuda_arm(facts: "analysis.FileAnalysis", node: cst.CSTNode) -> bool:
    """``node`` is in the arm of a conditional expression, within its
    statement, that runs only when the test says CUDA is in use
    (``x.cuda() if args.cuda else x``, ``x if not use_gpu else x.cuda()``):
    the one-expression form of ``if args.cuda: x = x.cuda()``."""
    child, current = node, facts.parent(node)
    while current is not None and not isinstance(current, (cst.BaseSmallStatement, cst.BaseCompoundStatement, cst.Lambda)):
        if isinstance(current, cst.IfExp):
            if child is current.body and analysis.cuda_test(current.test, True):
                return True
            if child is current.orelse and analysis.cuda_test(current.test, False):
                return True
        child, current = current, facts.parent(current)
    return False


def _in_own_cuda_method(facts: "analysis.FileAnalysis", call: cst.Call) -> bool:
    """``call`` is in a class's own ``cuda()`` method: the class implements
    its move to the GPU by moving its members and its base there, and any
    such move is the one its caller asked for. (In its own ``to()`` or
    ``_apply()``, a move that passes on the method's device is silent as
    every ``.cuda(k)`` with ``k`` a parameter is.)"""
    func = facts.enclosing(call, cst.FunctionDef)
    while func is not None:
        if isinstance(facts.parent(facts.parent(func)), cst.ClassDef):
            return func.name.value == "cuda"
        func = facts.enclosing(func, cst.FunctionDef)
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
    statement that always runs first, `self.device`; neither `x.device` nor
    `self.device` in a `@classmethod` or `@staticmethod`, where `self` is
    unbound and the parameters are not the module's inputs). A module-level device
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
    device=device)`; not one given `out=` (the tensor it writes into stays
    where it is, and `device=` anywhere else raises): that keeps
    `.to(device)`.
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
    lands in the original; a write to an attribute of the result
    (`layer.weight.data.zero_()`) or to what calling it returns is no such
    write (a module's `.to()` moves in place and rejects `copy=`). Unsafe (the fix may change more than the device)
    where such a write is not in this function (the result is returned and
    written by the caller) and so gets no `copy=True`: on the CPU the caller's
    write would then alias the tensor that was moved. A device taken from a
    device variable or flag the program defines follows that choice (another
    GPU, or the CPU where the program says so), not the default CUDA device.

    ## When it stays silent
    `X.cuda(0)`, `X.cuda(device=args.gpu)` and other explicit devices are
    reported without a fix: which device is meant is the user's choice.
    Silent where that device is already chosen elsewhere: a parameter of the
    function the call is in (`t.cuda(rank)`: its caller picks the GPU) or
    the GPU another tensor is on (`t.cuda(other.get_device())`, `other.device`
    of a known tensor); so a class's own `to(self, device)` or `_apply`
    passing its device on is silent. Silent too in a class's own `cuda()`
    method: it implements the move (its members' `.cuda(device)`,
    `super().cuda(device=device)`). Also reported
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
    `if device.type == "cuda":`; any flag, name or string key that says cuda
    or gpu, and not cpu or no_cuda: `if conf["use_gpu"]:`; a device index
    compared so that only a GPU's remains: `if cuda_device >= 0:`, `if
    device > -1:`, `if gpu != -1:`), in the `else` / `elif` of such a test
    that is false only with CUDA (`if cuda_device < 0: return x` / `elif
    ...: x.cuda(cuda_device)`), or after an `if` of the same block that
    returns or raises where there is none, the call runs only where CUDA is
    meant to be: silent; the same in the arm of a conditional expression
    that such a test chooses (`x.cuda() if args.cuda else x`, `x if not
    use_gpu else x.cuda()`).
    So too in a function or class whose decorator skips it without a GPU
    (`@skip_if_no_gpu`, `@requires_cuda`, `@onlyCUDA`,
    `@unittest.skipIf(not torch.cuda.is_available(), ...)`,
    `@pytest.mark.skipif(not torch.cuda.is_available(), ...)`), the same
    exception aside; not one that skips *with* a GPU (`@skip_if_cuda`).
    """

    code = "FDV104"
    name = "cuda-call"
    group = "cuda-only"
    message = "`.cuda()` ties the code to CUDA; use `.to(device)`"
    trigger = r"\.cuda\s*\("

    @classmethod
    def screen(cls, screening) -> bool:
        """A call ``X.cuda(...)`` in the code (the trigger also matches one
        in a docstring or a comment), unless surely under a CUDA test
        (``if cuda: model.cuda()``) and not of the shape a caller's value may
        meet there (``availability.meets_a_caller``)."""
        calls = [call for call in analysis.calls_named(screening, "cuda") if type(call.func) is ast.Attribute]
        if not calls:
            return False
        parents = analysis.ast_parents(analysis.flow_for(screening))
        return any(not surely_cuda_guarded(parents, call) or may_meet_a_caller(parents, call) for call in calls)

    VALID = [
        # a test skipped without a GPU
        "import torch\nfrom helpers import skip_if_no_gpu\n@skip_if_no_gpu\ndef test_sum():\n    assert torch.ones(2).cuda().sum().item() == 2\n",
        "import pytest, torch\n@pytest.mark.skipif(not torch.cuda.is_available(), reason='gpu')\ndef test_sum():\n    x = torch.ones(2)\n    y = x.cuda()\n",
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
        # a class's own move: its members follow it there
        "import torch\nclass Pair:\n    def cuda(self, device=None):\n        return Pair(self.a.cuda(device), self.b.cuda())\n",
        "import torch.nn as nn\nclass M(nn.Module):\n    def cuda(self, device=None):\n        return super().cuda(device=device)\n",
        "import torch\nclass Box:\n    def to(self, device):\n        self.t = self.t.cuda(device)\n        return self\n",
        # a device already chosen: by the caller, or where another tensor is
        "import torch\ndef f(x, rank):\n    return x.cuda(rank)\n",
        "import torch\ndef f(x, y):\n    return x.cuda(y.get_device())\n",
        # the one-expression form of `if use_cuda:`
        "import torch\ndef f(x, use_cuda):\n    return x.cuda() if use_cuda else x\n",
        "import torch\ndef f(x, use_cuda):\n    return x if not use_cuda else x.cuda()\n",
        "import pytest\ndef test_cuda(m):\n    with pytest.raises(ValueError):\n        m.cuda()\n",
    ]
    INVALID = [
        # a negative device index is the CPU: no guard for a GPU
        Invalid(
            "import torch\ndef place(net, device_id):\n    if device_id < 0:\n        net = net.cuda()\n    return net\n",
            'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\ndef place(net, device_id):\n    if device_id < 0:\n        net = net.to(device)\n    return net\n',
        ),
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
        # a setting read on the way is no device chosen by a caller; a plain method is no move of the class
        Invalid("import torch\ndef f(x, args):\n    return x.cuda(args.gpu)\n", None),
        Invalid("import torch\nclass Box:\n    def place(self, device):\n        return self.t.cuda(0)\n", None),
        # a test that says nothing of CUDA chooses no GPU
        Invalid(
            "def f(x, device, warm):\n    return x.cuda() if warm else x\n",
            "def f(x, device, warm):\n    return x.to(device) if warm else x\n",
        ),
        # a factory whose values do not depend on the device: made there at once
        Invalid(
            "import torch\ndef run(device):\n    return torch.zeros(2, dtype=torch.long).cuda(), torch.randn(2).cuda()\n",
            "import torch\ndef run(device):\n    return torch.zeros(2, dtype=torch.long, device=device), torch.randn(2).to(device)\n",
        ),
        # a factory given `out=` writes where that tensor is: the move stays a move
        Invalid(
            "import torch\ndef run(buf, device):\n    return torch.ones(2, out=buf).cuda()\n",
            "import torch\ndef run(buf, device):\n    return torch.ones(2, out=buf).to(device)\n",
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
        facts = analysis.of(self)
        if _in_own_cuda_method(facts, node):
            return  # the class's own `cuda()` moves its members: that is the move asked for
        if analysis.cuda_guarded(facts, node) or _in_a_cuda_arm(facts, node) or decorated_cuda_only(facts, node):
            # `if args.cuda: model.cuda()` runs only where CUDA is meant to be;
            # but "wherever there is a GPU" is not where a caller's tensor is
            met = availability.meets_a_caller(self, node, node.func.value)
            if met is not None:
                self.report(node, availability.message(*met))
            return
        positional = [a for a in node.args if a.keyword is None]
        keywords = {a.keyword.value for a in node.args if a.keyword is not None}
        if positional or not keywords <= KEPT_KEYWORDS:
            if self._device_already_chosen(facts, node, positional):
                return
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

    def _device_already_chosen(self, facts: "analysis.FileAnalysis", node: cst.Call, positional: list[cst.Arg]) -> bool:
        """``.cuda(k)`` / ``.cuda(device=k)`` (nothing else but the kept
        keywords) where ``k`` is a parameter of the function the call is in
        (its caller chose the GPU: ``t.cuda(rank)``) or the GPU another
        tensor is on (``t.get_device()``, ``t.device`` of a known tensor).
        A literal index (``.cuda(0)``) or a setting read on the way
        (``args.gpu``, ``self.device_id``) is not: those stay reported."""
        named = [a for a in node.args if a.keyword is not None and a.keyword.value == "device"]
        others = [a for a in node.args if a.keyword is not None and a.keyword.value not in KEPT_KEYWORDS and a.keyword.value != "device"]
        given = positional + named
        if len(given) != 1 or others or given[0].star:
            return False
        value = given[0].value
        if isinstance(value, cst.Name):
            func = facts.enclosing(node, cst.FunctionDef)
            return func is not None and value.value in set(placement.parameter_names(func)) - {"self", "cls"}
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "get_device" and not value.args:
            return True  # only a tensor has get_device(): the GPU it is on
        if isinstance(value, cst.Attribute) and value.attr.value == "device":
            return analysis.what_of(self, value.value) is What.TENSOR
        return False

    def _folds(self, receiver: cst.BaseExpression) -> bool:
        """``torch.zeros(2)`` in ``torch.zeros(2).cuda()``: a factory whose values
        do not depend on the device, with no ``device=``, no ``out=`` (the
        tensor written into stays where it is: ``device=`` elsewhere raises)
        and no ``*args`` or ``**kwargs`` (which may hold either)."""
        if not isinstance(receiver, cst.Call) or not self.qualified_names(receiver.func) & FOLDED_FACTORIES:
            return False
        return all(arg.star == "" and (arg.keyword is None or arg.keyword.value not in ("device", "out")) for arg in receiver.args)
