"""FDV103 constant-buffer: ``self.c = torch.tensor(...)`` in ``__init__`` → ``register_buffer``."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from fixdev.rule import Invalid, Option, Rule

from . import analysis
from .analysis import TENSOR_FACTORIES, TENSOR_METHODS


class ConstantBuffer(Rule):
    """
    ## What it does
    In an `nn.Module`'s `__init__`, after `super().__init__()`, rewrites
    `self.NAME = <tensor>` (a torch factory or `torch.tensor(...)`, possibly
    followed by tensor methods such as `.view` or `.unsqueeze`) to
    `self.register_buffer("NAME", <tensor>, persistent=False)`.

    ## Why is this bad?
    A tensor stored as a plain attribute is invisible to `model.to(device)` and
    `model.cuda()`: the parameters move, the constant stays on the CPU, and the
    first `forward` on the GPU raises a device mismatch. Buffers move with the
    module.

    ## Example
    ```python
    def __init__(self):
        super().__init__()
        self.scale = torch.tensor([1.0, 2.0, 3.0])
    ```

    ## Use instead
    ```python
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.tensor([1.0, 2.0, 3.0]), persistent=False)
    ```

    ## Fix safety
    `persistent=False` keeps every `state_dict` unchanged, so existing
    checkpoints still load with `strict=True` (set the rule option
    `persistent = true` to save the buffer in state dicts instead; old
    checkpoints then miss the key). Float buffers now follow `.half()` and
    `.double()` casts of the module, as parameters do.

    ## When it stays silent
    When `NAME` is assigned anywhere else in the class (a buffer cannot later
    take a float or an `nn.Parameter`); when the assignment comes before
    `super().__init__()` (or there is no such call); when the class is not a
    module (a `Dataset` has no `register_buffer`); when the tensor has
    `requires_grad=True` (it was probably meant as a parameter).
    """

    code = "FDV103"
    name = "constant-buffer"
    message = "Tensor stored as a plain attribute does not follow `.to(device)`; register it as a buffer"
    trigger = ("__init__", r"self\.\w+\s*=\s*[\w.]*" + analysis.FACTORY_CALL)
    options = {"persistent": Option(bool, False, "Save the new buffers in state dicts (changes their keys).")}

    VALID = [
        "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.w = nn.Parameter(torch.ones(3))\n",
        "import torch\nclass D(torch.utils.data.Dataset):\n    def __init__(self):\n        super().__init__()\n        self.x = torch.ones(3)\n",
        "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        self.c = torch.ones(3)\n        super().__init__()\n",
        "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.c = torch.ones(3)\n    def reset(self):\n        self.c = 1.0\n",
        "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.c = torch.ones(3, requires_grad=True)\n",
        "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n        self.n = n\n        self.c = compute(n)\n",
    ]
    INVALID = [
        Invalid(
            "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.scale = torch.tensor([1.0, 2.0])\n",
            "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.register_buffer(\"scale\", torch.tensor([1.0, 2.0]), persistent=False)\n",
        ),
        Invalid(
            "import torch\nfrom torch import nn\nclass Base(nn.Module):\n    pass\nclass M(Base):\n    def __init__(self, n):\n        super(M, self).__init__()\n        self.pos = torch.arange(n).view(1, -1).float()\n",
            "import torch\nfrom torch import nn\nclass Base(nn.Module):\n    pass\nclass M(Base):\n    def __init__(self, n):\n        super(M, self).__init__()\n        self.register_buffer(\"pos\", torch.arange(n).view(1, -1).float(), persistent=False)\n",
        ),
        Invalid(
            "import torch\nimport torch.nn as nn\nclass M(nn.Linear):\n    def __init__(self):\n        nn.Linear.__init__(self, 2, 2)\n        self.mask = torch.ones(2, 2)\n",
            "import torch\nimport torch.nn as nn\nclass M(nn.Linear):\n    def __init__(self):\n        nn.Linear.__init__(self, 2, 2)\n        self.register_buffer(\"mask\", torch.ones(2, 2), persistent=False)\n",
        ),
    ]

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        facts = analysis.of(self)
        if node not in facts.module_classes:
            return
        init = next((s for s in node.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
        if init is None:
            return
        super_end = self._super_init_end(init)
        if super_end is None:
            return
        assigned = _assignment_counts(node)
        for statement in m.findall(init.body, m.Assign(targets=[m.AssignTarget(target=m.Attribute(value=m.Name("self")))])):
            if facts.start(statement) < super_end or facts.enclosing(statement, cst.FunctionDef) is not init:
                continue
            name = statement.targets[0].target.attr.value
            if assigned.get(name, 0) != 1 or not self._is_constant_tensor(statement.value):
                continue
            persistent = "" if self.settings["persistent"] else ", persistent=False"
            replacement = f'self.register_buffer("{name}", {self.code_of(statement.value)}{persistent})'
            self.report(statement, fix=[self.replace(statement, replacement)], fix_message=f"Register `{name}` as a buffer")

    def _super_init_end(self, init: cst.FunctionDef) -> int | None:
        """End offset of ``super().__init__(...)`` (or ``Base.__init__(self, ...)``)."""
        facts = analysis.of(self)
        for call in m.findall(init.body, m.Call(func=m.Attribute(attr=m.Name("__init__")))):
            owner = call.func.value
            if m.matches(owner, m.Call(func=m.Name("super"))) or (analysis.is_name_chain(owner) and call.args and m.matches(call.args[0].value, m.Name("self"))):
                return facts.end(call)
        return None

    def _is_constant_tensor(self, value: cst.BaseExpression) -> bool:
        while m.matches(value, m.Call(func=m.Attribute())) and not self.qualified_names(value.func) & TENSOR_FACTORIES:
            if value.func.attr.value not in TENSOR_METHODS or value.func.attr.value in ("numpy", "tolist", "item"):
                return False
            value = value.func.value
        if not isinstance(value, cst.Call) or not self.qualified_names(value.func) & TENSOR_FACTORIES:
            return False
        grad = analysis.keyword(value, "requires_grad")
        return grad is None or m.matches(grad.value, m.Name("False"))


def _assignment_counts(cls: cst.ClassDef) -> dict[str, int]:
    """How many statements in the class assign ``self.NAME``, per NAME."""
    counts: dict[str, int] = {}
    self_attr = m.Attribute(value=m.Name("self"))
    for node in m.findall(cls.body, m.Assign() | m.AugAssign() | m.AnnAssign()):
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        for target in targets:
            for attribute in m.findall(target, self_attr) if not m.matches(target, self_attr) else [target]:
                counts[attribute.attr.value] = counts.get(attribute.attr.value, 0) + 1
    for call in m.findall(cls.body, m.Call(func=m.Name("setattr"))):
        if len(call.args) >= 2 and isinstance(call.args[1].value, cst.SimpleString):
            name = call.args[1].value.evaluated_value
            counts[name] = counts.get(name, 0) + 2  # never rewrite what setattr also sets
    return counts
