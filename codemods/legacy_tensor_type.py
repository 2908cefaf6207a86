"""FDV110 legacy-tensor-type: ``torch.cuda.FloatTensor(...)`` and its aliases →
factories with ``dtype=`` and ``device=``."""

from __future__ import annotations

import ast
import re

import libcst as cst

from fixdev.engine.rule import Edit, Invalid, Rule, child_nodes
from fixdev.engine.source import line_start

from fixdev.analysis import file_analysis as analysis, placement
from fixdev.analysis.flow import HOST, Device, What
from fixdev.analysis.cuda_only import decorated_cuda_only
from .hard_coded_cuda import cuda_device, distributed, guarded, torch_at, torch_prefix

# The forms the trigger looks for: a typed CPU constructor given a name, which
# the screen asks the flow about, and the others, which the text shows.
_CPU_TYPE_GIVEN_A_NAME = r"(?:Float|Double|Half|BFloat16|Long|Int|Short|Char|Byte|Bool)Tensor\s*\(\s*[A-Za-z_]"
_TEXTUAL_FORMS = r"cuda\s*\.\s*\w*Tensor\b|Tensor\s*\((?:[^()]|\([^()]*\))*\bdevice\s*=|from\s+torch\.cuda\s+import|\.type\(\s*[\w.\[\]]+\.type\(\s*\)\s*\)|=\s*\w+\.type\(\s*\)"
# What the screen passes on the text alone (and `import torch.cuda as tc`: `tc.FloatTensor(n)`).
_OTHER_FORMS = re.compile(r"torch\.cuda\s+as\b|" + _TEXTUAL_FORMS + r"|set_default_tensor_type")

# legacy type → the dtype it makes
DTYPES = {
    "FloatTensor": "float32",
    "DoubleTensor": "float64",
    "HalfTensor": "float16",
    "BFloat16Tensor": "bfloat16",
    "LongTensor": "int64",
    "IntTensor": "int32",
    "ShortTensor": "int16",
    "CharTensor": "int8",
    "ByteTensor": "uint8",
    "BoolTensor": "bool",
}
CUDA_TYPES = {f"torch.cuda.{name}": name for name in DTYPES}
# NumPy calls that return a new array: a legacy constructor given one copies
# nothing anyone else holds, so torch.tensor (which copies) is exact.
NUMPY_NEW_ARRAYS = frozenset(
    f"numpy.{name}" for name in "array zeros ones empty full arange linspace eye identity stack concatenate vstack hstack".split()
)
# numpy.random functions, and the position of their `size` argument: with a
# size they return a new array (without one, a scalar).
NUMPY_RANDOM_SIZE = {
    "normal": 2, "uniform": 2, "randint": 2, "binomial": 2, "laplace": 2, "beta": 2, "gamma": 2,
    "poisson": 1, "exponential": 1, "choice": 1,
    "rand": 0, "randn": 0, "random": 0, "random_sample": 0, "standard_normal": 0,
}  # fmt: skip
SETS_DEFAULT_DTYPE = ("set_default_dtype", "set_default_tensor_type")


