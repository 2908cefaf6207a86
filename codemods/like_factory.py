"""FDV101 like-factory: ``torch.ones(x.shape)`` → ``torch.ones_like(x)``."""

from __future__ import annotations

import ast

import libcst as cst

from fixdev.engine.rule import Invalid, Rule

from fixdev.analysis import file_analysis as analysis, placement
from fixdev.analysis.flow import What
from fixdev.analysis.moved import moved_before_use, on_host

# factory → (name of its _like twin, positional arguments before the shape)
FACTORIES = {
    "torch.ones": ("ones_like", 0),
    "torch.zeros": ("zeros_like", 0),
    "torch.empty": ("empty_like", 0),
    "torch.rand": ("rand_like", 0),
    "torch.randn": ("randn_like", 0),
    "torch.full": ("full_like", 0),
    "torch.randint": ("randint_like", None),  # (high, size) or (low, high, size)
}
# Keywords the _like twins accept; any other (out=, generator=, names=,
# pin_memory=) has no counterpart, so the rule stays silent.
KEPT_KEYWORDS = {"dtype", "layout", "requires_grad"}
ACCEPTED_KEYWORDS = KEPT_KEYWORDS | {"fill_value", "size"}  # a factory call with any other keyword is left alone (_split_shape)
SHORT_NAMES = {name.split(".")[-1] for name in FACTORIES}
# Twins whose dtype, taken from the tensor, changes what they make unless it
# is floating (no dtype is shown): `rand_like` / `randn_like` raise on an
# integer or bool tensor, `full_like` casts its fill value to it.
DTYPE_BOUND_TWINS = {"rand_like", "randn_like", "full_like"}
# What shows a tensor holds integers or booleans: bound by a call of these
# (`idx = x.argmax(-1)`, `n = lengths.long()`, `torch.LongTensor(...)`), with
# an integer `dtype=`, or by a comparison (`keep = p > 0.5`).
INTEGER_MAKERS = frozenset(
    "long int short bool byte char LongTensor IntTensor ShortTensor ByteTensor BoolTensor CharTensor "
    "randint randperm argmax argmin argsort nonzero bucketize searchsorted multinomial".split()
)
INTEGER_DTYPES = frozenset("long int short bool uint8 int8 int16 int32 int64".split())
VARARG_FACTORIES = {"torch.ones", "torch.zeros", "torch.empty", "torch.rand", "torch.randn"}


