"""FDV106 discarded-to: a bare ``x.to(device)`` → ``x = x.to(device)``."""

from __future__ import annotations

import ast

from typing import TYPE_CHECKING

import libcst as cst

from fixdev.engine.rule import Invalid, Rule

from fixdev.analysis import file_analysis as analysis
from fixdev.analysis.flow import FOLLOWS_MODULE, SameAs, What

if TYPE_CHECKING:
    from fixdev.analysis.flow import Value

CONVERSIONS = frozenset({"to", "cpu", "half", "float", "double", "bfloat16", "long", "int", "bool"})
MOVES_ONLY = frozenset({"cpu", "cuda"})  # conversions that change only the device
DEVICE_TYPES = frozenset({"cpu", "cuda", "mps", "xpu", "hpu", "npu", "xla", "meta"})


class DiscardedTo(Rule):
    """
    ## What it does
    Finds statements such as `x.to(device)`, `x.cpu()` or `x.half()` whose
    result is thrown away, where `x` is known to be a tensor (made by a torch
    function or tensor method, a loader batch, or anything the device-flow
    analysis shows holds a tensor on every path), and assigns the result
    back: `x = x.to(device)`. An item of a mapping the flow shows holds
    tensors (a dict of tensors, a tokenizer's batch, a loader's dict batch),
    read by a string key or by a key the loop draws from that mapping
    (`for k in batch: batch[k].to(device)`), is assigned back the same way:
    `batch[k] = batch[k].to(device)`.

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
    be none) sees the new tensor. The fix is safe for a move (`.cpu()`,
    `.to(device)`, `.to(x.device)`); for a conversion that changes the dtype
    (`.half()`, `.float()`, `.to(torch.float16)`, `.to(device, dtype)`) it is
    unsafe: the values after it change too (applied with `--unsafe-fixes`).

    ## When it stays silent
    For modules (`model.to(device)` and `self.to(device)` are correct: modules
    move in place), for names whose kind the code does not show, for
    expressions that are not a plain name or attribute chain or such a
    mapping's item (not a tensor's slice `x[:, 0]`, which written back stays
    in `x`, nor a position `pair[0]`, which a tuple cannot take), and for
    `nn.Parameter` attributes (a plain tensor cannot be assigned to them).
    """

    code = "FDV106"
    name = "discarded-to"
    group = "mismatch"
    message = "`Tensor.to()` returns a new tensor; the result is discarded"
    # (the first, a part of the second, is searched fast: the second only runs on files it matches)
    trigger = (r"\.(?:to|cpu|half|float|double|bfloat16|long|int|bool)\s*\(", r"(?m)^[ \t]*[\w.]+(?:\[[^\]\n]*\])?\.(?:to|cpu|half|float|double|bfloat16|long|int|bool)\s*\(")

    @classmethod
    def screen(cls, screening) -> bool:
        """A statement that is only ``x.to(...)`` (or another conversion) of a
        name chain the flow shows is a tensor, or places only where names of
        the function live (``_follows_tensor_parameters``), and not one that
        follows a module (a parameter)."""
        flow = analysis.flow_for(screening)
        parents = analysis.ast_parents(flow)
        for call in analysis.calls_named(screening, *CONVERSIONS):
            if type(parents.get(call)) is not ast.Expr or type(call.func) is not ast.Attribute:
                continue
            receiver = call.func.value
            if analysis.chain_root(receiver) is None and not (type(receiver) is ast.Subscript and analysis.chain_root(receiver.value) is not None):
                continue
            value = flow.value(receiver)
            if value.flags & FOLLOWS_MODULE:
                continue
            if value.what is What.TENSOR or (value.what is What.UNKNOWN and value.places and all(type(p) is SameAs for p in value.placements)):
                return True
        return False

    VALID = [
        "import torch\nx = torch.randn(3)\nx = x.to('cuda')\n",
        "import torch.nn as nn\nmodel = nn.Linear(2, 2)\nmodel.to('cuda')\n",
        "thing.to('cuda')\n",
        "import torch.nn as nn\nclass M(nn.Module):\n    def move(self):\n        self.to('cuda')\n",
        "import torch\nx = torch.randn(3)\nprint(x.to('cuda'))\n",
        "import torch\nx = torch.zeros(4, 3)\nx[:, 0].to('cuda')\n",
    ]
    INVALID = [
        Invalid("import torch\nx = torch.randn(3, 3)\nx.to('cuda')\n", "import torch\nx = torch.randn(3, 3)\nx = x.to('cuda')\n"),
        Invalid(
            "from torch.utils.data import DataLoader\nfor data, target in DataLoader(ds):\n    data.to(device)\n    target.cpu()\n",
            "from torch.utils.data import DataLoader\nfor data, target in DataLoader(ds):\n    data = data.to(device)\n    target = target.cpu()\n",
        ),
        Invalid(
            "import torch\ndef f(rows, device):\n    batch = {'x': torch.tensor(rows)}\n    for k in batch:\n        batch[k].to(device)\n    return batch\n",
            "import torch\ndef f(rows, device):\n    batch = {'x': torch.tensor(rows)}\n    for k in batch:\n        batch[k] = batch[k].to(device)\n    return batch\n",
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
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)):
            return
        if call.func.attr.value not in CONVERSIONS or call.lpar:
            return
        receiver = call.func.value
        if isinstance(receiver, cst.Subscript):
            if not self._mapping_item(receiver, node):
                return
        elif not analysis.is_name_chain(receiver):
            return
        value = analysis.value_of(self, receiver)
        if value.flags & FOLLOWS_MODULE or self._is_layer_weight(receiver):
            return  # an nn.Parameter: assigning a plain tensor to it raises
        if value.what is not What.TENSOR and (isinstance(receiver, cst.Subscript) or not self._follows_tensor_parameters(value, call)):
            return
        target = self.code_of(receiver)
        fix = [self.insert(self.span(call)[0], f"{target} = ")]
        self.report(call, fix=fix, fix_message=f"Assign the result back to `{target}`", unsafe=not _moves_only(self, call))

    def _mapping_item(self, item: cst.Subscript, statement: cst.Expr) -> bool:
        """``batch[k]`` of a container name chain that the code shows is a
        mapping, which takes the item back: the key is a string
        (``inputs["mask"]``; a tuple or list refuses it) or a name the loop
        around the statement draws from the container's keys (``for k in
        batch:`` / ``for k in batch.keys():``). Not a tensor's slice
        (``x[:, 0] = ...`` writes into ``x``, which stays where it is), nor
        an int position (a tuple refuses the assignment)."""
        if not analysis.is_name_chain(item.value) or len(item.slice) != 1:
            return False
        key = item.slice[0].slice
        if not isinstance(key, cst.Index) or key.star is not None:
            return False
        if analysis.what_of(self, item.value) not in (What.BATCH, What.UNKNOWN):
            return False
        key = key.value
        if isinstance(key, cst.SimpleString):
            return True
        if not isinstance(key, cst.Name):
            return False
        container = self.code_of(item.value)
        facts = analysis.of(self)
        loop = facts.enclosing(statement, (cst.For, cst.FunctionDef))
        while isinstance(loop, cst.For):
            if isinstance(loop.target, cst.Name) and loop.target.value == key.value:
                keys = loop.iter
                if isinstance(keys, cst.Call) and isinstance(keys.func, cst.Attribute) and keys.func.attr.value == "keys" and not keys.args:
                    keys = keys.func.value
                return analysis.is_name_chain(keys) and self.code_of(keys) == container
            loop = facts.enclosing(loop, (cst.For, cst.FunctionDef))
        return False

    def _is_layer_weight(self, receiver: cst.BaseExpression) -> bool:
        """``<module>.weight`` / ``.bias``: a parameter of a layer."""
        return isinstance(receiver, cst.Attribute) and receiver.attr.value in ("weight", "bias") and analysis.what_of(self, receiver.value) is What.MODULE

    def _follows_tensor_parameters(self, value: "Value", call: cst.Call) -> bool:
        """The flow does not know the receiver's kind but places it only where
        parameters the function treats as tensors live (``x``, ``x * 2``,
        ``x.expand_as(y)`` for such an ``x``; see ``FileFlow.tensor_parameters``)."""
        if value.what is not What.UNKNOWN or not value.places:
            return False
        func = analysis.of(self).enclosing(call, cst.FunctionDef)
        params = analysis.tensor_parameters(self, func) if func is not None else []
        return all(type(p) is SameAs and p.text in params for p in value.placements)


def _moves_only(rule: Rule, call: cst.Call) -> bool:
    """``x.cpu()``, or ``x.to(d)`` whose one argument is shown to be a device
    (a device string, ``y.device``, a value the flow shows is a device): the
    fix then changes only the device. Anything else may be a dtype
    (``x.to(orig_dtype)``, ``x.to(other)``): the fix is then unsafe."""
    method = call.func.attr.value
    if method in MOVES_ONLY:
        return True
    if method != "to" or len(call.args) != 1:
        return False
    arg = call.args[0]
    if arg.keyword is not None:
        return arg.keyword.value == "device"
    value = arg.value
    if isinstance(value, cst.SimpleString):
        return value.evaluated_value.split(":")[0] in DEVICE_TYPES
    if isinstance(value, cst.Attribute) and value.attr.value == "device":
        return True
    return analysis.what_of(rule, value) is What.DEVICE
