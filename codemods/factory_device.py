"""FDV102 factory-device: ``torch.zeros(n)`` meeting a device tensor gets ``device=x.device``."""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

import libcst as cst

from fixdev.engine.rule import Invalid, Rule

from fixdev.analysis.ast_screens import rooted_in
from fixdev.analysis.holders import last_name as ast_last_name
from fixdev.analysis import file_analysis as analysis, placement
from fixdev.analysis.file_analysis import MOVES, TENSOR_METHODS
from fixdev.analysis.flow import HOST, ZERO_DIM, Device, SameAs, What
from fixdev.analysis.flow.evidence import rebound_tensors, tensor_root

if TYPE_CHECKING:
    from fixdev.analysis.flow import FileFlow

# Factories that take device=; from_numpy and the _like twins do not need it.
FACTORIES = analysis.TENSOR_FACTORIES - {"torch.from_numpy"}
SHORT_NAMES = {name.split(".")[-1] for name in FACTORIES}
# Factories that draw random numbers: with `device=` they draw from the
# device's generator, so the same seed gives other values (an unsafe fix).
RANDOM_FACTORIES = frozenset({"rand", "randn", "randint", "randperm"})
# Sinks this rule fixes: a host tensor meeting a device ("module-input",
# "operand"), or meeting a tensor whose place the code does not show
# ("relative": its own device is right wherever it lives).
SINK_KINDS = ("module-input", "operand", "relative")
RELATIVE_MESSAGE = "Tensor made on the CPU meets a tensor that may live on a device; pass `device=` from that tensor"
# What code that may meet a device holds (a class: perhaps a module's methods).
DEVICE_CODE = re.compile(r"device|\bclass\b|\.(?:to|cuda)\s*\(")
MAX_HOPS = 4  # local variables followed from a factory to where it is used
# Methods that take a tensor from any device: buffer.copy_(cpu_tensor) is legal.
CROSS_DEVICE_METHODS = frozenset({"copy_"})
# The array API standard's creation functions that take device=; its
# namespace is conventionally named `xp` (array_api_compat, SciPy, scikit-learn).
ARRAY_API_FACTORIES = frozenset({"asarray", "zeros", "ones", "empty", "full", "arange", "linspace", "eye"})
ARRAY_NAMESPACE = "xp"
# Constants a namespace holds (`xp.pi`, `math.tau`): a factory scaled by them is the same array.
CONSTANTS = frozenset({"pi", "e", "tau", "inf", "nan"})


