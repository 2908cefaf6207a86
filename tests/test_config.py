from pathlib import Path

import pytest

from fixdev.config import ConfigError, load_file, nearest


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
