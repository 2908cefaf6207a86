"""Where a value lives: the device-flow analysis the rules share.

An abstract interpretation of each function of a file over CPython's ``ast``
(about 7x cheaper to build than libcst's tree). For every expression it
evaluates it keeps *what* the value is (``What``) and *where* it may live: a
small set of ``(placement, origin)`` pairs, where the placement is ``HOST``,
``Device(text)``, ``SameAs(text)`` or ``UNKNOWN`` and the origin is the ast node
that produced the value (a factory call, a loader loop's target, a parameter).
Branches join, loops iterate to a fixpoint, reassignment kills; facts flow
between the methods of a class, into functions through their call sites in the
file, and out of them through per-function summaries. ``UNKNOWN`` is the answer
whenever the code does not show otherwise, and unknown never fixes.

The query API, all on ``FileFlow(text_or_tree)``:

- ``what(node) -> What``: what an expression evaluated to.
- ``where(node) -> frozenset[(placement, origin)]``: where it may live; empty for
  values that live nowhere (numbers, strings, modules of code).
- ``value(node) -> Value``: both, with parts and flags.
- ``sinks() -> list[Sink]``: where a host value meets a device (or a device
  tensor reaches ``.numpy()``, or indexes a host tensor), each naming the value,
  its origins and the device to move it to.
- ``device_at(node) -> str | None``: the device a fix at ``node`` should use
  (issue 11 item 5's order).
- ``node_at(start, end)`` / ``span(node)``: between ast nodes and character
  offsets of the text (ast columns count UTF-8 bytes).
- ``qualified_name(node)``: ``torch.zeros`` for ``t.zeros`` after ``import torch as t``.

What it knows (everything else is UNKNOWN):

- Sources: factories without ``device=`` (``torch.zeros``, ``torch.tensor(list)``,
  ``torch.from_numpy``, ``torch.as_tensor(array)``, legacy ``torch.FloatTensor``)
  make host tensors, unless ``torch.set_default_device`` appears in the file or
  a ``with torch.device(...)`` block is open; ``device=d`` (also inside
  ``**kwargs`` dicts it can see) puts them on ``d``. A DataLoader's batches are
  host tensors (unpacking gives host tensors; ``for``, ``next(iter(...))``,
  ``enumerate``, ``zip``, ``tqdm``), unless its dataset or ``collate_fn`` is seen
  to move tensors, is a ``TensorDataset`` of device tensors, or the
  ``collate_fn`` is not in the file. ``Net()`` of an nn.Module class (torch.nn
  layers, classes of the file, torchvision/timm/transformers builders) is on
  the host until moved, unless given modules it keeps.
- Moves: ``.to(d)``, ``.cuda()``, ``.cpu()``, ``.type_as(v)``, ``.type(v.type())``;
  ``.to(dtype)`` keeps. Modules move in place (with their aliases and tracked
  submodules); a module passed to a call the analysis does not follow may come
  back moved (unknown).
- Propagation: tensor methods, arithmetic, comparisons and ``torch.*``
  operations keep the device (a mix takes the device side); a parameter-free
  layer passes its input's device through; a module's output is where the
  module is; containers keep their parts; class attributes set in ``__init__``
  (and helpers it calls) are known in other methods, submodules, parameters and
  buffers living where the module lives; devices: ``x.device``, ``torch.device``,
  device strings, ``cuda if available else cpu``, names that say ``device``.
- Optimizers: what ``torch.optim.SGD(...)`` and its kin make has ref
  ``OPTIMIZER`` and the calls that made it as ``parts``; where its state lives
  is not tracked.
- Functions of the file: a summary (parameters -> result, parameters that meet
  a device, modules they move), and their call sites' arguments as context when
  every use of the function's name is a call a run has seen.
- Other files' functions: what they return whatever they are given, when a
  project is passed (``FileFlow(text, project=...)``, see ``codemods.project``).
- Deliberately unknown: other files' classes, whether other files' functions
  move what they are given, attributes assigned outside
  ``__init__``, a tensor's number of dimensions (only ``torch.tensor(3.0)``,
  full reductions and ``t[i]`` may be 0-dim, which is never a finding), aliasing
  of tensors, ``setattr``/``getattr`` with computed names, lambdas, class bodies.

Functions are interpreted lazily, when something inside them is asked about,
and at most a few times per file: once with symbolic parameters (its summary),
once with its call sites' arguments when those say more. A file Python cannot
parse has no facts.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import collections
import enum
import re
import warnings
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, NamedTuple

from fixdev.engine.source import CPythonPositions, line_ends

# ---------------------------------------------------------------------------
# The lattice
# ---------------------------------------------------------------------------


class What(enum.Enum):
    MODULE = "module"  # an nn.Module instance
    TENSOR = "tensor"
    BATCH = "batch"  # a tuple, list or dict of tensors (a loader's batch), with parts
    ARRAY = "array"  # a NumPy array
    DEVICE = "device"  # names a device: torch.device(...), "cuda", x.device
    LOADER = "loader"  # iterating it yields batches
    SCALAR = "scalar"  # a number, string, None, dtype, shape: lives nowhere
    UNKNOWN = "unknown"


class _Named:
    """A placement without parameters."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


HOST = _Named("Host")
UNKNOWN = _Named("Unknown")


@dataclass(frozen=True, slots=True)
class Device:
    """On a device other than the host, named by ``text`` (source of an
    expression, such as ``device`` or ``x.device``; None where nothing in reach
    names it, as after ``.cuda()``). ``home`` is the scope whose names ``text``
    uses: None for text valid anywhere, the ``ast.Module`` for module-level
    names, a ``ClassDef`` for ``self``-based text, a function for its locals."""

    text: str | None
    home: ast.AST | None = None

    def __repr__(self) -> str:
        return f"Device({self.text})"


@dataclass(frozen=True, slots=True)
class SameAs:
    """Wherever ``text`` lives (a parameter, or ``x`` for ``x.device`` when ``x``'s
    place is not known): not known to be on a device."""

    text: str
    home: ast.AST | None = None

    def __repr__(self) -> str:
        return f"SameAs({self.text})"


class Parts(NamedTuple):
    """The inside of a batch, a container or an iterable."""

    elem: "Value"  # any element: iteration, an index not known
    items: tuple = ()  # ((key, Value), ...): known positions (int) or keys (str)


class Instance:
    """The ``ref`` of an instance of a class of this file (``self`` included)."""

    __slots__ = ("cls",)

    def __init__(self, cls: ast.ClassDef) -> None:
        self.cls = cls

    def __eq__(self, other: object) -> bool:
        return type(other) is Instance and other.cls is self.cls

    def __hash__(self) -> int:
        return id(self.cls)


# Value.flags
ZERO_DIM = 1  # may be a 0-dim tensor: a host one combines with device tensors legally
PARAM_FREE = 2  # a module without parameters or buffers: passes its input's device through
MAYBE_UNBOUND = 4  # a name not bound on every path to this point
MOVES_INPUTS = 8  # DataParallel and friends: moves host inputs itself
FOLLOWS_MODULE = 16  # an nn.Parameter or buffer: moves with the module that owns it
_JOIN_ALL = ZERO_DIM | PARAM_FREE | MOVES_INPUTS | FOLLOWS_MODULE  # kept when both sides have it

PENDING = "pending"  # origin of a loader batch's part until a name is bound to it
MAX_PLACES = 8


class Value:
    """What a value is and where it may live. ``parts``: a ``Parts`` for
    batches, containers and iterables; for modules, the frozenset of nodes that
    made the object (to move aliases in place). ``ref``: what a name refers to:
    a qualified name (``"torch.zeros"``), a function or class of this file, an
    ``Instance`` of a class of this file, or ``("instance", qualified name)``
    for an object an imported class made (``nn.Linear(...)``)."""

    __slots__ = ("what", "places", "parts", "ref", "flags")

    def __init__(self, what: What, places: frozenset = frozenset(), parts=None, ref=None, flags: int = 0) -> None:
        self.what = what
        self.places = places
        self.parts = parts
        self.ref = ref
        self.flags = flags

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(other) is not Value:
            return False
        return (
            self.what is other.what
            and self.flags == other.flags
            and self.places == other.places
            and self.parts == other.parts
            and self.ref == other.ref
        )

    def __hash__(self) -> int:
        return hash((self.what, self.places, self.flags))

    def __repr__(self) -> str:
        places = ", ".join(sorted(repr(p) for p, _ in self.places))
        return f"Value({self.what.name}, {{{places}}})"

    def but(self, **changes) -> "Value":
        fields = {name: getattr(self, name) for name in Value.__slots__}
        fields.update(changes)
        return Value(**fields)

    @property
    def placements(self) -> frozenset:
        return frozenset(p for p, _ in self.places)


NO_PLACES: frozenset = frozenset()
UNKNOWN_PLACES = frozenset({(UNKNOWN, None)})
UNKNOWN_VALUE = Value(What.UNKNOWN, UNKNOWN_PLACES)
SCALAR_VALUE = Value(What.SCALAR)
ARRAY_VALUE = Value(What.ARRAY)  # host memory, but not an operand torch checks devices of
DTYPE = "<dtype>"
DTYPE_VALUE = Value(What.SCALAR, ref=DTYPE)  # x.dtype: `.to(x.dtype)` does not move
NOTHING = Value(What.SCALAR)  # the element of an empty container
_TENSORISH = (What.TENSOR, What.BATCH, What.UNKNOWN)


def _cap(places: frozenset) -> frozenset:
    if len(places) <= MAX_PLACES:
        return places
    return UNKNOWN_PLACES | frozenset(p for p in places if p[0] is HOST)


def join(a: Value | None, b: Value | None) -> Value | None:
    """The least value that may be either."""
    if a is b or b is None:
        return a
    if a is None:
        return b
    # a value or None (or a number): what the value is, where it lives
    if a.what is What.SCALAR and a.parts is None and not a.places and b.what is not What.SCALAR:
        return b if not a.flags & MAYBE_UNBOUND or b.flags & MAYBE_UNBOUND else b.but(flags=b.flags | MAYBE_UNBOUND)
    if b.what is What.SCALAR and b.parts is None and not b.places and a.what is not What.SCALAR:
        return a if not b.flags & MAYBE_UNBOUND or a.flags & MAYBE_UNBOUND else a.but(flags=a.flags | MAYBE_UNBOUND)
    what = a.what if a.what is b.what else What.UNKNOWN
    places = a.places if a.places == b.places else _cap(a.places | b.places)
    parts = None
    if isinstance(a.parts, Parts) and isinstance(b.parts, Parts):
        parts = _join_parts(a.parts, b.parts)
    elif isinstance(a.parts, frozenset) and isinstance(b.parts, frozenset):
        parts = a.parts | b.parts
    ref = a.ref if a.ref == b.ref else None
    flags = (a.flags & b.flags & _JOIN_ALL) | ((a.flags | b.flags) & MAYBE_UNBOUND)
    return Value(what, places, parts, ref, flags)


def _join_parts(a: Parts, b: Parts) -> Parts:
    if a == b:
        return a
    elem = b.elem if a.elem is NOTHING else a.elem if b.elem is NOTHING else join(a.elem, b.elem)
    theirs = dict(b.items)
    items = tuple((key, join(value, theirs[key])) for key, value in a.items if key in theirs)
    return Parts(elem, items)


def _join_all(values: Iterable[Value | None]) -> Value | None:
    result = None
    for value in values:
        result = join(result, value)
    return result


def _join_states(a: dict | None, b: dict | None, untracked=None) -> dict | None:
    """States are dicts from a name (or a ``self.x`` chain) to its Value; None
    is a point no path reaches. A name one side lacks is not bound on that
    path; an attribute chain one side lacks was not assigned there, and holds
    what ``untracked(chain)`` says (unknown without it)."""
    if a is None:
        return b
    if b is None or a is b:
        return a
    result = {}
    for key, value in a.items():
        other = b.get(key)
        if other is None:
            result[key] = _one_sided(key, value, untracked)
        elif other is value:
            result[key] = value
        else:
            result[key] = join(value, other)
    for key, value in b.items():
        if key not in a:
            result[key] = _one_sided(key, value, untracked)
    return result


def _one_sided(key: str, value: Value, untracked) -> Value:
    if "." in key:
        return join(value, untracked(key) if untracked is not None else UNKNOWN_VALUE)
    return value if value.flags & MAYBE_UNBOUND else value.but(flags=value.flags | MAYBE_UNBOUND)


def _kinds(value: Value) -> tuple[bool, bool, bool]:
    """(may be on the host, may be on a device, may be elsewhere: unknown)."""
    host = device = other = False
    for placement, _ in value.places:
        if placement is HOST:
            host = True
        elif type(placement) is Device:
            device = True
        else:
            other = True
    return host, device, other


def _apart(host_side: Value, device_side: Value) -> bool:
    """A finding: ``host_side`` (a tensor, a batch, or a module never moved)
    may be on the host and is on no device (and is not a 0-dim tensor, which
    combines legally); ``device_side`` is on a device on some path and never
    somewhere unknown. A side on the host on one path and on a device on
    another was moved under a condition: if both sides vary they may vary
    together (``if args.cuda:`` moving both), so nothing fires; if only the
    device side varies, its device path fails whatever the condition is. So the
    device side may also be on the host only where the host side is on the host
    on every path."""
    if host_side.flags & ZERO_DIM or (host_side.what not in _TENSORISH and host_side.what is not What.MODULE):
        return False
    if device_side.what not in _TENSORISH and device_side.what is not What.MODULE:
        return False
    h_host, h_device, h_other = _kinds(host_side)
    if not h_host or h_device:
        return False
    d_host, d_device, d_other = _kinds(device_side)
    return d_device and not d_other and not (d_host and h_other)


# ---------------------------------------------------------------------------
# What the code's names mean: PyTorch, NumPy and friends
# ---------------------------------------------------------------------------


def _torch(names: str) -> frozenset:
    return frozenset(f"torch.{name}" for name in names.split())


# Fresh tensors from sizes or data, on the host unless device= says otherwise.
SIZE_FACTORIES = _torch(
    "zeros ones empty full rand randn randint randperm arange range linspace logspace eye "
    "empty_strided tril_indices triu_indices bartlett_window blackman_window hamming_window "
    "hann_window kaiser_window normal poisson bernoulli multinomial"
)
# Legacy constructors: always on the host (with a CUDA tensor they raise).
LEGACY_HOST_TYPES = _torch(
    "Tensor FloatTensor DoubleTensor HalfTensor BFloat16Tensor ByteTensor CharTensor ShortTensor "
    "IntTensor LongTensor BoolTensor"
)
# From data: on the host when the data is (a number, list, array), else where the data is.
DATA_FACTORIES = _torch("tensor as_tensor asarray scalar_tensor from_numpy frombuffer")
LIKE_FACTORIES = _torch("zeros_like ones_like empty_like full_like rand_like randn_like randint_like")
TENSOR_FACTORIES = SIZE_FACTORIES | LEGACY_HOST_TYPES | DATA_FACTORIES
DTYPES = _torch(
    "float32 float float16 half bfloat16 float64 double int64 long int32 int int16 short int8 uint8 "
    "bool complex64 cfloat complex128 cdouble"
)
# torch.* that do not combine their tensor arguments into one computation.
NOT_OPERATIONS = _torch(
    "device load save is_tensor is_storage is_floating_point is_complex is_nonzero numel manual_seed "
    "seed initial_seed get_default_dtype set_default_dtype set_default_device set_default_tensor_type "
    "no_grad enable_grad inference_mode set_grad_enabled is_grad_enabled compile vmap typename Size "
    "dtype finfo iinfo Generator Stream Event broadcast_shapes result_type can_cast promote_types "
    "get_num_threads set_num_threads use_deterministic_algorithms set_printoptions is_inference_mode_enabled "
    "autograd.Variable autograd.Function autograd.backward autocast get_autocast_dtype is_autocast_enabled"
)
NOT_OPERATION_PREFIXES = tuple(
    f"torch.{name}."
    for name in (
        "utils cuda backends distributed optim jit onnx testing hub multiprocessing profiler fx export "
        "compiler func library overrides package serialization ao quantization mps xpu accelerator "
        "random distributions nn.init nn.utils nn.parallel nn.modules nn.parameter amp futures"
    ).split()
)
REDUCTIONS = frozenset("sum mean max min prod norm std var all any median argmax argmin count_nonzero amax amin nansum nanmean logsumexp".split())
# Tensor methods whose result is a tensor on the receiver's device.
TENSOR_METHODS = frozenset(
    (
        "abs absolute acos addcdiv addcmul angle asin atan bool byte ceil char chunk clamp clamp_ clip "
        "clone contiguous cos cosh cpu cumprod cumsum deg2rad detach diag diagonal diff digamma double "
        "erf erfinv exp expand expand_as exp_ fill_ fill_diagonal_ flatten flip fliplr flipud float floor "
        "frac half int isfinite isinf isnan log log10 log1p log2 log_softmax logical_not long masked_fill "
        "narrow nan_to_num neg nonzero norm normal_ permute pin_memory reciprocal relu repeat repeat_interleave "
        "requires_grad_ reshape reshape_as resize_ roll rot90 round rsqrt sigmoid sign sin sinh softmax sort "
        "split sqrt square squeeze std t tan tanh tile topk transpose tril triu trunc unbind unflatten "
        "unfold uniform_ unique unsqueeze var view view_as zero_ bfloat16 short cumsum_ abs_ neg_ exponential_ "
        "geometric_ random_ cauchy_ log_normal_ bernoulli bernoulli_ sum mean max min prod argmax argmin "
        "amax amin all any median logsumexp cummax cummin kthvalue mode msort argsort nansum nanmean "
        "count_nonzero flatten_ movedim moveaxis swapaxes swapdims as_strided index_select take "
        "sub_ type_as float_ detach_ squeeze_ unsqueeze_ t_ transpose_ sigmoid_ tanh_ relu_ clamp_min clamp_max "
        "softplus cfloat cdouble real imag conj H mT"
    ).split()
)
# Tensor methods that combine their tensor arguments with the receiver.
COMBINING_METHODS = frozenset(
    (
        "add sub mul div true_divide floor_divide matmul mm bmm dot mv addmm addmv addbmm baddbmm "
        "masked_fill masked_fill_ where maximum minimum pow fmod remainder atan2 lerp lerp_ cross dist "
        "kron inner outer eq ne lt le gt ge logical_and logical_or logical_xor add_ sub_ mul_ div_ pow_ "
        "gather scatter scatter_ scatter_add scatter_add_ masked_scatter masked_scatter_ masked_select "
        "index_add index_add_ index_copy index_copy_ bitwise_and bitwise_or bitwise_xor copysign hypot "
        "equal allclose isclose clamp clamp_ addcmul addcdiv addcmul_ addcdiv_ multiply divide subtract"
    ).split()
)
NON_TENSOR_RESULTS = frozenset(
    "item tolist size dim numel ndimension element_size nelement is_contiguous data_ptr get_device stride "
    "storage_offset is_floating_point is_complex is_pinned untyped_storage backward register_hook type".split()
)
TENSOR_SAME_ATTRIBUTES = frozenset("T mT H mH real imag data grad".split())
TENSOR_SCALAR_ATTRIBUTES = frozenset("shape ndim dtype is_cuda requires_grad layout names itemsize nbytes is_leaf grad_fn".split())
MOVES = frozenset({"to", "cuda", "cpu"})
# Methods an nn.Module has and returns itself from.
MODULE_SELF_METHODS = frozenset("float double half bfloat16 type train eval requires_grad_ apply share_memory to_empty".split())
# torch.optim's optimizers. What one of them makes is known by its ref, OPTIMIZER,
# with the calls that made it as parts (rules ask where its parameters came from:
# its state goes where they are when `load_state_dict` runs, and stays there).
OPTIMIZER_CLASSES = frozenset("ASGD Adadelta Adafactor Adagrad Adam AdamW Adamax LBFGS Muon NAdam RAdam RMSprop Rprop SGD SparseAdam".split())
OPTIMIZER = ("instance", "torch.optim.Optimizer")
# Calls that show a value is an nn.Module (optimizers share state_dict and zero_grad).
MODULE_EVIDENCE = frozenset(
    "parameters named_parameters buffers named_buffers modules named_modules children named_children eval forward "
    "register_buffer register_parameter add_module register_forward_hook".split()
)
NN_PARAMETERS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.nn.Buffer", "torch.nn.parameter.Buffer"})
NOT_MODULES = NN_PARAMETERS | frozenset({"torch.nn.UninitializedParameter", "torch.nn.UninitializedBuffer"})
# torch.nn layers without parameters or buffers: their output is where their input is.
PARAM_FREE_LAYERS = frozenset(
    (
        "ReLU ReLU6 LeakyReLU ELU SELU CELU GELU SiLU Mish Sigmoid Tanh Softmax Softmax2d LogSoftmax Softmin "
        "Softplus Softsign Softshrink Hardshrink Hardtanh Hardsigmoid Hardswish Tanhshrink Threshold GLU "
        "LogSigmoid Dropout Dropout1d Dropout2d Dropout3d AlphaDropout FeatureAlphaDropout Flatten Unflatten "
        "Identity MaxPool1d MaxPool2d MaxPool3d AvgPool1d AvgPool2d AvgPool3d AdaptiveMaxPool1d "
        "AdaptiveMaxPool2d AdaptiveMaxPool3d AdaptiveAvgPool1d AdaptiveAvgPool2d AdaptiveAvgPool3d LPPool1d "
        "LPPool2d MaxUnpool1d MaxUnpool2d MaxUnpool3d FractionalMaxPool2d Upsample UpsamplingNearest2d "
        "UpsamplingBilinear2d PixelShuffle PixelUnshuffle ChannelShuffle ZeroPad1d ZeroPad2d ZeroPad3d "
        "ConstantPad1d ConstantPad2d ConstantPad3d ReflectionPad1d ReflectionPad2d ReflectionPad3d "
        "ReplicationPad1d ReplicationPad2d ReplicationPad3d CircularPad1d CircularPad2d CircularPad3d "
        "CosineSimilarity PairwiseDistance Fold Unfold LocalResponseNorm CrossMapLRN2d "
        "MSELoss L1Loss SmoothL1Loss HuberLoss KLDivLoss CTCLoss PoissonNLLLoss GaussianNLLLoss "
        "HingeEmbeddingLoss MarginRankingLoss CosineEmbeddingLoss TripletMarginLoss "
        "TripletMarginWithDistanceLoss SoftMarginLoss MultiLabelMarginLoss "
        "CrossEntropyLoss NLLLoss BCELoss BCEWithLogitsLoss MultiLabelSoftMarginLoss MultiMarginLoss"
    ).split()
)
# Losses that own a buffer when given a weight.
WEIGHTED_LOSSES = frozenset("CrossEntropyLoss NLLLoss BCELoss BCEWithLogitsLoss MultiLabelSoftMarginLoss MultiMarginLoss".split())
# Operations whose other tensor arguments may stay on the host (CTC's targets and lengths).
FIRST_ARGUMENT_ONLY = frozenset({"torch.nn.functional.ctc_loss", "torch.ctc_loss", "torch.nn.CTCLoss", "torch.nn.modules.loss.CTCLoss"})
MODULE_CONTAINERS = frozenset("Sequential ModuleList ModuleDict".split())
MODULE_WRAPPERS = frozenset(
    {
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.data_parallel.DataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
    }
)
LIGHTNING_MODULES = frozenset(
    {
        "pytorch_lightning.LightningModule",
        "pytorch_lightning.core.LightningModule",
        "pytorch_lightning.core.module.LightningModule",
        "lightning.LightningModule",
        "lightning.pytorch.LightningModule",
        "lightning.pytorch.core.module.LightningModule",
    }
)
# Module bases whose instances have a `device` property.
DEVICE_PROPERTY_BASES = LIGHTNING_MODULES | frozenset({"transformers.PreTrainedModel", "transformers.modeling_utils.PreTrainedModel"})
DATA_LOADERS = frozenset(
    {
        "torch.utils.data.DataLoader",
        "torch.utils.data.dataloader.DataLoader",
        "torch_geometric.loader.DataLoader",
        "torch_geometric.data.DataLoader",
    }
)
TENSOR_DATASETS = frozenset({"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"})
PASS_THROUGH_CALLS = frozenset(
    {
        "tqdm.tqdm",
        "tqdm.auto.tqdm",
        "tqdm.notebook.tqdm",
        "tqdm.std.tqdm",
        "copy.deepcopy",
        "copy.copy",
        "torch.autograd.Variable",
        "einops.rearrange",
        "einops.repeat",
        "einops.reduce",
    }
)
# Decorators that keep a function's parameters and result as they are.
TRANSPARENT_DECORATORS = frozenset(
    {"torch.no_grad", "torch.inference_mode", "torch.enable_grad", "functools.wraps", "staticmethod", "functools.lru_cache", "functools.cache"}
)
DEVICE_STRINGS = ("cuda", "mps", "xpu", "hpu", "npu", "xla", "vulkan")
# Names that say a value is a device, for values the code does not show.
_DEVICE_NAME = re.compile(r"(?:\w+_)?(?:device|dev|gpu|gpu_id|device_id|rank|local_rank|cuda_device)", re.IGNORECASE)
# Flags that say whether to run on the GPU.
FLAG_NAMES = frozenset({"cuda", "use_cuda", "use_gpu", "with_cuda", "on_gpu", "gpu_available", "cuda_available"})
DEVICE_NAMES = ("device", "dev")
# Attributes and methods only tensors have among the values a line uses.
_TENSOR_EVIDENCE = frozenset("shape dtype size dim ndim numel ndimension unsqueeze view reshape permute transpose".split())
# What shows a function treats a parameter as a tensor (``tensor_parameters``):
# a tensor's attributes, or its methods that a module does not also have.
_TENSOR_USE = frozenset(
    (
        "shape device dtype size dim ndim numel grad abs add addmm all any amax amin argmax argmin argsort "
        "bmm bool byte ceil char chunk clamp clamp_ clip clone contiguous cos cumsum detach div exp expand "
        "expand_as fill_ flatten flip floor gather int log log_softmax long masked_fill masked_fill_ matmul "
        "max mean min mm mul neg norm normal_ permute pow relu repeat repeat_interleave reshape roll round "
        "rsqrt sigmoid sign sin softmax sort split sqrt square squeeze std sub sum t tanh topk transpose "
        "tril triu type_as uniform_ unbind unflatten unsqueeze var view view_as where numpy tolist item"
    ).split()
)
# Owners of a `.device` attribute that are configuration, not tensors.
CONFIG_NAMES = frozenset({"args", "opt", "opts", "config", "cfg", "conf", "hparams", "hp", "params", "settings", "options", "flags", "FLAGS", "hyperparams"})
_BUILTIN_NAMES = frozenset(dir(builtins))
_SCALAR_BUILTINS = frozenset(
    "len isinstance issubclass hasattr int float str bool print callable id hash repr format ord chr round "
    "divmod input open bytes complex any all setattr delattr vars dir type".split()
)


