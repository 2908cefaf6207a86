import os
import stat

import pytest

from fixdev.files.writer import WriteError, write_atomic


def test_write_keeps_mode_and_leaves_no_temp(tmp_path):
    path = tmp_path / "a.py"
    path.write_bytes(b"old")
    os.chmod(path, 0o750)
    write_atomic(path, b"new", expected=b"old")
    assert path.read_bytes() == b"new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o750
    assert os.listdir(tmp_path) == ["a.py"]


def test_read_only_file_is_not_written(tmp_path):
    path = tmp_path / "a.py"
    path.write_bytes(b"old")
    os.chmod(path, 0o444)
    with pytest.raises(WriteError, match="read-only"):
        write_atomic(path, b"new", expected=b"old")
    assert path.read_bytes() == b"old"


def test_file_changed_since_read_is_not_overwritten(tmp_path):
    path = tmp_path / "a.py"
    path.write_bytes(b"edited meanwhile")
    with pytest.raises(WriteError, match="changed on disk"):
        write_atomic(path, b"new", expected=b"old")
    assert path.read_bytes() == b"edited meanwhile"
    assert os.listdir(tmp_path) == ["a.py"]
