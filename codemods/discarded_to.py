"""FDV106 discarded-to: a bare ``x.to(device)`` → ``x = x.to(device)``."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from fixdev.rule import Invalid, Rule

from . import analysis
from .flow import What

CONVERSIONS = frozenset({"to", "cpu", "half", "float", "double", "bfloat16", "long", "int", "bool"})


class DiscardedTo(Rule):
    """
    ## What it does
    Finds statements such as `x.to(device)`, `x.cpu()` or `x.half()` whose
    result is thrown away, where `x` is known to be a tensor (made by a torch
    function or tensor method, a loader batch, or anything the device-flow
    analysis shows holds a tensor on every path), and assigns the result
    back: `x = x.to(device)`.

    ## Why is this bad?
    `Tensor.to` and its relatives return a new tensor and leave `x` as it was,
    so the statement does nothing and `x` stays on the CPU. (`Module.to` moves
    a module in place, which is why the habit is so easy to pick up.)

    ## Example
    ```python
    for data, target in loader:
        data.to(device)
        target.to(device)
    ```

    ## Use instead
    ```python
    for data, target in loader:
        data = data.to(device)
        target = target.to(device)
    ```

    ## Fix safety
    `x` now holds the moved or converted tensor, which is what the statement
    meant; code after it that relied on `x` staying where it was (there should
    be none) sees the new tensor.

    ## When it stays silent
    For modules (`model.to(device)` and `self.to(device)` are correct: modules
    move in place), for names whose kind the code does not show, for
    expressions that are not a plain name or attribute chain, and for
    `nn.Parameter` attributes (a plain tensor cannot be assigned to them).
    """

    code = "FDV106"
    name = "discarded-to"
    group = "mismatch"
    message = "`Tensor.to()` returns a new tensor; the result is discarded"
    trigger = r"(?m)^[ \t]*[\w.]+\.(?:to|cpu|half|float|double|bfloat16|long|int|bool)\s*\("

    VALID = [
        "import torch\nx = torch.randn(3)\nx = x.to('cuda')\n",
        "import torch.nn as nn\nmodel = nn.Linear(2, 2)\nmodel.to('cuda')\n",
        "thing.to('cuda')\n",
        "import torch.nn as nn\nclass M(nn.Module):\n    def move(self):\n        self.to('cuda')\n",
        "import torch\nx = torch.randn(3)\nprint(x.to('cuda'))\n",
    ]
    INVALID = [
        Invalid("import torch\nx = torch.randn(3, 3)\nx.to('cuda')\n", "import torch\nx = torch.randn(3, 3)\nx = x.to('cuda')\n"),
        Invalid(
            "from torch.utils.data import DataLoader\nfor data, target in DataLoader(ds):\n    data.to(device)\n    target.cpu()\n",
            "from torch.utils.data import DataLoader\nfor data, target in DataLoader(ds):\n    data = data.to(device)\n    target = target.cpu()\n",
        ),
        Invalid("def f(x):\n    x.half()\n    return x.shape\n", "def f(x):\n    x = x.half()\n    return x.shape\n"),
        Invalid(
            "def prepare(surface, images, device):\n    surface_valid = surface.expand_as(images)\n    surface_valid.to(device)\n    return surface_valid\n",
            "def prepare(surface, images, device):\n    surface_valid = surface.expand_as(images)\n    surface_valid = surface_valid.to(device)\n    return surface_valid\n",
        ),
        Invalid(
            "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.c = torch.ones(3)\n    def move(self, device):\n        self.c.to(device)\n",
            "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.c = torch.ones(3)\n    def move(self, device):\n        self.c = self.c.to(device)\n",
        ),
    ]

    def visit_Expr(self, node: cst.Expr) -> None:
        call = node.value
        if not m.matches(call, m.Call(func=m.Attribute(attr=m.Name()))):
            return
        if call.func.attr.value not in CONVERSIONS or call.lpar:
            return
        receiver = call.func.value
        if not analysis.is_name_chain(receiver):
            return
        facts = analysis.of(self)
        if facts.is_parameter(receiver, call) or not (facts.kind(receiver, call).is_tensor or self._flow_says_tensor(receiver)):
            return
        target = self.code_of(receiver)
        self.report(call, fix=[self.insert(self.span(call)[0], f"{target} = ")], fix_message=f"Assign the result back to `{target}`")

    def _flow_says_tensor(self, receiver: cst.BaseExpression) -> bool:
        """The device flow knows the receiver holds a tensor on every path
        there (``y = x.expand_as(z)``, a loader batch, a function of the file
        that returns one)."""
        flow = analysis.flow_of(self)
        node = flow.node_at(*self.span(receiver))
        return node is not None and flow.what(node) is What.TENSOR