def _is_torch_module_class(name: str) -> bool:
    """``torch.nn.Linear``, ``torch.nn.modules.conv.Conv2d``: an nn.Module class."""
    if name in NOT_MODULES:
        return False
    if name == "torch.nn.Module" or name in LIGHTNING_MODULES or name in DEVICE_PROPERTY_BASES:
        return True
    parts = name.split(".")
    if parts[:2] != ["torch", "nn"] or not parts[-1][:1].isupper():
        return False
    return len(parts) == 3 or parts[2] in ("modules", "parallel")


def _is_optimizer_class(name: str) -> bool:
    """``torch.optim.SGD``, ``torch.optim.adam.Adam``; not a scheduler."""
    parts = name.split(".")
    return parts[:2] == ["torch", "optim"] and parts[-1] in OPTIMIZER_CLASSES and (len(parts) == 3 or len(parts) == 4 and parts[2] not in ("lr_scheduler", "swa_utils"))


def _is_model_builder(name: str, call: ast.Call) -> bool:
    """A call that returns a model: ``torchvision.models.resnet18()``,
    ``timm.create_model(...)``, ``AutoModel.from_pretrained(...)``."""
    if name.startswith("torchvision.models."):
        last = name.rsplit(".", 1)[-1]
        return last not in ("get_weight", "get_model_weights", "list_models") and not last.startswith("_")
    if name == "timm.create_model":
        return True
    if name.startswith("transformers.") and name.endswith(".from_pretrained"):
        owner = name.split(".")[-2]
        return "Model" in owner
    return False


def _imported(node: ast.ImportFrom, name: str) -> str:
    """The qualified name ``from M import name`` binds: ``.mod.f`` for both
    ``from .mod import f`` and ``from . import mod`` then ``mod.f``."""
    module = "." * node.level + (node.module or "")
    return f"{module}.{name}" if node.module else module + name


def ast_children(node: ast.AST) -> list[ast.AST]:
    """``ast.iter_child_nodes(node)`` but the load/store markers (``ctx``), as
    a list: a third of the time of that generator, for walks over whole files."""
    found = []
    fields = _AST_FIELDS.get(type(node))
    for name in fields if fields is not None else _ast_fields(type(node)):
        value = getattr(node, name, None)
        if type(value) is list:
            for item in value:
                if isinstance(item, ast.AST):
                    found.append(item)
        elif isinstance(value, ast.AST):
            found.append(value)
    return found


# Nodes with no child node (``ctx`` aside): nearly half of a tree's nodes,
# which walks need not ask for children.
AST_LEAVES = frozenset({ast.Name, ast.Constant})


def ast_walk(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk`` (breadth first), without the load/store markers, on ``ast_children``."""
    todo = collections.deque([node])
    while todo:
        node = todo.popleft()
        if type(node) not in AST_LEAVES:
            todo.extend(ast_children(node))
        yield node


def ast_statements(body: list[ast.stmt], enter: Callable[[ast.stmt], bool] | None = None) -> Iterator[ast.stmt]:
    """Every statement of ``body`` and of the blocks nested in it, at any
    depth, in no set order, without walking expressions (which hold none: a
    tenth of a tree's nodes). A compound statement ``enter`` refuses is given
    but its blocks are not (a nested function or class, where another scope
    or another ``self`` begins)."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.stmt):
            yield node
            if enter is not None and not enter(node):
                continue
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):  # (handlers and cases hold bodies too)
            stack.extend(getattr(node, field, ()))


_AST_FIELDS: dict[type, tuple[str, ...]] = {}


def _ast_fields(kind: type) -> tuple[str, ...]:
    _AST_FIELDS[kind] = tuple(name for name in kind._fields if name != "ctx")
    return _AST_FIELDS[kind]


def _chain(node: ast.AST) -> str | None:
    """``a.b.c`` for a name or attribute chain, else None."""
    if type(node) is ast.Name:
        return node.id
    if type(node) is ast.Attribute:
        base = _chain(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _root(text: str) -> str:
    """The name a device text starts from: ``self`` for ``next(self.parameters()).device``."""
    while text.startswith("next("):
        text = text[5:]
    end = len(text)
    for i, ch in enumerate(text):
        if not (ch.isalnum() or ch == "_"):
            end = i
            break
    return text[:end]


def _constant_number(node: ast.AST) -> bool:
    if type(node) is ast.UnaryOp and type(node.op) in (ast.USub, ast.UAdd):
        node = node.operand
    return type(node) is ast.Constant and type(node.value) in (int, float, bool, complex)


# ---------------------------------------------------------------------------
# The index: one pass over the statements
# ---------------------------------------------------------------------------

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SCOPE_STATEMENTS = (*_FUNCTIONS, ast.ClassDef)  # statements whose bodies are a scope of their own
_WALRUS_NAME = re.compile(r"([^\W\d]\w*)\s*\Z")  # the name just before a `:=`
_DEFAULT_DEVICE_CALL = re.compile(r"\bset_default_(?:device|tensor_type)\s*\(")


class Scope:
    """A module, function or class body, and the names it binds."""

    __slots__ = ("node", "kind", "outer", "parent", "cls", "counts", "declared", "imports", "stars", "locals", "start", "end", "self_name", "defs")

    def __init__(self, node: ast.AST, kind: str, parent: "Scope | None") -> None:
        self.node = node
        self.kind = kind  # "module" | "function" | "class"
        self.parent = parent  # the scope the node sits in
        # where free names are looked up: the nearest enclosing function or module (class bodies do not enclose)
        self.outer = None if parent is None else parent if parent.kind != "class" else parent.outer
        self.cls = parent.node if parent is not None and parent.kind == "class" and kind == "function" else None
        self.counts: dict[str, int] = {}
        self.declared: set[str] = set()  # global / nonlocal
        self.imports: dict[str, str] = {}
        self.stars: list[str] = []
        self.defs: dict[str, ast.AST] = {}  # names bound by def or class statements
        self.locals: frozenset = frozenset()
        self.start = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
        self.end = (getattr(node, "end_lineno", 1 << 30), getattr(node, "end_col_offset", 0))
        self.self_name: str | None = None

    def bind(self, name: str) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1

    def contains(self, position: tuple[int, int]) -> bool:
        return self.start <= position < self.end


class ClassInfo:
    __slots__ = ("node", "scope", "methods", "stores", "is_module", "bases", "local_bases", "owns", "own_text", "param_free", "device_property", "kept_parameters")

    def __init__(self, node: ast.ClassDef, scope: Scope) -> None:
        self.node = node
        self.scope = scope  # the scope the class statement sits in
        self.methods: dict[str, ast.AST] = {}
        self.stores: dict[str, set[str]] = {}  # self.X -> methods assigning it
        self.is_module = False
        self.bases: list[str] = []  # qualified names of the bases
        self.local_bases: list[ast.ClassDef] = []
        self.owns = False  # evidently owns parameters or buffers
        self.own_text: str | None = None  # names the module's own device, in its methods
        self.param_free = False
        self.device_property = False
        self.kept_parameters: set[str] = set()  # __init__ parameters it keeps as they are (self.inner = inner)


class _Index:
    """Scopes, bindings, classes and imports, from one pass over the statements."""

    def __init__(self, tree: ast.Module, source: str | None) -> None:
        self.tree = tree
        self.module = Scope(tree, "module", None)
        self.scopes: dict[ast.AST, Scope] = {tree: self.module}
        self.classes: dict[ast.ClassDef, ClassInfo] = {}
        self.default_device_set = False
        self._positions: list[tuple[tuple[int, int], Scope]] = []
        self.definitions: list[ast.AST] = []  # every def and class statement
        self._scan(tree.body, self.module)
        self._positions.sort(key=lambda item: item[0])
        self._starts = [position for position, _ in self._positions]
        if source is None or ":=" in source:
            self._walrus(source)
        for scope in self.scopes.values():
            scope.locals = frozenset(scope.counts) - scope.declared
        self._resolve_classes()
        if source is None:
            self.default_device_set = self._sets_default_device()
        else:  # in a comment or string too: then less is known, nothing is wrong
            self.default_device_set = "set_default_" in source and _DEFAULT_DEVICE_CALL.search(source) is not None

    # -- the pass ---------------------------------------------------------------------

    def _scan(self, statements: list[ast.stmt], scope: Scope) -> None:
        for node in statements:
            kind = type(node)
            if kind in _FUNCTIONS:
                scope.bind(node.name)
                scope.defs[node.name] = node
                self.definitions.append(node)
                self._function(node, scope)
            elif kind is ast.ClassDef:
                scope.bind(node.name)
                scope.defs[node.name] = node
                self.definitions.append(node)
                inner = self._new_scope(node, "class", scope)
                info = self.classes[node] = ClassInfo(node, scope)
                self._scan(node.body, inner)
                for child in node.body:
                    if type(child) in _FUNCTIONS:
                        info.methods[child.name] = child
            elif kind is ast.Assign:
                for target in node.targets:
                    self._target(target, scope)
            elif kind is ast.AugAssign or kind is ast.AnnAssign:
                self._target(node.target, scope)
            elif kind is ast.For or kind is ast.AsyncFor:
                self._target(node.target, scope)
                self._scan(node.body, scope)
                self._scan(node.orelse, scope)
            elif kind is ast.While or kind is ast.If:
                self._scan(node.body, scope)
                self._scan(node.orelse, scope)
            elif kind is ast.With or kind is ast.AsyncWith:
                for item in node.items:
                    if item.optional_vars is not None:
                        self._target(item.optional_vars, scope)
                self._scan(node.body, scope)
            elif kind is ast.Try or kind.__name__ == "TryStar":
                self._scan(node.body, scope)
                for handler in node.handlers:
                    if handler.name:
                        scope.bind(handler.name)
                    self._scan(handler.body, scope)
                self._scan(node.orelse, scope)
                self._scan(node.finalbody, scope)
            elif kind is ast.Import:
                for alias in node.names:
                    name = alias.asname or alias.name.split(".")[0]
                    scope.bind(name)
                    scope.imports[name] = alias.name if alias.asname else name
            elif kind is ast.ImportFrom:
                module = "." * node.level + (node.module or "")
                for alias in node.names:
                    if alias.name == "*":
                        scope.stars.append(module)
                        continue
                    name = alias.asname or alias.name
                    scope.bind(name)
                    scope.imports[name] = _imported(node, alias.name)
            elif kind is ast.Global or kind is ast.Nonlocal:
                scope.declared.update(node.names)
            elif kind is ast.Delete:
                for target in node.targets:
                    self._target(target, scope)
            elif kind is ast.Match:
                for case in node.cases:
                    for sub in ast_walk(case.pattern):
                        name = getattr(sub, "name", None) or getattr(sub, "rest", None)
                        if isinstance(name, str):
                            scope.bind(name)
                    self._scan(case.body, scope)

    def _new_scope(self, node: ast.AST, kind: str, parent: Scope) -> Scope:
        scope = self.scopes[node] = Scope(node, kind, parent)
        self._positions.append((scope.start, scope))
        return scope

    def _function(self, node: ast.AST, parent: Scope) -> None:
        scope = self._new_scope(node, "function", parent)
        args = node.args
        for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
            if arg is not None:
                scope.bind(arg.arg)
        if scope.cls is not None:
            positional = [*args.posonlyargs, *args.args]
            decorators = {_chain(d) for d in node.decorator_list}
            if positional and not decorators & {"staticmethod", "classmethod"}:
                scope.self_name = positional[0].arg
        self._scan(node.body, scope)
        if scope.cls is not None and scope.self_name:
            stores = self.classes[scope.cls].stores
            for attr in self._self_stores(node, scope.self_name):
                stores.setdefault(attr, set()).add(node.name)

    def _target(self, target: ast.AST, scope: Scope) -> None:
        kind = type(target)
        if kind is ast.Name:
            scope.bind(target.id)
        elif kind is ast.Tuple or kind is ast.List:
            for element in target.elts:
                self._target(element, scope)
        elif kind is ast.Starred:
            self._target(target.value, scope)

    def _self_stores(self, function: ast.AST, self_name: str) -> set[str]:
        """Attributes ``self.X`` a method assigns (directly, in its own body)."""
        stores = set()
        for node in ast_statements(function.body, enter=lambda statement: type(statement) not in _SCOPE_STATEMENTS):
            kind = type(node)
            if kind in _SCOPE_STATEMENTS:
                continue
            targets = ()
            if kind is ast.Assign:
                targets = node.targets
            elif kind is ast.AugAssign or kind is ast.AnnAssign:
                targets = (node.target,)
            elif kind is ast.For or kind is ast.AsyncFor:
                targets = (node.target,)
            for target in targets:
                for sub in ast_walk(target):
                    if type(sub) is ast.Attribute and type(sub.value) is ast.Name and sub.value.id == self_name:
                        stores.add(sub.attr)
            if kind is ast.Expr and type(node.value) is ast.Call:
                call = node.value
                if type(call.func) is ast.Attribute and call.func.attr in ("register_buffer", "register_parameter", "add_module"):
                    if call.args and type(call.args[0]) is ast.Constant and isinstance(call.args[0].value, str):
                        stores.add(call.args[0].value)
        return stores

    def _walrus(self, source: str | None) -> None:
        """``(x := ...)`` binds in the enclosing function, even inside a
        comprehension. Found in the text when there is one (an occurrence in
        a string only makes a name local that is not: less known, never wrong)."""
        if source is not None:
            starts = None
            at = source.find(":=")
            while at >= 0:
                match = _WALRUS_NAME.search(source, max(0, at - 200), at)
                if match is not None:
                    if starts is None:
                        starts = [0, *line_ends(source)]
                    line = bisect.bisect_right(starts, match.start()) - 1
                    self._bind_walrus(match.group(1), (line + 1, len(source[starts[line] : match.start()].encode("utf-8"))))
                at = source.find(":=", at + 2)
            return
        for node in ast_walk(self.tree):
            if type(node) is ast.NamedExpr and type(node.target) is ast.Name:
                self._bind_walrus(node.target.id, (node.lineno, node.col_offset))

    def _bind_walrus(self, name: str, position: tuple[int, int]) -> None:
        scope = self.scope_at(position)
        while scope.kind == "class":
            scope = scope.parent
        scope.bind(name)

    # -- where a node is --------------------------------------------------------------

    def scope_at(self, position: tuple[int, int]) -> Scope:
        """The innermost scope whose span holds ``position``."""
        i = bisect.bisect_right(self._starts, position) - 1
        if i < 0:
            return self.module
        scope: Scope | None = self._positions[i][1]
        while scope is not None and scope is not self.module and not scope.contains(position):
            scope = scope.parent
        return scope or self.module

    # -- static names, for facts needed before any interpretation ---------------------

    def static_name(self, node: ast.AST, scope: Scope) -> str | None:
        """The qualified name an expression refers to through imports, or the
        local class it names (``"<local>.Net"``), without interpretation."""
        chain = _chain(node)
        if chain is None:
            return None
        root, _, rest = chain.partition(".")
        current: Scope | None = scope
        while current is not None:
            if root in current.counts and root not in current.declared:
                if current.counts[root] == 1 and root in current.imports:
                    base = current.imports[root]
                    return f"{base}.{rest}" if rest else base
                return chain
            current = current.outer
        if root in _BUILTIN_NAMES:
            return None
        for star in self.module.stars:
            if star.startswith("torch"):
                return f"{star}.{chain}"
        return None

    def local_class(self, node: ast.AST, scope: Scope) -> ast.ClassDef | None:
        """The class of this file a name refers to (bound once, by its class statement)."""
        if type(node) is not ast.Name:
            return None
        current: Scope | None = scope
        while current is not None:
            if node.id in current.counts and node.id not in current.declared:
                found = current.defs.get(node.id) if current.counts[node.id] == 1 else None
                return found if type(found) is ast.ClassDef else None
            current = current.outer
        return None

    def _resolve_classes(self) -> None:
        for info in self.classes.values():
            for base in info.node.bases:
                local = self.local_class(base, info.scope)
                if local is not None:
                    info.local_bases.append(local)
                else:
                    name = self.static_name(base, info.scope)
                    if name:
                        info.bases.append(name)
        changed = True
        while changed:  # a class may derive from a module class defined later
            changed = False
            for info in self.classes.values():
                if info.is_module:
                    continue
                if any(_is_torch_module_class(b) for b in info.bases) or any(self.classes[b].is_module for b in info.local_bases if b in self.classes):
                    info.is_module = True
                    changed = True
        for info in self.classes.values():
            if info.is_module:
                self._ownership(info)

    def _ownership(self, info: ClassInfo) -> None:
        """Whether a module class evidently owns parameters or buffers, and the
        text that names its device inside its methods."""
        seen: set[ast.ClassDef] = set()

        def inherited(info: ClassInfo, attribute: str):
            for base in info.local_bases:
                base_info = self.classes.get(base)
                if base_info is not None and base not in seen:
                    seen.add(base)
                    if base_info.own_text is None and not base_info.owns:
                        self._ownership(base_info)
                    yield getattr(base_info, attribute)

        info.device_property = any(b in DEVICE_PROPERTY_BASES for b in info.bases) or any(inherited(info, "device_property"))
        layer_bases = [b for b in info.bases if _is_torch_module_class(b) and b != "torch.nn.Module"]
        owns = bool(layer_bases) and not all(b.split(".")[-1] in PARAM_FREE_LAYERS for b in layer_bases)
        own_text = None
        anything_stored = bool(info.stores)
        init = info.methods.get("__init__")
        if init is not None and self.scopes[init].self_name:
            info.kept_parameters = self._kept_parameters(init, self.scopes[init].self_name)
        for method in info.methods.values():
            scope = self.scopes[method]
            self_name = scope.self_name
            if not self_name:
                continue
            for statement in method.body if method is init else ():
                attr = self._direct_parameter(statement, self_name, scope)
                if attr is not None and own_text is None:
                    own_text = f"{self_name}.{attr}.device"
            if not owns:
                owns = self._stores_module(method, self_name, scope)
        owns = owns or any(inherited(info, "owns"))
        info.owns = owns or info.device_property
        if info.device_property:
            info.own_text = "self.device"
        elif own_text is not None:
            info.own_text = own_text.replace(f"{self.scopes[init].self_name}.", "self.", 1) if init else own_text
        elif info.owns:
            info.own_text = "next(self.parameters()).device"
        info.param_free = not info.owns and not anything_stored and not layer_bases and not info.local_bases

    @staticmethod
    def _kept_parameters(init: ast.AST, self_name: str) -> set[str]:
        """Parameters ``__init__`` stores as they are: ``self.inner = inner``."""
        args = init.args
        names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)} - {self_name}
        kept = set()
        for node in ast_statements(init.body):
            if type(node) is ast.Assign and type(node.value) is ast.Name and node.value.id in names:
                if any(type(t) is ast.Attribute and _chain(t.value) == self_name for t in node.targets):
                    kept.add(node.value.id)
        return kept

    def _direct_parameter(self, statement: ast.stmt, self_name: str, scope: Scope) -> str | None:
        """``self.w = nn.Parameter(...)`` or ``self.register_buffer("w", <tensor>)``
        run unconditionally in ``__init__``: the attribute name."""
        if type(statement) is ast.Assign and len(statement.targets) == 1:
            target, value = statement.targets[0], statement.value
            if type(target) is ast.Attribute and type(target.value) is ast.Name and target.value.id == self_name and type(value) is ast.Call:
                if self.static_name(value.func, scope) in NN_PARAMETERS:
                    return target.attr
        if type(statement) is ast.Expr and type(statement.value) is ast.Call:
            call = statement.value
            func = call.func
            if type(func) is ast.Attribute and func.attr in ("register_buffer", "register_parameter") and _chain(func.value) == self_name:
                if len(call.args) >= 2 and type(call.args[0]) is ast.Constant and isinstance(call.args[0].value, str):
                    if not (type(call.args[1]) is ast.Constant and call.args[1].value is None):
                        return call.args[0].value
        return None

    def _stores_module(self, method: ast.AST, self_name: str, scope: Scope) -> bool:
        for node in ast_walk(method):
            if type(node) is ast.Call:
                func = node.func
                if type(func) is ast.Attribute and func.attr in ("register_buffer", "register_parameter", "add_module") and _chain(func.value) == self_name:
                    return True
            elif type(node) is ast.Assign and type(node.value) is ast.Call:
                if not any(type(t) is ast.Attribute and _chain(t.value) == self_name for t in node.targets):
                    continue
                name = self.static_name(node.value.func, scope) or ""
                if name in NN_PARAMETERS or _is_model_builder(name, node.value):
                    return True
                if _is_torch_module_class(name) and name.split(".")[-1] not in PARAM_FREE_LAYERS:
                    return True
                local = self.local_class(node.value.func, scope)
                if local is not None and local in self.classes and self.classes[local].is_module:
                    return True
        return False

    def _sets_default_device(self) -> bool:
        for node in ast_walk(self.tree):
            if type(node) is ast.Call:
                chain = _chain(node.func) or ""
                if chain.rsplit(".", 1)[-1] in ("set_default_device", "set_default_tensor_type"):
                    return True
        return False