class LegacyTensorType(Rule):
    """
    ## What it does
    Rewrites the pre-1.0 CUDA tensor types into factories that say their
    dtype and device:
    `torch.cuda.FloatTensor(n, m)` → `torch.empty(n, m, dtype=torch.float32, device=...)`,
    `torch.cuda.LongTensor([1, 2])` → `torch.tensor([1, 2], dtype=torch.int64, device=...)`
    (also a new NumPy array: `FloatTensor(np.random.normal(0, 1, (n, d)))`;
    an existing one → `torch.as_tensor(a, dtype=..., device=...)`),
    `x.type(torch.cuda.FloatTensor)` → `x.to(torch.float32)` where the device
    flow shows `x` on a device already (or under `if x.is_cuda:`), and
    `x.to(device, torch.float32)` where it shows `x` on the host. The CPU
    types given a device, `torch.FloatTensor(data, device=d)` or
    `torch.Tensor(n, m, device=d)`, take the same split with `device=d` kept;
    an argument the code does not show to be sizes, data or an array is built
    as before and moved: `torch.Tensor(keep).to(d)`. An alias,
    `Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor`, is
    rewritten at every use (`Tensor(n, 1)`, `x.type(Tensor)`) when the file
    shows them all; the alias line then goes, or becomes the device it chose:
    `device = torch.device("cuda" if opt.cuda else "cpu")`.
    A constructor that runs only where CUDA is meant to be, under the guards
    `cuda-call` is silent under (`if torch.cuda.is_available():`, `if
    is_cuda:`, `if device > -1:`, a test skipped without a GPU), is left
    alone: it is right there. The device is `"cuda"` where the code runs
    only with CUDA by other signs (a `def test_cuda_...`, after an `assert`);
    else the device in reach or one defined once, as `cuda-call` does; for an alias, the one its condition chose (`x.device` for
    `x.is_cuda`).

    ## Why is this bad?
    `torch.cuda.FloatTensor` exists only on a CUDA build with a GPU: without
    one, `torch.cuda.FloatTensor(3)` raises `TypeError: type
    torch.cuda.FloatTensor not available` and `x.type(torch.cuda.FloatTensor)`
    raises `Cannot initialize CUDA`. The legacy constructors also read
    `FloatTensor(3)` as a size and `FloatTensor([3])` as data, and share
    memory with a tensor they are given. Given a device, the legacy
    constructors accept only the CPU: `torch.Tensor(data, device=x.device)`
    raises `legacy constructor expects device type: cpu` as soon as `x` is on
    a GPU.

    ## Example
    ```python
    cuda = torch.cuda.is_available()
    Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
    valid = Tensor(imgs.size(0), 1).fill_(1.0)
    real_imgs = imgs.type(Tensor)
    ```

    ## Use instead
    ```python
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    cuda = torch.cuda.is_available()
    valid = torch.empty(imgs.size(0), 1, dtype=torch.float32, device=device).fill_(1.0)
    real_imgs = imgs.to(device, torch.float32)
    ```

    Also `t.type(x.type())` on a tensor: on a GPU `x.type()` is
    `"torch.cuda.FloatTensor"`, which lands on the current CUDA device rather
    than on `x`'s (a second GPU, DataParallel replicas); it becomes `t.to(x)`,
    which takes `x`'s dtype and device. So does `t.type(wt)` where the
    function binds `wt` once, before it, as `wt = x.type()` of a tensor `x`
    it does not bind again after (a type name given by a caller, or chosen
    on some path, is left alone). `t.type_as(x)` is right as it is: it is
    `t.to(x.options())` since PyTorch 1.0, which keeps `x`'s device index.

    ## Fix safety
    Safe: only where the tensors live changes. `.type(torch.cuda.X)` keeps a
    CUDA tensor on the GPU it is on, so `x.to("cuda", ...)`, which would move
    one on a second GPU to the current one, is written only for a host `x`.
    An existing NumPy array goes through `torch.as_tensor`, which shares its
    memory where the CPU type does (same dtype) and copies where the CUDA
    type copies. The dtype is kept exactly (`torch.Tensor` in an alias's CPU branch is the
    default dtype, float32, unless the file changes it; then the alias is
    reported). Sizes give uninitialised memory, as before. Data is copied,
    as the legacy constructor copies a list or a new array. An alias at
    module level is removed only from a file that runs as a script (a
    top-level loop or `parse_args()`): no other module imports it. On a GPU
    the tensors land where they did; without one, on the CPU. A CPU type given
    `device=d` made its tensor on the CPU or raised: the rewrite makes the
    same tensor on the CPU (`.to(d)` of a CPU tensor to the CPU is the tensor
    itself) and the one the code asked for on a GPU; `torch.Tensor` is
    float32 unless the file changes the default dtype (then only the `.to(d)`
    form, which keeps the constructor, is written).

    ## When it stays silent
    `Variable(x).cuda()` is `cuda-call`'s (`.cuda()` → `.to(device)`;
    `Variable` itself is a harmless no-op since 0.4). CPU types
    (`torch.FloatTensor(n)`) run everywhere and are left alone, and so are
    type checks (`isinstance(x, torch.cuda.FloatTensor)`), and
    `y.type(torch.cuda.X)` not shown on either side but under a branch that
    tests a tensor's placement (`if x.is_cuda:`, `if x.device.type ==
    "cuda":`; the CPU type in the other branch): the code handles placement.
    An alias that runs everywhere (`A if cuda else torch.FloatTensor`, or the
    CUDA type chosen under a CUDA check, as in `if device == "cuda": dtype =
    torch.cuda.FloatTensor`) is a modernisation, not a bug: it is rewritten
    only when every use has an exact rewrite, else left alone whole (bound
    twice, on an attribute, used other than as a constructor or `.type()`
    argument, `.type(A)` of a tensor that is not shown to be on the host,
    or an argument not shown to be sizes, data or an array).
    A CPU type given `device="cpu"`. Reported without a fix: a CPU type given
    a device and a tensor the flow knows (the legacy form rejects that
    everywhere) or other keywords; `x.type(torch.cuda.X)` where `x` may be on the
    host or on any GPU (no one `.to(...)` does both), a tensor or any
    argument the code does not show to be sizes, data or a NumPy array (the
    legacy constructor shares a tensor's memory), keyword arguments, a
    module's `.type(...)` (which also casts integer buffers), an unconditional
    alias bound twice, on an attribute, or used other than as a constructor
    or `.type()` argument,
    `torch.set_default_tensor_type(torch.cuda.FloatTensor)`, and a typed CPU
    constructor given an existing tensor that may live on a device
    (`torch.LongTensor(torch.cat(found))` of indices found on a GPU; the flow
    shows it there, or, in a file that meets devices, does not show it on the
    host): it takes only a CPU tensor of its own dtype, of which it returns
    an alias, and raises for a CUDA one; `found.long()` is what was meant,
    but not the alias the constructor made, so it is not written (a
    storage, `torch.ByteTensor(torch.ByteStorage.from_buffer(b))`, is not a
    tensor; `torch.Tensor(t)` takes other dtypes and is left alone).
    """

    code = "FDV110"
    name = "legacy-tensor-type"
    group = "cuda-only"
    message = "Legacy `torch.cuda.*Tensor` type: CUDA-only; use a factory with `dtype=` and `device=`"
    # Every form names a `...Tensor` type or calls `.type(`: that cheap search
    # first (the alternation after it, alone, takes twice as long).
    trigger = r"Tensor|\.type\(", _CPU_TYPE_GIVEN_A_NAME + "|" + _TEXTUAL_FORMS

    @classmethod
    def screen(cls, screening) -> bool:
        """Any form but one the text shows (a CUDA type, a CPU type given
        ``device=``, a cast to a type name); the one, a typed CPU constructor
        given a name (``torch.LongTensor(idx)``, two files in three the
        trigger matches), only where the flow says the argument is a tensor
        that may be off the host, as ``_cpu_type_of_a_tensor`` asks: most of
        those files never reach libcst then."""
        if _OTHER_FORMS.search(screening.text):
            return True
        flow = analysis.flow_for(screening)
        for call in analysis.calls_named(screening, *DTYPES):
            if len(call.args) != 1 or call.keywords or type(call.args[0]) is ast.Starred:
                continue
            if _a_tensor_maybe_off_the_host(flow, call.args[0]):
                return True
        return False

    VALID = [
        # under a test of another tensor's placement: the code handles it
        "import torch\ndef f(r, d):\n    if r.is_cuda:\n        return d.lt(0).type(torch.cuda.FloatTensor)\n    return d.lt(0).type(torch.FloatTensor)\n",
        "import torch\nx = torch.FloatTensor(3, 4)\n",
        # a typed CPU constructor given a list, or a name nothing shows is a tensor
        "import torch\nrows = [0, 2]\nidx = torch.LongTensor(rows)\n",
        "import torch\ndef targets(labels):\n    return torch.LongTensor(labels)\n",
        # the CUDA binding runs only under a CUDA check, the CPU one otherwise (issue 25)
        (
            "import torch\ndef summary(model, size, device='cuda'):\n"
            "    if device == 'cuda' and torch.cuda.is_available():\n        dtype = torch.cuda.FloatTensor\n"
            "    else:\n        dtype = torch.FloatTensor\n"
            "    return model(torch.rand(2, *size).type(dtype))\n"
        ),
        "import torch\nok = isinstance(x, torch.cuda.FloatTensor)\n",
        "import torch\nfrom torch.autograd import Variable\nx = Variable(torch.ones(3)).cuda()\n",
        "import torch\nx = torch.empty(3, dtype=torch.float32, device='cuda')\n",
        # a constructor that runs only with CUDA, as cuda-call is silent there
        "import torch\nif torch.cuda.is_available():\n    idx = torch.cuda.LongTensor([0, 2])\n",
        "import torch\ndef steps(n, device: int):\n    if device > -1:\n        return torch.cuda.LongTensor(n, device=device).fill_(1).cumsum(0) - 1\n    return torch.arange(n)\n",
        # the CPU is the one device a legacy constructor takes
        "import torch\nx = torch.Tensor([1.0, 2.0], device='cpu')\n",
        # an alias runs everywhere: a fix that keeps every use exact, or nothing.
        # `.type(Tensor)` of a tensor that may be on any GPU has no exact rewrite
        "import torch\ncuda = torch.cuda.is_available()\nTensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor\n"
        "def prepare(x):\n    return x.type(Tensor)\n",
        "import torch\ndef summary(device):\n    if device == 'cuda' and torch.cuda.is_available():\n        dtype = torch.cuda.FloatTensor\n"
        "    else:\n        dtype = torch.FloatTensor\n    return torch.rand(2, 3).type(dtype)\n",
    ]
    INVALID = [
        Invalid(
            "import torch\nx = torch.cuda.FloatTensor(2, 3).zero_()\n",
            'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "x = torch.empty(2, 3, dtype=torch.float32, device=device).zero_()\n",
        ),
        # `.type` keeps a CUDA tensor on its GPU: x may be on any one
        Invalid("import torch\ndef prepare(x, device):\n    return x.type(torch.cuda.FloatTensor)\n", None),
        Invalid(
            "import torch\ndef prepare(x):\n    x = x.cuda()\n    return x.type(torch.cuda.HalfTensor)\n",
            "import torch\ndef prepare(x):\n    x = x.cuda()\n    return x.to(torch.float16)\n",
        ),
        Invalid(
            "import torch\ndef prepare(a, device):\n    return torch.from_numpy(a).type(torch.cuda.FloatTensor)\n",
            "import torch\ndef prepare(a, device):\n    return torch.from_numpy(a).to(device, torch.float32)\n",
        ),
        Invalid(
            "import torch\ncuda = torch.cuda.is_available()\nTensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor\n"
            "loader = torch.utils.data.DataLoader(data)\n"
            "for imgs in loader:\n    valid = Tensor(imgs.size(0), 1).fill_(1.0)\n    real = imgs.type(Tensor)\n",
            'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\ncuda = torch.cuda.is_available()\n'
            "loader = torch.utils.data.DataLoader(data)\n"
            "for imgs in loader:\n    valid = torch.empty(imgs.size(0), 1, dtype=torch.float32, device=device).fill_(1.0)\n"
            "    real = imgs.to(device, torch.float32)\n",
        ),
        Invalid(
            "import torch\ndef sample(mu):\n    Tensor = torch.cuda.FloatTensor if mu.is_cuda else torch.FloatTensor\n    return Tensor(mu.size(0), 8).normal_()\n",
            "import torch\ndef sample(mu):\n    return torch.empty(mu.size(0), 8, dtype=torch.float32, device=mu.device).normal_()\n",
        ),
        Invalid("import torch\ndef wrap(t):\n    return torch.cuda.FloatTensor(t)\n", None),
        Invalid(
            "import torch\ndef target(input):\n    return torch.tensor(1.0).type(input.type()).expand_as(input)\n",
            "import torch\ndef target(input):\n    return torch.tensor(1.0).to(input).expand_as(input)\n",
        ),
        # an existing array: shared where the CPU type would share it, copied to a GPU
        Invalid(
            "import numpy as np\nimport torch\nlabels = np.array([0, 1])\nidx = torch.cuda.LongTensor(labels)\n",
            "import numpy as np\nimport torch\n\ndevice = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n"
            "labels = np.array([0, 1])\nidx = torch.as_tensor(labels, dtype=torch.int64, device=device)\n",
        ),
        # a CPU type given a device: the split kept, the device kept
        Invalid(
            "import torch\ndef make(n, device):\n    return torch.FloatTensor(n, 4, device=device), torch.LongTensor([1, 2], device=device)\n",
            "import torch\ndef make(n, device):\n    return torch.empty(n, 4, dtype=torch.float32, device=device), torch.tensor([1, 2], dtype=torch.int64, device=device)\n",
        ),
        # what `keep` is the code does not show: built as before, then moved
        Invalid(
            "import torch\ndef select(keep, boxes):\n    return torch.Tensor(keep, device=boxes.device).long()\n",
            "import torch\ndef select(keep, boxes):\n    return torch.Tensor(keep).to(boxes.device).long()\n",
        ),
        Invalid("import torch\ndef copy(device):\n    t = torch.ones(3)\n    return torch.Tensor(t, device=device)\n", None),
        # a name bound to a list of numbers is data, not a size (nor surely
        # not a shape): reported
        Invalid("import torch\nrows = [0, 2]\nidx = torch.cuda.LongTensor(rows)\n", None),
        # a NumPy shape is a plain tuple: the legacy constructor reads it as data
        Invalid("import numpy as np\nimport torch\na = np.zeros((2, 3))\nb = torch.cuda.FloatTensor(a.shape)\n", None),
    ]

    # -- direct uses --------------------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        if any(a.keyword is not None and a.keyword.value == "device" for a in node.args):
            cpu_type = self._cpu_type(node.func)
            if cpu_type is not None:
                self._with_device(node, cpu_type)
                return
        legacy = self._cuda_type(node.func)
        if legacy is None and len(node.args) == 1 and not node.args[0].keyword and not node.args[0].star:
            self._cpu_type_of_a_tensor(node)
        if legacy is not None:
            self._direct(node, node, legacy, torch_prefix(self, node.func.value) if isinstance(node.func, cst.Attribute) else None)
            return
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "type" and node.args:
            if self._type_of_another(node):
                return
            legacy = self._cuda_type(node.args[0].value)
            if legacy is not None and node.args[0].keyword is None:
                self._direct(node, node, legacy, self._torch_of(node.args[0].value))
            return
        if legacy is None and analysis.last_name(node.func) == "set_default_tensor_type" and node.args:
            if self._cuda_type(node.args[0].value) and not guarded(analysis.of(self), node):
                self.report(node, "`set_default_tensor_type` with a CUDA type is CUDA-only; use `torch.set_default_device`")

    def _type_of_another(self, node: cst.Call) -> bool:
        """``t.type(x.type())`` on a tensor ``t``: the type name of ``x`` on a
        GPU is ``torch.cuda.FloatTensor``, which casts to the *current* CUDA
        device, not to ``x``'s; ``t.to(x)`` takes ``x``'s dtype and device."""
        (arg,) = node.args if len(node.args) == 1 else (None,)
        if arg is None or arg.keyword is not None or arg.star:
            return False
        named = arg.value
        if isinstance(named, cst.Name):
            other = self._type_name_bound(node, named)
            if other is None:
                return False
        elif isinstance(named, cst.Call) and not named.args and isinstance(named.func, cst.Attribute) and named.func.attr.value == "type":
            other = self.code_of(named.func.value)
        else:
            return False
        flow = analysis.flow_of(self)
        receiver = flow.node_at(*self.span(node.func.value))
        if receiver is None or flow.what(receiver) is not What.TENSOR:
            return False  # a module's .type() also casts integer buffers
        start, end = self.span(node.func.attr)[0], self.span(node)[1]
        self.report(
            node,
            "`.type(x.type())` casts to the current CUDA device, not to `x`'s; `.to(x)` takes its dtype and device",
            fix=[Edit(start, end, f"to({other})")],
            fix_message=f"Use `.to({other})`",
        )
        return True

    def _type_name_bound(self, call: cst.Call, name: cst.Name) -> str | None:
        """``x`` where ``name`` (``.type(wt)``) is bound once in the
        function, before ``call``, by ``wt = x.type()``: ``x`` a tensor the
        flow knows, a name the function never binds again (so ``.to(x)`` at
        ``call`` reads the tensor whose type name ``wt`` holds). None where
        the code does not show that."""
        facts = analysis.of(self)
        function = facts.enclosing(call, cst.FunctionDef)
        if function is None:
            return None
        flow = analysis.flow_of(self)
        scope = flow.function_at(self.span(function.name)[0])
        if scope is None:
            return None
        parameters = {a.arg for a in ast.walk(scope.args) if isinstance(a, ast.arg)}
        stores = [n for n in ast.walk(scope) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)]
        bound = [n for n in stores if n.id == name.value]
        if name.value in parameters or len(bound) != 1:
            return None
        parents = analysis.ast_parents(flow)
        assign = parents.get(bound[0])
        if not (isinstance(assign, ast.Assign) and assign.targets == [bound[0]]):
            return None
        value = assign.value
        if not (isinstance(value, ast.Call) and not value.args and not value.keywords and isinstance(value.func, ast.Attribute) and value.func.attr == "type"):
            return None
        source = value.func.value
        if not isinstance(source, ast.Name) or flow.what(source) is not What.TENSOR or flow.span(assign)[1] > self.span(call)[0]:
            return None
        if any(n.id == source.id and flow.span(n)[0] > flow.span(assign)[0] for n in stores):
            return None  # bound again after the type name was read: `.to(x)` would read another tensor
        if any(isinstance(n, (ast.Global, ast.Nonlocal)) and (name.value in n.names or source.id in n.names) for n in ast.walk(scope)):
            return None
        return source.id

    def _cuda_type(self, node: cst.BaseExpression) -> str | None:
        """``FloatTensor`` for ``torch.cuda.FloatTensor`` (or its string)."""
        if isinstance(node, cst.SimpleString):
            value = node.evaluated_value
            return CUDA_TYPES.get(value) if isinstance(value, str) else None
        if analysis.last_name(node) not in DTYPES:
            return None
        return next((CUDA_TYPES[q] for q in self.qualified_names(node) if q in CUDA_TYPES), None)

    def _cpu_type(self, node: cst.BaseExpression) -> str | None:
        """``FloatTensor`` for ``torch.FloatTensor``, and for ``torch.Tensor``
        (the default dtype, float32, where the file does not change it; ``""``
        where it does)."""
        name = analysis.last_name(node)
        if name != "Tensor" and name not in DTYPES:
            return None
        names = self.qualified_names(node)
        if name == "Tensor" and "torch.Tensor" in names:
            return "" if any(word in self.context.text for word in SETS_DEFAULT_DTYPE) else "FloatTensor"
        return name if f"torch.{name}" in names else None

    def _with_device(self, call: cst.Call, legacy: str) -> None:
        """``torch.FloatTensor(data, device=d)``: the legacy constructors take
        only a CPU device, so this raises wherever ``d`` is a GPU. Sizes, data
        and arrays become the factory that makes them (as for the CUDA types);
        an argument the code does not show is built as before and moved,
        ``torch.FloatTensor(x).to(d)``, which on the CPU is the very call it
        was; a tensor (which the legacy form rejects with a device) is
        reported."""
        device_arg = next(a for a in call.args if a.keyword is not None and a.keyword.value == "device")
        device_text = self.code_of(device_arg.value)
        if _names_the_host(self, device_arg.value):
            return
        shown = self.code_of(call.func)
        message = f"`{shown}(..., device=...)` raises for a GPU device: the legacy constructors take only the CPU"
        if any(a.keyword is not None and a is not device_arg for a in call.args) or any(a.star == "**" for a in call.args):
            self.report(call, f"{message}; use a factory with `device=`")
            return
        kept = [a for a in call.args if a is not device_arg]
        if kept and call.args[-1] is device_arg:  # the closing layout (a trailing comma, a line break) stays
            kept[-1] = kept[-1].with_changes(comma=device_arg.comma, whitespace_after_arg=device_arg.whitespace_after_arg)
        bare = call.with_changes(args=kept)
        kind = self._arguments(bare)
        if kind is None and len(kept) == 1 and not kept[0].star and self._is_tensor(kept[0].value):
            self.report(call, f"`{shown}(tensor, device=...)` raises (the legacy constructor takes no device with a tensor); use `tensor.to(device)`, or `torch.tensor(...)` for a copy")
            return
        torch = torch_prefix(self, call.func) if isinstance(call.func, cst.Attribute) else torch_at(analysis.of(self), call)
        if kind is None or not legacy or torch is None:
            moved = cst.Call(func=cst.Attribute(value=bare, attr=cst.Name("to")), args=[cst.Arg(device_arg.value)])
            self.report(call, message, fix=[self.replace(call, moved)], fix_message=f"Build it on the CPU, then move it: `{shown}(...).to({device_text})`")
            return
        factory = {"sizes": "empty", "data": "tensor", "array": "as_tensor"}[kind]
        new = bare.with_changes(func=cst.parse_expression(f"{torch}.{factory}"), args=kept or [cst.Arg(cst.Integer("0"))])
        new = analysis.with_keyword_argument(new, "dtype", f"{torch}.{DTYPES[legacy]}")
        new = analysis.with_keyword_argument(new, "device", device_text)
        self.report(call, message, fix=[self.replace(call, new)], fix_message=f"Use `{torch}.{factory}(..., dtype={torch}.{DTYPES[legacy]}, device={device_text})`")

    def _cpu_type_of_a_tensor(self, call: cst.Call) -> None:
        """``torch.LongTensor(t)`` of a tensor ``t`` that may live on a device
        (the flow shows it there, or, in a file that meets devices, does not
        show it on the host): the legacy constructor takes an existing tensor
        only when it is a CPU tensor of its very dtype (it returns an alias
        then) and raises ``expected TensorOptions(... device=cpu ...)`` for a
        CUDA one. Reported: ``t`` itself, ``t.long()`` or ``t.to(torch.int64)``
        is what was meant, but none of them is the alias the constructor
        made where it worked. ``torch.Tensor(t)`` is not a typed constructor
        and takes other dtypes; it is left alone."""
        name = analysis.last_name(call.func)
        if name not in DTYPES or f"torch.{name}" not in self.qualified_names(call.func):
            return
        flow = analysis.flow_of(self)
        node = flow.node_at(*self.span(call.args[0].value))
        if node is None or not _a_tensor_maybe_off_the_host(flow, node):
            return
        argument = self.code_of(call.args[0].value)
        method = {"float32": "float", "float64": "double", "float16": "half", "int64": "long", "int32": "int", "bool": "bool"}.get(DTYPES[name])
        how = f"`{argument}.{method}()`" if method else f"`{argument}.to(torch.{DTYPES[name]})`"
        self.report(
            call,
            f"`{self.code_of(call.func)}(tensor)` raises for a tensor on a GPU (the legacy constructor takes only a CPU tensor of its own dtype); use {how}",
        )

    def _torch_of(self, legacy: cst.BaseExpression) -> str | None:
        """``t`` for ``t.cuda.FloatTensor`` when ``t`` is torch."""
        if isinstance(legacy, cst.Attribute) and isinstance(legacy.value, cst.Attribute):
            return torch_prefix(self, legacy.value)
        return None

    def _direct(self, call: cst.Call, site: cst.CSTNode, legacy: str, torch: str | None) -> None:
        facts = analysis.of(self)
        if not self._is_type_call(call) and facts.enclosing(call, cst.Lambda) is None and (analysis.cuda_guarded(facts, call) or decorated_cuda_only(facts, call)):
            # `if is_cuda: torch.cuda.LongTensor(n)`, `if device > -1: ...`:
            # a constructor that runs only where CUDA is meant to be, as
            # cuda-call is silent there (a `.type(...)` cast still gets its
            # exact `.to(dtype)`)
            return
        torch = torch or torch_at(facts, call)
        if facts.enclosing(call, cst.Lambda) is None and (guarded(facts, call) or distributed(facts, call)):
            device = ('"cuda"', [])
        else:
            device = cuda_device(self, call)
        rewrite = self._rewrite(call, legacy, torch, device)
        if isinstance(rewrite, str) and self._is_type_call(call) and self._under_placement_test(call):
            return  # `if depth.is_cuda: ... .type(torch.cuda.FloatTensor)`: the code handles placement itself
        if isinstance(rewrite, str):
            self.report(site, rewrite)
        else:
            edits, how = rewrite
            self.report(site, fix=edits, fix_message=how)

    def _rewrite(self, call: cst.Call, legacy: str, torch: str | None, device: tuple[str, list[Edit]] | None, alias: bool = False) -> tuple[list[Edit], str] | str:
        """The edits that rewrite ``call`` (a constructor call, or
        ``x.type(T)``); or why not, as a message. ``alias``: ``T`` is an
        alias that is the CPU type when its condition is false."""
        dtype = DTYPES[legacy]
        if torch is None:
            return f"Legacy `{legacy}`: CUDA-only; `torch` is not imported where this runs"
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "type":
            receiver = call.func.value
            kept = call.args[1:]
            if any(a.keyword is None or a.keyword.value != "non_blocking" for a in kept):
                return f"Legacy `{legacy}` with other arguments: use `.to(device, torch.{dtype})`"
            if analysis.what_of(self, receiver) is What.MODULE:
                return f"`Module.type({legacy})` also casts integer buffers: use `.to(device, torch.{dtype})` if that is not needed"
            # `.type(torch.cuda.X)` keeps a CUDA tensor on the GPU it is on
            # and moves a host one to the current GPU; `.to("cuda")` would move
            # a tensor on another GPU to the current one. So: a host receiver
            # goes to the device, a CUDA one only changes dtype, and one the
            # code does not show either way is left to the reader.
            side = self._receiver_side(receiver)
            start, end = self.span(call.func.attr)[0], self.span(call)[1]
            if side == "device" and not alias:
                text = analysis.call_text(self, "to", [f"{torch}.{dtype}"], kept)
                return [Edit(start, end, text)], f"Use `.to({torch}.{dtype})`: the tensor is already on its GPU"
            if side != "host":
                return (
                    f"Legacy `{legacy}`: CUDA-only; `.type` keeps a CUDA tensor on its GPU, so use `.to({torch}.{dtype})` "
                    f"if it is one, else `.to(device, {torch}.{dtype})`"
                )
            if device is None:
                return f"Legacy `{legacy}`: CUDA-only; no place to define a device that is sure to run before this line"
            device_text, edits = device
            text = analysis.call_text(self, "to", [device_text, f"{torch}.{dtype}"], kept)
            return [*edits, Edit(start, end, text)], f"Use `.to({device_text}, {torch}.{dtype})`"
        if device is None:
            return f"Legacy `{legacy}`: CUDA-only; no place to define a device that is sure to run before this line"
        device_text, edits = device
        kind = self._arguments(call)
        if kind is None:
            return f"Legacy `{legacy}` of something not shown to be sizes or new data (an existing tensor or array may share its memory): rewrite it by hand"
        # an existing NumPy array: the CPU constructor shares its memory where
        # the dtype matches and the CUDA one copies, as torch.as_tensor does
        factory = {"sizes": "empty", "data": "tensor", "array": "as_tensor"}[kind]
        args = list(call.args) if call.args else [cst.Arg(cst.Integer("0"))]
        new = call.with_changes(func=cst.parse_expression(f"{torch}.{factory}"), args=args)
        new = analysis.with_keyword_argument(new, "dtype", f"{torch}.{dtype}")
        new = analysis.with_keyword_argument(new, "device", device_text)
        return [*edits, self.replace(call, new)], f"Use `{torch}.{factory}(..., dtype={torch}.{dtype}, device={device_text})`"

    @staticmethod
    def _is_type_call(call: cst.Call) -> bool:
        return isinstance(call.func, cst.Attribute) and call.func.attr.value == "type"

    def _under_placement_test(self, node: cst.CSTNode) -> bool:
        """``node`` runs only where a branch's test shows a tensor on CUDA:
        it reads a tensor's placement (``x.is_cuda``, ``x.device.type ==
        "cuda"``) and shows CUDA in use on ``node``'s side. The code chose
        the CUDA type for tensors on CUDA: the place is handled."""
        facts = analysis.of(self)
        child, current = node, facts.parent(node)
        while current is not None and not isinstance(current, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            if isinstance(current, (cst.If, cst.IfExp)) and (child is current.body or child is current.orelse):
                truth = child is current.body
                if _reads_placement(current.test) and analysis.cuda_test(current.test, truth):
                    return True
            child, current = current, facts.parent(current)
        return False

    def _receiver_side(self, receiver: cst.BaseExpression) -> str | None:
        """``"host"`` or ``"device"`` where the device flow shows every place
        the tensor may live on that side (``"device"`` also under ``if
        receiver.is_cuda:``); None where it does not."""
        flow = analysis.flow_of(self)
        node = flow.node_at(*self.span(receiver))
        places = flow.where(node) if node is not None else frozenset()
        if places and all(p is HOST for p, _ in places):
            return "host"
        if places and all(isinstance(p, Device) for p, _ in places):
            return "device"
        text, facts = self.code_of(receiver), analysis.of(self)
        child, current = receiver, facts.parent(receiver)
        while current is not None and not isinstance(current, (cst.FunctionDef, cst.Lambda)):
            if isinstance(current, cst.If) and child is current.body:
                test = current.test
                if isinstance(test, cst.Attribute) and test.attr.value == "is_cuda" and self.code_of(test.value) == text:
                    return "device"
            child, current = current, facts.parent(current)
        return None

    def _arguments(self, call: cst.Call) -> str | None:
        """``"sizes"``, ``"data"`` (a list, a tuple or a new NumPy array),
        ``"array"`` (a NumPy array the flow knows), or None when the code does
        not show which."""
        args = call.args
        if any(a.keyword is not None or a.star == "**" for a in args):
            return None
        if not args or len(args) > 1 or args[0].star == "*":
            return "sizes"
        value = args[0].value
        if isinstance(value, (cst.List, cst.Tuple)):
            return "data"
        if self._is_size(value):
            return "sizes"
        if self._is_new_array(value):
            return "data"
        flow = analysis.flow_of(self)
        node = flow.node_at(*self.span(value))
        if node is not None and flow.what(node) is What.ARRAY:
            return "array"
        if isinstance(value, cst.Name) and node is not None and flow.what(node) is What.SCALAR and flow.value(node).parts is None:
            return "sizes"  # (a list or tuple of numbers is SCALAR too, with parts: data)
        return None

    def _is_size(self, value: cst.BaseExpression) -> bool:
        """An int or a shape, as the code shows: a literal, ``x.size(...)``,
        ``x.shape[i]``, ``len(...)``, ``torch.Size(...)``, a tensor's
        ``x.shape``, or arithmetic of ints. (A NumPy array's ``a.shape`` is a
        plain tuple, which the legacy constructor reads as data.)"""
        if isinstance(value, cst.Integer):
            return True
        if isinstance(value, cst.Attribute):
            return value.attr.value == "shape" and self._is_tensor(value.value)
        if isinstance(value, cst.Subscript) and self._shape(value.value) and len(value.slice) == 1:
            return isinstance(value.slice[0].slice, cst.Index)  # one dimension: an int
        if isinstance(value, cst.Call):
            name = analysis.last_name(value.func)
            if name == "size" and isinstance(value.func, cst.Attribute):
                return True
            return (name == "len" and isinstance(value.func, cst.Name)) or "torch.Size" in self.qualified_names(value.func)
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide)):
            return self._is_size(value.left) and self._is_size(value.right) and not self._shape(value.left) and not self._shape(value.right)
        return False

    def _is_tensor(self, value: cst.BaseExpression) -> bool:
        flow = analysis.flow_of(self)
        node = flow.node_at(*self.span(value))
        return node is not None and flow.what(node) is What.TENSOR

    @staticmethod
    def _shape(value: cst.BaseExpression) -> bool:
        """A shape (a tuple), whose arithmetic would be tuple arithmetic."""
        if isinstance(value, cst.Attribute):
            return value.attr.value == "shape"
        return isinstance(value, cst.Call) and analysis.last_name(value.func) == "size" and not value.args

    def _is_new_array(self, value: cst.BaseExpression) -> bool:
        """A NumPy call that returns a new array (``np.random.normal(0, 1, (n, d))``),
        or arithmetic of one with numbers."""
        if isinstance(value, cst.BinaryOperation):
            sides = (value.left, value.right)
            return any(self._is_new_array(s) for s in sides) and all(self._is_new_array(s) or isinstance(s, (cst.Integer, cst.Float)) for s in sides)
        if not isinstance(value, cst.Call):
            return False
        names = self.qualified_names(value.func)
        if names & NUMPY_NEW_ARRAYS:
            return not any(a.keyword is not None and a.keyword.value == "copy" for a in value.args)
        for name in names:
            if name.startswith("numpy.random.") and name[13:] in NUMPY_RANDOM_SIZE:
                position = NUMPY_RANDOM_SIZE[name[13:]]
                positional = [a for a in value.args if a.keyword is None and not a.star]
                return len(positional) > position or any(a.keyword is not None and a.keyword.value == "size" for a in value.args)
        return False

    # -- aliases ----------------------------------------------------------------------

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        legacy, condition, cuda_first = self._alias_value(value)
        if legacy is None:
            return
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
            if condition is None and not guarded(analysis.of(self), node):  # `A if cuda else B` runs everywhere
                self.report(value, f"Legacy `{legacy}` alias: CUDA-only; use factories with `dtype=` and `device=`")
            return
        _Alias(self, node, node.targets[0].target.value, legacy, condition, cuda_first).fix()

    def _alias_value(self, value: cst.BaseExpression) -> tuple[str | None, cst.BaseExpression | None, bool]:
        """(legacy type, condition, whether the CUDA type is the true branch)
        for ``torch.cuda.X`` or ``torch.cuda.X if c else torch.X``."""
        if isinstance(value, cst.IfExp):
            for cuda_side, cpu_side, cuda_first in ((value.body, value.orelse, True), (value.orelse, value.body, False)):
                legacy = self._cuda_type(cuda_side) if not isinstance(cuda_side, cst.SimpleString) else None
                if legacy is not None:
                    return (legacy, value.test, cuda_first) if self._cpu_twin(cpu_side, legacy) else (None, None, True)
            return None, None, True
        if isinstance(value, cst.SimpleString):
            return None, None, True
        return self._cuda_type(value), None, True

    def _cpu_twin(self, node: cst.BaseExpression, legacy: str) -> bool:
        names = self.qualified_names(node)
        if f"torch.{legacy}" in names:
            return True
        if legacy == "FloatTensor" and "torch.Tensor" in names:
            return not any(name in self.context.text for name in SETS_DEFAULT_DTYPE)
        return False


