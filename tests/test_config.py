from pathlib import Path

import pytest

from kbench.config import RunConfig, resolve
from kbench.errors import ConfigError


def test_precedence_file_env_flags(tmp_path: Path) -> None:
    cfg_file = tmp_path / "kbench.toml"
    cfg_file.write_text('[kbench]\nbackend = "triton"\nsamples = 3\npreset = "small"\n')
    env = {"KBENCH_SAMPLES": "5", "KBENCH_BASELINES": "eager,compile-max-autotune", "OTHER": "x"}
    cfg = resolve(cfg_file, {"preset": "full", "dtype": None}, environ=env)
    assert cfg.backend == "triton"  # from the file
    assert cfg.samples == 5  # env beats file
    assert cfg.preset == "full"  # flag beats file
    assert cfg.dtype == "fp32"  # a None flag is ignored
    assert cfg.baselines == ["eager", "compile-max-autotune"]


def test_json_file_and_defaults(tmp_path: Path) -> None:
    cfg_file = tmp_path / "c.json"
    cfg_file.write_text('{"turns": 2}')
    cfg = resolve(cfg_file, environ={})
    assert cfg.turns == 2 and cfg.backend == RunConfig().backend


@pytest.mark.parametrize(
    ("text", "suffix", "fragment"),
    [("samples = [", ".toml", "not valid TOML"), ('{"backend": "fortran"}', ".json", "backend")],
)
def test_bad_config_is_a_clear_error(tmp_path: Path, text: str, suffix: str, fragment: str) -> None:
    cfg_file = tmp_path / f"c{suffix}"
    cfg_file.write_text(text)
    with pytest.raises(ConfigError, match=fragment):
        resolve(cfg_file, environ={})


def test_unknown_key_rejected(tmp_path: Path) -> None:
    cfg_file = tmp_path / "c.json"
    cfg_file.write_text('{"sampels": 2}')
    with pytest.raises(ConfigError, match="sampels"):
        resolve(cfg_file, environ={})


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        resolve(tmp_path / "nope.toml", environ={})