class FactoryDevice(Rule):
    """
    ## What it does
    In the methods of `nn.Module` classes, adds `device=x.device` to a tensor
    factory (`torch.zeros`, `ones`, `empty`, `full`, `rand`, `randn`,
    `randint`, `arange`, `linspace`, `logspace`, `eye`, `tensor`,
    `as_tensor`, …) whose result meets a tensor on the model's device: it is
    combined (arithmetic, `@`, comparison, an argument of a torch function or a
    tensor method) with a tensor derived from the method's inputs or the
    module's parameters and buffers, or passed to a submodule, directly or
    through local variables. `x` is the tensor it meets when that is a
    parameter or `self` attribute chain, else the method's first tensor
    parameter. A factory a method returns (`return torch.triu(torch.ones(n,
    n))`, or a name bound to it that the return reads), met on the module's
    device by its caller (`scores.masked_fill(self.causal_mask(n), ...)`),
    gets the device the flow names there where it is bound in the helper
    (the module's own, `next(self.parameters()).device`), when the file
    calls that helper once (another caller may want the tensor on the host).

    Outside module methods (scripts, functions, loss code), the device flow
    analysis finds a factory whose value meets a tensor or model on a device
    (a module it is fed to, an operand, an argument of a `torch` function),
    directly or through variables and branches; it gets `device=` naming
    where the other side lives (`x.device`, the program's `device`), provided
    that name is bound where the factory runs.

    Where the tensor it meets lives is not shown (a function's parameter, a
    `self` attribute) but the code shows it is a tensor (a method only
    tensors have, such as `x.size(...)`, `x.dim()`, `x.unsqueeze(...)`,
    `x.permute(...)`; or passed first to a `torch` operation, as in
    `torch.cat([x, ...])`), the factory gets `device=x.device`: the device
    of the tensor it meets, right wherever that tensor lives (on the CPU it
    changes nothing). So does a factory made inside the expression that meets
    a local tensor (`x[torch.isin(x[:, 0], torch.tensor(ids))]`, `x` made
    by torch): `x` holds that tensor there however often it is bound
    (`lut = torch.cat([torch.zeros(1), lut[:-1]])`). So does one made after
    the statement that binds a name for the last time at the top of the
    function's body, where the value is a tensor (`x = as_batch(x)` with
    `x.size(1)` after it, `ids = ids.long()`, `feats, n = batch`): after
    that statement the name holds that one value. A factory that is an arm
    of a conditional expression whose other arm is such a tensor
    (`x.mean() if x.numel() > 0 else torch.tensor(0.0)`) gets that
    tensor's device too, 0-dim or not: the value lives on two devices, and
    a `torch.stack` of such results fails. `torch.tensor(t)` in the arm
    where `isinstance(t, list)` (or `tuple`) holds is a host tensor. This
    holds in files that meet devices: a library (a module of a package, a
    file other files of the run import, a file that only defines things) or
    code that names or moves to a device. The flow follows a lambda bound in
    the function into its calls there (`dot = lambda g: (grid * g).sum()`),
    and data from a list or comprehension is on the host (`torch.tensor(ids)`).

    Anywhere: a factory passed to a call beside factories of the same
    namespace that all name one device (`f(torch.tensor([i]),
    torch.arange(n, device=dev))`) gets that device, also when it is scaled
    by numbers on the way (`phis=(2 * xp.pi / 12) * xp.asarray([...])`). Array
    API code counts too: creation functions of a namespace named `xp`, as the
    standard names it (`self.xp.asarray([i])` beside
    `self.xp.arange(n, device=self.dev)`).

    A class whose base this file does not define (imported from a file
    not in the run, or computed) counts as an `nn.Module` when its own
    methods show it: they call on `self` a method only modules have and the
    class does not define (`register_buffer`, `register_parameter`,
    `add_module`, `parameters()`, `named_parameters()`, `modules()`,
    `buffers()`, `children()`, …) or store an `nn.Parameter` on `self`.
    Defining `forward` and calling `super().__init__()` does not count:
    plain classes of other frameworks do both.

    ## Why is this bad?
    A factory without `device=` allocates on the CPU. Once the model runs on a
    GPU, the first operation that mixes the new tensor with the input raises
    `Expected all tensors to be on the same device`.

    ## Example
    ```python
    def forward(self, x):
        positions = torch.arange(x.size(1))
        return x + self.embed(positions)
    ```

    ## Use instead
    ```python
    def forward(self, x):
        positions = torch.arange(x.size(1), device=x.device)
        return x + self.embed(positions)
    ```

    ## Fix safety
    Only the device changes: dtype, values and shape are as before. For the
    random factories (`rand`, `randn`, `randint`, `randperm`) the fix is
    unsafe: on a GPU they now draw from the device's generator, so a seeded
    run gives other numbers than before (applied with `--unsafe-fixes`).

    ## When it stays silent
    When `device=` is given; when the result is moved at once (`.to(...)`,
    `.cuda()`, `.cpu()`, `.type_as(...)`) or copied into a tensor
    (`buffer.copy_(...)` takes a tensor from any device); in `__init__` (see
    `constant-buffer`); when the result never meets a device tensor, or where
    the other side lives is not known on every path (both move under the same
    `if args.cuda:`, a function's parameter nothing shows is a tensor: `x + 1`,
    `x.view(...)`, `x.reshape(...)`, `x.T`, `x.shape` and `x.device` work on
    NumPy arrays too; a local name bound again between the factory and the
    meeting; a name whose last binding is in a branch or a loop, or comes
    after the factory; an `isinstance` arm that admits a tensor too
    (`isinstance(t, (list, torch.Tensor))`); a sibling scaled by anything but
    numbers; a lambda passed to another function); in a script that runs on
    the CPU only (it names no device, moves nothing, and no other file
    imports it); where what meets the device is an element of a tensor
    iterated over (`for i in torch.arange(n): ids == i`: a 0-dim host tensor
    meets a device tensor legally); in a branch that runs only without CUDA
    (the `else:` of `if torch.cuda.is_available():`, where the model is on
    the CPU too). When it meets a
    device but no device is in reach to name, the site is reported without a
    fix.
    """

    code = "FDV102"
    name = "factory-device"
    group = "mismatch"
    message = "Tensor made on the CPU meets a tensor on the model's device; pass `device=`"
    # the fast one first; `def`: a function's tensor parameter met by a factory (a "relative" sink);
    # its branches are searched one by one, the likeliest first
    fixes_where_made = True
    trigger = (r"\bdef\b|" + DEVICE_CODE.pattern, analysis.FACTORY_CALL + r"|\bxp\.\w+\s*\(")

    @classmethod
    def screen(cls, screening) -> bool:
        """A factory's value meets a device (``visit_Module``), or, for
        ``visit_Call``: a factory without ``device=`` beside a call given
        ``device=``, or in a method other than ``__init__`` where it meets a
        tensor on the module's device (names as written, as the trigger reads them)."""
        if not DEVICE_CODE.search(screening.text):
            # only `def` matched the trigger: nothing names a device, so a
            # relative sink is all there may be; it needs a tensor shown by a
            # parameter's or a local's uses (or made by torch and met where the
            # factory is made) and a file that meets devices: walks, not runs
            flow = analysis.flow_for(screening)
            scopes = [scope for scope in flow.index.scopes.values() if scope.kind == "function"]
            if _factory_in_an_arm(screening, flow):
                return True
            if not flow.meets_devices() or not any(flow.evidenced_tensors(scope) or flow.evidenced_locals(scope) or any(shown for *_, shown in rebound_tensors(flow, scope).values()) or _meets_inside(scope.node) for scope in scopes):
                return False
            return analysis.has_sink(screening, "relative")
        flow = analysis.flow_for(screening)
        factories = analysis.calls_named(screening, *SHORT_NAMES, *ARRAY_API_FACTORIES)
        bare = [call for call in factories if not any(k.arg == "device" for k in call.keywords)]
        if len(bare) < len(factories):  # a factory is given device=: is a bare one beside it?
            parents = analysis.ast_parents(flow)
            for call in bare:
                inner, outer = call, parents.get(call)
                while _ast_scaled(outer, inner):
                    inner, outer = outer, parents.get(outer)
                outer = parents.get(outer) if type(outer) in (ast.keyword, ast.Starred) else outer
                if type(outer) is ast.Call and any(type(other) is ast.Call and any(k.arg == "device" for k in other.keywords) for other in analysis.call_arguments(outer)):
                    return True
        if _factory_in_an_arm(screening, flow):
            return True
        # Else the visits report only a factory without `device=` outside a
        # module's `__init__` (constant-buffer's): visit_Module one outside
        # module methods, where the file's runs show it meets a device;
        # visit_Call one in a module's other methods, by the walk below. The
        # runs are needed only for the first kind (most files a trigger
        # passes hold none: their factories make parameters and buffers, or
        # live in `forward`).
        # A torch factory's name is rooted in a name a torch import binds
        # (np.zeros, random.randint, a builtin range: none), as its qualified name is.
        torch_names = analysis.torch_imported_names(screening)
        outside = False  # a factory outside a module's methods: visit_Module's
        returned = False  # a module method's factory its method returns: visit_Module's where the walk finds no meeting
        for call in bare:
            if ast_last_name(call.func) not in SHORT_NAMES or not rooted_in(call.func, torch_names):
                continue
            # visit_Call's, in any method (libcst's facts may take more classes for modules than the flow's index)
            method = analysis.method_holding(screening, call)
            in_a_module = _of_a_module(flow, method)
            outside = outside or not in_a_module
            if method is None or method.name == "__init__" or flow.value(call).flags & ZERO_DIM:
                continue
            if _meets_device_tensor(flow, _Placed(flow, method), call, method, MAX_HOPS) is not None:
                return True
            returned = returned or (in_a_module and _returned(flow, call, method))
        return (returned or outside) and analysis.has_sink(screening, *SINK_KINDS)

    VALID = [
        # a 0-dim host tensor combines with device tensors legally
        "import torch, torch.nn as nn, torch.nn.functional as F\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 2)\n    def update(self, x, y):\n        objective = F.cross_entropy(self.fc(x), y)\n"
        "        if len(x) > 1:\n            penalty = torch.nan_to_num(self.mmd(x, x))\n        else:\n            penalty = torch.tensor(0)\n        (objective + 0.1 * penalty).backward()\n",
        "import torch, torch.nn as nn\nclass M(nn.Module):\n    def forward(self, x):\n        return x + torch.zeros(3, device=x.device)\n",
        "import torch, torch.nn as nn\nclass M(nn.Module):\n    def forward(self, x):\n        return x + torch.zeros(3).to(x.device)\n",
        "import torch, torch.nn as nn\nclass M(nn.Module):\n    def forward(self, x):\n        n = torch.zeros(3)\n        return n.sum().item() + x.shape[0]\n",
        "import torch\ndef f(x):\n    return x + torch.zeros(3)\n",
        # view, reshape and .T are NumPy arrays' too: nothing shows x is a tensor
        "import torch\ndef f(x):\n    return x.view(-1) + x.reshape(3) * torch.zeros(3) + x.T\n",
        # a script that runs on the CPU only
        "import torch\ndef f(x):\n    return x.unsqueeze(0) + torch.zeros(3)\nprint(f(load()))\n",
        "import torch, torch.nn as nn\nclass M(nn.Module):\n    def forward(self, x, scale):\n        return torch.ones(3) * scale\n",
        "import torch, torch.nn as nn\nclass M(nn.Module):\n    def reset(self, x):\n        x.copy_(torch.zeros(3))\n",
        "import torch\ndef f(g, n, a, b):\n    return g(torch.tensor([n]), torch.zeros(n, device=a), torch.ones(n, device=b))\n",
        "def f(g, xp, n):\n    return g(xp.asarray([n]), xp.arange(n))\n",
        "def f(g, xp, dev, w):\n    return g(a=xp.asarray([0.0], device=dev), b=w * xp.asarray([1.0]))\n",
        "import torch\ndef f(h):\n    e = torch.eye(3)\n    c = torch.as_tensor(h)\n    c = c / 2\n    return c + e\n",
    ]
    INVALID = [
        Invalid(
            "import torch\ndef add_bias(x):\n    return x + torch.zeros(x.size(-1))\n",
            "import torch\ndef add_bias(x):\n    return x + torch.zeros(x.size(-1), device=x.device)\n",
        ),
        Invalid(
            "import torch\ndef shifted(t):\n    return torch.cat([torch.ones(len(t), 1), t[:, :-1]], dim=1)\n",
            "import torch\ndef shifted(t):\n    return torch.cat([torch.ones(len(t), 1, device=t.device), t[:, :-1]], dim=1)\n",
        ),
        Invalid(
            "def ends(self, b):\n    return self.scanner.get(self.xp.asarray([b]), self.xp.arange(4, device=self.dev))\n",
            "def ends(self, b):\n    return self.scanner.get(self.xp.asarray([b], device=self.dev), self.xp.arange(4, device=self.dev))\n",
        ),
        Invalid(
            "def f(g, xp, dev):\n    return g(a=xp.asarray([0.0], device=dev), b=(2 * xp.pi / 12) * xp.asarray([1.0]))\n",
            "def f(g, xp, dev):\n    return g(a=xp.asarray([0.0], device=dev), b=(2 * xp.pi / 12) * xp.asarray([1.0], device=dev))\n",
        ),
        Invalid(
            "import torch\ndef keep(rows, ids):\n    x = torch.as_tensor(rows)\n    x = x.float()\n    return torch.isin(x[:, -1], torch.tensor([int(i) for i in ids]))\n",
            "import torch\ndef keep(rows, ids):\n    x = torch.as_tensor(rows)\n    x = x.float()\n    return torch.isin(x[:, -1], torch.tensor([int(i) for i in ids], device=x.device))\n",
        ),
        Invalid(
            "import torch\ndef f(x, device):\n    x = x.to(device)\n    ramp = torch.linspace(0, 1, 4)\n    weigh = lambda t: t * ramp\n    return weigh(x)\n",
            "import torch\ndef f(x, device):\n    x = x.to(device)\n    ramp = torch.linspace(0, 1, 4, device=device)\n    weigh = lambda t: t * ramp\n    return weigh(x)\n",
        ),
        Invalid(
            "import torch\ndef f(g, n, dev):\n    return g(torch.tensor([n]), torch.arange(n, device=dev))\n",
            "import torch\ndef f(g, n, dev):\n    return g(torch.tensor([n], device=dev), torch.arange(n, device=dev))\n",
        ),
        Invalid(
            "import torch, torch.nn as nn\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "model = nn.Linear(4, 2).to(device)\nout = model(torch.randn(8, 4))\n",
            "import torch, torch.nn as nn\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "model = nn.Linear(4, 2).to(device)\nout = model(torch.randn(8, 4, device=device))\n",
        ),
        Invalid(
            "import torch, torch.nn as nn\nclass M(nn.Module):\n    def forward(self, x):\n        bias = torch.zeros(x.size(0), 5)\n        return x.sum(1, keepdim=True) + bias\n",
            "import torch, torch.nn as nn\nclass M(nn.Module):\n    def forward(self, x):\n        bias = torch.zeros(x.size(0), 5, device=x.device)\n        return x.sum(1, keepdim=True) + bias\n",
        ),
        Invalid(
            "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.embed = nn.Embedding(10, 4)\n    def forward(self, x):\n        steps = torch.arange(x.shape[1])\n        return x + self.embed(steps)\n",
            "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.embed = nn.Embedding(10, 4)\n    def forward(self, x):\n        steps = torch.arange(x.shape[1], device=x.device)\n        return x + self.embed(steps)\n",
        ),
        Invalid(
            "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.w = nn.Parameter(torch.ones(3))\n    def scaled(self):\n        return self.w * torch.tensor([1.0, 2.0, 3.0])\n",
            "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.w = nn.Parameter(torch.ones(3))\n    def scaled(self):\n        return self.w * torch.tensor([1.0, 2.0, 3.0], device=self.w.device)\n",
        ),
        Invalid(
            "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(3, 3)\n    def forward(self, x):\n        h = self.fc(x)\n        return torch.cat([h, torch.zeros(2, 3)])\n",
            "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(3, 3)\n    def forward(self, x):\n        h = self.fc(x)\n        return torch.cat([h, torch.zeros(2, 3, device=x.device)])\n",
        ),
        Invalid(
            "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(3, 3)\n    def forward(self, batch):\n        return self.fc(torch.ones(2, 3))\n",
            None,
        ),
    ]

    def visit_Module(self, node: cst.Module) -> None:
        """Outside module methods: the device flow finds factories whose
        value meets a device (in scripts, functions, loss code)."""
        flow = analysis.flow_of(self)
        facts = analysis.of(self)
        done: set[int] = set()
        for sink in flow.sinks():
            if sink.kind not in SINK_KINDS:
                continue
            for origin in sink.origins:
                call = facts.call_at(*flow.span(origin)) if isinstance(origin, ast.Call) else None
                if call is None or id(call) in done or not self._is_bare_factory(call):
                    continue
                if self._sibling_device(call) is not None:
                    continue  # visit_Call names the device its sibling was given
                method = facts.enclosing_method(call)
                if method is not None and not self._returned_unmet(flow, sink, origin, call, method[1]):
                    continue  # module methods: visit_Call below
                if analysis.runs_without_cuda(facts, call):
                    continue  # `else:` of `if torch.cuda.is_available():`: nothing is on a GPU there
                target = analysis.ast_parents(flow).get(origin)
                if isinstance(target, ast.Assign) and len(target.targets) == 1 and isinstance(target.targets[0], ast.Name):
                    if analysis.fixed_by_a_bare_move(flow, target.targets[0].id, origin):
                        continue  # x = torch.zeros(n); x.cuda(): cuda-call's fix moves it
                done.add(id(call))
                statement = facts.statement_of(call)
                device = self._bound_device(facts, statement, sink.device)
                if device is None and sink.kind == "relative" and (_read_where_made(flow, sink, origin) or _made_after_last_binding(flow, sink, origin)):
                    device = sink.device
                if sink.kind == "relative":
                    if device is not None:  # else the tensor it meets is not yet bound where it is made: silent
                        new_call = analysis.with_keyword_argument(call, "device", device)
                        self.report(call, RELATIVE_MESSAGE, fix=[self.replace(call, new_call)], fix_message=f"Add `device={device}`", unsafe=_draws(call))
                    continue
                if device is None:  # asked only now: it may interpret the function again
                    device = self._bound_device(facts, statement, flow.device_at(origin))
                if device is None:
                    self.report(call, "Tensor made on the CPU meets a tensor on a device, and no device is in reach for `device=`")
                    continue
                new_call = analysis.with_keyword_argument(call, "device", device)
                self.report(call, fix=[self.replace(call, new_call)], fix_message=f"Add `device={device}`", unsafe=_draws(call))

    @staticmethod
    def _bound_device(facts: "analysis.FileAnalysis", statement: cst.CSTNode | None, device: str | None) -> str | None:
        """``device`` when every name it reads is bound where ``statement`` runs."""
        if device is None or statement is None or not placement.expression_bound_at(facts, device, statement):
            return None
        return device

    def _is_bare_factory(self, node: cst.Call) -> bool:
        if analysis.last_name(node.func) not in SHORT_NAMES or analysis.keyword(node, "device") is not None:
            return False
        return bool(self.qualified_names(node.func) & FACTORIES) and not any(a.star for a in node.args)

    def _namespace(self, call: cst.Call) -> str | None:
        """``torch`` for a torch factory, the namespace's text for an array
        API creation function (``self.xp.asarray``), else None."""
        if any(a.star for a in call.args) or not isinstance(call.func, cst.Attribute):
            return "torch" if isinstance(call.func, cst.Name) and self.qualified_names(call.func) & FACTORIES else None
        if self.qualified_names(call.func) & FACTORIES:
            return "torch"
        namespace = call.func.value
        if call.func.attr.value in ARRAY_API_FACTORIES and analysis.is_name_chain(namespace) and analysis.last_name(namespace) == ARRAY_NAMESPACE:
            return self.code_of(namespace)
        return None

    def _sibling_device(self, node: cst.Call) -> str | None:
        """For a factory without ``device=`` passed to a call beside factories
        of the same namespace that all name one device (``f(xp.asarray([i]),
        xp.arange(n, device=dev))``): that device's text. The arguments of one
        call are meant to be used together, and the code says where."""
        if analysis.keyword(node, "device") is not None:
            return None
        facts = analysis.of(self)
        arg = facts.parent(node)
        inner = node
        while _scaled(arg, inner):  # `(2 * xp.pi / 12) * xp.asarray([...])`: scaled by numbers, the same array
            inner, arg = arg, facts.parent(arg)
        outer = facts.parent(arg) if isinstance(arg, cst.Arg) else None
        if not isinstance(outer, cst.Call):
            return None
        # syntax first: names are resolved only for calls beside a device= sibling
        placed = [
            other.value
            for other in outer.args
            if other is not arg and isinstance(other.value, cst.Call) and analysis.keyword(other.value, "device") is not None
        ]
        if not placed:
            return None
        namespace = self._namespace(node)
        if namespace is None:
            return None
        devices = {self.code_of(analysis.keyword(call, "device").value) for call in placed if self._namespace(call) == namespace}
        return devices.pop() if len(devices) == 1 else None

    def visit_Call(self, node: cst.Call) -> None:
        sibling = self._sibling_device(node)
        if sibling is not None:
            statement = analysis.of(self).statement_of(node)
            # a sibling in the same call reads the names of a plain `dev` or
            # `self.dev` there: bound where the factory runs, however bound
            if not _name_chain_text(sibling) and self._bound_device(analysis.of(self), statement, sibling) is None:
                self.report(node, "Tensor made on the CPU is passed beside tensors made on a device, and that device is not in reach for `device=`")
                return
            new_call = analysis.with_keyword_argument(node, "device", sibling)
            self.report(node, fix=[self.replace(node, new_call)], fix_message=f"Add `device={sibling}`", unsafe=_draws(node))
            return
        if analysis.last_name(node.func) not in SHORT_NAMES or analysis.keyword(node, "device") is not None:
            return
        if not self.qualified_names(node.func) & FACTORIES:
            return
        if any(a.star for a in node.args):
            return
        facts = analysis.of(self)
        method = facts.enclosing_method(node)
        if method is None or method[1].name.value == "__init__":
            return
        if analysis.runs_without_cuda(facts, node):
            return  # `else:` of `if torch.cuda.is_available():`: the module is on the CPU there
        if analysis.value_of(self, node).flags & ZERO_DIM:
            return  # `torch.tensor(0)`: a 0-dim host tensor combines with device tensors legally
        func = method[1]
        flow = analysis.flow_of(self)
        call, function = flow.node_at(*self.span(node)), flow.function_at(self.span(func.name)[0])
        if call is None or function is None:
            return
        met = _meets_device_tensor(flow, _Placed(flow, function), call, function, MAX_HOPS)
        if met is None:
            return
        tensor = self._device_source(met, func)
        if tensor is None:
            self.report(node, "Tensor made on the CPU meets a tensor on the model's device, and no tensor is at hand for `device=`")
            return
        new_call = analysis.with_keyword_argument(node, "device", f"{tensor}.device")
        self.report(node, fix=[self.replace(node, new_call)], fix_message=f"Add `device={tensor}.device`", unsafe=_draws(node))

    def visit_IfExp(self, node: cst.IfExp) -> None:
        """``x.mean() if x.numel() else torch.tensor(0.0)``: one arm a tensor
        the code shows is one, the other made on the host; the value lives
        where ``x`` does on one path and on the CPU on the other, and the
        first mix of it with a tensor beside ``x`` (``torch.stack`` of such
        results) fails on a GPU. The factory gets ``device=x.device``, the
        other arm's device, right wherever ``x`` lives (0-dim ones too: the
        stack does not spare them)."""
        flow = analysis.flow_of(self)
        if " else " not in self.context.text or not flow.meets_devices():
            return
        facts = analysis.of(self)
        for arm in (node.body, node.orelse):
            call = arm
            while isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value in TENSOR_METHODS and isinstance(call.func.value, cst.Call):
                call = call.func.value  # torch.tensor([0.0]).repeat(n)
            if not isinstance(call, cst.Call) or not self._is_bare_factory(call) or self._sibling_device(call) is not None:
                continue
            made = flow.node_at(*self.span(call))
            if made is None:
                continue
            name = _arm_partner(flow, analysis.ast_parents(flow), made)
            if name is None:
                continue
            device = self._bound_device(facts, facts.statement_of(call), f"{name}.device")
            if device is None:
                continue
            new_call = analysis.with_keyword_argument(call, "device", device)
            self.report(call, RELATIVE_MESSAGE, fix=[self.replace(call, new_call)], fix_message=f"Add `device={device}`", unsafe=_draws(call))

    def _returned_unmet(self, flow: "FileFlow", sink, origin: ast.Call, call: cst.Call, func: cst.FunctionDef) -> bool:
        """A factory in a module's method (not ``__init__``) that the method
        returns, which visit_Call's walk finds meeting nothing there, met on
        a device by its caller (``self.causal_mask(n)`` as a mask of scores):
        the flow's meeting is this rule's, on a device (not a relative one,
        whose device is named where the meeting is). Only for a helper the
        file calls once."""
        if sink.kind == "relative" or func.name.value == "__init__" or flow.value(origin).flags & ZERO_DIM:
            return False
        function = flow.function_at(self.span(func.name)[0])
        if function is None or not _returned(flow, origin, function):
            return False
        # one caller, the one that meets the device: another might want the
        # tensor on the host (`self.lengths(n).numpy()`), which device= would break
        mentions = flow.mentions()
        if mentions is None or len(mentions.occurrences.get(function.name, ())) != 1:
            return False
        return _meets_device_tensor(flow, _Placed(flow, function), origin, function, MAX_HOPS) is None

    def _device_source(self, met: ast.expr | None, func: cst.FunctionDef) -> str | None:
        """The tensor whose ``.device`` to use: the one met, when it is sure to
        exist where the factory runs (a parameter or a ``self`` chain), else the
        method's first tensor parameter."""
        root = analysis.chain_root(met) if met is not _MET_A_MODULE else None
        if root is not None:
            if (root.id == "self" and type(met) is ast.Attribute) or (root.id in placement.parameter_names(func) and not placement.binds_in_body(func, root.id)):
                flow = analysis.flow_of(self)
                start, end = flow.span(met)
                return self.context.text[start:end]
        return analysis.first_tensor_parameter(self, func)


