"""What the code's names mean: PyTorch, NumPy and friends, as data."""

from __future__ import annotations

import ast
import builtins
import re


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
    "autograd.Variable autograd.Function autograd.backward autograd.grad autocast get_autocast_dtype is_autocast_enabled"
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
# The ref of a DEVICE value that is a `torch.device` object, not a device string:
# `torch.device(...)`, a tensor's `.device`. Join keeps a ref only when both sides
# have it, so a name holding a string on some path is not one (`x.device == "cpu"`
# is always false on a torch.device, right on a string).
DEVICE_OBJECT = ("instance", "torch.device")
# The ref of a BATCH value that is a tokenizer's (or processor's) result: a
# `BatchEncoding` / `BatchFeature` of tensors, which moves whole with
# `.to(device)` and reads its tensors by key or attribute (`enc.input_ids`).
ENCODING = ("instance", "transformers.BatchEncoding")
# A tokenizer's methods that return one tensor with `return_tensors="pt"`,
# not a BatchEncoding (`apply_chat_template` unless `return_dict=True`).
TOKENIZER_TENSOR_METHODS = frozenset({"encode", "apply_chat_template"})
# A BatchEncoding's own attributes, which are no tensors of it.
ENCODING_ATTRIBUTES = frozenset("data encodings is_fast n_sequences tensor_type".split())
# Calls that show a value is an nn.Module (optimizers share state_dict and zero_grad).
MODULE_EVIDENCE = frozenset(
    "parameters named_parameters buffers named_buffers modules named_modules children named_children eval forward "
    "register_buffer register_parameter add_module register_forward_hook".split()
)
# Methods only nn.Module objects have, called on `self`: a class calling one
# it does not define is a module whatever its (imported) base.
MODULE_ONLY_SELF_CALLS = frozenset(
    "register_buffer register_parameter register_module add_module parameters named_parameters buffers named_buffers "
    "modules named_modules children named_children".split()
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
# Libraries' nn.Module base classes, besides torch.nn's and Lightning's.
LIBRARY_MODULE_BASES = frozenset(
    {
        "diffusers.ModelMixin",
        "diffusers.models.modeling_utils.ModelMixin",
        "torch_geometric.nn.MessagePassing",
        "torch_geometric.nn.conv.MessagePassing",
        "timm.models.layers.DropPath",
        "timm.layers.DropPath",
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
# NumPy's functions that copy their first argument into an array, of which a
# tensor on a device cannot give one (the rest of numpy's functions read it too,
# but some read only its shape or take sizes and numbers there: `np.zeros(n)`).
NUMPY_ARRAY_READERS = frozenset({"numpy.array", "numpy.asarray", "numpy.asanyarray", "numpy.copy"})
NUMPY_NOT_READING = frozenset(
    "shape ndim size isscalar iterable result_type can_cast issubdtype promote_types dtype ndarray zeros ones empty full "
    "arange linspace logspace geomspace eye identity tri save savez savez_compressed savetxt load loadtxt set_printoptions "
    "printoptions seterr errstate broadcast_shapes".split()
)
DEVICE_STRINGS = ("cuda", "mps", "xpu", "hpu", "npu", "xla", "vulkan")
# Names that say a value is a device, for values the code does not show.
DEVICE_NAME_PATTERN = re.compile(r"(?:\w+_)?(?:device|dev|gpu|gpu_id|device_id|rank|local_rank|cuda_device)", re.IGNORECASE)
# Flags that say whether to run on the GPU.
FLAG_NAMES = frozenset({"cuda", "use_cuda", "use_gpu", "with_cuda", "on_gpu", "gpu_available", "cuda_available"})
DEVICE_NAMES = ("device", "dev")
# Attributes and methods only tensors have among the values a line uses.
TENSOR_EVIDENCE = frozenset("shape dtype size dim ndim numel ndimension unsqueeze view reshape permute transpose".split())
# What shows a function treats a parameter as a tensor (``tensor_parameters``):
# a tensor's attributes, or its methods that a module does not also have.
TENSOR_USE = frozenset(
    (
        "shape device dtype size dim ndim numel grad abs add addmm all any amax amin argmax argmin argsort "
        "bmm bool byte ceil char chunk clamp clamp_ clip clone contiguous cos cumsum detach div exp expand "
        "expand_as fill_ flatten flip floor gather int log log_softmax long masked_fill masked_fill_ matmul "
        "max mean min mm mul neg norm normal_ permute pow relu repeat repeat_interleave reshape roll round "
        "rsqrt sigmoid sign sin softmax sort split sqrt square squeeze std sub sum t tanh topk transpose "
        "tril triu type_as uniform_ unbind unflatten unsqueeze var view view_as where numpy tolist item"
    ).split()
)
# What only a tensor has, among the values code handles (not NumPy arrays,
# whose 2.x API shares view, reshape, T, shape, device; not modules, which
# share to, cuda, float, half): a parameter used so is a tensor.
TENSOR_ONLY_METHODS = frozenset(
    (
        "size dim ndimension numel unsqueeze unsqueeze_ permute contiguous detach detach_ masked_fill masked_fill_ "
        "expand expand_as view_as reshape_as type_as new_zeros new_ones new_full new_empty new_tensor index_select "
        "scatter scatter_ scatter_add scatter_add_ gather narrow element_size softmax log_softmax sigmoid relu "
        "clamp clamp_ unbind long int bool byte t numpy backward is_floating_point get_device pin_memory topk "
        "masked_select bmm mm repeat_interleave exp log sqrt rsqrt norm"
    ).split()
)
# torch.* that take a Python number as their first argument too (torch 2.13:
# every torch function tried with a number first and a tensor second).
NUMBER_FIRST_OPERATIONS = _torch(
    "add bucketize div divide float_power floor_divide isin mul multiply normal polygamma pow remainder sub subtract "
    "true_divide xlogy sym_sum"
)
TENSOR_ONLY_ATTRIBUTES = frozenset("is_cuda grad grad_fn requires_grad is_leaf".split())
# Owners of a `.device` attribute that are configuration, not tensors.
CONFIG_NAMES = frozenset({"args", "opt", "opts", "config", "cfg", "conf", "hparams", "hp", "params", "settings", "options", "flags", "FLAGS", "hyperparams"})
BUILTIN_NAMES = frozenset(dir(builtins))
SCALAR_BUILTINS = frozenset(
    "len isinstance issubclass hasattr int float str bool print callable id hash repr format ord chr round "
    "divmod input open bytes complex any all setattr delattr vars dir type".split()
)


def is_torch_module_class(name: str) -> bool:
    """``torch.nn.Linear``, ``torch.nn.modules.conv.Conv2d``: an nn.Module class."""
    if name in NOT_MODULES:
        return False
    if name == "torch.nn.Module" or name in LIGHTNING_MODULES or name in DEVICE_PROPERTY_BASES or name in LIBRARY_MODULE_BASES:
        return True
    parts = name.split(".")
    if parts[:2] != ["torch", "nn"] or not parts[-1][:1].isupper():
        return False
    return len(parts) == 3 or parts[2] in ("modules", "parallel")


def is_optimizer_class(name: str) -> bool:
    """``torch.optim.SGD``, ``torch.optim.adam.Adam``; not a scheduler."""
    parts = name.split(".")
    return parts[:2] == ["torch", "optim"] and parts[-1] in OPTIMIZER_CLASSES and (len(parts) == 3 or len(parts) == 4 and parts[2] not in ("lr_scheduler", "swa_utils"))


def is_model_builder(name: str, call: ast.Call) -> bool:
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
