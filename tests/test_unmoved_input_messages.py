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


def test_a_tensor_from_an_unseen_iterator_is_not_said_to_be_on_the_cpu():
    messages = _messages("iterator_batches")
    assert messages and not any("on the CPU" in m for m in messages), messages


def test_a_loaders_batch_keeps_the_rules_message():
    assert _messages("loader_loop") and all(m == UnmovedInput.message for m in _messages("loader_loop"))