_MET_A_MODULE = ast.Name("self")  # stands for "passed to a submodule": no tensor to name


class _Placed:
    """What the device flow says of the values a fresh tensor meets in one
    method of a module."""

    def __init__(self, flow: "FileFlow", method: ast.FunctionDef) -> None:
        self.flow = flow
        self.tensor_parameters = flow.tensor_parameters(method)

    def on_device(self, expr: ast.expr) -> bool:
        """On a device on every path, taking the method's tensor parameters
        for inputs on the model's device (what a module's methods are written
        for)."""
        value = self.flow.value(expr)
        if value.what not in (What.TENSOR, What.UNKNOWN) or not value.places:
            return False
        return all(type(p) is Device or (type(p) is SameAs and p.text in self.tensor_parameters) for p in value.placements)

    def is_module(self, expr: ast.expr) -> bool:
        return self.flow.what(expr) is What.MODULE

    def on_the_cpu(self, expr: ast.expr) -> bool:
        value = self.flow.value(expr)
        return value.what is What.TENSOR and value.placements == {HOST}


def _meets_device_tensor(flow: "FileFlow", placed: _Placed, expr: ast.expr, method: ast.FunctionDef, hops: int) -> ast.expr | None:
    """Follow a freshly made tensor upwards (through tensor methods, indexing,
    arithmetic, local variables) until it meets a device tensor; return that
    tensor (or ``_MET_A_MODULE``), or None when it never does."""
    parents = analysis.ast_parents(flow)
    current = expr
    while True:
        parent = parents.get(current)
        kind = type(parent)
        if kind is ast.Attribute and parent.value is current:
            call = parents.get(parent)
            if not (type(call) is ast.Call and call.func is parent):
                return None  # an attribute read such as .shape
            if parent.attr in MOVES:
                return None
            for arg in analysis.call_arguments(call):
                if placed.on_device(arg):
                    return arg
            if parent.attr not in TENSOR_METHODS and not parent.attr.endswith("_"):
                return None
            current = call
        elif kind is ast.Subscript:
            if parent.value is not current:
                return None  # an index, not the indexed
            current = parent
        elif kind is ast.UnaryOp:
            current = parent
        elif kind is ast.BinOp:
            other = parent.right if parent.left is current else parent.left
            if placed.on_device(other):
                return other
            current = parent
        elif kind is ast.Compare:
            for operand in (parent.left, *parent.comparators):
                if operand is not current and placed.on_device(operand):
                    return operand
            if len(parent.ops) != 1 or type(parent.ops[0]) in (ast.Is, ast.IsNot, ast.In, ast.NotIn):
                return None
            current = parent  # `torch.triu(torch.ones(n, n)) == 1`: a fresh mask
        elif kind in (ast.List, ast.Tuple):
            if type(parents.get(parent)) is ast.Subscript and parents[parent].slice is parent:
                return None  # x[a, b]: indices
            for element in parent.elts:
                if element is not current and placed.on_device(element.value if type(element) is ast.Starred else element):
                    return element.value if type(element) is ast.Starred else element
            current = parent
        elif kind is ast.keyword or kind is ast.Starred or (kind is ast.Call and parent.func is not current):
            call = parents.get(parent) if kind is not ast.Call else parent
            if type(call) is not ast.Call:
                return None
            met, outer = _meets_in_call(flow, placed, call, current)
            if met is not None or outer is None:
                return met
            current = outer  # torch.triu(torch.ones(n, n)) is as fresh as its argument
        elif kind is ast.Assign and parent.value is current:
            if hops == 0 or len(parent.targets) != 1 or type(parent.targets[0]) is not ast.Name:
                return None
            for use in _uses_after(parent.targets[0].id, parent, method):
                met = _meets_device_tensor(flow, placed, use, method, hops - 1)
                if met is not None:
                    return met
            return None
        else:
            return None