# ---------------------------------------------------------------------------
# Findings
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Sink:
    """Where a value meets a device it does not live on.

    ``kind``: ``"module-input"`` (a host value passed to a module on a device),
    ``"module-on-host"`` (a module never moved fed a device tensor),
    ``"operand"`` (a host value combined with a device tensor by an operator,
    comparison, ``torch.*`` function or tensor method), ``"numpy"`` (a value that
    may live on a device reaches ``.numpy()`` / ``np.array``), ``"index"`` (a
    host tensor read by an index tensor on a device: ``other`` is that index).
    ``node``: the call, operation or subscript. ``value``: the expression on
    the wrong side (on the host; for ``"numpy"``, the one that may be on a
    device). ``origins``: where that value
    was made or bound (a factory call, a loader loop's target, a ``from_numpy``
    call, a parameter, the model's constructor call): where a fix goes.
    ``other``: the module, operand or input on the device. ``device``: source
    text naming the device to move ``value`` to, valid at ``node``; None when
    nothing in reach names it (and for ``"numpy"``).
    """

    kind: str
    node: ast.AST
    value: ast.expr
    origins: tuple
    other: ast.expr | None
    device: str | None


# ---------------------------------------------------------------------------
# The interpreter
# ---------------------------------------------------------------------------

_MAX_ITERATIONS = 4
_MAX_PARTS_DEPTH = 3
_MAX_INLINE_DEPTH = 2


def _depth(value: Value) -> int:
    depth = 0
    while isinstance(value.parts, Parts) and depth <= _MAX_PARTS_DEPTH:
        depth += 1
        value = value.parts.elem
    return depth


def _container(what_of_elements: list[Value], items: tuple, elem: Value) -> Value:
    """A tuple, list or dict value: a BATCH when every element is a tensor or batch."""
    places = frozenset()
    for element in what_of_elements:
        if element.what in _TENSORISH:
            places |= element.places
    if what_of_elements and all(e.what in (What.TENSOR, What.BATCH) for e in what_of_elements):
        what = What.BATCH
    elif all(e.what is What.SCALAR for e in what_of_elements):
        what = What.SCALAR
    else:
        what = What.UNKNOWN
    return Value(what, _cap(places), Parts(elem, items))


def _settle(value: Value, origin: ast.AST) -> Value:
    """A loader batch's part gets the binding it is first bound to as origin."""
    for _, o in value.places:
        if o is PENDING:
            break
    else:
        return value
    places = frozenset((p, origin if o is PENDING else o) for p, o in value.places)
    return value.but(places=places)


def _settle_to_expression(places: frozenset, node: ast.AST) -> tuple:
    return tuple(sorted({node if o is PENDING else o for p, o in places if p is HOST and o is not None}, key=_position))


def _position(node: ast.AST) -> tuple[int, int]:
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))


