"""Random draws on the virtual GPU (``fixdev --run``): one CPU generator per
virtual device, as a GPU has one CUDA generator per device.

A draw on ``cuda:N`` (``torch.randn(..., device="cuda")``, ``rand_like`` of a
device tensor, dropout, ``bernoulli_``, ``nn.init`` on a device parameter)
runs with device N's generator swapped in for the CPU's default one, so the
CPU stream and each device's stream are independent, as on a GPU: a draw on
the device does not move the CPU's stream, and the reverse. The values are
those of torch's CPU generator (Mersenne Twister) seeded the same way, not
those of CUDA's Philox generator.

``torch.cuda.manual_seed``/``manual_seed_all`` (and ``torch.manual_seed``,
which calls ``manual_seed_all``), ``seed``, ``initial_seed`` and
``get_rng_state``/``set_rng_state`` (and their ``_all`` forms) act on these
generators, so ``torch.utils.checkpoint`` and ``torch.random.fork_rng`` save
and restore the device's stream as on a GPU.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

_SWAP = threading.Lock()

# functions whose draws come from the default generator of the device their
# tensors (or their device= argument) are on, by (module path, name)
_DRAWS = {
    "torch": ("rand", "randn", "randint", "randperm", "normal", "bernoulli", "multinomial", "poisson", "binomial",
              "rand_like", "randn_like", "randint_like", "dropout", "dropout_", "alpha_dropout", "alpha_dropout_",
              "feature_dropout", "feature_dropout_", "feature_alpha_dropout", "feature_alpha_dropout_", "native_dropout",
              "rrelu", "rrelu_", "lstm", "gru", "rnn_tanh", "rnn_relu"),
    "torch.nn.functional": ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
                            "rrelu", "rrelu_", "gumbel_softmax", "scaled_dot_product_attention", "multi_head_attention_forward"),
    "torch.Tensor": ("uniform_", "normal_", "bernoulli", "bernoulli_", "exponential_", "geometric_", "cauchy_",
                     "log_normal_", "random_", "multinomial"),
    "torch.nn.init": ("uniform_", "normal_", "trunc_normal_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
                      "kaiming_normal_", "orthogonal_", "sparse_"),
}


def drawing_functions(torch: Any) -> frozenset:
    """The torch functions (as a TorchFunctionMode sees them) that draw random numbers."""
    import torch.nn.functional
    import torch.nn.init

    owners = {"torch": torch, "torch.nn.functional": torch.nn.functional, "torch.Tensor": torch.Tensor, "torch.nn.init": torch.nn.init}
    found = set()
    for owner, names in _DRAWS.items():
        for name in names:
            function = getattr(owners[owner], name, None)
            if function is not None:
                found.add(function)
    return frozenset(found)


class Generators:
    """The virtual devices' generators; ``current`` says which device a
    ``torch.cuda`` call without a device means."""

    def __init__(self, torch: Any, gpus: int, current: Callable[[Any], int]) -> None:
        self.torch = torch
        self.each = tuple(torch.Generator() for _ in range(gpus))  # seeded as CUDA's are at start (67280421310721)
        self.index = current

    def drawn(self, index: int, call: Callable[[], Any]) -> Any:
        """``call()`` with device ``index``'s generator as the default one."""
        default, mine = self.torch.default_generator, self.each[index]
        with _SWAP:
            saved = default.get_state()
            default.set_state(mine.get_state())
            try:
                return call()
            finally:
                mine.set_state(default.get_state())
                default.set_state(saved)

    def answers(self) -> dict:
        """``torch.cuda``'s seeding and RNG-state functions, for these generators."""
        each, index = self.each, self.index

        def manual_seed(seed: int) -> None:
            each[index(None)].manual_seed(int(seed))

        def manual_seed_all(seed: int) -> None:
            for generator in each:
                generator.manual_seed(int(seed))

        def seed() -> None:
            each[index(None)].seed()

        def seed_all() -> None:
            value = each[index(None)].seed() if each else None
            for generator in each:
                generator.manual_seed(value)

        def get_rng_state(device: Any = "cuda") -> Any:
            return each[index(device)].get_state()

        def set_rng_state(new_state: Any, device: Any = "cuda") -> None:
            each[index(device)].set_state(new_state.clone())

        def set_rng_state_all(new_states: Any) -> None:
            for number, state in enumerate(new_states):
                set_rng_state(state, number)

        return {
            "manual_seed": manual_seed, "manual_seed_all": manual_seed_all, "seed": seed, "seed_all": seed_all,
            "initial_seed": lambda: each[index(None)].initial_seed(),
            "get_rng_state": get_rng_state, "set_rng_state": set_rng_state,
            "get_rng_state_all": lambda: [generator.get_state() for generator in each],
            "set_rng_state_all": set_rng_state_all,
            "default_generators": each,
        }
