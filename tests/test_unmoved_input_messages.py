"""FDV107's messages say only what the code shows about where a tensor is."""

from __future__ import annotations

from fixdev.codemods.unmoved_input import UnmovedInput
from fixdev.engine.core import Engine

from tests.conftest import FIXTURES


def _messages(name: str) -> list[str]:
    code = (FIXTURES / "unmoved-input" / f"{name}.before.py").read_text()
    return [f.message for f in Engine([UnmovedInput], unsafe_fixes=True).lint(code)]


def test_torch_tensor_of_unseen_data_is_not_said_to_be_on_the_cpu():
    # torch.tensor(obs) without device= makes it on the default device, or
    # where obs is if that is a tensor: "on the CPU" is not shown
    for name, made in (("tensor_from_env", "torch.tensor"), ("tensor_from_reader", "torch.as_tensor")):
        messages = _messages(name)
        assert messages and all(m.startswith(f"Tensor made by `{made}(...)` without `device=`") for m in messages), messages
        assert not any("on the CPU" in m for m in messages)


UNSEEN_ITERATOR = """import torch
from data import batches


def evaluate(model, device):
    model.to(device)
    for x, y in batches(3):
        out = model(x.view(x.size(0), -1))
        loss = (out - y.unsqueeze(1)).pow(2).mean()
"""


def test_a_tensor_from_an_unseen_iterator_is_not_said_to_be_on_the_cpu():
    messages = [f.message for f in Engine([UnmovedInput], unsafe_fixes=True).lint(UNSEEN_ITERATOR)]
    assert messages and not any("on the CPU" in m for m in messages), messages


def test_what_the_files_own_generator_yields_is_said_where_it_is_made():
    # `yield torch.randn(2, 4), torch.randn(2)`: on the CPU, as the code shows
    messages = _messages("iterator_batches")
    assert messages and all(m == UnmovedInput.message for m in messages), messages


def test_a_loaders_batch_keeps_the_rules_message():
    assert _messages("loader_loop") and all(m == UnmovedInput.message for m in _messages("loader_loop"))