class _Alias:
    """``NAME = torch.cuda.X [if COND else torch.X]`` and every use of NAME."""

    def __init__(self, rule: LegacyTensorType, statement: cst.Assign, name: str, legacy: str, condition: cst.BaseExpression | None, cuda_first: bool) -> None:
        self.rule = rule
        self.facts = analysis.of(rule)
        self.statement = statement
        self.name = name
        self.legacy = legacy
        self.condition = condition
        self.cuda_first = cuda_first
        self.scope = self.facts.enclosing(statement, cst.FunctionDef)
        self.value = statement.value

    def fix(self) -> None:
        rule, facts = self.rule, self.facts
        message = f"Legacy `{self.legacy}` alias `{self.name}`: CUDA-only where unguarded; use factories with `dtype=` and `device=`"
        # `A if cuda else torch.FloatTensor`, or the CUDA type under a CUDA
        # check, runs everywhere: not a bug, a modernisation, so it is a fix
        # that keeps every use exact, or nothing (never a report alone)
        everywhere = self.condition is not None or guarded(facts, self.statement)

        def cannot(reason: str) -> None:
            if not everywhere:
                rule.report(self.value, f"{message}{reason}")

        if not self._bound_once():
            cannot(f" (`{self.name}` is bound more than once)")
            return
        if everywhere and self.condition is None:
            return  # only ever the CUDA type under a CUDA check
        uses = [u for u in placement.name_reads(facts).get(self.name, []) if self._resolves_here(u)]
        if any(self._call_of(u) is None or not self._after_binding(u) for u in uses):
            cannot(f" (`{self.name}` is used other than as a constructor or `.type()` argument)")
            return
        if not uses:
            return  # nothing to rewrite; importing the name is harmless
        definition = self._device_definition()
        rewrites: list[tuple[cst.Call, tuple[list[Edit], str] | str]] = []
        for use in uses:
            call = self._call_of(use)
            device = self._device_at(call, definition)
            torch = torch_at(facts, call) or self._torch_through_alias(call)
            rewrites.append((call, rule._rewrite(call, self.legacy, torch, device, alias=self.condition is not None)))
        if everywhere and any(isinstance(r, str) for _, r in rewrites):
            return  # a use without an exact rewrite: leave the alias whole
        inserted = [definition[1]] if definition is not None else []
        line_edit = self._line_edit()
        if line_edit is not None and all(not isinstance(r, str) for _, r in rewrites):
            edits = sorted({line_edit, *inserted, *(e for _, (found, _) in rewrites for e in found)})
            if any(a.end > b.start or a.start == b.start for a, b in zip(edits, edits[1:])):
                cannot(" (uses nested in one another: rewrite by hand)")
                return
            rule.report(self.value, message, fix=edits, fix_message=f"Rewrite every use of `{self.name}` with `dtype=torch.{DTYPES[self.legacy]}` and a device")
            return
        for call, rewrite in rewrites:
            if isinstance(rewrite, str):
                rule.report(call, rewrite)
            else:
                edits, how = rewrite
                rule.report(call, fix=[*edits, *inserted], fix_message=how)

    # -- uses -------------------------------------------------------------------------

    def _call_of(self, use: cst.Name) -> cst.Call | None:
        """The call ``NAME(...)`` or ``x.type(NAME)`` this use is part of."""
        parent = self.facts.parent(use)
        if isinstance(parent, cst.Call) and parent.func is use:
            return parent
        if isinstance(parent, cst.Arg) and parent.keyword is None and not parent.star:
            call = self.facts.parent(parent)
            if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "type" and call.args[0] is parent:
                return call
        return None

    def _bound_once(self) -> bool:
        """The alias is the one binding of its name in its scope (the function,
        or the module), and no function declares the name global."""
        if placement.declared_global_or_nonlocal(self.facts, self.name):
            return False
        return self._bindings_in_scope(self.name) == 1

    def _bindings_in_scope(self, name: str) -> int:
        """How many statements of the alias's scope bind ``name``, a parameter counting as one."""
        facts = self.facts
        count = len(placement.scope_bindings(facts, self.scope if self.scope is not None else facts.module)[1].get(name, ()))
        if self.scope is not None:
            count += name in placement.parameter_names(self.scope)
        return count

    def _resolves_here(self, use: cst.Name) -> bool:
        """``use`` reads the alias's binding: the nearest enclosing function
        that binds the name is the alias's scope (none: the module)."""
        func = self.facts.enclosing(use, cst.FunctionDef)
        while func is not None and not placement.binds(func, self.name):
            func = self.facts.enclosing(func, cst.FunctionDef)
        return func is self.scope

    def _after_binding(self, use: cst.CSTNode) -> bool:
        """In a function, the alias runs before the use."""
        return self.scope is None or placement.dominates(self.facts, self.statement, use)

    def _torch_through_alias(self, use: cst.CSTNode) -> str | None:
        """``t`` of the alias's own ``t.cuda.X``: the alias ran before any use
        of it, so ``t`` is bound there too, when the alias's scope binds it
        once and no function in between binds it again (an ``import torch``
        inside ``try:`` reaches no further than this)."""
        cuda_side = self.value.body if isinstance(self.value, cst.IfExp) and self.cuda_first else self.value.orelse if isinstance(self.value, cst.IfExp) else self.value
        torch = self.rule._torch_of(cuda_side)
        if torch is None:
            return None
        if self._bindings_in_scope(torch) > 1:
            return None
        func = self.facts.enclosing(use, cst.FunctionDef)
        while func is not None and func is not self.scope:
            if placement.binds(func, torch):
                return None
            func = self.facts.enclosing(func, cst.FunctionDef)
        return torch

    # -- the device -------------------------------------------------------------------

    def needs_definition(self) -> bool:
        """Neither an availability check nor ``x.is_cuda`` stands for the
        alias's condition: the device is defined from the condition itself."""
        return self.condition is not None and not _is_availability(self.rule, self.condition) and self._is_cuda_parameter() is None

    def definition_key(self) -> tuple:
        """Aliases of one block with one condition share one definition."""
        line = self.facts.parent(self.statement)
        return id(self.facts.parent(line)), self.rule.code_of(self.condition), self.cuda_first

    def _device_definition(self) -> tuple[str, Edit] | None:
        """(name, insertion) of the device the alias's condition chooses:
        ``NAME = torch.device("cuda" if COND else "cpu")``, just before the
        first alias of its block with that condition, so that every alias
        sharing it inserts the very same line (the engine applies it once)."""
        if not self.needs_definition():
            return None
        found = _condition_devices(self.rule).get(self.definition_key())
        if found is None:
            return None
        name, anchor, torch = found
        line = self.facts.parent(anchor.statement)
        block = self.facts.parent(line)
        if not isinstance(line, cst.SimpleStatementLine) or not isinstance(block, (cst.IndentedBlock, cst.Module)):
            return None
        branches = '"cuda" if {} else "cpu"' if self.cuda_first else '"cpu" if {} else "cuda"'
        text = f"{name} = {torch}.device({branches.format(self.rule.code_of(self.condition))})"
        return name, placement.lines_before(self.rule, block, block.body.index(line), [text])

    def _is_cuda_parameter(self) -> str | None:
        """``x`` for ``if x.is_cuda``, when x is a parameter of the function
        holding the alias that nothing rebinds."""
        condition = self.condition
        if not (isinstance(condition, cst.Attribute) and condition.attr.value == "is_cuda" and isinstance(condition.value, cst.Name)):
            return None
        name = condition.value.value
        if self.scope is None or name not in placement.parameter_names(self.scope):
            return None
        body = self.scope.body
        if any(name in placement.bound_names(s) for s in placement.own_statements(body)):
            return None
        return name if self.cuda_first else None

    def _device_at(self, call: cst.Call, definition: tuple[str, str] | None) -> tuple[str, list[Edit]] | None:
        if definition is not None:
            return definition[0], []
        if self.condition is None and (guarded(self.facts, call) or distributed(self.facts, call)):
            return '"cuda"', []
        tensor = self._is_cuda_parameter()
        if tensor is not None:
            return f"{tensor}.device", []
        if self.condition is None:
            return cuda_device(self.rule, call)
        if not self.cuda_first:
            return None
        # the condition is an availability check: the device cuda-call
        # defines (or one the program has) is the one it chose, at every use
        existing = placement.existing_device(self.facts, call)
        return (existing, []) if existing is not None else placement.define_device(self.rule, self.facts, call)

    # -- the alias line -----------------------------------------------------------------

    def _line(self) -> cst.SimpleStatementLine | None:
        line = self.facts.parent(self.statement)
        if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1:
            block = self.facts.parent(line)
            if isinstance(block, (cst.IndentedBlock, cst.Module)) and len(block.body) > 1:
                return line
        return None

    def _line_edit(self) -> Edit | None:
        """The alias line, removed; None when it stays (another module may
        import it, or a comment shares its line)."""
        line = self._line()
        if line is None or (self.scope is None and not _runs_as_script(self.facts)):
            return None
        text = self.rule.context.text
        start, end = self.rule.span(line)
        line_begin = line_start(text, start)
        rest = text[end:]
        stripped = rest.lstrip(" \t")
        if stripped.startswith("#"):
            return None  # a comment on the line: keep the line
        newline = len(rest) - len(stripped)
        for ending in ("\r\n", "\n", "\r"):
            if stripped.startswith(ending):
                newline += len(ending)
                break
        return Edit(line_begin, end + newline, "")



