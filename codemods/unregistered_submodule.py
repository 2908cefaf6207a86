"""FDV113 unregistered-submodule: layers in a plain ``list``/``dict`` → ``nn.ModuleList`` / ``nn.ModuleDict``; a model never moved while its inputs are."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Iterator

import libcst as cst

from fixdev.engine.rule import Edit, Invalid, Rule, child_nodes, dotted

from fixdev.analysis import holders
from fixdev.analysis import file_analysis as analysis, placement
from fixdev.analysis.unmoved_model import is_weighted_loss, move_before, unmoved_losses, unmoved_models
from fixdev.analysis.file_analysis import TENSOR_FACTORIES, TENSOR_METHODS
from fixdev.analysis.flow import LIGHTNING_MODULES, NOT_MODULES, ast_walk

# torch.nn layers that own parameters (or running statistics): built inside
# `forward` they start on the CPU at every call. A list of names, not "any
# torch.nn class": activations, pooling, dropout and losses own nothing, and a
# report there would be noise.
STATEFUL_LAYERS = frozenset(
    (
        "Linear Bilinear LazyLinear Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d "
        "LazyConv1d LazyConv2d LazyConv3d Embedding EmbeddingBag BatchNorm1d BatchNorm2d BatchNorm3d "
        "SyncBatchNorm LayerNorm GroupNorm RMSNorm RNN LSTM GRU RNNCell LSTMCell GRUCell MultiheadAttention "
        "Transformer TransformerEncoder TransformerDecoder TransformerEncoderLayer TransformerDecoderLayer PReLU"
    ).split()
)
# torch.nn classes that own nothing themselves (a plain list of them moves
# nothing that matters). Containers own what they are given.
OWN_NOTHING = frozenset({"Module", "Identity", "Flatten", "Unflatten", "Dropout", "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax", "LeakyReLU", "ELU", "Mish", "Hardswish", "LogSoftmax"})
_CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict"})
_PARAMETERS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
# Names of attributes every ModuleDict / ParameterDict has (torch 2.13's
# ``dir(nn.ModuleDict())`` without the private ones; tests check it still
# covers torch's): a key spelled like one raises ``KeyError: attribute
# 'keys' already exists``. Keys starting with ``_`` are refused as well.
MODULE_DICT_ATTRIBUTES = frozenset(
    (
        "T_destination add_module apply bfloat16 buffers call_super_init children clear compile cpu cuda double "
        "dump_patches eval extra_repr float forward get_buffer get_extra_state get_parameter get_submodule half "
        "ipu items keys load_state_dict modules mtia named_buffers named_children named_modules named_parameters "
        "parameters pop register_backward_hook register_buffer register_forward_hook register_forward_pre_hook "
        "register_full_backward_hook register_full_backward_pre_hook register_load_state_dict_post_hook "
        "register_load_state_dict_pre_hook register_module register_parameter register_state_dict_post_hook "
        "register_state_dict_pre_hook requires_grad_ set_extra_state set_submodule share_memory state_dict to "
        "to_empty train training type update values xpu zero_grad copy fromkeys get popitem setdefault smart_apply"
    ).split()
)
# A name that says the author keeps the copy out of training on purpose.
# The text the registration part looks for (the rule's trigger is wider: a
# move, for a model never moved while its inputs are).
_STORE_TEXT = re.compile(r"(?m)self\.\w+\s*=\s*(?:[\[{(]|dict\(|\w+\s*$)|def forward")
_MOVE_TEXT = re.compile(r"\.(?:to|cuda)\s*\(")
_HIDDEN_WORDS = re.compile(r"(?:^|_)(?:teacher|frozen|freeze|ema|momentum|shadow|target|swa|averaged|ref)(?:_|$|s\b)")
# Imports that say something else places, shards or copies the models.
_WRAPPER_IMPORTS = (
    "torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed", "torch.distributed.fsdp",
    "torch.distributed._composable", "torch.optim.swa_utils", "lightning", "pytorch_lightning", "accelerate",
    "deepspeed", "fairscale", "timm.utils.model_ema", "timm.utils.ModelEma", "ema_pytorch", "torch_ema",
)
_WRAPPER_CALLS = ("DistributedDataParallel", "FullyShardedDataParallel", "fully_shard", "AveragedModel", "ModelEma", "ModelEmaV2", "ModelEmaV3")
_SEQUENCE_BUILTINS = frozenset({"len", "enumerate", "zip", "reversed", "list", "tuple", "iter", "sorted"})
_DICT_READS = frozenset({"items", "keys", "values"})
_ADDS = frozenset({"append", "insert", "extend"})
_REGISTERS = frozenset({"add_module", "register_module", "register_parameter", "register_buffer"})


@dataclass
class _Holder:
    """What one ``self.NAME = <plain container>`` holds, and why it may not be fixed."""

    kind: str  # "module", "parameter" or "tensor"
    container: str  # "list" or "dict"
    stateful: bool = False
    keys_known: bool = True
    keys: list[str] = field(default_factory=list)
    registered: int = 0  # elements that are attributes already registered
    elements: int = 0


class UnregisteredSubmodule(Rule):
    """
    ## What it does
    In an `nn.Module`'s `__init__` (after `super().__init__()`), finds
    `self.NAME` set to a plain `list`, `tuple` or `dict` of sub-modules —
    torch.nn layers or the file's own module classes, built right there
    (`[nn.Linear(d, d) for _ in range(n)]`, `{"a": Head()}`, `[]` filled by
    `self.NAME.append(Block())`, or a local list filled so and then stored)
    — and wraps it: `nn.ModuleList([...])`, `nn.ModuleDict({...})`, spelled
    through the file's imports (`nn.` / `torch.nn.`, or the name added to a
    `from torch.nn import ...`). A plain container of `nn.Parameter`s
    becomes `nn.ParameterList` / `nn.ParameterDict`. Reported without a fix:
    a plain container of constant tensors that a method reads, and a
    parameterised layer (`nn.Linear`, a norm, an RNN …) built inside
    `forward`.
    Also a model the code never moves fed inputs it moves (`x =
    x.to(device); model(x)`): where the model's whole history is in the file
    (built here, returned by its functions, or a parameter every caller of
    which is here) and the file moves nothing but tensors, `model =
    model.to(device)` before the call (before the loop that holds it); a
    plain class's `self.model = model` (a trainer given its model) whose
    methods send the inputs to a device the file chooses itself (a
    module-level `DEVICE`), `self.model = model.to(DEVICE)` where it is
    stored; one it builds there (`self.policy = Policy()`) while sending the
    inputs to its `self.device`, set before: `Policy().to(self.device)`.
    And a torch.nn loss given a weight the code makes on the host
    (`nn.CrossEntropyLoss(weight=torch.tensor([1.0, 3.0]))`, `pos_weight=`,
    a `torch.from_numpy` array), never moved, called with tensors on a
    device: `.to(device)` where it is built (`criterion =
    nn.CrossEntropyLoss(weight=w).to(device)`; in a plain class,
    `.to(self.device)` when `self.device` is set before).

    ## Why is this bad?
    `nn.Module` only knows the sub-modules it holds as attributes or in its
    containers. Modules in a plain list are not in `parameters()` (the
    optimizer never trains them), not in `state_dict()` (checkpoints lose
    them), and `model.to(device)` / `.cuda()` / `.half()` / `.eval()` never
    reach them: on a GPU the first `forward` raises `Expected all tensors to
    be on the same device`. A layer built in `forward` starts on the CPU,
    with fresh random weights, at every call. A weighted loss holds its
    `weight` as a buffer where it was made: `criterion(logits, labels)` with
    both on the GPU raises the same error.

    ## Example
    ```python
    class MLP(nn.Module):
        def __init__(self, d, n):
            super().__init__()
            self.layers = [nn.Linear(d, d) for _ in range(n)]
    ```

    ## Use instead
    ```python
    class MLP(nn.Module):
        def __init__(self, d, n):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(d, d) for _ in range(n)])
    ```

    ## Fix safety
    Always unsafe (applied with `--unsafe-fixes`): registering changes more
    than where the layers live. `state_dict()` gains the layers' keys, so
    checkpoints saved before the fix fail `load_state_dict(strict=True)`
    with missing keys; optimizers built from `parameters()` start training
    them; `train()` / `eval()` / `.half()` / `requires_grad_()` reach them;
    DDP expects their gradients. The rule gives no fix (a report only) where
    one of these is likely to be unwanted: the file loads checkpoints
    (`load_state_dict`, `load_from_checkpoint`); the attribute's name says it
    is kept out of training on purpose (`teacher`, `frozen`, `ema`,
    `target`, `momentum` …); its modules get `requires_grad_(False)` /
    `requires_grad = False` or run under `torch.no_grad()`; some elements are
    already registered as attributes (`[self.a, nn.Linear(...)]`, or
    `self.first = self.layers[0]`), which would give them two keys; a
    dict's keys are not known identifier strings that `ModuleDict` accepts
    (no `.`, not a name `ModuleDict` already has, such as `keys` or
    `forward`); the container is used in a way a `ModuleList` /
    `ModuleDict` does not support or may change (passed to an unknown
    function, `list.index`, `dict.get`, `+`, `isinstance`); or DDP / FSDP,
    Lightning, `accelerate`, DeepSpeed, an EMA copy or `device_map=` places
    or copies the models in the file. Moving a model never moved is unsafe
    too: `.to()` moves the caller's model in place, and one the caller
    placed elsewhere on purpose (sharded, kept on the CPU) moves; where the
    file names such a wrapper (`device_map`, DDP, `accelerate`, an EMA
    copy …) it is reported without a fix. Moving a weighted loss is safe: a
    loss has no parameters, and `.to(device)` moves only its weight buffers.

    ## When it stays silent
    When any element is not a known construction (a name or call the file
    does not show to be a torch.nn layer or its own module class, such as
    `nn.Linear(...).cuda()`, which the author placed); when every element is
    an activation, pooling or other layer that owns nothing; when the
    attribute is set more than once, by `+=`, `setattr` or before
    `super().__init__()`, or changed outside `__init__` (a list used as a
    store); when no method other than `__init__` reads it; when the modules
    are registered some other way too (`nn.Sequential(*self.layers)`,
    `self.add_module(...)` or `setattr(self, ...)` over them); for a list of
    tensors that no method reads or that an `_apply` override in the file
    moves itself (`m.grid = list(map(fn, m.grid))`); and for layers built in `forward` and
    moved there (`nn.Linear(...).to(x.device)`). For a model never moved:
    silent where the file moves anything not shown to be a tensor, where a
    caller chooses the device (`def evaluate(model, loader, device)`: it
    moves the model with the device it passes), where the inputs go to the
    model's own device, inside an `nn.Module`'s methods, where the model is
    loaded whole (`torch.load`) or given to a call that may place it (one
    naming a device or a wrapper), and for parameter-free layers. For a
    weighted loss: silent where its weight is made on the device or moved
    before (`torch.tensor(w, device=device)`), comes from a caller or a call
    the file does not show (its place is not known), the loss is moved on
    some path (`if use_gpu: criterion.cuda()`), used otherwise than called
    (put in a list, handed on), or held by an `nn.Module` (it moves with
    it); reported without a fix where no device in reach names its inputs'.
    """

    code = "FDV113"
    name = "unregistered-submodule"
    # "state": the bug is what the module owns (its registered state), left
    # on the CPU by `.to()`; the mismatch in `forward` is a consequence.
    group = "state"
    fix_applicability = "unsafe"  # state-dict keys, parameters(), train()/eval(): see Fix safety
    message = "Sub-modules in a plain container are not registered: `.to(device)` leaves them behind and `parameters()` misses them"
    trigger = r"Module|\.(?:to|cuda)\s*\("

    @classmethod
    def screen(cls, screening) -> bool:
        """A class whose method stores a plain container holding calls (or an
        empty one, or a local name bound to a list), or whose ``forward``
        calls a parameterised torch.nn layer's name or a class of the file:
        what ``visit_ClassDef`` looks at, names unresolved; or a model never
        moved fed moved inputs (``unmoved_models``)."""
        text = screening.text
        if "Module" in text and _STORE_TEXT.search(text) and cls._screen_classes(screening):
            return True
        return _MOVE_TEXT.search(text) is not None and bool(unmoved_models(analysis.flow_for(screening)) or unmoved_losses(analysis.flow_for(screening)))

    @classmethod
    def _screen_classes(cls, screening) -> bool:
        return holders.screen_classes(screening, STATEFUL_LAYERS, _ADDS)

    VALID = [
        # the loss's weight is made on the device
        "import torch\nimport torch.nn as nn\ndef step(model, x, y, device):\n    model.to(device)\n    w = torch.tensor([1.0, 3.0], device=device)\n    return nn.CrossEntropyLoss(weight=w)(model(x.to(device)), y.to(device))\n",
        # the caller chooses the device, and moves the model with it
        "import torch\ndef evaluate(model, loader, device):\n    for x in loader:\n        model(x.to(device))\n",
        # already registered
        "import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
        "        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(n)])\n    def forward(self, x):\n"
        "        for layer in self.layers:\n            x = layer(x)\n        return x\n",
        # registered through nn.Sequential too: nothing stays behind
        "import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.blocks = [nn.Linear(4, 4), nn.Linear(4, 4)]\n        self.net = nn.Sequential(*self.blocks)\n"
        "    def forward(self, x):\n        return self.net(x)\n",
        # elements placed by the author
        "import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.heads = [nn.Linear(4, 4).cuda() for _ in range(2)]\n    def forward(self, x):\n        return [h(x) for h in self.heads]\n",
        # activations own nothing
        "import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.acts = [nn.ReLU(), nn.Tanh()]\n    def forward(self, x, i):\n        return self.acts[i](x)\n",
        # not a module class
        "import torch.nn as nn\nclass Ensemble:\n    def __init__(self):\n        self.models = [nn.Linear(4, 4) for _ in range(3)]\n"
        "    def predict(self, x):\n        return [m(x) for m in self.models]\n",
        # a list used as a store, changed in forward
        "import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 4)\n"
        "        self.outputs = []\n    def forward(self, x):\n        self.outputs.append(self.fc(x))\n        return x\n",
        # a layer built in forward and moved there
        "import torch.nn as nn\nclass M(nn.Module):\n    def forward(self, x):\n        return nn.Linear(x.shape[-1], 2).to(x.device)(x)\n",
    ]
    INVALID = [
        # a loss given a weight made on the host, never moved (a safe fix)
        Invalid(
            "import torch\nimport torch.nn as nn\ndef step(model, x, y, device):\n    model.to(device)\n    w = torch.tensor([1.0, 3.0])\n"
            "    criterion = nn.CrossEntropyLoss(weight=w)\n    return criterion(model(x.to(device)), y.to(device))\n",
            "import torch\nimport torch.nn as nn\ndef step(model, x, y, device):\n    model.to(device)\n    w = torch.tensor([1.0, 3.0])\n"
            "    criterion = nn.CrossEntropyLoss(weight=w).to(device)\n    return criterion(model(x.to(device)), y.to(device))\n",
        ),
        # a model never moved, fed inputs moved to the device
        Invalid(
            "import torch, torch.nn as nn\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "def run(xs):\n    net = nn.Linear(4, 2)\n    for x in xs:\n        net(x.to(device))\n",
            "import torch, torch.nn as nn\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "def run(xs):\n    net = nn.Linear(4, 2)\n    net = net.to(device)\n    for x in xs:\n        net(x.to(device))\n",
        ),
        Invalid(
            "import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
            "        self.layers = [nn.Linear(4, 4) for _ in range(n)]\n    def forward(self, x):\n"
            "        for layer in self.layers:\n            x = layer(x)\n        return x\n",
            "import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
            "        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(n)])\n    def forward(self, x):\n"
            "        for layer in self.layers:\n            x = layer(x)\n        return x\n",
        ),
        Invalid(
            "import torch\nclass Heads(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.heads = {'cls': torch.nn.Linear(4, 2), 'box': torch.nn.Linear(4, 4)}\n"
            "    def forward(self, x):\n        return {k: h(x) for k, h in self.heads.items()}\n",
            "import torch\nclass Heads(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.heads = torch.nn.ModuleDict({'cls': torch.nn.Linear(4, 2), 'box': torch.nn.Linear(4, 4)})\n"
            "    def forward(self, x):\n        return {k: h(x) for k, h in self.heads.items()}\n",
        ),
        Invalid(
            "from torch.nn import Module, Linear\nclass Block(Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.fc = Linear(4, 4)\n    def forward(self, x):\n        return self.fc(x)\n"
            "class Net(Module):\n    def __init__(self, n):\n        super().__init__()\n        self.blocks = []\n"
            "        for _ in range(n):\n            self.blocks.append(Block())\n    def forward(self, x):\n"
            "        for block in self.blocks:\n            x = block(x)\n        return x\n",
            "from torch.nn import Module, Linear, ModuleList\nclass Block(Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.fc = Linear(4, 4)\n    def forward(self, x):\n        return self.fc(x)\n"
            "class Net(Module):\n    def __init__(self, n):\n        super().__init__()\n        self.blocks = ModuleList()\n"
            "        for _ in range(n):\n            self.blocks.append(Block())\n    def forward(self, x):\n"
            "        for block in self.blocks:\n            x = block(x)\n        return x\n",
        ),
        Invalid(
            "import torch\nimport torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.scales = [nn.Parameter(torch.ones(4)), nn.Parameter(torch.ones(4))]\n"
            "    def forward(self, x):\n        return x * self.scales[0] * self.scales[1]\n",
            "import torch\nimport torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.scales = nn.ParameterList([nn.Parameter(torch.ones(4)), nn.Parameter(torch.ones(4))])\n"
            "    def forward(self, x):\n        return x * self.scales[0] * self.scales[1]\n",
        ),
        # a frozen teacher: registering would train and save it
        Invalid(
            "import torch.nn as nn\nclass Distill(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.student = nn.Linear(4, 4)\n        self.teacher = [nn.Linear(4, 4)]\n"
            "    def forward(self, x):\n        return self.student(x), self.teacher[0](x)\n",
            None,
        ),
        # a key ModuleDict refuses
        Invalid(
            "import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.heads = {'keys': nn.Linear(4, 4)}\n    def forward(self, x):\n        return self.heads['keys'](x)\n",
            None,
        ),
        # constant tensors: registering them one by one changes every read
        Invalid(
            "import torch\nimport torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.anchors = [torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])]\n"
            "    def forward(self, x, i):\n        return x * self.anchors[i]\n",
            None,
        ),
        Invalid(
            "import torch.nn as nn\nclass M(nn.Module):\n    def forward(self, x):\n        return nn.Linear(x.shape[-1], 2)(x)\n",
            None,
        ),
    ]

    # -- the visit -----------------------------------------------------------------

    def visit_Module(self, node: cst.Module) -> None:
        if _MOVE_TEXT.search(self.context.text) is None:
            return
        flow = analysis.flow_of(self)
        losses = unmoved_losses(flow)
        for met in (*(m for m in unmoved_models(flow) if m.chain not in {loss.chain for loss in losses}), *losses):
            loss = met in losses
            if met.store is not None:  # self.model = model: moved where it is stored
                at = start, end = flow.span(met.store.value)
                plain = isinstance(met.store.value, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))
                value = self.context.text[start:end] if plain else f"({self.context.text[start:end]})"
                bound = not loss or placement.expression_bound_at(facts := analysis.of(self), met.device, facts.statement_at(flow.span(met.store)[0]))
                fix = (Edit(start, end, f"{value}.to({met.device})"),) if bound else ()
            else:
                at = flow.span(met.model)
                fix = move_before(self, flow, met)
            what = f"Loss `{met.chain}` holds its weight on the host and is never moved" if loss else f"Model `{met.chain}` is never moved"
            if not loss and is_weighted_loss(flow, met.model):  # a caller's weight: where it was made is not shown
                what = f"Loss `{met.chain}` holds its weight as a buffer and is never moved"
            self.report_at(*at, f"{what}, while its inputs are moved to `{met.device}`", unsafe=False if loss else None, fix=() if met.placers else fix,
                           fix_message=f"Move `{met.chain}` to `{met.device}`", origins=() if met.store is None else (flow.span(met.model),))

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        facts = analysis.of(self)
        if node not in facts.module_classes:
            return
        methods = [s for s in node.body.body if isinstance(s, cst.FunctionDef) and _self_name(s) is not None]
        forward = next((m for m in methods if m.name.value == "forward"), None)
        if forward is not None:
            self._built_in_forward(forward)
        init = next((m for m in methods if m.name.value == "__init__"), None)
        # Positions (a code generation of the class) and the uses only for
        # a `self.X = <what _check may take as a holder>`: most classes have none.
        stores = _holder_stores(init) if init is not None else []
        super_end = self._super_init_end(init) if stores else None
        if super_end is None:
            return
        uses = _self_attributes(methods)
        for statement in stores:
            if facts.start(statement) > super_end:
                attribute = statement.targets[0].target.attr.value
                self._check(node, init, statement, attribute, uses.get(attribute, []))

    def _check(self, cls: cst.ClassDef, init: cst.FunctionDef, statement: cst.Assign, name: str, uses: list) -> None:
        facts = analysis.of(self)
        value = statement.value
        source = value
        local_adds: list[cst.Call] = []
        if isinstance(value, cst.Name):  # layers = []; layers.append(...); self.layers = layers
            found = self._local_list(init, value.value, statement)
            if found is None:
                return
            source, local_adds = found
        holder = self._holder(source, init)
        if holder is None:
            return
        reasons: list[str] = []
        reads = 0
        adds: list[cst.Call] = list(local_adds)
        for attribute, method in uses:
            if attribute is None:
                return  # setattr(self, "NAME", ...) sets it too
            if attribute is statement.targets[0].target:
                continue
            verdict = self._use(attribute, method, init, holder)
            if verdict == "silent":
                return
            if verdict == "add":
                adds.append(facts.parent(facts.parent(attribute)))
            else:
                reads += method is not init
                if verdict != "read":
                    reasons.append(verdict)
        for call in adds:
            if not self._add_elements(call, holder, init):
                return
        if holder.elements and holder.registered == holder.elements:
            return  # an alias of modules registered as attributes: they move
        if holder.kind != "tensor" and not (holder.stateful or holder.kind == "parameter"):
            return
        if not reads:
            return  # nothing in the class runs them
        if holder.kind == "tensor":
            if name in analysis.set_in_apply(self.context):
                return  # an _apply override moves them with the module (m.grid = list(map(fn, m.grid)))
            self.report(
                statement,
                f"Tensors in a plain {holder.container} `self.{name}` do not follow `.to(device)`; register each as a buffer "
                "(`self.register_buffer(...)`), or make them on the input's device where they are used",
            )
            return
        reasons.extend(self._hidden(cls, init, name, holder))
        if holder.registered:
            reasons.append("some elements are registered as attributes too, and would get two state-dict keys")
        if holder.container == "dict" and not holder.keys_known:
            reasons.append("its keys are not known strings that `ModuleDict` accepts")
        wrapper = {"module": {"list": "ModuleList", "dict": "ModuleDict"}, "parameter": {"list": "ParameterList", "dict": "ParameterDict"}}[holder.kind][holder.container]
        shape = "tuple" if isinstance(source, cst.Tuple) else holder.container
        message = (
            f"`self.{name}` holds {'sub-modules' if holder.kind == 'module' else 'parameters'} in a plain {shape}: "
            f"`.to(device)` leaves them on the CPU and `parameters()` misses them; use `nn.{wrapper}`"
        )
        spelled = self._spelling(wrapper) if not reasons else None
        if spelled is None:
            reason = f" (no fix: {'; '.join(dict.fromkeys(reasons))})" if reasons else ""
            self.report(statement, message + reason)
            return
        text, edits = spelled
        inner = "" if _is_empty(value) else self.code_of(value)
        if isinstance(value, cst.Tuple) and not value.lpar:
            inner = f"({inner})"
        self.report(statement, message, fix=[self.replace(value, f"{text}({inner})"), *edits], fix_message=f"Wrap `self.{name}` in `{text}`")

    # -- what a container holds -----------------------------------------------------------

    def _holder(self, value: cst.BaseExpression, init: cst.FunctionDef) -> _Holder | None:
        """The kind of every element of a list, tuple or dict expression (all
        one kind, or None); an empty one is filled later (``_add_elements``)."""
        if isinstance(value, (cst.List, cst.Tuple)):
            holder = _Holder("", "list")
            elements = list(value.elements)
            if any(isinstance(e, cst.StarredElement) for e in elements):
                return None
            return holder if all(self._element(e.value, holder, init) for e in elements) else None
        if isinstance(value, cst.ListComp):
            holder = _Holder("", "list")
            return holder if self._element(value.elt, holder, init) else None
        if isinstance(value, cst.Dict):
            holder = _Holder("", "dict")
            for element in value.elements:
                if not isinstance(element, cst.DictElement) or not self._element(element.value, holder, init):
                    return None
                self._key(element.key, holder)
            return holder
        if isinstance(value, cst.DictComp):
            holder = _Holder("", "dict")
            if not self._element(value.value, holder, init):
                return None
            keys = _literal_strings(value.for_in.iter) if _is_name(value.key, getattr(value.for_in.target, "value", None)) and value.for_in.inner_for_in is None else None
            for key in keys if keys is not None else [None]:
                self._key(key, holder)
            return holder
        if isinstance(value, cst.Call) and _is_name(value.func, "dict") and "dict" not in self.context.index().rebound and not value.args:
            return _Holder("", "dict")
        if isinstance(value, cst.Call) and _is_name(value.func, "dict") and "dict" not in self.context.index().rebound:
            holder = _Holder("", "dict")
            for arg in value.args:
                if arg.keyword is None or not self._element(arg.value, holder, init):
                    return None
                self._key(arg.keyword.value, holder)
            return holder
        return None

    def _key(self, key, holder: _Holder) -> None:
        text = key if isinstance(key, str) else key.evaluated_value if isinstance(key, cst.SimpleString) else None
        if not (isinstance(text, str) and text.isidentifier() and not text.startswith("_") and text not in MODULE_DICT_ATTRIBUTES):
            holder.keys_known = False
        else:
            holder.keys.append(text)

    def _element(self, expr: cst.BaseExpression, holder: _Holder, init: cst.FunctionDef) -> bool:
        """Whether ``expr`` is an element of the holder's one kind; records
        whether it owns state and whether it is registered already."""
        if isinstance(expr, cst.IfExp):
            return self._element(expr.body, holder, init) and self._element(expr.orelse, holder, init)
        kind, stateful, registered = self._element_kind(expr, init)
        if kind is None or holder.kind not in ("", kind):
            return False
        holder.kind = kind
        holder.stateful |= stateful
        holder.registered += registered
        holder.elements += 1
        return True

    def _element_kind(self, expr: cst.BaseExpression, init: cst.FunctionDef) -> tuple[str | None, bool, bool]:
        if isinstance(expr, cst.Attribute) and _is_name(expr.value, _self_name(init)):
            # self.a, set in __init__ to a module: registered already
            for statement in _walk_statements(init.body):
                if isinstance(statement, cst.Assign) and any(isinstance(t.target, cst.Attribute) and _is_name(t.target.value, _self_name(init)) and t.target.attr.value == expr.attr.value for t in statement.targets):
                    kind, stateful = self._construction(statement.value)
                    if kind == "module":
                        return kind, stateful, True
            return None, False, False
        if isinstance(expr, cst.Name):
            value = self._local_construction(init, expr.value)
            kind, stateful = self._construction(value) if value is not None else (None, False)
            return kind, stateful, False
        kind, stateful = self._construction(expr)
        return kind, stateful, False

    def _construction(self, expr: cst.BaseExpression) -> tuple[str | None, bool]:
        """("module", owns state) for a torch.nn layer or a module class of the
        file built here; ("parameter", True) for ``nn.Parameter(...)``;
        ("tensor", False) for a constant tensor; else (None, False)."""
        if not isinstance(expr, cst.Call):
            return None, False
        names = self.qualified_names(expr.func)
        if names & _PARAMETERS:
            return "parameter", True
        if self._constant_tensor(expr):
            return "tensor", False
        for qualified in names:
            if _is_torch_module_class(qualified):
                last = qualified.rsplit(".", 1)[-1]
                if last in _CONTAINERS:
                    return "module", any(self._construction(arg.value)[1] for arg in expr.args)
                return "module", last in STATEFUL_LAYERS or not _owns_nothing(last)
        local = self._local_module_class(expr.func)
        if local is not None:
            return "module", self._owns_state(local, set())
        return None, False

    def _constant_tensor(self, expr: cst.BaseExpression) -> bool:
        while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and not self.qualified_names(expr.func) & TENSOR_FACTORIES:
            if expr.func.attr.value not in TENSOR_METHODS or expr.func.attr.value in ("numpy", "tolist", "item"):
                return False
            expr = expr.func.value
        return isinstance(expr, cst.Call) and bool(self.qualified_names(expr.func) & TENSOR_FACTORIES)

    def _local_module_class(self, func: cst.BaseExpression) -> cst.ClassDef | None:
        """The file's own module class ``func`` names: a top-level class, the
        only top-level definition of that name, which no import binds."""
        if not isinstance(func, cst.Name):
            return None
        facts = analysis.of(self)
        if "module_classes_by_name" not in facts.shared:
            defined: dict[str, list] = {}
            for statement in self.context.module.body:
                if isinstance(statement, (cst.ClassDef, cst.FunctionDef)):
                    defined.setdefault(statement.name.value, []).append(statement)
            facts.shared["module_classes_by_name"] = {
                n: found[0] for n, found in defined.items()
                if len(found) == 1 and found[0] in facts.module_classes and n not in self.context.index().imported
            }
        return facts.shared["module_classes_by_name"].get(func.value)

    def _owns_state(self, cls: cst.ClassDef, seen: set) -> bool:
        """The class (or a base of the file's) stores a layer, a parameter or a
        buffer on ``self``, or derives from a torch.nn layer that owns some."""
        if cls in seen:
            return False
        seen.add(cls)
        for base in cls.bases:
            for qualified in self.qualified_names(base.value):
                if _is_torch_module_class(qualified) and not _owns_nothing(qualified.rsplit(".", 1)[-1]):
                    return True
            local = self._local_module_class(base.value)
            if local is not None and self._owns_state(local, seen):
                return True
        for node in _walk(cls.body):
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _REGISTERS:
                return True
            if isinstance(node, cst.Assign) and any(isinstance(t.target, cst.Attribute) for t in node.targets):
                if isinstance(node.value, cst.Call) and self._construction(node.value) != (None, False) and self._construction(node.value)[1]:
                    return True
        return False

    # -- local names in __init__ ------------------------------------------------------------

    def _local_construction(self, init: cst.FunctionDef, name: str) -> cst.BaseExpression | None:
        """``layer = nn.Linear(...)`` bound once in ``__init__``, and used
        nowhere else than as an element of the containers this rule looks at
        (else it may be registered some other way)."""
        bindings = [s for s in _walk_statements(init.body) if isinstance(s, cst.Assign) and any(_is_name(t.target, name) for t in s.targets)]
        if len(bindings) != 1 or len(bindings[0].targets) != 1 or name in placement.parameter_names(init):
            return None
        for node in _walk(init.body):
            if isinstance(node, cst.Name) and node.value == name and node is not bindings[0].targets[0].target and _is_variable(analysis.of(self), node):
                parent = analysis.of(self).parent(node)
                holder = analysis.of(self).parent(parent)
                in_add = isinstance(parent, cst.Arg) and isinstance(holder, cst.Call) and isinstance(holder.func, cst.Attribute) and holder.func.attr.value in _ADDS
                if not (in_add or isinstance(parent, (cst.Element, cst.DictElement))):
                    return None
        return bindings[0].value

    def _local_list(self, init: cst.FunctionDef, name: str, store: cst.Assign) -> tuple[cst.BaseExpression, list[cst.Call]] | None:
        """``layers = [...]`` (or ``[]`` filled by ``layers.append(...)``)
        bound once in ``__init__`` and used only so and by ``self.X = layers``."""
        bindings = [s for s in _walk_statements(init.body) if isinstance(s, cst.Assign) and any(_is_name(t.target, name) for t in s.targets)]
        if len(bindings) != 1 or len(bindings[0].targets) != 1 or name in placement.parameter_names(init):
            return None
        value = bindings[0].value
        if not isinstance(value, (cst.List, cst.ListComp)):
            return None
        adds = []
        for node in _walk(init.body):
            if not (isinstance(node, cst.Name) and node.value == name) or node is bindings[0].targets[0].target or node is store.value:
                continue
            if not _is_variable(analysis.of(self), node):
                continue
            parent = analysis.of(self).parent(node)
            call = analysis.of(self).parent(parent)
            if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in _ADDS and isinstance(call, cst.Call) and call.func is parent:
                adds.append(call)
            else:
                return None
        return value, adds

    def _add_elements(self, call: cst.Call, holder: _Holder, init: cst.FunctionDef) -> bool:
        """``X.append(e)`` / ``X.insert(i, e)`` / ``X.extend([...])`` in
        ``__init__``: whether what it adds is of the holder's kind."""
        if holder.container != "list" or analysis.of(self).enclosing(call, cst.FunctionDef) is not init:
            return False
        method = call.func.attr.value
        args = [a for a in call.args if a.keyword is None and not a.star]
        if len(args) != len(call.args):
            return False
        if method == "append" and len(args) == 1:
            return self._element(args[0].value, holder, init)
        if method == "insert" and len(args) == 2:
            return self._element(args[1].value, holder, init)
        if method == "extend" and len(args) == 1:
            added = self._holder(args[0].value, init)
            if added is None or added.container != "list" or holder.kind not in ("", added.kind):
                return False
            holder.kind, holder.stateful = added.kind, holder.stateful or added.stateful
            holder.registered += added.registered
            holder.elements += added.elements
            return True
        return False

    # -- how the class uses it ----------------------------------------------------------

    def _use(self, attribute: cst.Attribute, method: cst.FunctionDef, init: cst.FunctionDef, holder: _Holder) -> str:
        """What one ``self.X`` read does: "read" (what a ModuleList/ModuleDict
        does the same), "add" (``self.X.append(...)``), "silent" (set again,
        changed outside ``__init__``, or registered another way), or a reason
        not to fix."""
        facts = analysis.of(self)
        parent = facts.parent(attribute)
        grand = facts.parent(parent)
        if isinstance(parent, cst.AssignTarget) or isinstance(parent, (cst.AugAssign, cst.AnnAssign)) and parent.target is attribute:
            return "silent"  # set again
        if isinstance(parent, (cst.Del, cst.Element, cst.StarredElement)) or (isinstance(parent, cst.Arg) and parent.star):
            return "silent" if isinstance(parent, cst.Del) or self._registers(grand) else "it is unpacked or put in another container"
        if self._in_no_grad(attribute):
            return "it runs under `torch.no_grad()`"
        if self._freezes_around(attribute):
            return "its modules get `requires_grad` False"
        if isinstance(parent, cst.Subscript) and parent.value is attribute:
            holder_of = facts.parent(parent)
            if isinstance(holder_of, (cst.AssignTarget, cst.Del)) or isinstance(holder_of, cst.AugAssign) and holder_of.target is parent:
                return "silent"  # an element replaced
            if self._registers(facts.parent(holder_of)) if isinstance(holder_of, cst.Arg) else False:
                return "silent"
            if isinstance(holder_of, cst.Assign) and any(isinstance(t.target, cst.Attribute) for t in holder_of.targets):
                return "one of its elements is registered as an attribute too"
            return "read"
        if isinstance(parent, (cst.For, cst.CompFor)) and parent.iter is attribute:
            return "silent" if self._registers_in(parent) else "read"
        if isinstance(parent, cst.Arg) and isinstance(grand, cst.Call):
            if isinstance(grand.func, cst.Name) and grand.func.value in _SEQUENCE_BUILTINS and grand.func.value not in self.context.index().rebound:
                loop = facts.parent(grand)
                if isinstance(loop, (cst.For, cst.CompFor)) and loop.iter is grand and self._registers_in(loop):
                    return "silent"
                return "read"
            return "silent" if self._registers(grand) else "it is passed to a function"
        if isinstance(parent, cst.ComparisonTarget) and isinstance(parent.operator, (cst.In, cst.NotIn)):
            return "read"
        if isinstance(parent, cst.Attribute) and parent.value is attribute and isinstance(grand, cst.Call) and grand.func is parent:
            called = parent.attr.value
            if called in _ADDS and method is init:
                return "add"
            if holder.container == "dict" and called in _DICT_READS:
                return "read" if not (isinstance(facts.parent(grand), (cst.For, cst.CompFor)) and self._registers_in(facts.parent(grand))) else "silent"
            return "silent" if called in _ADDS or called in ("pop", "remove", "clear", "update", "insert", "sort", "reverse") else f"`.{called}()` is called on it"
        if isinstance(parent, cst.Assign) and parent.value is attribute and all(_names_only(t.target) for t in parent.targets):
            return "read"  # a local alias, or unpacked: `first, second = self.pair`
        return "it is used as a plain container"

    def _registers(self, call: cst.CSTNode | None) -> bool:
        """A call that registers what it is given: ``add_module``,
        ``setattr``, or a torch.nn container."""
        if not isinstance(call, cst.Call):
            return False
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in _REGISTERS:
            return True
        if _is_name(call.func, "setattr"):
            return True
        return any(_is_torch_module_class(q) for q in self.qualified_names(call.func))

    def _registers_in(self, loop: cst.CSTNode) -> bool:
        """A loop over the container whose body registers (``self.add_module(...)``)."""
        body = loop.body if isinstance(loop, cst.For) else analysis.of(self).parent(loop)
        return any(self._registers(n) for n in _walk(body))

    def _in_no_grad(self, node: cst.CSTNode) -> bool:
        facts = analysis.of(self)
        current = facts.enclosing(node, cst.With)
        while current is not None:
            for item in current.items:
                call = item.item
                if isinstance(call, cst.Call) and self.qualified_names(call.func) & {"torch.no_grad", "torch.inference_mode"}:
                    return True
            current = facts.enclosing(current, cst.With)
        return False

    def _freezes_around(self, attribute: cst.Attribute) -> bool:
        """``requires_grad_(False)`` / ``requires_grad = False`` in the
        statement that reads ``self.X``, or in a loop over it."""
        facts = analysis.of(self)
        statement = facts.statement_of(attribute)
        if statement is not None and _freezes(statement):
            return True
        loop = facts.enclosing(attribute, cst.For)
        return loop is not None and loop.iter is not None and attribute in set(_walk(loop.iter)) and _freezes(loop.body)

    def _hidden(self, cls: cst.ClassDef, init: cst.FunctionDef, name: str, holder: _Holder) -> list[str]:
        """Why registering may change what the author wanted: a name that says
        frozen, checkpoints loaded in the file, a wrapper that places models."""
        reasons = []
        if _HIDDEN_WORDS.search(_snake(name)):
            reasons.append(f"`{name}` sounds like a copy kept out of training on purpose")
        if analysis.calls_named(self.context, "load_state_dict", "load_from_checkpoint"):
            reasons.append("the file loads checkpoints by key, and registering adds keys")
        if self._wrapped(cls):
            reasons.append("a wrapper (DDP, FSDP, Lightning, an EMA copy, `device_map=`) places or copies the models here")
        return reasons

    def _wrapped(self, cls: cst.ClassDef) -> bool:
        if any(self.qualified_names(base.value) & LIGHTNING_MODULES for base in cls.bases):
            return True
        shared = self.context.shared
        if "fdv113_wrapped" not in shared:
            tree = analysis.flow_for(self.context).tree
            imports = [
                alias.name if type(node) is ast.Import else f"{node.module or ''}.{alias.name}"
                for node in ast_walk(tree)
                if type(node) in (ast.Import, ast.ImportFrom)
                for alias in node.names
            ]
            calls = [call for name in _WRAPPER_CALLS for call in analysis.calls_named(self.context, name)]
            device_map = any(
                keyword.arg == "device_map" for node in ast_walk(tree) if type(node) is ast.Call for keyword in node.keywords
            )
            shared["fdv113_wrapped"] = bool(calls) or device_map or any(
                path == prefix or path.startswith(prefix + ".") for path in imports for prefix in _WRAPPER_IMPORTS
            )
        return shared["fdv113_wrapped"]

    # -- layers built in forward ----------------------------------------------------------

    def _built_in_forward(self, forward: cst.FunctionDef) -> None:
        facts = analysis.of(self)
        for node in _walk(forward.body):
            if not isinstance(node, cst.Call):
                continue
            names = self.qualified_names(node.func)
            layer = next((q.rsplit(".", 1)[-1] for q in names if _is_torch_module_class(q) and q.rsplit(".", 1)[-1] in STATEFUL_LAYERS), None)
            local = self._local_module_class(node.func) if layer is None else None
            if layer is None and (local is None or not self._owns_state(local, set())):
                continue
            if self._moved_in(forward, node):
                continue
            shown = f"nn.{layer}" if layer else local.name.value
            assign = facts.parent(node)
            if isinstance(assign, cst.Assign) and any(isinstance(t.target, cst.Attribute) for t in assign.targets):
                when = "on the CPU when `forward` first runs, after the module has moved, so it misses `.to(device)`"
            else:
                when = "on the CPU with new weights at every call, and `parameters()` never has it"
            self.report(node, f"`{shown}` built inside `forward` starts {when}; build it in `__init__`")

    def _moved_in(self, forward: cst.FunctionDef, call: cst.Call) -> bool:
        """``nn.Linear(...).to(x.device)``, or a name it is bound to moved later in ``forward``."""
        facts = analysis.of(self)
        parent = facts.parent(call)
        if isinstance(parent, cst.Attribute) and parent.attr.value in ("to", "cuda", "type_as"):
            return True
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
            target = self.code_of(parent.targets[0].target)
            return any(
                isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in ("to", "cuda") and self.code_of(n.func.value) == target
                for n in _walk(forward.body)
            )
        return False

    # -- spelling and placement -----------------------------------------------------------

    def _spelling(self, wrapper: str) -> tuple[str, list[Edit]] | None:
        """How the file names ``torch.nn.<wrapper>``: a module-level import
        of it, of ``torch.nn`` or of ``torch``, none of them rebound; else
        the name joins a module-level ``from torch.nn import ...``."""
        index = self.context.index()
        qualified = f"torch.nn.{wrapper}"
        for path, attributes in ((qualified, []), ("torch.nn", [wrapper]), ("torch", ["nn", wrapper])):
            alias = index.module_alias(path)
            if alias is not None and index.resolve(alias, attributes) == {qualified}:
                return ".".join([alias, *attributes]), []
        if wrapper in index.imported or wrapper in index.rebound or wrapper in analysis.of(self).identifiers():
            return None
        for statement in self.context.module.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if isinstance(small, cst.ImportFrom) and not small.relative and small.module is not None and dotted(small.module) == "torch.nn" and not isinstance(small.names, cst.ImportStar):
                    names = list(small.names)
                    names[-1] = names[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                    return wrapper, [self.replace(small, small.with_changes(names=[*names, cst.ImportAlias(cst.Name(wrapper))]))]
        return None

    def _super_init_end(self, init: cst.FunctionDef) -> int | None:
        """End offset of ``super().__init__(...)`` (or ``Base.__init__(self, ...)``):
        a ``ModuleList`` set before it raises."""
        facts = analysis.of(self)
        for call in _walk(init.body):
            if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "__init__"):
                continue
            owner = call.func.value
            if (isinstance(owner, cst.Call) and _is_name(owner.func, "super")) or (analysis.is_name_chain(owner) and call.args and _is_name(call.args[0].value, _self_name(init))):
                return facts.end(call)
        return None


# -- helpers --------------------------------------------------------------------------------


def _is_torch_module_class(name: str) -> bool:
    if name in NOT_MODULES:
        return False
    parts = name.split(".")
    return parts[:2] == ["torch", "nn"] and parts[-1][:1].isupper() and (len(parts) == 3 or parts[2] == "modules")


def _owns_nothing(layer: str) -> bool:
    """A torch.nn class with neither parameters nor buffers (as the class
    is usually built: a weighted loss owns its weight, but rarely sits in a list)."""
    return layer in OWN_NOTHING or layer.endswith(("Loss", "Pool1d", "Pool2d", "Pool3d", "Pad1d", "Pad2d", "Pad3d")) or layer.startswith(("Dropout", "Upsampl"))


def _is_variable(facts, node: cst.Name) -> bool:
    """A name used as a variable: not ``x.NAME``'s attribute, not ``f(NAME=...)``'s keyword."""
    parent = facts.parent(node)
    return not ((isinstance(parent, cst.Attribute) and parent.attr is node) or (isinstance(parent, cst.Arg) and parent.keyword is node))


def _is_name(node: cst.CSTNode, name: str | None) -> bool:
    return isinstance(node, cst.Name) and node.value == name


def _names_only(target: cst.BaseExpression) -> bool:
    if isinstance(target, (cst.Tuple, cst.List)):
        return all(isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in target.elements)
    return isinstance(target, cst.Name)


def _is_empty(value: cst.BaseExpression) -> bool:
    return (isinstance(value, (cst.List, cst.Dict, cst.Tuple)) and not value.elements) or (isinstance(value, cst.Call) and not value.args)


def _self_name(method: cst.FunctionDef) -> str | None:
    """The first parameter of a plain method (not a static or class method)."""
    if any(isinstance(d.decorator, cst.Name) and d.decorator.value in ("staticmethod", "classmethod") for d in method.decorators):
        return None
    params = method.params.posonly_params or method.params.params
    return params[0].name.value if params else None


def _literal_strings(node: cst.BaseExpression) -> list[str] | None:
    if isinstance(node, (cst.List, cst.Tuple)) and all(isinstance(e, cst.Element) and isinstance(e.value, cst.SimpleString) for e in node.elements):
        return [e.value.evaluated_value for e in node.elements]
    return None


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``node`` and everything under it, nested classes aside (their ``self`` is another object)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed([c for c in child_nodes(current) if type(c) is not cst.ClassDef]))