def _meets_in_call(flow: "FileFlow", placed: _Placed, call: ast.Call, arg: ast.expr) -> tuple[ast.expr | None, ast.Call | None]:
    """For a fresh tensor passed as ``arg``: (the device tensor it meets there,
    or None; the call to keep following when its result is a fresh tensor too)."""
    if placed.is_module(call.func):
        return _MET_A_MODULE, None
    if type(call.func) is ast.Attribute:
        if call.func.attr in MOVES or call.func.attr in CROSS_DEVICE_METHODS:
            return None, None
        receiver = call.func.value
        if placed.on_device(receiver):
            return receiver, None
    if (flow.qualified_name(call.func) or "").startswith("torch."):
        for other in analysis.call_arguments(call):
            if other is not arg and placed.on_device(other):
                return other, None
        if placed.on_the_cpu(call):
            return None, call
    return None, None


def _uses_after(name: str, assign: ast.Assign, method: ast.FunctionDef) -> list[ast.Name]:
    """Reads of ``name`` after ``assign``, up to its next assignment in ``method``."""
    start = (assign.end_lineno, assign.end_col_offset)
    names, rebinds, targets = [], [], set()
    stack: list[ast.AST] = list(method.body)
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is ast.Name:
            if node.id == name and id(node) not in targets:
                names.append(node)
            continue
        if kind is ast.Assign:
            for target in node.targets:
                if type(target) is ast.Name:
                    targets.add(id(target))
            if len(node.targets) == 1 and type(node.targets[0]) is ast.Name and node.targets[0].id == name and (node.lineno, node.col_offset) > start:
                rebinds.append((node.lineno, node.col_offset))
        stack.extend(ast.iter_child_nodes(node))
    stop = min(rebinds, default=(method.end_lineno, method.end_col_offset))
    return sorted((node for node in names if start < (node.lineno, node.col_offset) < stop), key=lambda n: (n.lineno, n.col_offset))