class LikeFactory(Rule):
    """
    ## What it does
    Finds tensor factories whose size is another tensor's shape, such as
    `torch.ones(x.shape)`, `torch.zeros(x.size())`, `torch.randn(*x.shape)`,
    `torch.full(x.shape, v)` and `torch.randint(lo, hi, x.shape)`, and rewrites
    them to the `_like` form: `torch.ones_like(x)`, `torch.full_like(x, v)`,
    `torch.randint_like(x, lo, hi)`. Where the `_like` twin would take a
    dtype that changes what it makes, the factory keeps its own dtype and
    takes the tensor's device instead: always for `rand`, `randn` and `full`
    without `dtype=` (`torch.rand(x.shape, device=x.device)`: `rand_like`
    raises on an integer or bool `x`, `full_like(x, 0.5)` of one fills
    zeros; no dtype is shown to be floating), and for the others where the
    function binds `x` only to integer or bool tensors (`idx = s.argmax(-1)`,
    `n = m.long()`, an integer `dtype=`, `torch.arange(n)`, a comparison):
    `torch.zeros(idx.shape, device=idx.device)`. A name such as `lengths` is
    no evidence of a dtype.

    ## Why is this bad?
    A factory allocates on the default device, the CPU, whatever device `x` is
    on. When `x` lives on the GPU, combining the two raises `Expected all tensors
    to be on the same device`. The `_like` twin allocates on `x.device`.

    ## Example
    ```python
    def forward(self, x):
        mask = torch.ones(x.shape)
        return x * mask
    ```

    ## Use instead
    ```python
    def forward(self, x):
        mask = torch.ones_like(x)
        return x * mask
    ```

    ## Fix safety
    Unsafe, except where the factory draws no random numbers and the dtype
    cannot change: `dtype=` is given (`torch.zeros(x.shape, dtype=torch.int64)`)
    or the fix adds `device=` (`torch.full(x.shape, 0.5, device=x.device)`).
    Besides the device, the `_like` form may change the dtype, and a draw the
    random stream. The result takes `x`'s dtype, layout and memory format, unless
    `dtype=` was given (it is kept): `torch.ones(x.shape)` is always float32,
    but `torch.ones_like(x)` is int64 when `x` is, and float16 under `.half()`
    (`torch.full_like(x, 0.5)` of an integer `x` is all zeros).
    `torch.rand_like` and `torch.randn_like` raise on integer or bool `x`, and
    on a GPU they draw from the GPU's generator instead of the CPU's: with the
    same seed, other numbers than before (`torch.manual_seed` runs, a seeded
    sampler). Every other argument is kept. Unsafe fixes are applied with
    `--unsafe-fixes`.

    ## When it stays silent
    When the code moves the result itself before it meets anything: in the
    same expression (`torch.randn(x.shape).to(x.device)`, `.cuda()`,
    `.type_as(x)`, also after host-only steps such as `* 0.1`, `.float()` or
    a comparison with a number or a parameter annotated `float` / `int`:
    `(torch.rand(x.size()) > p).to(x.device)`), where its value is only
    copied in place (`mask.copy_(torch.rand(x.shape) > p)`: `copy_` copies
    across devices), where the tensor it is sized by is shown on the host
    (made by a CPU factory in the function: both are on the CPU),
    or, for `noise = torch.randn(x.shape)`, on the next statement that reads
    `noise` (`noise = noise.to(x.device)`; `if x.is_cuda: noise = noise.cuda()`,
    whose other path is the CPU one); writing numbers into it (`f[i] = 1`) or
    joining it with other host tensors first counts as host-only. Nothing is
    broken there, and the rewrite would only change the random stream and the
    dtype. The device flow says which steps keep it on the host and which
    move it: `.to(torch.float16)` and `.cpu()` are no moves. A read before the
    move, a `return`, a call argument, or a move under a test that is not
    about CUDA still gets the fix.
    When `x` is not a plain name or attribute chain (evaluating a call once
    instead of twice, or not at all, could change behaviour); when `x` is known
    to be a NumPy array; when `x` is `self` (a Tensor subclass's own method:
    `ones_like(self)` would go through the subclass's dispatch); when `device=` is already given (the device is right,
    and the rewrite would only change the dtype); when an argument has no
    `_like` counterpart (`out=`, `generator=`, `names=`, `pin_memory=`); when
    the size is not exactly `x.shape` or `x.size()`.
    """

    code = "FDV101"
    name = "like-factory"
    group = "mismatch"
    message = "Factory sized by another tensor's shape allocates on the CPU, not on that tensor's device"
    # The first, a part of the second, is searched fast: the second only runs
    # on files it matches. No `\b` before the names: it would make the search
    # try every position (2.5 times slower); the screen reads the real names.
    fixes_where_made = True
    trigger = (r"\.(?:shape\b|size\s*\()", r"(?:ones|zeros|empty|rand|randn|full|randint)\s*\([^()]*\.(?:shape\b|size\s*\()")

    @classmethod
    def screen(cls, screening) -> bool:
        """A factory given ``T.shape`` or ``T.size()`` for a name chain ``T``
        that is not ``self``/``cls`` nor known to be a NumPy array, and no
        keyword the ``_like`` form would not keep (``generator=``, ``device=``, ``**``)."""
        flow = analysis.flow_for(screening)
        for call in analysis.calls_named(screening, *SHORT_NAMES):
            if any(k.arg is None or k.arg not in ACCEPTED_KEYWORDS for k in call.keywords):
                continue  # _split_shape gives up on it
            for arg in (*call.args, *(k.value for k in call.keywords)):
                value = arg.value if type(arg) is ast.Starred else arg
                if type(value) is ast.Attribute and value.attr == "shape":
                    owner = value.value
                elif type(value) is ast.Call and type(value.func) is ast.Attribute and value.func.attr == "size" and not value.args and not value.keywords:
                    owner = value.func.value
                else:
                    continue
                root = analysis.chain_root(owner)
                if root is not None and not (owner is root and root.id in ("self", "cls")) and flow.what(owner) is not What.ARRAY:
                    return True
        return False

    VALID = [
        "import torch\ny = torch.ones(3, 4)\n",
        "import torch\ny = torch.ones(x.shape[0], 4)\n",
        "import torch\ny = torch.ones(make().shape)\n",
        "import torch\ny = torch.ones(x.shape, out=buf)\n",
        "import torch\ny = torch.randn(x.shape, generator=g)\n",
        "import torch\ny = torch.randn(x.shape, device=x.device)\n",
        "import numpy as np\nimport torch\na = np.zeros((2, 3))\ny = torch.zeros(a.shape)\n",
        "import torch\nclass T(torch.Tensor):\n    def blank(self):\n        return torch.zeros(self.size())\n",
        "ones = lambda s: s\ny = ones(x.shape)\n",
        # moved in the same expression, or before anything reads it: nothing is broken
        "import torch\ndef f(x):\n    return x + torch.randn(x.shape).to(x.device)\n",
        "import torch\ndef f(x):\n    return x + torch.zeros(x.size()).cuda()\n",
        "import torch\ndef f(x):\n    return x + (torch.rand(x.shape) * 0.1).type_as(x)\n",
        "import torch\ndef f(x):\n    noise = torch.randn(x.shape)\n    if x.is_cuda:\n        noise = noise.cuda()\n    return x + noise\n",
        "import torch\ndef f(x):\n    noise = torch.randn(x.shape)\n    noise = noise.to(x.device)\n    return x + noise\n",
        "import torch\ndef f(p: float, x):\n    return x * (torch.rand(x.size()) > p).to(x.device)\n",
        "import torch\ndef f(x, p: float):\n    x.data.copy_(torch.rand(x.size()) > p)\n",
        "import torch\ndef f(n):\n    a = torch.rand(n, 2)\n    return a + torch.zeros(a.shape)\n",
    ]
    INVALID = [
        Invalid("import torch\ny = torch.ones(x.shape)\n", "import torch\ny = torch.ones_like(x)\n"),
        Invalid("import torch as t\ny = t.zeros(x.size(), dtype=t.int64)\n", "import torch as t\ny = t.zeros_like(x, dtype=t.int64)\n"),
        Invalid("from torch import empty\ny = empty(*self.h.shape)\n", "from torch import empty, empty_like\ny = empty_like(self.h)\n"),
        Invalid("from torch import randn\ny = randn(*self.h.shape)\n", "from torch import randn\ny = randn(*self.h.shape, device=self.h.device)\n"),
        Invalid("import torch\nfrom torch import ones\ny = ones(x.shape)\n", "import torch\nfrom torch import ones\ny = torch.ones_like(x)\n"),
        Invalid("import torch\ny = torch.full(x.shape, 0.5)\n", "import torch\ny = torch.full(x.shape, 0.5, device=x.device)\n"),
        Invalid("import torch\ny = torch.rand(n.shape)\n", "import torch\ny = torch.rand(n.shape, device=n.device)\n"),
        Invalid("import torch\ny = torch.full(x.shape, 0.5, dtype=torch.half)\n", "import torch\ny = torch.full_like(x, 0.5, dtype=torch.half)\n"),
        Invalid(
            "import torch\ndef f(s):\n    idx = s.argmax(-1)\n    return torch.ones(idx.size())\n",
            "import torch\ndef f(s):\n    idx = s.argmax(-1)\n    return torch.ones(idx.size(), device=idx.device)\n",
        ),
        Invalid("import torch\ny = torch.randint(0, 10, x.shape)\n", "import torch\ny = torch.randint_like(x, 0, 10)\n"),
        Invalid("import torch\ny = torch.randint(10, size=x.shape)\n", "import torch\ny = torch.randint_like(x, 10)\n"),
        Invalid("import torch\ny = torch.empty(size=x.size(), requires_grad=True)\n", "import torch\ny = torch.empty_like(x, requires_grad=True)\n"),
        # read before the move; `.to(dtype)` is no move
        Invalid(
            "import torch\ndef f(x):\n    noise = torch.randn(x.shape)\n    y = x + noise\n    noise = noise.to(x.device)\n    return y\n",
            "import torch\ndef f(x):\n    noise = torch.randn(x.shape, device=x.device)\n    y = x + noise\n    noise = noise.to(x.device)\n    return y\n",
        ),
        Invalid("import torch\ndef f(x):\n    return x * torch.ones(x.shape).to(torch.float16)\n", "import torch\ndef f(x):\n    return x * torch.ones_like(x).to(torch.float16)\n"),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if analysis.last_name(node.func) not in SHORT_NAMES:
            return
        factory = next((q for q in self.qualified_names(node.func) if q in FACTORIES), None)
        if factory is None:
            return
        split = _split_shape(factory, node.args)
        if split is None:
            return
        shape_arg, before, after = split
        owner = _shape_owner(shape_arg)
        if owner is None:
            return
        shape = shape_arg.value
        written = shape.value if isinstance(shape, cst.Attribute) else shape.func.value  # the owner as written (``_shape_owner`` returns a copy)
        if analysis.what_of(self, written) is What.ARRAY:
            return
        if on_host(self, written):
            return  # the tensor it is sized by is on the host too (made by a CPU factory): both on the CPU
        if moved_before_use(self, node, self.code_of(written)):
            # the code moves it itself before it meets anything: nothing is
            # broken, and the rewrite would change the random stream and dtype
            return
        twin, _ = FACTORIES[factory]
        keeps_dtype = any(a.keyword is not None and a.keyword.value == "dtype" for a in node.args)
        if not keeps_dtype and (twin in DTYPE_BOUND_TWINS or _shown_integer(self, node, written)):
            # `rand_like` raises on an integer tensor, `full_like(n, 0.5)` of
            # one fills zeros, `ones_like(lengths)` is an integer tensor: the
            # factory keeps its own dtype and takes the tensor's device
            device = f"{self.code_of(written)}.device"
            new_call = analysis.with_keyword_argument(node, "device", device)
            self.report(node, fix=[self.replace(node, new_call)], fix_message=f"Add `device={device}`", unsafe=twin.startswith("rand"))
            return
        if isinstance(node.func, cst.Attribute):
            new_func, import_edits = node.func.with_changes(attr=cst.Name(twin)), []
        else:  # ``from torch import ones``: spell the twin the way this file can
            spelled = analysis.of(self).torch_function(twin, self, node)
            if spelled is None:
                self.report(node)
                return
            spelling, import_edits = spelled
            new_func = cst.parse_expression(spelling)
        new_args = [cst.Arg(owner), *before, *after]
        new_call = node.with_changes(func=new_func, args=_comma_separated(new_args))
        # Safe only when nothing but the device can change: the dtype is given
        # (kept) and nothing is drawn (the GPU's generator gives other numbers).
        unsafe = not keeps_dtype or twin.startswith("rand")
        self.report(node, fix=[self.replace(node, new_call), *import_edits], fix_message=f"Use `{twin}`", unsafe=unsafe)


def _shown_integer(rule: Rule, node: cst.Call, owner: cst.BaseExpression) -> bool:
    """A local name ``owner`` that the function (or module) around ``node``
    binds only to integer or boolean tensors, and at least once
    (``INTEGER_MAKERS``, an integer ``dtype=``, ``torch.arange`` of integer
    literals or names, a comparison)."""
    if not isinstance(owner, cst.Name):
        return False
    facts = analysis.of(rule)
    scope = facts.enclosing(node, cst.FunctionDef) or facts.module
    bindings = placement.scope_bindings(facts, scope)[1].get(owner.value, [])
    values = []
    for binding in bindings:
        if not (isinstance(binding, cst.Assign) and len(binding.targets) == 1 and isinstance(binding.targets[0].target, cst.Name)):
            return False
        values.append(binding.value)
    return bool(values) and all(_integer_valued(facts, value) for value in values)


def _integer_valued(facts: "analysis.FileAnalysis", value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.Comparison):
        return True
    if not isinstance(value, cst.Call):
        return False
    dtype = analysis.keyword(value, "dtype")
    if dtype is not None:
        return (analysis.last_name(dtype.value) or "") in INTEGER_DTYPES
    name = analysis.last_name(value.func)
    if name in INTEGER_MAKERS:
        return True
    if name == "arange" and "torch.arange" in facts.qnames(value.func):
        return all(a.keyword is None and isinstance(a.value, (cst.Integer, cst.Name, cst.Attribute)) for a in value.args)
    return False


def _split_shape(factory: str, args: tuple[cst.Arg, ...]) -> tuple[cst.Arg, list[cst.Arg], list[cst.Arg]] | None:
    """(the shape argument, positional args to keep, keyword args to keep), or None."""
    positional = [a for a in args if a.keyword is None and a.star == ""]
    keywords = [a for a in args if a.keyword is not None]
    if any(a.star == "**" for a in args):
        return None
    starred = [a for a in args if a.star == "*"]
    size_kw = [a for a in keywords if a.keyword.value == "size"]
    kept_keywords = [a for a in keywords if a.keyword.value != "size"]
    if any(a.keyword.value not in KEPT_KEYWORDS | {"fill_value"} for a in kept_keywords):
        return None
    if factory == "torch.full":
        # full(size, fill_value): the shape is the first positional or size=
        if size_kw and not starred:
            shape = size_kw[0]
            others = positional
        elif positional and not starred and not size_kw:
            shape, others = positional[0], positional[1:]
        else:
            return None
        if len(others) + sum(a.keyword.value == "fill_value" for a in kept_keywords) != 1:
            return None
        return shape, [_positional(a) for a in others], kept_keywords
    if factory == "torch.randint":
        if starred:
            return None
        if size_kw:
            shape, bounds = size_kw[0], positional
        elif len(positional) in (2, 3):
            shape, bounds = positional[-1], positional[:-1]
        else:
            return None
        if not 1 <= len(bounds) <= 2:
            return None
        return shape, [_positional(a) for a in bounds], kept_keywords
    # ones/zeros/empty/rand/randn: a single positional shape, *shape, or size=
    candidates = positional + starred + size_kw
    if len(candidates) != 1:
        return None
    shape = candidates[0]
    if shape.star == "*" and factory not in VARARG_FACTORIES:
        return None
    return shape, [], kept_keywords


def _shape_owner(arg: cst.Arg) -> cst.BaseExpression | None:
    """``T`` from ``T.shape`` or ``T.size()``, when T is a name or attribute chain."""
    value = arg.value
    if isinstance(value, cst.Attribute) and value.attr.value == "shape":
        owner = value.value
    elif isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "size" and not value.args:
        owner = value.func.value
    else:
        return None
    if value.lpar or not analysis.is_name_chain(owner):
        return None
    if isinstance(owner, cst.Name) and owner.value in ("self", "cls"):
        return None  # inside a Tensor subclass: *_like(self) would dispatch to it
    return owner.with_changes(lpar=(), rpar=())


def _positional(arg: cst.Arg) -> cst.Arg:
    return arg.with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT) if arg.keyword and arg.keyword.value == "size" else arg


def _comma_separated(args: list[cst.Arg]) -> list[cst.Arg]:
    """Arguments joined by ", ", keeping the spacing an argument already had."""
    result = []
    for i, arg in enumerate(args):
        last = i == len(args) - 1
        if last:
            result.append(arg.with_changes(comma=cst.MaybeSentinel.DEFAULT))
        elif isinstance(arg.comma, cst.Comma):
            result.append(arg)
        else:
            result.append(arg.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))))
    return result