def _walk_statements(body: cst.CSTNode) -> Iterator[cst.BaseSmallStatement]:
    """The small statements of a method, in blocks too, not in nested functions."""
    for node in _walk(body):
        if isinstance(node, cst.SimpleStatementLine):
            yield from node.body


def _holder_stores(init: cst.FunctionDef) -> list[cst.Assign]:
    """``self.X = v`` of ``__init__`` (one target) where ``_check`` may find a holder in ``v``."""
    statements = [s for s in _walk_statements(init.body) if isinstance(s, cst.Assign) and len(s.targets) == 1]
    lists = {t.target.value for s in statements if isinstance(s.value, (cst.List, cst.ListComp)) for t in s.targets if isinstance(t.target, cst.Name)}
    return [
        s for s in statements
        if isinstance(target := s.targets[0].target, cst.Attribute) and _is_name(target.value, _self_name(init))
        and (isinstance(s.value, _HOLDERS) or (isinstance(s.value, cst.Call) and _is_name(s.value.func, "dict")) or (isinstance(s.value, cst.Name) and s.value.value in lists))
    ]


_HOLDERS = (cst.List, cst.Tuple, cst.ListComp, cst.Dict, cst.DictComp)


def _self_attributes(methods: list[cst.FunctionDef]) -> dict[str, list[tuple[cst.Attribute, cst.FunctionDef]]]:
    """Every ``self.NAME`` of the class's methods, by NAME."""
    found: dict[str, list] = {}
    for method in methods:
        self_name = _self_name(method)
        for node in _walk(method.body):
            if isinstance(node, cst.Attribute) and _is_name(node.value, self_name):
                found.setdefault(node.attr.value, []).append((node, method))
            elif isinstance(node, cst.Call) and _is_name(node.func, "setattr") and len(node.args) >= 2:
                key = node.args[1].value
                if isinstance(key, cst.SimpleString):  # setattr(self, "layers", ...) sets it again
                    found.setdefault(key.evaluated_value, []).append((None, method))
    return found


def _freezes(node: cst.CSTNode) -> bool:
    for n in _walk(node):
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "requires_grad_":
            if not n.args or _is_name(n.args[0].value, "False"):
                return True
        if isinstance(n, cst.Assign) and _is_name(n.value, "False") and any(isinstance(t.target, cst.Attribute) and t.target.attr.value == "requires_grad" for t in n.targets):
            return True
    return False


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()
