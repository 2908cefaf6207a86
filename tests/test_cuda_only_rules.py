"""hard-coded-cuda (FDV109) and legacy-tensor-type (FDV110) through the CLI,
on files: each is selected and ignored by code and by name, and with
cuda-call (FDV104) they define one device, not two."""

from __future__ import annotations

import pytest

SOURCE = """\
import torch

device = torch.device("cuda")


def main():
    model = Net().cuda()
    blank = torch.cuda.FloatTensor(2, 3)
    return model, blank
"""

LINES = {"FDV104": 7, "FDV109": 3, "FDV110": 8}


def codes_reported(result) -> dict[str, int]:
    """Code → line of each finding in concise output."""
    found = {}
    for line in result.stdout.decode().splitlines():
        location, _, rest = line.partition(": ")
        if rest.startswith("FDV"):
            found[rest.split()[0]] = int(location.split(":")[1])
    return found


@pytest.fixture
def program(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(SOURCE)
    return path


@pytest.mark.parametrize(
    "options, expected",
    [
        (["--select", "FDV109"], {"FDV109"}),
        (["--select", "hard-coded-cuda"], {"FDV109"}),
        (["--select", "FDV110"], {"FDV110"}),
        (["--select", "legacy-tensor-type"], {"FDV110"}),
        (["--ignore", "FDV109"], {"FDV104", "FDV110"}),
        (["--ignore", "hard-coded-cuda,legacy-tensor-type"], {"FDV104"}),
        (["--select", "cuda-only", "--ignore", "legacy-tensor-type"], {"FDV104", "FDV109"}),
        (["--select", "FDV104", "--extend-select", "FDV110"], {"FDV104", "FDV110"}),
    ],
)
def test_select_and_ignore(program, fixdev, options, expected):
    result = fixdev("--check", "--no-cache", "--output-format", "concise", *options, str(program))
    assert result.returncode == 1, result.stderr.decode()
    reported = codes_reported(result)
    assert set(reported) == expected
    assert all(reported[code] == LINES[code] for code in expected)


def test_each_rule_alone_fixes_only_its_own_site(program, fixdev):
    result = fixdev("--apply", "--no-cache", "--select", "legacy-tensor-type", str(program))
    fixed = program.read_text()
    assert 'torch.empty(2, 3, dtype=torch.float32, device=device)' in fixed
    assert 'torch.device("cuda")' in fixed and "Net().cuda()" in fixed  # the other rules' sites, untouched
    assert result.returncode == 0

    program.write_text(SOURCE)
    fixdev("--apply", "--no-cache", "--select", "FDV109", str(program))
    fixed = program.read_text()
    assert 'torch.device("cuda" if torch.cuda.is_available() else "cpu")' in fixed
    assert "torch.cuda.FloatTensor(2, 3)" in fixed and "Net().cuda()" in fixed


def test_with_cuda_call_one_device_is_defined_and_a_second_run_changes_nothing(tmp_path, fixdev):
    path = tmp_path / "evaluate.py"
    path.write_text(
        "import torch\n\n\ndef evaluate(model, x):\n"
        "    model = model.cuda()\n    mask = torch.cuda.FloatTensor(x.size(0)).fill_(1)\n"
        '    return model(x.to("cuda")) * mask\n'
    )
    first = fixdev("--apply", "--no-cache", str(path))
    assert first.returncode == 0, first.stderr.decode()
    fixed = path.read_text()
    assert fixed.count("torch.device(") == 1
    assert "model.to(device)" in fixed and 'x.to(device)' in fixed and "device=device).fill_(1)" in fixed
    again = fixdev("--diff", "--no-cache", str(path))
    assert again.returncode == 0 and again.stdout == b""
