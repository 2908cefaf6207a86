from pathlib import Path

import pytest

from fixdev.files.config import ConfigError, load_file, nearest


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "pyproject.toml"
    path.write_text(body)
    nearest.cache_clear()
    return path


def test_full_table_is_read(tmp_path):
    path = write(
        tmp_path,
        '[tool.fixdev]\nselect = ["FDV1"]\nignore = ["cuda-call"]\nextend-select = ["ALL"]\nexclude = ["legacy/**"]\n'
        'per-file-ignores = { "tests/**" = ["FDV101"] }\n[tool.fixdev.rules.constant-buffer]\npersistent = true\n',
    )
    settings = load_file(path)
    assert settings.select == ("FDV1",) and settings.ignore == ("cuda-call",)
    assert settings.options() == {"constant-buffer": {"persistent": True}}
    assert settings.ignored_for(tmp_path / "tests" / "a.py") == {"FDV101"}
    assert settings.ignored_for(tmp_path / "src" / "a.py") == set()


@pytest.mark.parametrize(
    "body, message",
    [
        ("[tool.fixdev]\nselct = []\n", "unknown key 'selct'"),
        ('[tool.fixdev]\nselect = ["FDV999"]\n', "FDV999"),
        ("[tool.fixdev]\nselect = 3\n", "select must be a list"),
        ("[tool.fixdev.rules.constant-buffer]\npersistent = 'yes'\n", "persistent must be bool"),
        ("[tool.fixdev.rules.constant-buffer]\npersitent = true\n", "unknown option 'persitent'"),
        ("[tool.fixdev.rules.no-such-rule]\nx = 1\n", "unknown rule"),
        ("[tool.fixdev\n", "invalid TOML"),
    ],
)
def test_bad_configuration_names_file_and_key(tmp_path, body, message):
    path = write(tmp_path, body)
    with pytest.raises(ConfigError, match=message) as info:
        load_file(path)
    assert str(path) in str(info.value)


def test_nearest_walks_up_and_skips_pyprojects_without_a_table(tmp_path):
    write(tmp_path, '[tool.fixdev]\nignore = ["FDV104"]\n')
    inner = tmp_path / "pkg"
    inner.mkdir()
    (inner / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    nearest.cache_clear()
    assert nearest(inner).ignore == ("FDV104",)
    assert nearest(inner).root == tmp_path


# Issue 10 item 17
def test_unknown_key_suggests_a_close_one(tmp_path, fixdev):
    write(tmp_path, '[tool.fixdev]\nselct = ["ALL"]\n')
    (tmp_path / "m.py").write_text("x = 1\n")
    result = fixdev("m.py", cwd=tmp_path)
    assert result.returncode == 2 and "unknown key 'selct' in [tool.fixdev]; did you mean 'select'?" in result.stderr.decode()


def test_unknown_rule_in_configuration_suggests_a_close_one(tmp_path, fixdev):
    write(tmp_path, '[tool.fixdev]\nignore = ["cuda-cal"]\n')
    (tmp_path / "m.py").write_text("x = 1\n")
    result = fixdev("m.py", cwd=tmp_path)
    assert result.returncode == 2 and "did you mean 'cuda-call'?" in result.stderr.decode()


@pytest.mark.parametrize("body, key", [('ignore = "FDV105"', "ignore"), ('select = "ALL"', "select"), ('exclude = "legacy/"', "exclude"),
                                       ('per-file-ignores = { "tests/**" = "cuda-call" }', "per-file-ignores.tests/**")])
def test_a_string_where_a_list_belongs_is_a_type_error(tmp_path, fixdev, body, key):
    path = write(tmp_path, f"[tool.fixdev]\n{body}\n")
    (tmp_path / "m.py").write_text("x = 1\n")
    result = fixdev("m.py", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.decode().splitlines() == [f"{path}: error: [tool.fixdev] {key} must be a list of strings, not a string"]


def test_a_configuration_that_leaves_no_rule_is_an_error(tmp_path, fixdev):
    path = write(tmp_path, '[tool.fixdev]\nselect = ["FDV104"]\nignore = ["cuda-call"]\n')
    (tmp_path / "m.py").write_text("x = 1\n")
    result = fixdev("m.py", cwd=tmp_path)
    assert result.returncode == 2 and f"{path}: error:" in result.stderr.decode() and "no rule" in result.stderr.decode()