def _a_tensor_maybe_off_the_host(flow, node: ast.AST) -> bool:
    """The flow says ``node`` is a tensor that may live off the host: on a
    device on some path, or, in a file that meets devices, not shown on the
    host on every path (``_cpu_type_of_a_tensor`` and the screen ask it)."""
    if flow.what(node) is not What.TENSOR:
        return False
    places = flow.where(node)
    if not places or all(p is HOST for p, _ in places):
        return False
    return any(isinstance(p, Device) for p, _ in places) or flow.meets_devices()


def _condition_devices(rule: LegacyTensorType) -> dict[tuple, tuple[str, "_Alias", str]]:
    """Each condition an alias's device is defined from (see
    ``_Alias.definition_key``) → (a name of its own, the first alias with it,
    how that alias spells torch). Names skip the one ``define_device`` would
    take, so a device ``cuda-call`` defines in the same run is another name."""
    facts = analysis.of(rule)
    if "legacy_alias_devices" not in facts.shared:
        taken = {placement.free_name(facts)} | facts.identifiers()
        names = iter([n for n in placement.NEW_DEVICE_NAMES if n not in taken])
        found: dict[tuple, tuple[str, _Alias, str]] = {}
        assignments = [n for n in facts.index_order() if isinstance(n, cst.Assign)]
        for node in sorted(assignments, key=facts.start):  # in reading order: the first alias anchors
            if not (len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)):
                continue
            legacy, condition, cuda_first = rule._alias_value(node.value)
            if legacy is None or condition is None:
                continue
            alias = _Alias(rule, node, node.targets[0].target.value, legacy, condition, cuda_first)
            torch = rule._torch_of(node.value.body if cuda_first else node.value.orelse)
            if not alias.needs_definition() or torch is None or alias.definition_key() in found:
                continue
            name = next(names, None)
            if name is None:
                break
            found[alias.definition_key()] = (name, alias, torch)
        facts.shared["legacy_alias_devices"] = found
    return facts.shared["legacy_alias_devices"]