def _scaled(parent: cst.CSTNode | None, child: cst.CSTNode) -> bool:
    """``parent`` is ``child`` under a sign, parentheses aside, or combined by
    arithmetic with numbers and names' attributes (``2 * xp.pi / 12``), never
    with a call or another array."""
    if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, (cst.Minus, cst.Plus)):
        return True
    if not isinstance(parent, cst.BinaryOperation) or not isinstance(parent.operator, (cst.Multiply, cst.Divide, cst.Add, cst.Subtract)):
        return False
    other = parent.right if parent.left is child else parent.left
    return _numberish(other)


def _returned(flow: "FileFlow", call: ast.Call, function: ast.AST) -> bool:
    """``call`` is in ``function``'s own ``return`` statement, or bound to a
    name there that a ``return`` of the function reads (``mask = ...;
    return mask.triu(1)``)."""
    parents = analysis.ast_parents(flow)
    node = parents.get(call)
    while node is not None and not isinstance(node, ast.stmt):
        node = parents.get(node)
    if type(node) is ast.Return:
        return True
    if type(node) is not ast.Assign or len(node.targets) != 1 or type(node.targets[0]) is not ast.Name:
        return False
    name = node.targets[0].id
    return any(type(sub) is ast.Return and sub.value is not None and any(type(n) is ast.Name and n.id == name for n in ast.walk(sub.value)) for sub in ast.walk(function))