class _Run:
    """One abstract interpretation of one scope's body.

    ``record``: keep every expression's value and the sinks (the run queries
    use). ``summaries``: use other functions' summaries and class facts (off
    for the module-level prepass that gives functions their globals)."""

    def __init__(self, flow: "FileFlow", scope: Scope, params: dict[str, Value], *, record: bool, summaries: bool, in_init: bool = False, depth: int = 0, watch: ast.stmt | None = None) -> None:
        self.flow = flow
        self.index = flow._index
        self.scope = scope
        self.record = record
        self.summaries = summaries
        self.in_init = in_init
        self.depth = depth
        self.watch = watch
        self.watched: dict | None = None
        self.values: dict[ast.AST, Value] = {}
        self.sinks: dict[tuple, Sink] = {}
        self.returns: Value | None = None
        self.exits: dict | None = None  # the state where the body ends or returns
        self.generator = False
        self.flag_tests: list[ast.AST] = []
        self.calls: dict[ast.Call, tuple] = {}
        # uses of the file's own functions and classes by name: node -> def; calls -> (function, implicit self)
        self.references: dict[ast.AST, ast.AST] = {}
        self.called: set[ast.AST] = set()
        self.callees: dict[ast.Call, tuple] = {}
        self.discarded: dict[str, frozenset] = {}  # chain -> where a discarded .to() would put it
        # (parameter, kind, node, its use, other node, other value): a parameter meets a device here
        self.meetings: list[tuple] = []
        self.params = params
        self._loops: list[tuple[list, list]] = []
        self._default_device = 0
        self._dotted_roots: set[str] = set()
        self.cls_info = flow._index.classes.get(scope.cls) if scope.cls is not None else None
        if flow._told:  # --traceback's evidence: only then is each expression checked against it
            self.ev = self._ev_told

    # -- running ---------------------------------------------------------------------

    def _join(self, a: dict | None, b: dict | None) -> dict | None:
        return _join_states(a, b, self._untracked)

    def _untracked(self, chain: str) -> Value:
        """What ``self.x`` holds where this run has not assigned it: the class's facts."""
        root, _, attr = chain.partition(".")
        owner = self.params.get(root)
        if root != self.scope.self_name or "." in attr or owner is None or type(owner.ref) is not Instance:
            return UNKNOWN_VALUE
        found = self.flow._instance_attribute(self, owner, attr, chain)
        return UNKNOWN_VALUE if found is None else found

    def run(self) -> "_Run":
        node = self.scope.node
        state = dict(self.params)
        if self.record and self.scope.kind == "function":
            args = node.args
            for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
                if arg is not None and arg.arg in state:
                    self.values[arg] = state[arg.arg]
        state = self.block(node.body, state)
        if state is not None:
            self.returns = join(self.returns, SCALAR_VALUE)
            self.exits = self._join(self.exits, state)
        # Finished, a run is only read (values, exits, sinks). Without its
        # flow it closes no cycle (flow -> cache -> run -> flow), and a
        # file's flow is freed by reference counting when its user drops it.
        self.flow = None
        return self

    def block(self, statements: list[ast.stmt], state: dict | None) -> dict | None:
        handlers = _STATEMENTS
        for statement in statements:
            if state is None:
                return None
            if statement is self.watch:
                self.watched = self._join(self.watched, dict(state))
            handler = handlers.get(type(statement))
            if handler is not None:
                state = handler(self, statement, state)
        return state

    # -- statements ------------------------------------------------------------------

    def s_expr(self, node: ast.Expr, state: dict) -> dict:
        value = node.value
        if type(value) is ast.Call and type(value.func) is ast.Attribute and value.func.attr in MOVES:
            self.discarded_move(value, state)
        else:
            self.ev(value, state)
        return state

    def s_assign(self, node: ast.Assign, state: dict) -> dict:
        value = self.ev(node.value, state)
        for target in node.targets:
            self.bind(target, value, state)
        return state

    def s_annassign(self, node: ast.AnnAssign, state: dict) -> dict:
        if node.value is not None:
            value = self.ev(node.value, state)
            if value.what is What.UNKNOWN and value.places == UNKNOWN_PLACES:
                what = self.flow._annotation_what(node.annotation, self.scope)
                if what is not What.UNKNOWN:
                    value = value.but(what=what)
            self.bind(node.target, value, state)
        return state

    def s_augassign(self, node: ast.AugAssign, state: dict) -> dict:
        left = self.load_target(node.target, state)
        right = self.ev(node.value, state)
        result = self.combine(node, [(node.target, left), (node.value, right)], state)
        if result.what is What.SCALAR and left.what is not What.SCALAR:
            result = left if left.what in (What.TENSOR, What.ARRAY) else UNKNOWN_VALUE
        self.bind(node.target, result, state, settle=False)
        return state

    def s_if(self, node: ast.If, state: dict) -> dict | None:
        self.ev(node.test, state)
        self._note_flag(node.test)
        taken = self.block(node.body, dict(state))
        skipped = self.block(node.orelse, state)
        return self._join(taken, skipped)

    def s_for(self, node: ast.For, state: dict) -> dict | None:
        element = self.element(self.ev(node.iter, state))
        target = node.target

        def enter(body_state: dict) -> dict:
            self.bind(target, element, body_state)
            return body_state

        return self.loop(node, state, enter, None)

    def s_while(self, node: ast.While, state: dict) -> dict | None:
        self._note_flag(node.test)
        forever = type(node.test) is ast.Constant and bool(node.test.value)

        def enter(body_state: dict) -> dict:
            self.ev(node.test, body_state)
            return body_state

        return self.loop(node, state, enter, forever)

    def loop(self, node: ast.AST, entry: dict, enter, forever: bool | None) -> dict | None:
        head = entry
        breaks: list = []
        for iteration in range(_MAX_ITERATIONS + 1):
            self._loops.append(([], []))
            end = self.block(node.body, enter(dict(head)))
            breaks, continues = self._loops.pop()
            back = end
            for other in continues:
                back = self._join(back, other)
            new_head = self._join(entry, back)
            if new_head == head:
                break
            if iteration == _MAX_ITERATIONS - 1:
                # widen: what still changes becomes unknown, then one more pass
                new_head = {k: (v if head.get(k) == v else UNKNOWN_VALUE.but(flags=v.flags & MAYBE_UNBOUND)) for k, v in new_head.items()}
            head = new_head
        if forever:
            after = None
        else:
            if type(node) is ast.While:
                self.ev(node.test, head)
            after = self.block(node.orelse, dict(head)) if node.orelse else head
        for other in breaks:
            after = self._join(after, other)
        return after

    def s_with(self, node: ast.With, state: dict) -> dict | None:
        sets_default = 0
        for item in node.items:
            value = self.ev(item.context_expr, state)
            if value.what is What.DEVICE:
                sets_default += 1  # `with torch.device("cuda"):` moves factories
            if item.optional_vars is not None:
                self.bind(item.optional_vars, UNKNOWN_VALUE, state)
        self._default_device += sets_default
        state = self.block(node.body, state)
        self._default_device -= sets_default
        return state

    def s_try(self, node: ast.Try, state: dict) -> dict | None:
        before = dict(state)
        after_body = self.block(node.body, state)
        # an exception may come anywhere in the body: approximated by its start and end
        raised = self._join(before, after_body)
        outcomes = [self.block(node.orelse, after_body) if after_body is not None else None]
        for handler in node.handlers:
            if handler.type is not None:
                self.ev(handler.type, raised)
            entered = dict(raised)
            if handler.name:
                entered[handler.name] = UNKNOWN_VALUE
            outcomes.append(self.block(handler.body, entered))
        after = None
        for outcome in outcomes:
            after = self._join(after, outcome)
        if node.finalbody:
            finished = self.block(node.finalbody, dict(after if after is not None else raised))
            return finished if after is not None else None
        return after

    def s_return(self, node: ast.Return, state: dict) -> None:
        value = self.ev(node.value, state) if node.value is not None else SCALAR_VALUE
        self.returns = join(self.returns, value)
        self.exits = self._join(self.exits, state)
        return None

    def s_raise(self, node: ast.Raise, state: dict) -> None:
        if node.exc is not None:
            self.ev(node.exc, state)
        return None

    def s_break(self, node: ast.Break, state: dict) -> None:
        if self._loops:
            self._loops[-1][0].append(state)
        return None

    def s_continue(self, node: ast.Continue, state: dict) -> None:
        if self._loops:
            self._loops[-1][1].append(state)
        return None

    def s_assert(self, node: ast.Assert, state: dict) -> dict:
        self.ev(node.test, state)
        return state

    def s_delete(self, node: ast.Delete, state: dict) -> dict:
        for target in node.targets:
            chain = _chain(target)
            if chain is not None:
                state.pop(chain, None)
                self._kill(chain, state)
        return state

    def s_function(self, node: ast.AST, state: dict) -> dict:
        transparent = all(self.flow._qualified(d, self.scope) in TRANSPARENT_DECORATORS for d in node.decorator_list)
        state[node.name] = Value(What.UNKNOWN, ref=node if transparent else None)
        return state

    def s_class(self, node: ast.ClassDef, state: dict) -> dict:
        state[node.name] = Value(What.UNKNOWN, ref=node)
        return state

    def s_import(self, node: ast.Import, state: dict) -> dict:
        for alias in node.names:
            if alias.asname:
                state[alias.asname] = self.flow._ref(alias.name)
            else:
                name = alias.name.split(".")[0]
                state[name] = self.flow._ref(name)
        return state

    def s_importfrom(self, node: ast.ImportFrom, state: dict) -> dict:
        for alias in node.names:
            if alias.name != "*":
                state[alias.asname or alias.name] = self.flow._ref(_imported(node, alias.name))
        return state

    def s_match(self, node: ast.Match, state: dict) -> dict | None:
        self.ev(node.subject, state)
        after = state  # no case may match
        for case in node.cases:
            entered = dict(state)
            for sub in ast_walk(case.pattern):
                name = getattr(sub, "name", None) or getattr(sub, "rest", None)
                if isinstance(name, str):
                    entered[name] = UNKNOWN_VALUE
            if case.guard is not None:
                self.ev(case.guard, entered)
            after = self._join(after, self.block(case.body, entered))
        return after

    # -- binding ---------------------------------------------------------------------

    def bind(self, target: ast.AST, value: Value, state: dict, settle: bool = True) -> None:
        kind = type(target)
        if kind is ast.Name:
            if settle:
                value = _settle(value, target)
            if value.flags & MAYBE_UNBOUND:
                value = value.but(flags=value.flags & ~MAYBE_UNBOUND)
            state[target.id] = value
            if target.id in self._dotted_roots:
                self._kill(target.id, state)
            if self.record:
                self._remember(target, value)
        elif kind is ast.Tuple or kind is ast.List:
            self._unpack(target.elts, value, state)
        elif kind is ast.Attribute:
            chain = _chain(target)
            if chain is None:
                self.ev(target.value, state)
                return
            if settle:
                value = _settle(value, target)
            value = self._attach(target, value, state)
            if value.flags & MAYBE_UNBOUND:
                value = value.but(flags=value.flags & ~MAYBE_UNBOUND)
            state[chain] = value
            self._dotted_roots.add(_root(chain))
            self._kill(chain, state)
            if self.record:
                self._remember(target, value)
        elif kind is ast.Subscript:
            container = self.ev(target.value, state)
            self.ev(target.slice, state)
            chain = _chain(target.value)
            key = target.slice.value if type(target.slice) is ast.Constant else None
            if chain is not None and isinstance(container.parts, Parts):
                if isinstance(key, (str, int)):
                    # batch["image"] = batch["image"].to(device)
                    items = tuple((k, v) for k, v in container.parts.items if k != key) + ((key, value),)
                    parts = Parts(container.parts.elem, items)
                else:
                    # batch[k] = ...: any part may now be the new value
                    elem = container.parts.elem
                    parts = Parts(value if elem is NOTHING else join(elem, value), tuple((k, join(v, value)) for k, v in container.parts.items))
                state[chain] = container.but(parts=parts)
            elif chain is not None and container.what in _TENSORISH and container.places and value.places and not value.places <= container.places:
                # x[k] = value where value may live elsewhere: x is a container after all (a loader's dict batch)
                state[chain] = container.but(places=_cap(container.places | value.places))
        elif kind is ast.Starred:
            self.bind(target.value, value, state, settle)

    def _unpack(self, targets: list, value: Value, state: dict) -> None:
        parts = value.parts if isinstance(value.parts, Parts) else None
        items = dict(parts.items) if parts is not None else {}
        star = next((i for i, t in enumerate(targets) if type(t) is ast.Starred), None)
        length = len(targets)
        known_length = None
        if items and all(isinstance(k, int) for k in items) and sorted(items) == list(range(len(items))):
            known_length = len(items)
        for i, target in enumerate(targets):
            if parts is not None:
                key = i
                if star is not None and i > star and known_length is not None:
                    key = known_length - (length - i)
                part = items.get(key, parts.elem) if not (star is not None and i == star) else Value(value.what, value.places, Parts(parts.elem))
                if part is NOTHING:
                    part = UNKNOWN_VALUE
            elif value.what is What.TENSOR:
                part = value.but(flags=value.flags & ~ZERO_DIM)  # unbinding along the first dimension
            else:
                part = UNKNOWN_VALUE
            self.bind(target, part, state)

    def _attach(self, target: ast.Attribute, value: Value, state: dict) -> Value:
        """``self.fc = nn.Linear(...)`` in an nn.Module: submodules, parameters
        and buffers live where the module lives."""
        info = self.cls_info
        if info is None or not info.is_module or type(target.value) is not ast.Name or target.value.id != self.scope.self_name:
            return value
        if value.what is What.MODULE or value.flags & FOLLOWS_MODULE:
            own = self.flow._self_places(info.node)
            return value.but(places=own, flags=value.flags | FOLLOWS_MODULE)
        return value

    def _kill(self, root: str, state: dict) -> None:
        prefix = root + "."
        for key in [k for k in state if k.startswith(prefix)]:
            del state[key]

    def load_target(self, target: ast.AST, state: dict) -> Value:
        kind = type(target)
        if kind is ast.Name:
            return self.e_name(target, state)
        if kind is ast.Attribute:
            chain = _chain(target)
            if chain is not None and chain in state:
                return state[chain]
            return self.attribute(self.ev(target.value, state), target.attr, target, chain, state)
        if kind is ast.Subscript:
            return self.subscript(self.ev(target.value, state), target, state)
        return UNKNOWN_VALUE

    # -- expressions -----------------------------------------------------------------

    def ev(self, node: ast.AST, state: dict) -> Value:
        handler = _EXPRESSIONS.get(type(node))
        value = handler(self, node, state) if handler is not None else UNKNOWN_VALUE
        if self.record:
            self._remember(node, value)
        return value

    def _ev_told(self, node: ast.AST, state: dict) -> Value:
        """``ev``, where an expression the analysis cannot place is placed as
        the run's evidence says (``Evidence``); placed values keep their place."""
        handler = _EXPRESSIONS.get(type(node))
        value = handler(self, node, state) if handler is not None else UNKNOWN_VALUE
        told = self.flow._told.get((type(node), node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)) if hasattr(node, "lineno") else None
        if told is not None and value.what in (What.TENSOR, What.UNKNOWN, What.MODULE) and not any(p is HOST or type(p) is Device for p, _ in value.places):
            value = value.but(what=What.TENSOR if value.what is What.UNKNOWN else value.what, places=frozenset({told}))
        if self.record:
            self._remember(node, value)
        return value

    def _note_call(self, node: ast.Call, positional: list[Value], keywords: dict, callee: ast.AST, implicit_self: bool) -> None:
        """The arguments a call of a function of this file passes, for its context."""
        self.callees[node] = (callee, implicit_self)
        self.called.add(node.func)
        if type(node.func) is ast.Attribute and node.func.attr == callee.name:
            self.references[node.func] = callee
        old = self.calls.get(node)
        if old is not None:
            positional = [join(a, b) for a, b in zip(old[0], positional)]
            keywords = {k: join(old[1].get(k), v) for k, v in keywords.items()}
        self.calls[node] = (positional, keywords)

    def _remember(self, node: ast.AST, value: Value) -> None:
        old = self.values.get(node)
        self.values[node] = value if old is None or old is value else join(old, value)

    def e_constant(self, node: ast.Constant, state: dict) -> Value:
        value = node.value
        if type(value) is str:
            return self.flow._device_string(value) or SCALAR_VALUE
        return SCALAR_VALUE

    def e_name(self, node: ast.Name, state: dict) -> Value:
        value = state.get(node.id)
        if value is None:
            if node.id in self.scope.locals:
                return UNKNOWN_VALUE  # not bound yet on any path
            value = self.flow._free(self.scope, node.id)
        ref = value.ref
        if self.record and (type(ref) in _FUNCTIONS or type(ref) is ast.ClassDef) and ref.name == node.id:
            self.references[node] = ref
        if value.what is What.DEVICE:
            return self._named_device(value, node.id)
        return value

    def _named_device(self, value: Value, text: str) -> Value:
        """A name bound to a device names it: ``device`` after
        ``device = "cuda" if ... else "cpu"`` is ``Device(device)``, on every path."""
        host, device, _ = _kinds(value)
        if not device:
            return value
        home = self.flow._home(self.scope, _root(text))
        places = frozenset((Device(text, home), None) if p is HOST or type(p) is Device else (p, o) for p, o in value.places)
        return value.but(places=places)

    def e_attribute(self, node: ast.Attribute, state: dict) -> Value:
        chain = _chain(node)
        if chain is not None and chain in state:
            value = state[chain]
            return self._named_device(value, chain) if value.what is What.DEVICE else value
        base = self.ev(node.value, state)
        value = self.attribute(base, node.attr, node, chain, state)
        if self.record and type(value.ref) in _FUNCTIONS and value.ref.name == node.attr:
            self.references[node] = value.ref
        return value

    def attribute(self, base: Value, attr: str, node: ast.AST, chain: str | None, state: dict) -> Value:
        ref = base.ref
        if type(ref) is str:
            return self.flow._ref(f"{ref}.{attr}")
        if type(ref) is Instance:
            found = self.flow._instance_attribute(self, base, attr, chain)
            if found is not None:
                return found
        what = base.what
        if attr == "device":
            owner = node.value if type(node) is ast.Attribute else node.args[0] if type(node) is ast.Call and node.args else None
            return self._device_of(base, _chain(owner) if owner is not None else None)
        if what is What.TENSOR:
            if attr in TENSOR_SAME_ATTRIBUTES:
                return base
            if attr == "dtype":
                return DTYPE_VALUE
            if attr in TENSOR_SCALAR_ATTRIBUTES:
                return SCALAR_VALUE
            return Value(What.UNKNOWN, base.places)  # a model output's .logits, .last_hidden_state
        if what is What.MODULE:
            if attr in ("weight", "bias") and not base.flags & PARAM_FREE:
                return Value(What.TENSOR, base.places, flags=FOLLOWS_MODULE)
            if attr == "module" and base.flags & MOVES_INPUTS:  # DataParallel(model).module
                return base.but(flags=base.flags & ~MOVES_INPUTS)
            if attr == "training":
                return SCALAR_VALUE
            return UNKNOWN_VALUE
        if what is What.ARRAY:
            return SCALAR_VALUE if attr in ("shape", "ndim", "dtype", "size") else base
        if attr in TENSOR_SCALAR_ATTRIBUTES and attr != "grad_fn":
            return SCALAR_VALUE
        return UNKNOWN_VALUE

    def _device_of(self, base: Value, owner: str | None) -> Value:
        """``x.device``: names where ``x`` lives; ``args.device``: a configured device."""
        home = self.flow._home(self.scope, _root(owner)) if owner else None
        if base.what in (What.TENSOR, What.MODULE, What.BATCH) or (base.what is What.UNKNOWN and base.places and base.places != UNKNOWN_PLACES):
            places = set()
            for placement, origin in base.places:
                if placement is HOST or type(placement) is Device:
                    places.add((placement, origin))
                elif type(placement) is SameAs:
                    places.add((placement, origin))
                elif owner is not None:
                    places.add((SameAs(owner, home), origin))
                else:
                    places.add((UNKNOWN, None))
            return Value(What.DEVICE, frozenset(places) or UNKNOWN_PLACES)
        if owner is not None and (_root(owner) in CONFIG_NAMES or (owner == self.scope.self_name and not (self.cls_info and self.cls_info.is_module))):
            return Value(What.DEVICE, frozenset({(Device(f"{owner}.device", home), None)}))
        if owner is not None:
            return Value(What.DEVICE, frozenset({(SameAs(owner, home), None)}))
        return Value(What.DEVICE, UNKNOWN_PLACES)

    def e_subscript(self, node: ast.Subscript, state: dict) -> Value:
        return self.subscript(self.ev(node.value, state), node, state)

    def subscript(self, container: Value, node: ast.Subscript, state: dict) -> Value:
        index_value = self.ev(node.slice, state)
        what = container.what
        if isinstance(container.parts, Parts):
            index = node.slice
            if type(index) is ast.Slice:
                return container
            key = index.value if type(index) is ast.Constant else None
            if type(key) is int and key < 0:
                ints = [k for k, _ in container.parts.items if type(k) is int]
                if ints and sorted(ints) == list(range(len(ints))):
                    key = len(ints) + key
            for k, part in container.parts.items:
                if k == key:
                    return part
            elem = container.parts.elem
            return UNKNOWN_VALUE if elem is NOTHING else elem
        if what is What.TENSOR:
            index = node.slice
            if self.record:
                self._index_meets(container, node, index_value, state)
            # t[i] may be 0-dim (t[0] of a 1-dim tensor), which combines legally
            single = type(index) is not ast.Slice and type(index) is not ast.Tuple and index_value.what is What.SCALAR
            return container.but(flags=(container.flags & ~(ZERO_DIM | FOLLOWS_MODULE)) | (ZERO_DIM if single else 0))
        if what is What.ARRAY or what is What.SCALAR:
            return container if what is What.ARRAY else SCALAR_VALUE
        if what is What.UNKNOWN and container.places and container.places != UNKNOWN_PLACES and container.ref is None:
            return Value(What.UNKNOWN, container.places)
        return UNKNOWN_VALUE

    def _index_meets(self, container: Value, node: ast.Subscript, index_value: Value, state: dict) -> None:
        """``host[device_index]``: reading by index checks that every index
        tensor is on the CPU or on the indexed tensor's device. Legal, so
        silent: a device tensor indexed by host indices, a 0-dim integer index
        (read as a number), and assignments (``host[device_index] = v`` moves
        the indices)."""
        index = node.slice
        if type(index) is ast.Tuple:
            if not isinstance(index_value.parts, Parts) or any(type(e) is ast.Starred for e in index.elts):
                return
            parts = dict(index_value.parts.items)
            elements = [(element, parts.get(i)) for i, element in enumerate(index.elts)]
        else:
            elements = [(index, index_value)]
        for element, value in elements:
            if value is not None and value.what is What.TENSOR and not value.flags & ZERO_DIM and _apart(container, value):
                self._sink("index", node, node.value, container, element, value, state)
                return

    def e_starred(self, node: ast.Starred, state: dict) -> Value:
        return self.ev(node.value, state)

    def e_sequence(self, node: ast.AST, state: dict) -> Value:
        values = [self.ev(element, state) for element in node.elts]
        if any(type(e) is ast.Starred for e in node.elts):
            elem = _join_all(values) or NOTHING
            return _container(values, (), elem)
        trimmed = [v if _depth(v) < _MAX_PARTS_DEPTH else v.but(parts=None) for v in values]
        elem = _join_all(trimmed) or NOTHING
        return _container(trimmed, tuple(enumerate(trimmed)), elem)

    def e_dict(self, node: ast.Dict, state: dict) -> Value:
        items = []
        values = []
        for key, value_node in zip(node.keys, node.values):
            value = self.ev(value_node, state)
            if key is None:  # {**other}
                values.append(value.parts.elem if isinstance(value.parts, Parts) else value)
                continue
            self.ev(key, state)
            if _depth(value) >= _MAX_PARTS_DEPTH:
                value = value.but(parts=None)
            values.append(value)
            if type(key) is ast.Constant and isinstance(key.value, (str, int)):
                items.append((key.value, value))
        return _container(values, tuple(items), _join_all(values) or NOTHING)

    def e_set(self, node: ast.Set, state: dict) -> Value:
        for element in node.elts:
            self.ev(element, state)
        return UNKNOWN_VALUE

    def e_comprehension(self, node: ast.AST, state: dict) -> Value:
        inner = dict(state)
        for generator in node.generators:
            self.bind(generator.target, self.element(self.ev(generator.iter, inner)), inner)
            for condition in generator.ifs:
                self.ev(condition, inner)
        if type(node) is ast.DictComp:
            self.ev(node.key, inner)
            element = self.ev(node.value, inner)
        else:
            element = self.ev(node.elt, inner)
        if _depth(element) >= _MAX_PARTS_DEPTH:
            element = element.but(parts=None)
        what = What.BATCH if element.what in (What.TENSOR, What.BATCH) else What.SCALAR if element.what is What.SCALAR else What.UNKNOWN
        places = element.places if element.what in _TENSORISH else NO_PLACES
        return Value(what, places, Parts(element))

    def e_unaryop(self, node: ast.UnaryOp, state: dict) -> Value:
        operand = self.ev(node.operand, state)
        if type(node.op) is ast.Not:
            return SCALAR_VALUE
        if operand.what in (What.TENSOR, What.ARRAY, What.SCALAR):
            return operand
        return UNKNOWN_VALUE

    def e_binop(self, node: ast.BinOp, state: dict) -> Value:
        left = self.ev(node.left, state)
        right = self.ev(node.right, state)
        return self.combine(node, [(node.left, left), (node.right, right)], state)

    def e_boolop(self, node: ast.BoolOp, state: dict) -> Value:
        return _join_all([self.ev(value, state) for value in node.values])

    def e_compare(self, node: ast.Compare, state: dict) -> Value:
        operands = [(node.left, self.ev(node.left, state))]
        operands += [(c, self.ev(c, state)) for c in node.comparators]
        if any(type(op) in (ast.Is, ast.IsNot, ast.In, ast.NotIn) for op in node.ops):
            return SCALAR_VALUE
        result = self.combine(node, operands, state)
        return result if result.what is What.TENSOR else SCALAR_VALUE

    def e_ifexp(self, node: ast.IfExp, state: dict) -> Value:
        self.ev(node.test, state)
        self._note_flag(node.test)
        return join(self.ev(node.body, state), self.ev(node.orelse, state))

    def e_namedexpr(self, node: ast.NamedExpr, state: dict) -> Value:
        value = self.ev(node.value, state)
        self.bind(node.target, value, state)
        return value

    def e_joinedstr(self, node: ast.AST, state: dict) -> Value:
        """``f"cuda:{rank}"`` names a device."""
        first = node.values[0] if node.values else None
        if type(first) is ast.Constant and isinstance(first.value, str) and first.value.split(":")[0] in DEVICE_STRINGS:
            return Value(What.DEVICE, frozenset({(Device(None), None)}))  # named once bound to a name
        return SCALAR_VALUE

    def e_lambda(self, node: ast.Lambda, state: dict) -> Value:
        return UNKNOWN_VALUE

    def e_await(self, node: ast.AST, state: dict) -> Value:
        if getattr(node, "value", None) is not None:
            self.ev(node.value, state)
        if type(node) is not ast.Await:
            self.generator = True
        return UNKNOWN_VALUE

    def e_slice(self, node: ast.Slice, state: dict) -> Value:
        for part in (node.lower, node.upper, node.step):
            if part is not None:
                self.ev(part, state)
        return SCALAR_VALUE

    def _note_flag(self, test: ast.AST) -> None:
        """Remember chains tested like flags (``if args.cuda:``), for device_at."""
        if not self.record:
            return
        tests = test.values if type(test) is ast.BoolOp else [test]
        for sub in tests:
            if type(sub) is ast.UnaryOp and type(sub.op) is ast.Not:
                sub = sub.operand
            chain = _chain(sub)
            if chain is not None and chain.rsplit(".", 1)[-1] in FLAG_NAMES:
                self.flag_tests.append(sub)

    # -- combining tensors -----------------------------------------------------------

    def combine(self, node: ast.AST, operands: list[tuple[ast.AST, Value]], state: dict) -> Value:
        """An operation on tensors: a finding where they live apart; the result
        lives on the device side (where it would live once the code runs)."""
        tensors = [(n, v) for n, v in operands if v.what in _TENSORISH and v.places and type(v.ref) is not str]
        if not tensors or all(v is UNKNOWN_VALUE for _, v in tensors):
            if any(v.what is What.ARRAY for _, v in operands):
                return next(v for _, v in operands if v.what is What.ARRAY)
            if all(v.what is What.SCALAR for _, v in operands):
                return SCALAR_VALUE
            return UNKNOWN_VALUE
        if self.record and len(tensors) > 1:
            for host_node, host in tensors:
                for device_node, device in tensors:
                    if device_node is not host_node and self._meet("operand", node, host_node, host, device_node, device, state):
                        break
        significant = [v for _, v in tensors if not (v.flags & ZERO_DIM and _kinds(v) == (True, False, False))] or [v for _, v in tensors]
        on_device = [v for v in significant if _kinds(v) == (False, True, False)]
        places = frozenset()
        for value in on_device or significant:
            places |= value.places
        what = What.TENSOR if any(v.what is What.TENSOR for _, v in tensors) else What.UNKNOWN
        zero_dim = ZERO_DIM if all(v.flags & ZERO_DIM for _, v in tensors) and all(v.what in (What.TENSOR, What.SCALAR) for _, v in operands) else 0
        return Value(what, _cap(places), flags=zero_dim)

    def _meet(self, kind: str, node: ast.AST, host_node: ast.AST, host: Value, device_node: ast.AST, device: Value, state: dict) -> bool:
        """Whether ``host`` meeting ``device`` here is a finding (then it is
        kept). Where ``host`` is one of this function's parameters as callers
        pass it (``SameAs(x)``) and ``device`` is on a device, the meeting is
        kept in the function's summary instead: a call passing a host value
        for that parameter makes it a finding."""
        if _apart(host, device):
            self._sink(kind, node, host_node, host, device_node, device, state)
            return True
        if host.places and _kinds(device) == (False, True, False):
            function = self.scope.node
            params = {p.text for p, _ in host.places if type(p) is SameAs and p.home is function}
            if len(params) == 1 and all(type(p) is SameAs for p, _ in host.places):
                self.meetings.append((params.pop(), kind, node, host_node, device_node, device))
        return False

    def _sink(self, kind: str, node: ast.AST, value_node: ast.AST, value: Value, other_node: ast.AST | None, other: Value | None, state: dict) -> None:
        if kind == "numpy":
            origins = tuple(sorted({o for p, o in value.places if type(p) is Device and o is not None and o is not PENDING}, key=_position))
            device = None
        else:
            origins = _settle_to_expression(value.places, value_node)
            device = self.flow._device_text(self.scope, other, other_node)
        key = (node, value_node)
        if key not in self.sinks:
            self.sinks[key] = Sink(kind, node, value_node, origins, other_node, device)

    # -- calls -----------------------------------------------------------------------

    def e_call(self, node: ast.Call, state: dict) -> Value:
        func = node.func
        if type(func) is ast.Attribute:
            receiver = self.ev(func.value, state)
            if type(receiver.ref) is str:
                name = f"{receiver.ref}.{func.attr}"
                if self.record:
                    self._remember(func, self.flow._ref(name))
                return self.call_named(name, node, state)
            if receiver.what is What.MODULE and func.attr == "forward":
                return self.call_module(receiver, func.value, node, state)
            chain = _chain(func)
            member = state.get(chain) if chain is not None else None
            if member is None and type(receiver.ref) is Instance:
                member = self.flow._instance_attribute(self, receiver, func.attr, chain)
            if member is not None and (member.what is What.MODULE or isinstance(member.ref, (ast.FunctionDef, ast.AsyncFunctionDef))):
                if self.record:
                    self._remember(func, member)
                if isinstance(member.ref, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    return self.call_function(member.ref, node, state, receiver)
                return self.call_module(member, func, node, state)
            return self.method(receiver, func.attr, func.value, node, state)
        callee = self.ev(func, state)
        ref = callee.ref
        if type(ref) is str:
            return self.call_named(ref, node, state)
        if type(ref) in _FUNCTIONS:
            return self.call_function(ref, node, state, None)
        if type(ref) is ast.ClassDef:
            return self.construct(ref, node, state)
        if callee.what is What.MODULE:
            return self.call_module(callee, func, node, state)
        positional, keywords = self._arguments(node, state)
        self._forget_modules(positional, keywords, state)
        return UNKNOWN_VALUE

    def _arguments(self, node: ast.Call, state: dict) -> tuple[list[Value], dict[str | None, Value]]:
        positional = [self.ev(arg, state) for arg in node.args]
        keywords: dict[str | None, Value] = {}
        for keyword in node.keywords:
            value = self.ev(keyword.value, state)
            if keyword.arg is None and "device" not in keywords:
                # f(**kw): a device may be in it (dd = dict(device=device); torch.zeros(3, **dd))
                items = dict(value.parts.items) if isinstance(value.parts, Parts) else {}
                keywords["device"] = items.get("device", UNKNOWN_VALUE)
            keywords[keyword.arg] = join(keywords.get(keyword.arg), value)
        return positional, keywords

    def call_named(self, name: str, node: ast.Call, state: dict) -> Value:
        positional, keywords = self._arguments(node, state)
        first = positional[0] if positional else None
        if name.startswith("torch."):
            return self.torch_call(name, node, positional, keywords, state)
        if name.startswith("builtins."):
            return self.builtin_call(name[9:], node, positional, keywords, state)
        if name.startswith("numpy."):
            if name in ("numpy.array", "numpy.asarray", "numpy.asanyarray", "numpy.copy") and first is not None:
                if first.what in _TENSORISH and _kinds(first)[1]:
                    self._sink("numpy", node, node.args[0], first, None, None, state)
            return ARRAY_VALUE
        if name in DATA_LOADERS:
            return self.loader(node, positional, keywords)
        if name in PASS_THROUGH_CALLS:
            return first if first is not None else UNKNOWN_VALUE
        if _is_model_builder(name, node):
            if "device_map" in keywords:
                return Value(What.MODULE, UNKNOWN_PLACES, frozenset({node}), ("instance", name))
            return Value(What.MODULE, frozenset({(HOST, node)}), frozenset({node}), ("instance", name))
        if name.startswith("einops.") and positional:
            return self.combine(node, list(zip(node.args, positional)), state)
        self._forget_modules(positional, keywords, state)
        project = self.flow.project
        if project is not None and self.summaries:
            # another file's function: what it returns whatever it is given (codemods.project)
            returned = project.call(name, node)
            if returned is not None:
                return returned
        return UNKNOWN_VALUE

    def torch_call(self, name: str, node: ast.Call, positional: list[Value], keywords: dict, state: dict) -> Value:
        first = positional[0] if positional else None
        if name in TENSOR_FACTORIES:
            return self.factory(name, node, first, keywords)
        if name in LIKE_FACTORIES:
            if "device" in keywords:
                return self._placed(node, keywords["device"])
            return Value(What.TENSOR, first.places if first is not None and first.what in _TENSORISH else UNKNOWN_PLACES)
        if name == "torch.device":
            return self._device_constructor(node, positional, keywords)
        if name == "torch.accelerator.current_accelerator":  # a device, or None on a machine without one
            return Value(What.DEVICE, frozenset({(Device(self.flow._source(node), self.flow._home(self.scope, _root(self.flow._source(node)))), None)}))
        if name.startswith("torch.cuda.") and name.endswith("Tensor") and name.rsplit(".", 1)[-1][:1].isupper():
            return Value(What.TENSOR, frozenset({(Device(None), node)}))
        if name in NN_PARAMETERS:
            base = first if first is not None and first.what in _TENSORISH else UNKNOWN_VALUE
            return Value(What.TENSOR, base.places, flags=FOLLOWS_MODULE)
        if name in MODULE_WRAPPERS:
            inner = first if first is not None else UNKNOWN_VALUE
            return Value(What.MODULE, inner.places, inner.parts if isinstance(inner.parts, frozenset) else frozenset({node}), ("instance", name), MOVES_INPUTS)
        if name in TENSOR_DATASETS:
            places = frozenset()
            for value in positional:
                places |= value.places
            return Value(What.UNKNOWN, places, ref=("instance", name))
        if name in DATA_LOADERS:
            return self.loader(node, positional, keywords)
        if name in PASS_THROUGH_CALLS or (name == "torch.compile" and first is not None and first.what is What.MODULE):
            return first if first is not None else UNKNOWN_VALUE
        if _is_torch_module_class(name):
            leaf = name.rsplit(".", 1)[-1]
            free = leaf in PARAM_FREE_LAYERS and not (leaf in WEIGHTED_LOSSES and (positional or "weight" in keywords or "pos_weight" in keywords))
            if leaf in MODULE_CONTAINERS:
                return self._module_container(name, node, positional)
            if "device" in keywords and not free:  # nn.Linear(4, 4, device=device)
                places = self._target_places(keywords["device"], node)
                return Value(What.MODULE, places if places is not None else UNKNOWN_PLACES, frozenset({node}), ("instance", name))
            return Value(What.MODULE, frozenset({(HOST, node)}), frozenset({node}), ("instance", name), PARAM_FREE if free else 0)
        if _is_optimizer_class(name):
            return Value(What.UNKNOWN, NO_PLACES, frozenset({node}), OPTIMIZER)
        if name in NOT_OPERATIONS or name.startswith(NOT_OPERATION_PREFIXES) or "._" in name or name.startswith("torch.nn.") and not name.startswith("torch.nn.functional."):
            if name.startswith(("torch.is_", "torch.cuda.is_", "torch.backends.")) or name in ("torch.numel", "torch.typename"):
                return SCALAR_VALUE
            return UNKNOWN_VALUE
        # an operation: its tensor arguments (and the tensors in list arguments) meet
        operands = []
        for arg, value in zip(node.args, positional):
            if type(arg) in (ast.List, ast.Tuple) and isinstance(value.parts, Parts):
                operands += [(element, element_value) for element, (_, element_value) in zip(arg.elts, value.parts.items)]
            elif isinstance(value.parts, Parts) and value.what is not What.LOADER and type(arg) is not ast.Starred:
                operands.append((arg, value.parts.elem if value.parts.elem is not NOTHING else value))
            else:
                operands.append((arg, value))
        for keyword in node.keywords:
            if keyword.arg not in ("dim", "out", "dtype", "keepdim") and keyword.arg is not None:
                operands.append((keyword.value, keywords[keyword.arg]))
        if name in FIRST_ARGUMENT_ONLY:
            operands = operands[:1]
        result = self.combine(node, operands, state)
        if result.what is not What.TENSOR:  # torch's operations return tensors
            result = Value(What.TENSOR, result.places if result.places else UNKNOWN_PLACES, flags=result.flags)
        if name.rsplit(".", 1)[-1] in REDUCTIONS and len(node.args) == 1 and not node.keywords and result.what is What.TENSOR:
            result = result.but(flags=result.flags | ZERO_DIM)
        elif result.flags & ZERO_DIM:
            result = result.but(flags=result.flags & ~ZERO_DIM)
        return result

    def _module_container(self, name: str, node: ast.Call, positional: list[Value]) -> Value:
        """``nn.Sequential(a, b)``, ``nn.ModuleList([a, b])``: where the modules it holds are."""
        children = []
        for arg, value in zip(node.args, positional):
            if type(arg) is ast.Starred or (type(arg) in (ast.List, ast.Tuple, ast.ListComp) and isinstance(value.parts, Parts)):
                children.append(self.element(value))
            else:
                children.append(value)
        flags = PARAM_FREE if children and all(c.what is What.MODULE and c.flags & PARAM_FREE for c in children) else 0
        if not children:
            return Value(What.MODULE, frozenset({(HOST, node)}), frozenset({node}), ("instance", name), 0)
        if not all(c.what is What.MODULE for c in children):
            return Value(What.MODULE, UNKNOWN_PLACES, frozenset({node}), ("instance", name), flags)
        places = frozenset((p, o) for c in children for p, o in c.places)
        return Value(What.MODULE, _cap(places), frozenset({node}), ("instance", name), flags)

    def factory(self, name: str, node: ast.Call, first: Value | None, keywords: dict) -> Value:
        if "device" in keywords:
            return self._placed(node, keywords["device"], name == "torch.scalar_tensor" or (name == "torch.tensor" and node.args and _constant_number(node.args[0])))
        if self._default_device or self.index.default_device_set:
            return Value(What.TENSOR, UNKNOWN_PLACES)
        zero_dim = ZERO_DIM if name == "torch.scalar_tensor" or (name in ("torch.tensor", "torch.as_tensor") and node.args and self._maybe_number(node.args[0], first)) else 0
        if name in ("torch.tensor", "torch.as_tensor", "torch.asarray") and first is not None and not zero_dim:
            if first.what is What.TENSOR or (first.what is What.BATCH and name != "torch.tensor"):
                return Value(What.TENSOR, first.places)
            if first.what is What.UNKNOWN:
                literal = type(node.args[0]) in (ast.List, ast.Tuple) and all(v.what is What.SCALAR for _, v in (first.parts.items if isinstance(first.parts, Parts) else ()))
                if not literal:
                    return Value(What.TENSOR, UNKNOWN_PLACES)
        return Value(What.TENSOR, frozenset({(HOST, node)}), flags=zero_dim)

    @staticmethod
    def _maybe_number(arg: ast.AST, value: Value | None) -> bool:
        """``torch.tensor(3.0)``, ``torch.tensor(step)``: data that may be a single number."""
        if _constant_number(arg):
            return True
        return value is not None and value.what is What.SCALAR and value.parts is None and type(arg) not in (ast.List, ast.Tuple, ast.ListComp, ast.Constant)

    def _placed(self, node: ast.Call, device: Value, zero_dim: bool = False) -> Value:
        places = self._target_places(device, node)
        return Value(What.TENSOR, places if places is not None else UNKNOWN_PLACES, flags=ZERO_DIM if zero_dim else 0)

    def _device_constructor(self, node: ast.Call, positional: list[Value], keywords: dict) -> Value:
        arg = positional[0] if positional else keywords.get("type")
        if arg is None:
            return Value(What.DEVICE, UNKNOWN_PLACES)
        if arg.what is What.DEVICE:
            if all(p is HOST for p, _ in arg.places):
                return Value(What.DEVICE, frozenset({(HOST, None)}))
            places = frozenset((Device(self.flow._source(node), self.flow._home(self.scope, "torch")) if type(p) is Device and p.text and p.text.startswith('"') else p, o) for p, o in arg.places)
            return Value(What.DEVICE, places)
        return Value(What.DEVICE, frozenset({(Device(self.flow._source(node), self.flow._home(self.scope, _root(self.flow._source(node)))), None)}))

    def _target_places(self, device: Value, node: ast.AST) -> frozenset | None:
        """Where ``.to(d)`` / ``device=d`` puts a tensor; None when ``d`` is not a device."""
        if device.what is What.DEVICE:
            return frozenset((p, node) for p, _ in device.places)
        if device.what is What.TENSOR:  # x.to(other): other's device (and dtype)
            return frozenset((p, node) for p, _ in device.places)
        if type(device.ref) is str and (device.ref in DTYPES or device.ref.startswith("numpy.")):
            return None
        if device.ref == DTYPE:
            return None
        return frozenset({(UNKNOWN, None)})  # a string or number: a device not known

    def builtin_call(self, name: str, node: ast.Call, positional: list[Value], keywords: dict, state: dict) -> Value:
        first = positional[0] if positional else None
        if name == "next" and first is not None:
            element = self.element(first)
            return join(element, positional[1]) if len(positional) > 1 else element
        if name == "iter" and first is not None:
            return first
        if name == "enumerate" and first is not None:
            return Value(What.UNKNOWN, NO_PLACES, Parts(_container([SCALAR_VALUE, self.element(first)], ((0, SCALAR_VALUE), (1, self.element(first))), UNKNOWN_VALUE)))
        if name == "zip":
            elements = [self.element(v) for v in positional]
            return Value(What.UNKNOWN, NO_PLACES, Parts(_container(elements, tuple(enumerate(elements)), _join_all(elements) or NOTHING)))
        if name in ("list", "tuple", "sorted", "reversed") and first is not None:
            element = self.element(first)
            if element is UNKNOWN_VALUE:
                return UNKNOWN_VALUE
            return _container([element], (), element) if name in ("sorted", "reversed") or first.what is not What.BATCH else first
        if name == "range":
            return Value(What.SCALAR, NO_PLACES, Parts(SCALAR_VALUE))
        if name == "getattr" and len(node.args) >= 2 and type(node.args[1]) is ast.Constant and isinstance(node.args[1].value, str):
            return self.attribute(first, node.args[1].value, node, None, state)
        if name == "abs" and first is not None and first.what is What.TENSOR:
            return first
        if name in _SCALAR_BUILTINS:
            return SCALAR_VALUE
        return UNKNOWN_VALUE

    def element(self, iterable: Value) -> Value:
        """What iterating ``iterable`` yields."""
        if isinstance(iterable.parts, Parts):
            elem = iterable.parts.elem
            return UNKNOWN_VALUE if elem is NOTHING else elem
        if iterable.what is What.TENSOR:
            return iterable.but(flags=iterable.flags & ~(ZERO_DIM | FOLLOWS_MODULE))
        if iterable.what is What.ARRAY:
            return iterable
        if iterable.what is What.SCALAR:
            return SCALAR_VALUE
        return UNKNOWN_VALUE

    def loader(self, node: ast.Call, positional: list[Value], keywords: dict) -> Value:
        """A DataLoader: its batches live on the host, unless its dataset or
        collate_fn is seen to hold or move device tensors."""
        dataset = positional[0] if positional else keywords.get("dataset")
        collate = keywords.get("collate_fn") if "collate_fn" in keywords else (positional[4] if len(positional) > 4 else None)
        on_host = True
        if collate is not None and collate is not SCALAR_VALUE:
            ref = collate.ref
            on_host = type(ref) in _FUNCTIONS and not self.flow._mentions_device(ref)
        if dataset is not None and on_host:
            if type(dataset.ref) is Instance:
                on_host = not self.flow._mentions_device(dataset.ref.cls)
            elif type(dataset.ref) is tuple and dataset.ref[1] in TENSOR_DATASETS:
                on_host = all(p is HOST for p, _ in dataset.places)
        if not on_host:
            return Value(What.LOADER, NO_PLACES, Parts(UNKNOWN_VALUE))
        return _host_loader()

    def construct(self, cls: ast.ClassDef, node: ast.Call, state: dict) -> Value:
        positional, keywords = self._arguments(node, state)
        info = self.index.classes.get(cls)
        if self.record:
            init = info.methods.get("__init__") if info is not None else None
            self.called.add(node.func)
            if init is not None:
                self._note_call(node, positional, keywords, init, True)
        if info is not None and info.is_module:
            flags = PARAM_FREE if info.param_free else 0
            given = any(v.what is What.MODULE for v in (*positional, *keywords.values()))
            init = info.methods.get("__init__")
            if not given and init is not None and info.kept_parameters:
                bound = self.flow._bind(self.index.scopes[init], node, (positional, keywords), True)
                given = any(bound.get(name, UNKNOWN_VALUE).what is What.UNKNOWN for name in info.kept_parameters)
            if given or not (info.owns or info.param_free):
                # it may hold modules it is given, wherever they are
                return Value(What.MODULE, UNKNOWN_PLACES, frozenset({node}), Instance(cls), flags)
            return Value(What.MODULE, frozenset({(HOST, node)}), frozenset({node}), Instance(cls), flags)
        return Value(What.UNKNOWN, NO_PLACES, None, Instance(cls))

    def call_function(self, function: ast.AST, node: ast.Call, state: dict, receiver: Value | None) -> Value:
        positional, keywords = self._arguments(node, state)
        if self.record:
            self._note_call(node, positional, keywords, function, receiver is not None)
        if not self.summaries:
            return UNKNOWN_VALUE
        if self.in_init and receiver is not None and receiver.ref == Instance(self.scope.cls) and self.depth < _MAX_INLINE_DEPTH:
            inlined = self.flow._inline(self, function, node, positional, keywords, state)
            if inlined is not None:
                return inlined
        return self.flow._apply_summary(self, function, node, positional, keywords, receiver, state)

    def call_module(self, module: Value, func: ast.AST, node: ast.Call, state: dict) -> Value:
        positional, keywords = self._arguments(node, state)
        inputs = list(zip(node.args, positional)) + [(k.value, keywords[k.arg]) for k in node.keywords]
        if module.flags & PARAM_FREE:
            if type(module.ref) is tuple and module.ref[1] in FIRST_ARGUMENT_ONLY:
                inputs = inputs[:1]
            if not inputs:
                return UNKNOWN_VALUE
            result = self.combine(node, inputs, state)
            return result if result.places else UNKNOWN_VALUE
        if self.record and not module.flags & MOVES_INPUTS:
            required = self.flow._inputs_on_device(self, module, node, positional, keywords)
            if required is not None:
                # a module of this file: only the inputs its forward() uses with its own parameters
                inputs = [(arg, value) for i, (arg, value) in enumerate(inputs) if i in required]
            for arg, value in _spread(inputs):
                if self._meet("module-input", node, arg, value, func, module, state):
                    continue
                if _apart(module, value):
                    self._sink("module-on-host", node, func, module, arg, value, state)
                    break
        if _kinds(module) == (True, False, False) and any(_kinds(v)[1] for _, v in inputs):
            # a module on the host fed a device tensor fails here; what it would return is not known
            return Value(What.TENSOR, UNKNOWN_PLACES)
        places = frozenset((p, node if o is None else o) for p, o in module.places)
        return Value(What.TENSOR, places or UNKNOWN_PLACES)

    def discarded_move(self, node: ast.Call, state: dict) -> None:
        """``m.to(d)`` as a statement: a module moves in place; on a value the
        code does not show to be a module, a discarded move says it is one only
        where other calls show it (``m.eval()``)."""
        receiver_node = node.func.value
        chain = _chain(receiver_node)
        value = self.ev(node, state)
        if chain is None or chain not in state and type(receiver_node) is not ast.Name:
            return
        receiver = self.load_target(receiver_node, state) if type(receiver_node) in (ast.Name, ast.Attribute) else UNKNOWN_VALUE
        if receiver.what is What.UNKNOWN and receiver.ref is None:
            if self.flow._module_evidence(self.scope, chain):
                state[chain] = Value(What.MODULE, value.places, frozenset({node}))
            else:
                # moves a module in place, does nothing to a tensor: a caller passing a module sees it moved
                self.discarded[chain] = value.places

    def method(self, receiver: Value, name: str, receiver_node: ast.AST, node: ast.Call, state: dict) -> Value:
        positional, keywords = self._arguments(node, state)
        what = receiver.what
        chain = _chain(receiver_node)
        if what is What.UNKNOWN and chain is not None and name in MODULE_EVIDENCE and receiver.ref is None:
            receiver = Value(What.MODULE, receiver.places if receiver.places else UNKNOWN_PLACES, frozenset({node}))
            state[chain] = receiver
            what = What.MODULE
        if what is What.MODULE:
            return self.module_method(receiver, name, receiver_node, node, positional, keywords, state)
        if name in ("append", "extend", "insert") and chain is not None and positional and (isinstance(receiver.parts, Parts) or what is What.SCALAR):
            # xs = []; xs.append(t): a list of what is appended
            added = positional[-1] if name != "extend" else self.element(positional[-1])
            parts = receiver.parts if isinstance(receiver.parts, Parts) else Parts(NOTHING)
            elem = added if parts.elem is NOTHING else join(parts.elem, added)
            state[chain] = _container([elem], (), elem)
            return SCALAR_VALUE
        if type(receiver.ref) is Instance and not (receiver.ref.cls and what is What.MODULE):
            function = self.flow._method_of(receiver.ref.cls, name)
            if function is not None:
                if self.record:
                    self._note_call(node, positional, keywords, function, True)
                if not self.summaries:
                    return UNKNOWN_VALUE
                if self.in_init and receiver.ref == Instance(self.scope.cls) and self.depth < _MAX_INLINE_DEPTH:
                    inlined = self.flow._inline(self, function, node, positional, keywords, state)
                    if inlined is not None:
                        return inlined
                return self.flow._apply_summary(self, function, node, positional, keywords, receiver, state)
            return UNKNOWN_VALUE
        if what is What.TENSOR or (what is What.UNKNOWN and receiver.places and receiver.places != UNKNOWN_PLACES and receiver.ref is None):
            return self.tensor_method(receiver, name, receiver_node, node, positional, keywords, state)
        if what is What.BATCH:
            return self.batch_method(receiver, name, node, positional, keywords)
        if what is What.ARRAY:
            return SCALAR_VALUE if name in ("tolist", "item", "sum", "mean", "max", "min") and not node.args else receiver
        if what is What.UNKNOWN:
            if name in MOVES:
                moved = self._moved(receiver, name, node, positional, keywords)
                return Value(What.UNKNOWN, moved) if moved is not None else UNKNOWN_VALUE
            if name in TENSOR_METHODS and name not in MODULE_SELF_METHODS and name not in ("cpu", "type"):
                return Value(What.TENSOR, UNKNOWN_PLACES)
            if name in NON_TENSOR_RESULTS:
                return SCALAR_VALUE
            self._forget_modules(positional, keywords, state)
            return UNKNOWN_VALUE
        if what is What.LOADER or what is What.DEVICE:
            return UNKNOWN_VALUE
        if what is What.SCALAR:
            return SCALAR_VALUE if name not in ("items", "values", "get", "pop") else UNKNOWN_VALUE
        return UNKNOWN_VALUE

    def _forget_modules(self, positional: list[Value], keywords: dict, state: dict) -> None:
        """A module passed to a call the analysis does not follow may come back
        moved (``accelerator.prepare(model)``, ``load_checkpoint(model, ...)``)."""
        for value in (*positional, *keywords.values()):
            if value.what is What.MODULE and isinstance(value.parts, frozenset) and value.places != UNKNOWN_PLACES:
                self._move_in_place(value, value.but(places=UNKNOWN_PLACES), None, state)

    def _moved(self, receiver: Value, name: str, node: ast.Call, positional: list[Value], keywords: dict) -> frozenset | None:
        """Where ``.to(...)`` / ``.cuda()`` / ``.cpu()`` put the receiver; None for
        ``.to(dtype)``, which does not move it."""
        if name == "cpu":
            return frozenset({(HOST, node)})
        if name == "cuda":
            device = positional[0] if positional else keywords.get("device")
            if device is not None and device.what is What.DEVICE:
                return frozenset((p, node) for p, _ in device.places)
            return frozenset({(Device(None), node)})
        device = keywords.get("device")
        if device is None and node.args:
            arg = node.args[0]
            device = positional[0]
            if type(arg) is ast.Constant and type(arg.value) is int:
                return frozenset({(Device(None), node)})
            if device.what is What.UNKNOWN and (device.ref is None or type(device.ref) is str and device.ref not in DTYPES):
                # `.to(DEVICE)` with DEVICE imported or unknown: its name says what it is
                chain = _chain(arg)
                if chain is not None and _DEVICE_NAME.fullmatch(chain.rsplit(".", 1)[-1]):
                    return frozenset({(Device(chain, self.flow._home(self.scope, _root(chain))), node)})
                if chain is not None and "dtype" in chain.rsplit(".", 1)[-1].lower():
                    return None
        if device is None:
            return None  # .to(dtype=...), .to(memory_format=...)
        return self._target_places(device, node)

    def module_method(self, module: Value, name: str, receiver_node: ast.AST, node: ast.Call, positional: list[Value], keywords: dict, state: dict) -> Value:
        if name in MOVES:
            moved = self._moved(module, name, node, positional, keywords)
            if moved is None:
                return module
            result = module.but(places=moved)
            self._move_in_place(module, result, receiver_node, state)
            return result
        if name in MODULE_SELF_METHODS:
            return module
        chain = _chain(receiver_node)
        if name in ("register_buffer", "register_parameter", "add_module") and chain is not None and node.args and type(node.args[0]) is ast.Constant and isinstance(node.args[0].value, str):
            given = positional[1] if len(positional) > 1 else keywords.get("tensor", keywords.get("param", keywords.get("module")))
            if given is None or given is SCALAR_VALUE:
                value = SCALAR_VALUE  # register_buffer("x", None)
            else:
                value = Value(What.MODULE if name == "add_module" else What.TENSOR, module.places, flags=FOLLOWS_MODULE)
            state[f"{chain}.{node.args[0].value}"] = value
            self._dotted_roots.add(_root(chain))
            return SCALAR_VALUE
        if name in ("parameters", "buffers"):
            return Value(What.BATCH, module.places, Parts(Value(What.TENSOR, module.places, flags=FOLLOWS_MODULE)))
        if name in ("named_parameters", "named_buffers", "state_dict"):
            tensor = Value(What.TENSOR, module.places, flags=FOLLOWS_MODULE)
            pair = _container([SCALAR_VALUE, tensor], ((0, SCALAR_VALUE), (1, tensor)), UNKNOWN_VALUE)
            return Value(What.BATCH if name == "state_dict" else What.UNKNOWN, module.places, Parts(tensor if name == "state_dict" else pair))
        if name == "forward":
            return self.call_module(module, node.func, node, state)
        if type(module.ref) is Instance:
            function = self.flow._method_of(module.ref.cls, name)
            if function is not None:
                if self.record:
                    self._note_call(node, positional, keywords, function, True)
                if not self.summaries:
                    return UNKNOWN_VALUE
                if self.in_init and module.ref == Instance(self.scope.cls) and self.depth < _MAX_INLINE_DEPTH:
                    inlined = self.flow._inline(self, function, node, positional, keywords, state)
                    if inlined is not None:
                        return inlined
                return self.flow._apply_summary(self, function, node, positional, keywords, module, state)
        return UNKNOWN_VALUE

    def _move_in_place(self, module: Value, moved: Value, receiver_node: ast.AST, state: dict) -> None:
        """Modules move in place: every name holding the same object moves,
        and so do their submodules (``model.fc``: forgotten, to be read again
        through the moved model)."""
        identity = module.parts if isinstance(module.parts, frozenset) else frozenset()
        chain = _chain(receiver_node) if receiver_node is not None else None
        moved_keys = []
        if chain is not None and (chain in state or type(receiver_node) is ast.Name):
            if not (self.scope.self_name and chain == self.scope.self_name):
                state[chain] = moved
                moved_keys.append(chain)
        if identity:
            for key, value in list(state.items()):
                if value.what is What.MODULE and isinstance(value.parts, frozenset) and value.parts & identity:
                    state[key] = value.but(places=moved.places)
                    moved_keys.append(key)
        for key in moved_keys:
            if _root(key) in self._dotted_roots:
                self._kill(key, state)

    def tensor_method(self, tensor: Value, name: str, receiver_node: ast.AST, node: ast.Call, positional: list[Value], keywords: dict, state: dict) -> Value:
        what = What.TENSOR if tensor.what is What.TENSOR else What.UNKNOWN
        if name in MOVES:
            moved = self._moved(tensor, name, node, positional, keywords)
            return Value(what, moved if moved is not None else tensor.places, flags=tensor.flags & ZERO_DIM)
        if name == "type_as":
            other = positional[0] if positional else None
            if other is not None and other.what in _TENSORISH and other.places:
                return Value(what, frozenset((p, node) for p, _ in other.places), flags=tensor.flags & ZERO_DIM)
            return Value(what, UNKNOWN_PLACES)
        if name == "type":
            return self._retyped(tensor, node, positional, keywords)
        if name == "numpy":
            if _kinds(tensor)[1]:
                self._sink("numpy", node, receiver_node, tensor, None, None, state)
            return ARRAY_VALUE
        if name in NON_TENSOR_RESULTS:
            return SCALAR_VALUE
        if name.startswith("new_"):
            if "device" in keywords:
                return self._placed(node, keywords["device"])
            return Value(What.TENSOR, tensor.places)
        if name in COMBINING_METHODS:
            operands = [(receiver_node, tensor)] + list(zip(node.args, positional))
            operands += [(k.value, keywords[k.arg]) for k in node.keywords if k.arg not in ("dim", "out", "keepdim", "dtype", None)]
            result = self.combine(node, operands, state)
            return result if result.places else Value(what, tensor.places)
        if name in REDUCTIONS and not node.args and not node.keywords:
            return Value(what, tensor.places, flags=ZERO_DIM if what is What.TENSOR else 0)
        if name in ("expand_as", "view_as", "reshape_as", "copy_", "resize_as_"):
            return Value(what, tensor.places, flags=tensor.flags & ZERO_DIM if name == "copy_" else 0)
        if name in TENSOR_METHODS or name.endswith("_"):
            return Value(What.TENSOR, tensor.places, flags=tensor.flags & ZERO_DIM if name in ("float", "double", "half", "long", "int", "bool", "detach", "clone", "contiguous", "abs", "neg", "sqrt", "exp", "log") else 0)
        return Value(What.UNKNOWN, tensor.places) if tensor.what is What.TENSOR else UNKNOWN_VALUE

    def _retyped(self, tensor: Value, node: ast.Call, positional: list[Value], keywords: dict) -> Value:
        """``t.type(other.type())`` follows ``other``; ``t.type(torch.cuda.FloatTensor)`` moves."""
        if not node.args:
            return SCALAR_VALUE if "dtype" not in keywords else Value(What.TENSOR, tensor.places)
        arg = node.args[0]
        value = positional[0]
        if type(arg) is ast.Call and type(arg.func) is ast.Attribute and arg.func.attr == "type" and not arg.args:
            other = self.values.get(arg.func.value) if self.record else None
            if other is not None and other.what in _TENSORISH and other.places:
                return Value(What.TENSOR, frozenset((p, node) for p, _ in other.places))
            return Value(What.TENSOR, UNKNOWN_PLACES)
        text = arg.value if type(arg) is ast.Constant and isinstance(arg.value, str) else value.ref if type(value.ref) is str else None
        if text is not None:
            if text.startswith("torch.cuda."):
                return Value(What.TENSOR, frozenset({(Device(None), node)}))
            if text in LEGACY_HOST_TYPES:
                return Value(What.TENSOR, frozenset({(HOST, node)}))
            if text in DTYPES:
                return Value(What.TENSOR, tensor.places)
        return Value(What.TENSOR, UNKNOWN_PLACES)

    def batch_method(self, batch: Value, name: str, node: ast.Call, positional: list[Value], keywords: dict) -> Value:
        parts = batch.parts if isinstance(batch.parts, Parts) else Parts(UNKNOWN_VALUE)
        if name == "items":
            pair = _container([SCALAR_VALUE, parts.elem], ((0, SCALAR_VALUE), (1, parts.elem)), UNKNOWN_VALUE)
            return Value(What.UNKNOWN, NO_PLACES, Parts(pair))
        if name == "values":
            return Value(What.UNKNOWN, NO_PLACES, Parts(parts.elem))
        if name == "keys":
            return SCALAR_VALUE
        if name in ("get", "pop") and node.args and type(node.args[0]) is ast.Constant:
            for key, value in parts.items:
                if key == node.args[0].value:
                    return value
            return parts.elem if parts.elem is not NOTHING else UNKNOWN_VALUE
        if name in MOVES:  # a batch object with .to(): torch_geometric's Batch, a tokenizer's BatchEncoding
            moved = self._moved(batch, name, node, positional, keywords)
            if moved is None:
                return batch
            element = Value(What.TENSOR, moved)
            return Value(What.BATCH, moved, Parts(element, tuple((k, element) for k, _ in parts.items)))
        return UNKNOWN_VALUE


def _spread(inputs: list[tuple[ast.AST, Value]]) -> Iterator[tuple[ast.AST, Value]]:
    """A module's inputs, with the tensors of a tuple or list argument one by
    one (``lstm(x, (h0, c0))``): each must be on the module's device."""
    for node, value in inputs:
        parts = value.parts if isinstance(value.parts, Parts) else None
        if parts is not None and parts.items and value.what is not What.LOADER:
            elements = node.elts if type(node) in (ast.Tuple, ast.List) and len(node.elts) == len(parts.items) else None
            for i, (_, part) in enumerate(parts.items):
                yield (elements[i] if elements is not None else node), part
        else:
            yield node, value


def _host_loader() -> Value:
    tensor = Value(What.TENSOR, frozenset({(HOST, PENDING)}))
    batch = Value(What.BATCH, frozenset({(HOST, PENDING)}), Parts(tensor))
    return Value(What.LOADER, NO_PLACES, Parts(batch))


_STATEMENTS = {
    ast.Expr: _Run.s_expr,
    ast.Assign: _Run.s_assign,
    ast.AnnAssign: _Run.s_annassign,
    ast.AugAssign: _Run.s_augassign,
    ast.If: _Run.s_if,
    ast.For: _Run.s_for,
    ast.AsyncFor: _Run.s_for,
    ast.While: _Run.s_while,
    ast.With: _Run.s_with,
    ast.AsyncWith: _Run.s_with,
    ast.Try: _Run.s_try,
    ast.Return: _Run.s_return,
    ast.Raise: _Run.s_raise,
    ast.Break: _Run.s_break,
    ast.Continue: _Run.s_continue,
    ast.Assert: _Run.s_assert,
    ast.Delete: _Run.s_delete,
    ast.FunctionDef: _Run.s_function,
    ast.AsyncFunctionDef: _Run.s_function,
    ast.ClassDef: _Run.s_class,
    ast.Import: _Run.s_import,
    ast.ImportFrom: _Run.s_importfrom,
    ast.Match: _Run.s_match,
}
if hasattr(ast, "TryStar"):
    _STATEMENTS[ast.TryStar] = _Run.s_try

_EXPRESSIONS = {
    ast.Constant: _Run.e_constant,
    ast.Name: _Run.e_name,
    ast.Attribute: _Run.e_attribute,
    ast.Subscript: _Run.e_subscript,
    ast.Starred: _Run.e_starred,
    ast.Tuple: _Run.e_sequence,
    ast.List: _Run.e_sequence,
    ast.Dict: _Run.e_dict,
    ast.Set: _Run.e_set,
    ast.ListComp: _Run.e_comprehension,
    ast.SetComp: _Run.e_comprehension,
    ast.GeneratorExp: _Run.e_comprehension,
    ast.DictComp: _Run.e_comprehension,
    ast.UnaryOp: _Run.e_unaryop,
    ast.BinOp: _Run.e_binop,
    ast.BoolOp: _Run.e_boolop,
    ast.Compare: _Run.e_compare,
    ast.IfExp: _Run.e_ifexp,
    ast.NamedExpr: _Run.e_namedexpr,
    ast.JoinedStr: _Run.e_joinedstr,
    ast.Lambda: _Run.e_lambda,
    ast.Await: _Run.e_await,
    ast.Yield: _Run.e_await,
    ast.YieldFrom: _Run.e_await,
    ast.Slice: _Run.e_slice,
    ast.Call: _Run.e_call,
}


# ---------------------------------------------------------------------------
# The file: lazy runs, summaries, contexts, class facts, and the query API
# ---------------------------------------------------------------------------

_IDENTIFIER = re.compile(r"[^\W\d]\w*")
# A comment or a string literal (leftmost first, so a `#` in a string is in the string).
# Each string's body is matched as runs of plain characters between escapes
# (and lone quotes, in a triple-quoted one): the same matches as trying an
# escape, a character and the closing quotes at every character, three times faster.
_STRINGS_AND_COMMENTS = re.compile(
    r"#[^\r\n]*"
    r"|'''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*'''"
    r'|"""[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*"""'
    r"|'[^'\\\r\n]*(?:\\.[^'\\\r\n]*)*'"
    r'|"[^"\\\r\n]*(?:\\.[^"\\\r\n]*)*"',
    re.DOTALL,
)
_KEYWORD_OR_TARGET = re.compile(r"[ \t]*=(?!=)")


def _find_names(text: str, names: set[str]) -> Iterator[tuple[str, int]]:
    """Where each of ``names`` occurs as a whole identifier: a search per name
    when there are few (C-speed scanning), one pass over every identifier else."""
    if len(names) > 40:
        for match in _IDENTIFIER.finditer(text):
            if match.group() in names:
                yield match.group(), match.start()
        return
    found = []
    for name in names:
        at = text.find(name)
        while at >= 0:
            end = at + len(name)
            before = text[at - 1] if at else " "
            after = text[end] if end < len(text) else " "
            if not (before.isalnum() or before == "_" or after.isalnum() or after == "_"):
                found.append((at, name))
            at = text.find(name, end)
    for at, name in sorted(found):
        yield name, at


def _may_name_a_definition(scope: Scope, name: str) -> bool:
    """Whether a bare ``name`` in ``scope`` may refer to a def or class statement:
    the scope it resolves to has one of that name."""
    current: Scope | None = scope
    while current is not None:
        if name in current.locals or (current.kind == "class" and name in current.counts):
            return name in current.defs
        current = current.outer if current.kind != "class" else current.parent
    return False


def _after_dot(text: str, start: int) -> bool:
    i = start - 1
    while i >= 0 and text[i] in " \t":
        i -= 1
    return i >= 0 and text[i] == "."


class Evidence:
    """What a device error's message says about expressions of one text, from
    outside its code (``fixdev --traceback``): ``told`` holds ``(span,
    placement, origin)`` items; ``span`` and ``origin`` are ast positions
    ``(type name, lineno, col_offset, end_lineno, end_col_offset)``
    (``origin``: the name or parameter that made the value, where a fix goes;
    None: the expression itself); ``placement`` is ``"host"`` or ``"device"``.
    A ``FileFlow`` made with it as ``project`` places each of those
    expressions so wherever the analysis could not (its value is on no known
    side), and nothing else; for another text it is ignored. It travels
    as the project facts do (``project`` is their view, or None), so rules ask
    their flow as always and never know where a fact came from."""

    def __init__(self, project, text: str, told: Iterable[tuple]) -> None:
        self.project = project
        self.text = text
        self.told = tuple(told)

    def call(self, name: str, node: ast.Call):
        return self.project.call(name, node) if self.project is not None else None

    def used(self) -> tuple:
        return self.project.used() if self.project is not None else ()

    def resolve(self, flow: "FileFlow") -> dict[tuple, tuple]:
        """``{(node type, positions): (placement, origin node)}`` for ``flow``'s tree."""
        if flow.text != self.text or not self.told:
            return {}
        nodes = {(type(n).__name__, n.lineno, n.col_offset, n.end_lineno, n.end_col_offset): n for n in ast_walk(flow.tree) if isinstance(n, (ast.expr, ast.arg))}
        found: dict[tuple, tuple] = {}
        for span, placement, origin in self.told:
            node = nodes.get(tuple(span))
            if node is None:
                continue
            made = nodes.get(tuple(origin)) if origin is not None else node
            found[(type(node), *span[1:])] = (HOST if placement == "host" else Device(None), made if made is not None else node)
        return found


class FileFlow:
    """The device flow of one file. ``source`` is the text (or an already
    parsed ``ast.Module``; then ``span``/``node_at`` need ``text=``). A text
    Python cannot parse has no facts: everything is unknown, no sinks."""

    def __init__(self, source: str | ast.Module, text: str | None = None, project=None) -> None:
        # project: what the other files of the run return (codemods.project's
        # view for this file), or None: calls of their functions are unknown;
        # or an Evidence holding that view and what a device error says
        evidence = project if isinstance(project, Evidence) else None
        self.project = evidence.project if evidence is not None else project
        if isinstance(source, ast.Module):
            tree, self.text = source, text
        else:
            tree, self.text = None, source
        self._bom = 1 if self.text is not None and self.text.startswith("\ufeff") else 0
        self.parsed = True
        if tree is None:
            try:
                with warnings.catch_warnings():  # `1()`, "\d": the file's business, not ours to print
                    warnings.simplefilter("ignore", SyntaxWarning)
                    warnings.simplefilter("ignore", DeprecationWarning)
                    tree = ast.parse(self.text[self._bom :])
            except (SyntaxError, ValueError):  # ValueError: a null byte
                tree = ast.Module(body=[], type_ignores=[])
                self.parsed = False
        self.tree = tree
        self._index = _Index(tree, self.text[self._bom :] if self.text is not None else None)
        self._cache: dict[tuple, object] = {}
        self._active: list[tuple] = []
        self._tainted: set[tuple] = set()
        self._runs = 0
        self._budget = 2 * len(self._index.scopes) + 20
        self._refs: dict[str, Value] = {}
        self._free_values: dict[tuple, Value] = {}  # a prepass is never in progress when asked
        self._mention_index: _Mentions | None = None
        self._cpython_positions: CPythonPositions | None = None
        self._spans: dict[ast.stmt, dict] = {}
        self._device_strings: dict[str, Value | None] = {}
        self._told: dict[tuple, tuple] = evidence.resolve(self) if evidence is not None else {}

    # -- the query API -----------------------------------------------------------------

    def value(self, node: ast.AST) -> Value:
        """What ``node`` evaluated to, joined over every time the code runs it."""
        run = self._run_holding(node)
        value = run.values.get(node) if run is not None else None
        return UNKNOWN_VALUE if value is None else value

    def what(self, node: ast.AST) -> What:
        return self.value(node).what

    def where(self, node: ast.AST) -> frozenset:
        """``{(placement, origin), ...}``: where ``node``'s value may live and
        which node made it so (a loader batch's part not yet bound: ``node``)."""
        return frozenset((p, node if o is PENDING else o) for p, o in self.value(node).places)

    def qualified_name(self, node: ast.AST) -> str | None:
        ref = self.value(node).ref
        return ref if type(ref) is str else None

    def sinks(self) -> list[Sink]:
        """Every place in the file where a value meets a device it does not
        live on, in source order."""
        found: dict[tuple, Sink] = {}
        for scope in self._index.scopes.values():
            if scope.kind == "class":
                continue
            run = self._main(scope)
            if run is not None:
                for key, sink in run.sinks.items():
                    found.setdefault(key, sink)
        return sorted(found.values(), key=lambda s: (_position(s.node), _position(s.value)))

    def device_at(self, node: ast.AST) -> str | None:
        """Source text of the device a fix at ``node`` should use, in issue 11's
        order: the device of a tensor the code at that line already works with;
        in a module's method, the module's own device (from a parameter or buffer
        it owns); a device variable or flag the program defines that is bound on
        every path before ``node`` (``device``, ``self.device``, ``args.device``,
        ``args.cuda``); else None."""
        scope = self._index.scope_at(_position(node))
        if scope.kind == "class":
            return None
        run = self._main(scope)
        statement = self._statement_of(scope, node)
        if run is None or statement is None:
            return None
        info = self._index.classes.get(scope.cls) if scope.cls is not None else None
        constructing = info is not None and info.is_module and getattr(scope.node, "name", None) == "__init__"
        # 1. a tensor the line works with
        own = _chain(node)
        unsure = None
        expressions = list(_header_expressions(statement))
        # x in x.shape, x.size(0), x.dtype: the line treats x as a tensor
        evidenced = {_chain(sub.value) for sub in expressions if type(sub) is ast.Attribute and sub.attr in _TENSOR_EVIDENCE}
        for sub in expressions:
            if type(sub) not in (ast.Name, ast.Attribute) or type(getattr(sub, "ctx", None)) is not ast.Load:
                continue
            chain = _chain(sub)
            value = run.values.get(sub)
            if chain is None or chain == own or value is None or value.flags & MAYBE_UNBOUND:
                continue
            if constructing and _root(chain) == scope.self_name:
                continue  # a module's own tensors are still on the CPU while it is built
            if value.what is not What.TENSOR and not (value.what is What.UNKNOWN and chain in evidenced and value.places):
                continue
            host, device, other = _kinds(value)
            if host:
                continue
            if device and not other:
                return f"{chain}.device"
            unsure = unsure or f"{chain}.device"
        if unsure is not None:
            return unsure
        # 2. the module's own device (not while it is built: the CPU, then)
        if info is not None and info.is_module and info.own_text is not None and scope.self_name == "self" and not constructing:
            return info.own_text
        # 3. a device variable or flag in reach
        return self._device_in_reach(scope, run, statement)

    def node_at(self, start: int, end: int) -> ast.expr | None:
        """The expression whose source is ``text[start:end]`` (character
        offsets), allowing for whitespace and parentheses around it, as libcst
        spans include them."""
        text = self._require_text()
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        while start < end:
            found = self._spans_near(start).get((start, end))
            if found is not None:
                return found
            if text[start] == "(" and text[end - 1] == ")" and _parenthesized(text, start, end):
                start, end = start + 1, end - 1
                while start < end and text[start].isspace():
                    start += 1
                while end > start and text[end - 1].isspace():
                    end -= 1
                continue
            return None
        return None

    def span(self, node: ast.AST) -> tuple[int, int]:
        """Character offsets of ``node`` in the text."""
        return self._offset(node.lineno, node.col_offset), self._offset(node.end_lineno, node.end_col_offset)

    # -- what other files may ask (codemods.project) -----------------------------------

    def module_binding(self, name: str) -> ast.AST | str | None:
        """What a module-level name (``f``, or ``Cls.f`` for a static or class
        method) is bound to when that is its only binding: the ``def``, or the
        qualified name an import binds it to; None otherwise (bound twice, under
        a decorator that may change what it returns, declared global somewhere)."""
        module = self._index.module
        head, _, attr = name.partition(".")
        if module.counts.get(head) != 1 or any(head in scope.declared for scope in self._index.scopes.values()):
            return None
        if not attr:
            if head in module.imports:
                return module.imports[head]
            found = module.defs.get(head)
            if type(found) not in _FUNCTIONS:
                return None
        else:
            cls = module.defs.get(head)
            info = self._index.classes.get(cls) if type(cls) is ast.ClassDef else None
            found = info.methods.get(attr) if info is not None and "." not in attr else None
            if found is None or self._index.scopes[cls].counts.get(attr) != 1:
                return None
            kinds = {d.id for d in found.decorator_list if type(d) is ast.Name and d.id not in module.counts}
            if not kinds & {"staticmethod", "classmethod"}:
                return None  # an instance method: what it returns depends on the instance
        for decorator in found.decorator_list:
            bare = type(decorator) is ast.Name and decorator.id in ("staticmethod", "classmethod") and decorator.id not in module.counts
            if not bare and self._qualified(decorator, module) not in TRANSPARENT_DECORATORS:
                return None
        return found

    def returned(self, function: ast.AST) -> Value | None:
        """What a function of this file returns with its parameters as
        themselves (the result of its summary); None for a generator."""
        run = self._symbolic(self._index.scopes[function])
        if run is None or run.generator:
            return None
        return run.returns if run.returns is not None else SCALAR_VALUE

    def tensor_parameters(self, function: ast.AST) -> list[str]:
        """The parameters of ``function`` (``self`` aside) its code treats as
        tensors, in order: annotated as one, read with a tensor's attribute or
        method (``x.shape``, ``x.view(...)``), or passed first to a submodule
        of ``self``. A parameter's value alone says nothing of that (it is
        wherever the caller's argument is), so rules that assume a module's
        inputs live where the module does ask this."""
        return self._compute(("tensor parameters", function), lambda: self._tensor_parameters(function)) or []

    def function_at(self, offset: int) -> ast.AST | None:
        """The innermost function whose code holds character ``offset`` (for
        rules that walk libcst: the offset of a ``def``'s name), or None."""
        scope = self._index.scope_at(self._position_of(offset))
        while scope is not None and scope.kind == "class":
            scope = scope.parent
        return scope.node if scope is not None and scope.kind == "function" else None

    def _tensor_parameters(self, function: ast.AST) -> list[str]:
        scope = self._index.scopes.get(function)
        if scope is None or scope.kind != "function":
            return []
        args = function.args
        params = [a for a in (*args.posonlyargs, *args.args, *args.kwonlyargs) if a.arg not in (scope.self_name, "self", "cls")]
        used = set()
        for node in ast_walk(function):
            kind = type(node)
            if kind is ast.Attribute and type(node.value) is ast.Name and node.attr in _TENSOR_USE:
                used.add(node.value.id)
            elif kind is ast.Call and node.args and type(node.args[0]) is ast.Name and type(node.func) is ast.Attribute:
                if scope.self_name is not None and _chain(node.func.value) == scope.self_name and self.what(node.func) is What.MODULE:
                    used.add(node.args[0].id)
        return [a.arg for a in params if a.arg in used or self._annotation_what(a.annotation, scope) is What.TENSOR]

    # -- laziness, once per file ---------------------------------------------------------

    def _compute(self, key: tuple, make):
        """``make()`` once per key. A key asked for while it is being computed
        (recursion between functions) answers None, and what was computed from
        that answer is not kept, so results do not depend on the order of
        questions (unless a file is so tangled that the budget runs out)."""
        if key in self._cache:
            return self._cache[key]
        if key in self._active:
            self._tainted.update(self._active[self._active.index(key) + 1 :])
            return None
        self._active.append(key)
        try:
            result = make()
        finally:
            self._active.pop()
        self._runs += 1
        if key in self._tainted:
            self._tainted.discard(key)
            if self._runs < self._budget:
                return result
        self._cache[key] = result
        return result

    def _run_holding(self, node: ast.AST) -> _Run | None:
        scope = self._index.scope_at(_position(node))
        return None if scope.kind == "class" else self._main(scope)

    def _main(self, scope: Scope) -> _Run | None:
        """The run queries use: with the arguments of the function's call sites
        when they say more than its parameters do, else the symbolic run."""
        if scope.kind == "module":
            return self._compute(("main", scope.node), lambda: _Run(self, scope, {}, record=True, summaries=True).run())
        if scope.kind != "function":
            return None

        def make() -> _Run | None:
            context = self._context(scope)
            if context is None:
                return self._symbolic(scope)
            return _Run(self, scope, context, record=True, summaries=True, in_init=self._is_init(scope)).run()

        return self._compute(("main", scope.node), make)

    def _symbolic(self, scope: Scope) -> _Run | None:
        """The run with parameters as themselves (``SameAs(x)``): the summary."""
        return self._compute(("sym", scope.node), lambda: _Run(self, scope, self._symbolic_params(scope), record=True, summaries=True, in_init=self._is_init(scope)).run())

    def _prepass(self, scope: Scope) -> dict:
        """A scope's state at its end, without other functions' summaries or
        class facts: the globals (and closure variables) other functions see."""

        def make() -> dict:
            params = self._symbolic_params(scope) if scope.kind == "function" else {}
            run = _Run(self, scope, params, record=False, summaries=False).run()
            return run.exits or {}

        result = self._compute(("pre", scope.node), make)
        return {} if result is None else result

    @staticmethod
    def _is_init(scope: Scope) -> bool:
        return scope.cls is not None and scope.node.name == "__init__"

    # -- names ------------------------------------------------------------------------------

    def _ref(self, name: str) -> Value:
        value = self._refs.get(name)
        if value is None:
            value = self._refs[name] = Value(What.UNKNOWN, NO_PLACES, ref=name)
        return value

    def _free(self, scope: Scope, name: str) -> Value:
        """A name the scope does not bind: an enclosing function's or the
        module's (as their prepass leaves it), else a builtin."""
        key = (scope.node, name)
        value = self._free_values.get(key)
        if value is None:
            value = self._free_values[key] = self._free_value(scope, name)
        return value

    def _free_value(self, scope: Scope, name: str) -> Value:
        outer = scope.outer
        while outer is not None:
            if name in outer.locals:
                value = self._prepass(outer).get(name)
                if value is None:
                    return UNKNOWN_VALUE
                if value.flags & MAYBE_UNBOUND:
                    value = value.but(flags=value.flags & ~MAYBE_UNBOUND)
                return self._rehome(value, scope, name)
            outer = outer.outer
        stars = self._index.module.stars
        if stars:
            if all(star == "torch" for star in stars) and name not in _BUILTIN_NAMES:
                return self._ref(f"torch.{name}")
            if all(star.startswith("torch.nn") for star in stars) and name[:1].isupper():
                return self._ref(f"torch.nn.{name}")
            if name not in _BUILTIN_NAMES or not all(star.startswith("torch") for star in stars):
                return UNKNOWN_VALUE
        if name in _BUILTIN_NAMES:
            return self._ref(f"builtins.{name}")
        return UNKNOWN_VALUE

    def _home(self, scope: Scope, root: str) -> ast.AST | None:
        """The scope node whose binding ``root`` refers to from ``scope``."""
        if scope.cls is not None and root == scope.self_name:
            return scope.cls
        current: Scope | None = scope
        while current is not None:
            if root in current.locals:
                return current.node
            current = current.outer
        return None

    def _valid(self, placement, scope: Scope) -> bool:
        """Whether a placement's text names the same thing from ``scope``."""
        if placement.text is None or placement.home is None:
            return True
        home = self._home(scope, _root(placement.text))
        if home is placement.home:
            return True
        # `self.w.device` in a class names the same in its subclasses' methods
        return type(home) is ast.ClassDef and type(placement.home) is ast.ClassDef and placement.home in self._ancestors(home)

    def _ancestors(self, cls: ast.ClassDef) -> set:
        """The classes of this file ``cls`` derives from."""
        key = ("ancestors", cls)
        found = self._cache.get(key)
        if found is None:
            found = set()
            stack = list(self._index.classes[cls].local_bases) if cls in self._index.classes else []
            while stack:
                base = stack.pop()
                if base not in found:
                    found.add(base)
                    stack.extend(self._index.classes[base].local_bases if base in self._index.classes else ())
            self._cache[key] = found
        return found

    def _rehome(self, value: Value, scope: Scope, chain: str | None) -> Value:
        """``value`` seen from ``scope``, where it is reached as ``chain``:
        texts that name nothing there are rewritten through ``chain``."""
        changed = False
        places = []
        for placement, origin in value.places:
            kind = type(placement)
            if (kind is Device or kind is SameAs) and not self._valid(placement, scope):
                changed = True
                home = self._home(scope, _root(chain)) if chain else None
                if kind is Device:
                    placement = Device(_naming(value, chain), home)
                else:
                    placement = SameAs(chain, home) if chain else UNKNOWN
            places.append((placement, origin))
        parts = value.parts
        if isinstance(parts, Parts) and _depth(value) <= _MAX_PARTS_DEPTH:
            elem = parts.elem if parts.elem is NOTHING else self._rehome(parts.elem, scope, None)
            items = tuple((k, self._rehome(v, scope, None)) for k, v in parts.items)
            if elem is not parts.elem or any(a is not b for (_, a), (_, b) in zip(items, parts.items)):
                parts = Parts(elem, items)
                changed = True
        if not changed:
            return value
        return value.but(places=frozenset(places), parts=parts)

    def _device_string(self, text: str) -> Value | None:
        if text not in self._device_strings:
            kind = text.split(":")[0]
            if text == "cpu":
                value = Value(What.DEVICE, frozenset({(HOST, None)}))
            elif kind in DEVICE_STRINGS and (kind == text or text[len(kind) + 1 :].isdigit()):
                value = Value(What.DEVICE, frozenset({(Device(f'"{text}"'), None)}))
            elif text == "meta":
                value = Value(What.DEVICE, UNKNOWN_PLACES)
            else:
                value = None
            self._device_strings[text] = value
        return self._device_strings[text]

    def _source(self, node: ast.AST) -> str:
        if self.text is not None:
            start, end = self.span(node)
            return self.text[start:end]
        return ast.unparse(node)

    def _qualified(self, node: ast.AST, scope: Scope) -> str | None:
        if type(node) is ast.Call:
            node = node.func
        return self._index.static_name(node, scope)

    def _annotation_what(self, annotation: ast.AST | None, scope: Scope) -> What:
        if annotation is None:
            return What.UNKNOWN
        if type(annotation) is ast.BinOp and type(annotation.op) is ast.BitOr:
            sides = [annotation.left, annotation.right]
            kept = [s for s in sides if not (type(s) is ast.Constant and s.value is None)]
            return self._annotation_what(kept[0], scope) if len(kept) == 1 else What.UNKNOWN
        if type(annotation) is ast.Subscript:
            name = self._index.static_name(annotation.value, scope) or ""
            if name.rsplit(".", 1)[-1] == "Optional":
                return self._annotation_what(annotation.slice, scope)
            return What.UNKNOWN
        local = self._index.local_class(annotation, scope)
        if local is not None:
            info = self._index.classes.get(local)
            return What.MODULE if info is not None and info.is_module else What.UNKNOWN
        name = self._index.static_name(annotation, scope)
        if name is None:
            return What.UNKNOWN
        if name in ("torch.Tensor", "torch.FloatTensor", "torch.LongTensor", "torch.nn.Parameter", "torch.BoolTensor", "torch.DoubleTensor") or name.startswith("torch.cuda."):
            return What.TENSOR
        if name in DATA_LOADERS:
            return What.LOADER
        if name == "torch.device":
            return What.DEVICE
        if name in ("numpy.ndarray", "numpy.array"):
            return What.ARRAY
        if name in ("int", "float", "str", "bool"):
            return What.SCALAR
        if _is_torch_module_class(name):
            return What.MODULE
        return What.UNKNOWN

    # -- parameters, contexts and summaries ------------------------------------------------

    def _symbolic_params(self, scope: Scope) -> dict[str, Value]:
        function = scope.node
        args = function.args
        params: dict[str, Value] = {}
        for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
            if arg.arg == scope.self_name:
                params[arg.arg] = self._self_value(scope.cls)
            else:
                params[arg.arg] = self._param_value(scope, arg)
        for arg in (args.vararg, args.kwarg):
            if arg is not None:
                params[arg.arg] = UNKNOWN_VALUE
        return params

    def _param_value(self, scope: Scope, arg: ast.arg) -> Value:
        what = self._annotation_what(arg.annotation, scope)
        name = arg.arg
        function = scope.node
        if what is What.UNKNOWN and (name in DEVICE_NAMES or name.endswith("_device")):
            what = What.DEVICE
        if what is What.DEVICE:
            return Value(What.DEVICE, frozenset({(Device(name, function), arg)}))
        if what is What.LOADER:
            return _host_loader()
        if what is What.SCALAR:
            return SCALAR_VALUE
        if what is What.ARRAY:
            return ARRAY_VALUE
        same = frozenset({(SameAs(name, function), arg)})
        if what is What.MODULE:
            return Value(What.MODULE, same, frozenset({arg}))
        return Value(what, same)

    def _self_value(self, cls: ast.ClassDef) -> Value:
        info = self._index.classes.get(cls)
        if info is None or not info.is_module:
            return Value(What.UNKNOWN, NO_PLACES, None, Instance(cls))
        return Value(What.MODULE, self._self_places(cls), frozenset({cls}), Instance(cls), PARAM_FREE if info.param_free else 0)

    def _self_places(self, cls: ast.ClassDef) -> frozenset:
        """Where a module's submodules, parameters and buffers live, inside its
        methods: on the module's device, named by a parameter it owns."""
        info = self._index.classes[cls]
        if info.param_free:
            return UNKNOWN_PLACES
        return frozenset({(Device(info.own_text, cls if info.own_text else None), None)})

    def _mentions(self) -> "_Mentions | None":
        if self._mention_index is None and self.text is not None:
            self._mention_index = _Mentions(self)
        return self._mention_index

    def _context(self, scope: Scope) -> dict[str, Value] | None:
        """A function's parameters as its call sites in the file pass them,
        when every use of its name is seen to be a call (its name occurs in the
        text nowhere else) and they say more than the parameters do."""
        mentions = self._mentions()
        function = scope.node
        if mentions is None or function in mentions.cyclic:
            return None
        if any(self._qualified(d, scope.parent) not in TRANSPARENT_DECORATORS for d in function.decorator_list):
            return None
        target = scope.cls if self._is_init(scope) else function  # a class is called by its name
        method = target is function and scope.cls is not None
        occurrences = [(offset, caller) for offset, caller, dotted in mentions.occurrences.get(target.name, ()) if dotted == method]
        if not occurrences or any(caller is None for _, caller in occurrences):
            return None
        runs = []
        for caller in {caller for _, caller in occurrences}:
            run = self._main(caller)
            if run is None:
                return None
            runs.append(run)
        seen = set()
        calls = []
        for run in runs:
            for node, used in run.references.items():
                if used.name != target.name:
                    continue
                seen.add(self._reference_offset(node))  # a use of this name, of this or a namesake definition
                if used is target and node not in run.called:
                    return None  # used as a value: called where the analysis cannot see
            calls += [(call, run, implicit) for call, (callee, implicit) in run.callees.items() if callee is function]
        if not calls or any(offset not in seen for offset, _ in occurrences):
            return None  # a use no run has seen
        joined: dict[str, Value] = {}
        for call, run, implicit_self in calls:
            mapping = self._bind(scope, call, run.calls.get(call), implicit_self)
            for name, value in mapping.items():
                joined[name] = join(joined.get(name), value)
        params = self._symbolic_params(scope)
        useful = False
        for name, value in joined.items():
            if name not in params or name == scope.self_name:
                continue
            value = self._rehome(value.but(flags=value.flags & ~MAYBE_UNBOUND), scope, name)
            if any(type(p) is Device and (p.text is None or value.what is What.DEVICE) for p, _ in value.places):
                # inside the function, the parameter names the device its callers' argument is on
                named = Device(_naming(value, name), function)
                value = value.but(places=frozenset((named, o) if type(p) is Device and (p.text is None or value.what is What.DEVICE) else (p, o) for p, o in value.places))
            host, device, _ = _kinds(value)
            if host or device or value.what in (What.MODULE, What.LOADER, What.TENSOR, What.BATCH, What.DEVICE):
                useful = True
            params[name] = value
        return params if useful else None

    def _bind(self, scope: Scope, call: ast.Call, recorded: tuple | None, implicit_self: bool) -> dict[str, Value]:
        """Parameter name -> the argument value a call passes (UNKNOWN where not seen)."""
        args = scope.node.args
        positional_names = [a.arg for a in (*args.posonlyargs, *args.args)]
        if implicit_self and scope.self_name:
            positional_names = positional_names[1:]
        names = positional_names + [a.arg for a in args.kwonlyargs]
        result: dict[str, Value] = {}
        if recorded is None:
            return {name: UNKNOWN_VALUE for name in names}
        positional, keywords = recorded
        starred = False
        for i, (node, value) in enumerate(zip(call.args, positional)):
            if type(node) is ast.Starred:
                starred = True
                break
            if i < len(positional_names):
                result[positional_names[i]] = value
        for name, value in keywords.items():
            if name is None:
                starred = True
            elif name in names:
                result[name] = value
        defaults = dict(zip(positional_names[len(positional_names) - len(args.defaults) :], args.defaults)) if args.defaults else {}
        defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
        for name in names:
            if name in result:
                continue
            default = defaults.get(name)
            if starred or default is None:
                result[name] = UNKNOWN_VALUE
            elif type(default) is ast.Constant:
                result[name] = (self._device_string(default.value) if type(default.value) is str else None) or SCALAR_VALUE
            else:
                result[name] = UNKNOWN_VALUE
        return result

    def _apply_summary(self, run: _Run, function: ast.AST, call: ast.Call, positional: list[Value], keywords: dict, receiver: Value | None, state: dict) -> Value:
        """A call of a function of this file: its summary, with the call's
        arguments put where its parameters are."""
        scope = self._index.scopes[function]
        mentions = self._mentions()
        if mentions is not None and function in mentions.cyclic and mentions.cyclic.get(run.scope.node) is mentions.cyclic[function]:
            return UNKNOWN_VALUE  # recursion: the summary would depend on itself
        summary = self._symbolic(scope)
        if summary is None or summary.generator:
            return UNKNOWN_VALUE
        mapping = self._bind(scope, call, (positional, keywords), receiver is not None)
        # a module argument the function moves in place (`model.to(device)`) comes back moved
        exits = summary.exits or {}
        for name, before in summary.params.items():
            given = mapping.get(name)
            if given is None or given.what is not What.MODULE:
                continue
            after = exits.get(name)
            if name in summary.discarded:
                after = Value(What.MODULE, summary.discarded[name])
            if after is not None and after.places != before.places:
                moved = self._substitute(after, scope, mapping, receiver, run.scope)
                run._move_in_place(given, given.but(places=moved.places), None, state)
        if run.record:
            for name, kind, node, use, other_node, other in summary.meetings:
                given = mapping.get(name)
                if given is None:
                    continue
                here = self._substitute(other, scope, mapping, receiver, run.scope)
                if _apart(given, here):
                    # found inside the function; made (and fixed) where the caller made the value
                    sink = Sink(kind, node, use, _settle_to_expression(given.places, call), other_node, self._device_text(scope, other, other_node))
                    run.sinks.setdefault((node, use), sink)
                elif _kinds(here) == (False, True, False):
                    # the caller's own parameter, passed on: the caller's summary keeps the meeting
                    params = {p.text for p, _ in given.places if type(p) is SameAs and p.home is run.scope.node}
                    if len(params) == 1 and all(type(p) is SameAs for p, _ in given.places):
                        run.meetings.append((params.pop(), kind, node, use, other_node, here))
        result = summary.returns if summary.returns is not None else SCALAR_VALUE
        return self._substitute(result, scope, mapping, receiver, run.scope)

    def _substitute(self, value: Value, scope: Scope, mapping: dict[str, Value], receiver: Value | None, at: Scope) -> Value:
        function = scope.node
        places = set()
        sole: Value | None = None
        for placement, origin in value.places:
            kind = type(placement)
            if kind is SameAs and placement.home is function and placement.text in mapping:
                given = mapping[placement.text]
                places |= given.places
                sole = given if sole is None or sole is given else UNKNOWN_VALUE
            elif kind is Device and placement.home is function and placement.text in mapping and mapping[placement.text].what is What.DEVICE:
                places |= {(p, origin) for p, _ in mapping[placement.text].places}
            elif (kind is Device or kind is SameAs) and placement.home is not None and placement.home is scope.cls:
                if at.cls is scope.cls and receiver is not None and receiver.ref == Instance(scope.cls) and receiver.places == self._self_places(scope.cls):
                    places.add((placement, origin))
                elif receiver is not None and receiver.what is What.MODULE:
                    places |= receiver.places
                else:
                    places.add((Device(None), origin) if kind is Device else (UNKNOWN, None))
            elif (kind is Device or kind is SameAs) and not self._valid(placement, at):
                places.add((Device(None), origin) if kind is Device else (UNKNOWN, None))
            else:
                places.add((placement, origin))
        parts = value.parts
        if isinstance(parts, Parts) and _depth(value) <= _MAX_PARTS_DEPTH:
            elem = parts.elem if parts.elem is NOTHING else self._substitute(parts.elem, scope, mapping, receiver, at)
            parts = Parts(elem, tuple((k, self._substitute(v, scope, mapping, receiver, at)) for k, v in parts.items))
        elif isinstance(parts, frozenset):
            parts = frozenset(p for p in parts if not isinstance(p, ast.arg)) or None
        what = value.what
        if what is What.UNKNOWN and sole is not None and sole is not UNKNOWN_VALUE and len(value.places) == 1:
            what = sole.what
        ref = value.ref if not isinstance(value.ref, Instance) or value.ref.cls is not None else None
        return Value(what, _cap(frozenset(places)), parts, ref, value.flags & ~MAYBE_UNBOUND)

    def _inline(self, run: _Run, function: ast.AST, call: ast.Call, positional: list[Value], keywords: dict, state: dict) -> Value | None:
        """``self.helper(...)`` called from ``__init__``: interpreted in place, so
        the attributes it sets are known after the call."""
        scope = self._index.scopes[function]
        if function is run.scope.node or not scope.self_name or not run.scope.self_name:
            return None
        params = self._symbolic_params(scope)
        for name, value in self._bind(scope, call, (positional, keywords), True).items():
            params[name] = self._rehome(value, scope, name)
        params[scope.self_name] = state.get(run.scope.self_name, params[scope.self_name])
        mine, theirs = run.scope.self_name + ".", scope.self_name + "."
        for key, value in state.items():
            if key.startswith(mine):
                params[theirs + key[len(mine) :]] = value
        child = _Run(self, scope, params, record=False, summaries=True, in_init=True, depth=run.depth + 1).run()
        for key, value in (child.exits or {}).items():
            if key.startswith(theirs):
                chain = mine + key[len(theirs) :]
                state[chain] = self._rehome(value, run.scope, chain)
                run._dotted_roots.add(run.scope.self_name)
        return self._rehome(child.returns or SCALAR_VALUE, run.scope, None)

    # -- classes ---------------------------------------------------------------------------

    def _inputs_on_device(self, run: _Run, module: Value, call: ast.Call, positional: list[Value], keywords: dict) -> set[int] | None:
        """For a call of a module whose class (and ``forward``) this file
        defines: the indexes (in ``call.args`` then ``call.keywords``) of the
        inputs ``forward`` uses with the module's own parameters, which must be
        on its device; None for other modules (every input must be)."""
        if type(module.ref) is not Instance or not run.summaries:
            return None
        forward = self._method_of(module.ref.cls, "forward")
        if forward is None:
            return None
        scope = self._index.scopes[forward]
        summary = self._symbolic(scope)
        if summary is None:
            return None
        owners = {module.ref.cls} | self._ancestors(module.ref.cls)
        needed = {name for name, _, _, _, _, other in summary.meetings if any(type(p) is Device and p.home in owners for p, _ in other.places)}
        args = scope.node.args
        names = [a.arg for a in (*args.posonlyargs, *args.args)][1:]
        required = set()
        for i, arg in enumerate(call.args):
            if type(arg) is ast.Starred or i >= len(names):
                return None  # the analysis cannot tell which parameter gets it
            if names[i] in needed:
                required.add(i)
        for j, keyword in enumerate(call.keywords):
            if keyword.arg is None:
                return None
            if keyword.arg in needed:
                required.add(len(call.args) + j)
        return required

    def _method_of(self, cls: ast.ClassDef, name: str, seen: set | None = None) -> ast.AST | None:
        info = self._index.classes.get(cls)
        if info is None:
            return None
        method = info.methods.get(name)
        if method is not None:
            decorators = {_chain(d) for d in method.decorator_list}
            return None if decorators & {"property", "classmethod"} or name in info.stores else method
        seen = seen or set()
        for base in info.local_bases:
            if base not in seen:
                seen.add(base)
                found = self._method_of(base, name, seen)
                if found is not None:
                    return found
        return None

    def _attributes(self, cls: ast.ClassDef) -> dict[str, Value]:
        """``self.X`` after ``__init__`` (and the helpers it calls), joined with
        unknown for attributes other methods assign too."""

        def make() -> dict[str, Value]:
            info = self._index.classes[cls]
            result = dict(self._base_attributes(cls))
            init = info.methods.get("__init__")
            if init is not None:
                scope = self._index.scopes[init]
                run = self._symbolic(scope)
                if run is not None and scope.self_name:
                    prefix = scope.self_name + "."
                    for key, value in (run.exits or {}).items():
                        if key.startswith(prefix) and "." not in key[len(prefix) :]:
                            result[key[len(prefix) :]] = value
                    _name_devices_by_attribute(result, init, cls, prefix)
            # helpers only __init__ calls set attributes as __init__ does
            mentions = self._mentions()
            only_from_init = set()
            if mentions is not None and init is not None:
                for name in info.methods:
                    occurrences = [caller for _, caller, dotted in mentions.occurrences.get(name, ()) if dotted]
                    if occurrences and all(caller is not None and caller.node is init for caller in occurrences):
                        only_from_init.add(name)
            for attr, methods in info.stores.items():
                if methods - {"__init__"} - only_from_init:
                    result[attr] = join(result.get(attr), UNKNOWN_VALUE)
            return result

        result = self._compute(("attrs", cls), make)
        return {} if result is None else result

    def _base_attributes(self, cls: ast.ClassDef) -> dict[str, Value]:
        result: dict[str, Value] = {}
        for base in self._index.classes[cls].local_bases:
            if base in self._index.classes:
                result.update(self._attributes(base))
        return result

    def _instance_attribute(self, run: _Run, owner: Value, attr: str, chain: str | None) -> Value | None:
        """``self.X`` or ``model.X`` for an instance of a class of this file."""
        cls = owner.ref.cls
        info = self._index.classes.get(cls)
        if info is None:
            return None
        is_self = run.scope.cls is cls and chain is not None and _root(chain) == run.scope.self_name
        if not run.summaries:
            return None
        attributes = self._base_attributes(cls) if (run.in_init and is_self) else self._attributes(cls)
        value = attributes.get(attr)
        if value is None:
            if attr == "device" and info.device_property:
                return Value(What.DEVICE, owner.places)
            method = self._method_of(cls, attr)
            return Value(What.UNKNOWN, NO_PLACES, ref=method) if method is not None else None
        if value.flags & FOLLOWS_MODULE and not is_self:
            return value.but(places=owner.places)
        return self._rehome(value, run.scope, chain)

    def _module_evidence(self, scope: Scope, chain: str) -> bool:
        """Whether the scope calls a method only modules have on ``chain``."""
        key = ("evidence", scope.node)
        found = self._cache.get(key)
        if found is None:
            found = set()
            for node in ast_walk(scope.node):
                if type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr in MODULE_EVIDENCE:
                    receiver = _chain(node.func.value)
                    if receiver is not None:
                        found.add(receiver)
            self._cache[key] = found
        return chain in found

    def _mentions_device(self, node: ast.AST) -> bool:
        """Whether a class, function or lambda moves tensors or names a device."""
        key = ("mentions", node)
        found = self._cache.get(key)
        if found is None:
            found = False
            for sub in ast_walk(node):
                if type(sub) is ast.Attribute and sub.attr in ("to", "cuda", "device"):
                    found = True
                    break
                if type(sub) is ast.Name and _DEVICE_NAME.fullmatch(sub.id):
                    found = True
                    break
            self._cache[key] = found
        return found

    # -- naming a device --------------------------------------------------------------------

    def _device_text(self, scope: Scope, other: Value | None, other_node: ast.AST | None) -> str | None:
        """Text naming the device ``other`` lives on, valid in ``scope``."""
        if other is None:
            return None
        texts = {p.text for p, _ in other.places if type(p) is Device and p.text is not None and self._valid(p, scope)}
        if len(texts) == 1:
            return texts.pop()
        chain = _chain(other_node) if other_node is not None else None
        if chain is not None:
            return _naming(other, chain)
        return None

    def _device_in_reach(self, scope: Scope, run: _Run, statement: ast.stmt) -> str | None:
        state = self._state_at(scope, run, statement)
        candidates: list[tuple[int, str]] = []

        def consider(rank: int, text: str, value: Value) -> None:
            host, device, _ = _kinds(value)
            candidates.append((rank + (0 if device else 4) + (0 if _root(text) in DEVICE_NAMES or text.rsplit(".", 1)[-1] in DEVICE_NAMES else 1), text))

        for name, value in state.items():
            if value.what is not What.DEVICE or value.flags & MAYBE_UNBOUND:
                continue
            root = _root(name)
            if "." not in name and scope.counts.get(name, 0) != 1:
                continue
            if "." in name and (state.get(root) is None and root != scope.self_name):
                continue
            consider(0, name, value)
        if scope.cls is not None and scope.self_name == "self":
            attribute = self._attributes(scope.cls).get("device")
            if attribute is not None and attribute.what is What.DEVICE and "self.device" not in state:
                consider(0, "self.device", attribute)
        module_run = self._main(self._index.module) if scope.kind != "module" else None
        sources = [(run, False)] + ([(module_run, True)] if module_run is not None else [])
        for source, global_only in sources:
            for node, value in source.values.items():
                if type(node) is not ast.Attribute or value.what is not What.DEVICE or type(node.ctx) is not ast.Load:
                    continue
                chain = _chain(node)
                if chain is None or _root(chain) not in CONFIG_NAMES:
                    continue
                if global_only and self._home(scope, _root(chain)) is not self._index.tree:
                    continue
                if self._in_reach(scope, state, _root(chain)):
                    consider(2, chain, value)
        if scope.kind != "module":
            module_state = self._prepass(self._index.module)
            for name, value in module_state.items():
                if value.what is What.DEVICE and "." not in name and self._index.module.counts.get(name, 0) == 1 and self._home(scope, name) is self._index.tree:
                    consider(8, name, value)
        flags = list(run.flag_tests)
        if module_run is not None:
            flags += [t for t in module_run.flag_tests if self._home(scope, _root(_chain(t))) is self._index.tree]
        for test in flags:
            chain = _chain(test)
            if chain is not None and self._in_reach(scope, state, _root(chain)):
                candidates.append((16, f'"cuda" if {chain} else "cpu"'))
        if not candidates:
            return None
        return min(candidates, key=lambda c: c[0])[1]

    def _in_reach(self, scope: Scope, state: dict, root: str) -> bool:
        if root in scope.locals:
            value = state.get(root)
            return value is not None and not value.flags & MAYBE_UNBOUND
        home = self._home(scope, root)
        return home is self._index.tree and self._index.module.counts.get(root, 0) >= 1

    def _state_at(self, scope: Scope, run: _Run, statement: ast.stmt) -> dict:
        key = ("state", statement)
        if key not in self._cache:
            watcher = _Run(self, scope, run.params, record=False, summaries=True, in_init=run.in_init, watch=statement).run()
            self._cache[key] = watcher.watched or {}
        return self._cache[key]

    def _statement_of(self, scope: Scope, node: ast.AST) -> ast.stmt | None:
        """The innermost statement of ``scope`` that holds ``node``."""
        position = _position(node)
        end = (getattr(node, "end_lineno", position[0]), getattr(node, "end_col_offset", position[1]))
        blocks = [scope.node.body]
        found = None
        while blocks:
            body = blocks.pop()
            for statement in body:
                start = _position(statement)
                if start <= position and end <= (statement.end_lineno, statement.end_col_offset):
                    found = statement
                    if type(statement) in _FUNCTIONS or type(statement) is ast.ClassDef:
                        blocks = []
                        break
                    blocks = [getattr(statement, f) for f in ("body", "orelse", "finalbody") if getattr(statement, f, None)]
                    for handler in getattr(statement, "handlers", ()):
                        blocks.append(handler.body)
                    for case in getattr(statement, "cases", ()):
                        blocks.append(case.body)
                    break
        return found

    # -- offsets ----------------------------------------------------------------------------

    def _require_text(self) -> str:
        if self.text is None:
            raise ValueError("FileFlow was made from a tree: pass text= to map offsets")
        return self.text

    def _positions(self) -> CPythonPositions:
        if self._cpython_positions is None:
            self._cpython_positions = CPythonPositions(self._require_text())
        return self._cpython_positions

    def _starts(self) -> list[int]:
        return self._positions().starts

    def _offset(self, line: int, byte_column: int) -> int:
        return self._positions().offset(line, byte_column)

    def _reference_offset(self, node: ast.AST) -> int:
        """Character offset of the name a Name or Attribute node uses."""
        if type(node) is ast.Attribute:
            return self._offset(node.end_lineno, node.end_col_offset) - len(node.attr)
        return self._offset(node.lineno, node.col_offset)

    def _position_of(self, offset: int) -> tuple[int, int]:
        """(line, UTF-8 column), as ast counts them, of a character offset."""
        return self._positions().position(offset)

    def _name_offset(self, definition: ast.AST) -> int:
        """Character offset of the name in a def or class statement's header."""
        text, name = self.text, definition.name
        at = self._offset(definition.lineno, definition.col_offset)
        while True:
            at = text.find(name, at)
            if at < 0:
                return -1
            end = at + len(name)
            if not (text[at - 1 : at].isidentifier() or text[at - 1 : at].isdigit()) and not (text[end : end + 1].isidentifier() or text[end : end + 1].isdigit()):
                return at
            at = end

    def _spans_near(self, offset: int) -> dict:
        """Expressions of the top-level statement holding ``offset``, by span."""
        starts = self._starts()
        line = bisect.bisect_right(starts, offset) - 1
        body = self.tree.body
        i = bisect.bisect_right([s.lineno for s in body], line) - 1
        if i < 0:
            return {}
        statement = body[i]
        found = self._spans.get(statement)
        if found is None:
            found = {}
            for node in ast_walk(statement):
                if isinstance(node, ast.expr):
                    found.setdefault(self.span(node), node)
            self._spans[statement] = found
        return found


def _name_devices_by_attribute(attributes: dict[str, Value], init: ast.AST, cls: ast.ClassDef, prefix: str) -> None:
    """``self.device = device`` in ``__init__``: what ``__init__`` moved with
    ``device`` is, in the other methods, on ``self.device``."""
    names: dict[str, str] = {}
    for attr, value in attributes.items():
        if value.what is What.DEVICE:
            for placement, _ in value.places:
                if type(placement) is Device and placement.text is not None and placement.home is init:
                    names.setdefault(placement.text, prefix + attr)
    if not names:
        return
    for attr, value in list(attributes.items()):
        places = frozenset(
            (Device(names[p.text], cls), o) if type(p) is Device and p.home is init and p.text in names else (p, o)
            for p, o in value.places
        )
        if places != value.places:
            attributes[attr] = value.but(places=places)


def _naming(value: Value, chain: str | None) -> str | None:
    """Text naming the device of ``value``, reached as ``chain``."""
    if chain is None:
        return None
    if value.what is What.DEVICE:
        return chain
    if value.what is What.MODULE:
        return f"next({chain}.parameters()).device"
    if value.what in (What.TENSOR, What.UNKNOWN):
        return f"{chain}.device"
    return None


def _header_expressions(statement: ast.stmt) -> Iterator[ast.AST]:
    """The expressions of a statement's own line(s): a compound statement's
    header, not its body."""
    stack = []
    for field, value in ast.iter_fields(statement):
        if field in ("body", "orelse", "finalbody", "handlers", "cases", "decorator_list"):
            continue
        if isinstance(value, list):
            stack.extend(v for v in value if isinstance(v, ast.AST))
        elif isinstance(value, ast.AST):
            stack.append(value)
    while stack:
        node = stack.pop()
        if type(node) is ast.Lambda:
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _parenthesized(text: str, start: int, end: int) -> bool:
    """Whether the parenthesis at ``start`` closes at ``end - 1``."""
    depth = 0
    for i in range(start, end):
        ch = text[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i == end - 1
    return False


class _Mentions:
    """Where the names of the file's functions and classes occur in its code,
    found by searching the text (no walk over the tree), strings and comments
    left out. An occurrence after a dot (``obj.name``) can only be a method; a
    bare one only a function or class. A keyword argument or an assignment
    target (``name=``) refers to none. What is left over-approximates who
    refers to whom, which keeps what is built on it safe: contexts (every
    occurrence must be a use a run has seen) and recursion (functions that
    reach themselves through the names they mention)."""

    def __init__(self, flow: "FileFlow") -> None:
        index = flow._index
        text = flow.text
        by_name: dict[str, list[ast.AST]] = {}
        for node in index.definitions:
            by_name.setdefault(node.name, []).append(node)
        headers = {flow._name_offset(node) for node in index.definitions}
        # name -> [(offset, scope (None: a class body, which no run sees), after a dot)]
        self.occurrences: dict[str, list[tuple[int, Scope | None, bool]]] = {}
        self.edges: dict[ast.AST, set] = {}  # scope -> the definitions it mentions
        # else only in their own headers (a substring count can only say "more": then the search below finds none)
        wanted = {name for name, nodes in by_name.items() if text.count(name) > len(nodes)}
        if wanted:
            literals = [(m.start(), m.end()) for m in _STRINGS_AND_COMMENTS.finditer(text)]
            literal_starts = [start for start, _ in literals]
            for name in wanted:
                self.occurrences[name] = []
            for name, start in _find_names(text, wanted):
                if start in headers:
                    continue
                i = bisect.bisect_right(literal_starts, start) - 1
                if i >= 0 and start < literals[i][1]:
                    continue  # in a string or a comment
                if _KEYWORD_OR_TARGET.match(text, start + len(name)):
                    continue
                dotted = _after_dot(text, start)
                scope = index.scope_at(flow._position_of(start))
                if not dotted and not _may_name_a_definition(scope, name):
                    continue  # a local of that name hides the definitions
                self.occurrences[name].append((start, scope if scope.kind != "class" else None, dotted))
                while scope.kind == "class":
                    scope = scope.parent
                targets = self.edges.setdefault(scope.node, set())
                for node in by_name[name]:
                    if (index.scopes[node].cls is not None) != dotted:
                        continue  # a method is reached after a dot; a function or class by its bare name
                    targets.add(node)
                    info = index.classes.get(node)
                    if info is not None and "__init__" in info.methods:
                        targets.add(info.methods["__init__"])
        self.cyclic = self._cyclic()

    def _cyclic(self) -> dict:
        """Functions that reach themselves through their callers, each mapped
        to its component: the strongly connected components (Tarjan's,
        iterative) of size > 1, and functions that call themselves."""
        edges = self.edges
        number: dict = {}
        low: dict = {}
        on_stack: set = set()
        stack: list = []
        cyclic: dict = {}
        counter = 0
        for start in list(edges):
            if start in number:
                continue
            work = [(start, iter(edges.get(start, ())))]
            number[start] = low[start] = counter
            counter += 1
            stack.append(start)
            on_stack.add(start)
            while work:
                node, children = work[-1]
                advanced = False
                for child in children:
                    if child not in number:
                        number[child] = low[child] = counter
                        counter += 1
                        stack.append(child)
                        on_stack.add(child)
                        work.append((child, iter(edges.get(child, ()))))
                        advanced = True
                        break
                    if child in on_stack:
                        low[node] = min(low[node], number[child])
                if advanced:
                    continue
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == number[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member is node:
                            break
                    if len(component) > 1 or node in edges.get(node, ()):
                        for member in component:
                            cyclic[member] = node
        return cyclic