def _is_availability(rule: Rule, condition: cst.BaseExpression, depth: int = 0) -> bool:
    """``torch.cuda.is_available()``, ``True if torch.cuda.is_available() else
    False``, or a name bound once (in the whole file) to one of them."""
    if isinstance(condition, cst.Call):
        return not condition.args and "torch.cuda.is_available" in rule.qualified_names(condition.func)
    if isinstance(condition, cst.IfExp):
        return _is_availability(rule, condition.test, depth) and _constant(condition.body) is True and _constant(condition.orelse) is False
    if isinstance(condition, cst.Name) and depth == 0:
        facts = analysis.of(rule)
        if placement.binding_counts(facts).get(condition.value) != 1:
            return False
        for node in facts.index_order():
            if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) and node.targets[0].target.value == condition.value:
                return _is_availability(rule, node.value, depth + 1)
    return False


def _names_the_host(rule: Rule, node: cst.BaseExpression) -> bool:
    """``"cpu"`` or ``torch.device("cpu")``: the one device the legacy
    constructors take."""
    if isinstance(node, cst.Call) and "torch.device" in rule.qualified_names(node.func) and len(node.args) == 1:
        node = node.args[0].value
    return isinstance(node, cst.SimpleString) and node.evaluated_value == "cpu"


def _constant(node: cst.BaseExpression) -> bool | None:
    return {"True": True, "False": False}.get(node.value) if isinstance(node, cst.Name) else None


def _runs_as_script(facts: "analysis.FileAnalysis") -> bool:
    """The module does its work when run (a top-level loop, or ``parse_args()``
    outside functions): a script, which no other module imports."""
    if "runs_as_script" not in facts.shared:
        found = False
        for statement in facts.module.body:
            if isinstance(statement, (cst.For, cst.While)):
                found = True
            elif isinstance(statement, cst.SimpleStatementLine):
                stack: list[cst.CSTNode] = [statement]
                while stack and not found:
                    node = stack.pop()
                    found = isinstance(node, cst.Call) and analysis.last_name(node.func) == "parse_args"
                    stack.extend(child_nodes(node))
            if found:
                break
        facts.shared["runs_as_script"] = found
    return facts.shared["runs_as_script"]


def _reads_placement(test: cst.BaseExpression) -> bool:
    """The test reads where a tensor is: ``x.is_cuda``, ``x.device.type``."""
    found = False

    class Reads(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> None:
            nonlocal found
            if node.attr.value == "is_cuda" or (node.attr.value == "type" and isinstance(node.value, cst.Attribute) and node.value.attr.value == "device"):
                found = True

    test.visit(Reads())
    return found