def _of_a_module(flow: "FileFlow", method: ast.AST | None) -> bool:
    """``method`` is one ``enclosing_method`` finds: it binds ``self`` (the
    flow's scope says so, as libcst's ``binds_self``) in a class the flow's
    index takes for an ``nn.Module`` (libcst's facts do too:
    ``FileAnalysis._flow_module``)."""
    scope = flow.index.scopes.get(method) if method is not None else None
    if scope is None or not scope.self_name or scope.cls is None:
        return False
    info = flow.index.classes.get(scope.cls)
    return info is not None and info.is_module and bool(scope.cls.bases)


def _ast_scaled(parent: ast.AST | None, child: ast.AST) -> bool:
    """``_scaled`` on CPython's tree, for the screen."""
    if type(parent) is ast.UnaryOp and type(parent.op) in (ast.USub, ast.UAdd):
        return True
    if type(parent) is not ast.BinOp or type(parent.op) not in (ast.Mult, ast.Div, ast.Add, ast.Sub):
        return False
    other = parent.right if parent.left is child else parent.left
    return _ast_numberish(other)


def _ast_numberish(node: ast.AST) -> bool:
    """``_numberish`` on CPython's tree."""
    kind = type(node)
    if kind is ast.Constant:
        return type(node.value) in (int, float)
    if kind is ast.Attribute:
        return node.attr in CONSTANTS and type(node.value) in (ast.Name, ast.Attribute)
    if kind is ast.UnaryOp:
        return _ast_numberish(node.operand)
    if kind is ast.BinOp:
        return _ast_numberish(node.left) and _ast_numberish(node.right)
    return False


def _numberish(node: cst.CSTNode) -> bool:
    """A number, or arithmetic of numbers and constants such as ``xp.pi``."""
    if isinstance(node, (cst.Integer, cst.Float)):
        return True
    if isinstance(node, cst.Attribute):
        return node.attr.value in CONSTANTS and analysis.is_name_chain(node)
    if isinstance(node, cst.UnaryOperation):
        return _numberish(node.expression)
    if isinstance(node, cst.BinaryOperation):
        return _numberish(node.left) and _numberish(node.right)
    return False


def _meets_inside(function: ast.AST) -> bool:
    """A torch factory written inside the arguments of a call or an operation
    with a name beside it (``torch.isin(x[:, 0], torch.tensor(ids))``): what a
    relative sink from a local tensor needs, by the syntax alone."""
    for node in ast.walk(function):
        if type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr in SHORT_NAMES:
            continue
        inner = node.args if type(node) is ast.Call else (node.left, node.right) if type(node) is ast.BinOp else ()
        if any(type(a) is ast.Call and type(a.func) is ast.Attribute and a.func.attr in SHORT_NAMES for a in inner) and any(type(a) in (ast.Name, ast.Subscript) for a in inner):
            return True
    return False


def _name_chain_text(text: str) -> bool:
    """``dev``, ``self.dev``: names and attributes, nothing evaluated twice."""
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return False
    while type(node) is ast.Attribute:
        node = node.value
    return type(node) is ast.Name


def _read_where_made(flow: "FileFlow", sink, origin: ast.AST) -> bool:
    """The factory is made inside the expression that meets the tensor whose
    device the fix names (``x[torch.isin(x[:, 0], torch.tensor(ids))]``), and
    that expression reads the tensor's name: it is bound there, whatever
    other bindings of it the function has."""
    other = sink.other
    while type(other) is ast.Subscript:
        other = other.value
    if type(other) is not ast.Name or sink.device != f"{other.id}.device":
        return False
    start, end = flow.span(sink.node)
    origin_start, origin_end = flow.span(origin)
    return start <= origin_start and origin_end <= end


def _made_after_last_binding(flow: "FileFlow", sink, origin: ast.AST) -> bool:
    """The device the fix names is ``x.device`` of a name the function binds
    for the last time at the top of its body (``evidence.rebound_tensors``), and
    the factory is made after that statement: ``x`` is bound there, to the
    value it meets."""
    name = sink.device[: -len(".device")] if sink.device and sink.device.endswith(".device") else None
    scope = flow.index.scope_at((origin.lineno, origin.col_offset))
    if name is None or scope is None or scope.kind != "function":
        return False
    where = rebound_tensors(flow, scope).get(name)
    return where is not None and (origin.lineno, origin.col_offset) > where[1]


def _factory_in_an_arm(screening, flow: "FileFlow") -> bool:
    """``visit_IfExp``'s screen: a torch factory without ``device=`` is an
    arm of a conditional expression whose other arm is a tensor
    (``_arm_partner``), in a file that meets devices; the text first."""
    if " else " not in screening.text or not flow.meets_devices():
        return False
    torch_names = analysis.torch_imported_names(screening)
    parents = analysis.ast_parents(flow)
    for call in analysis.calls_named(screening, *SHORT_NAMES):
        if not any(k.arg == "device" for k in call.keywords) and rooted_in(call.func, torch_names) and _arm_partner(flow, parents, call) is not None:
            return True
    return False


def _arm_partner(flow: "FileFlow", parents: dict, call: ast.Call) -> str | None:
    """For a torch factory that is an arm of a conditional expression (after
    tensor methods: ``torch.tensor([0.0]).repeat(n)``): the name the other
    arm is read from (``x`` of ``x``, ``x.mean()``, ``x[0]``) when the
    function's code shows it holds a tensor there: a parameter never bound
    again and shown one by its uses, a local bound once and so shown or
    bound to a torch operation's result, or a name last bound at the top of
    the body and shown one after (``rebound_tensors``). Else None."""
    arm, parent = call, parents.get(call)
    while type(parent) is ast.Attribute and parent.attr in TENSOR_METHODS and type(parents.get(parent)) is ast.Call and parents[parent].func is parent:
        arm = parents[parent]
        parent = parents.get(arm)
    if type(parent) is not ast.IfExp or arm is parent.test:
        return None
    root = tensor_root(parent.orelse if arm is parent.body else parent.body)
    scope = flow.index.scope_at((call.lineno, call.col_offset))
    if root is None or scope is None or scope.kind != "function":
        return None
    name = root.id
    if name in flow.evidenced_tensors(scope, reads=False) and scope.counts.get(name) == 1:
        return name
    if name in flow.evidenced_locals(scope) or name in flow.torch_results(scope):
        return name
    where = rebound_tensors(flow, scope).get(name)
    return name if where is not None and where[2] and (call.lineno, call.col_offset) > where[1] else None


def _draws(call: cst.Call) -> bool:
    """Whether the factory draws random numbers (its fix is then unsafe)."""
    return analysis.last_name(call.func) in RANDOM_FACTORIES
