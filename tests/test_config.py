from pathlib import Path

import pytest

from kbench.config import SAMPLING_TEMPERATURE, RunConfig, resolve
from kbench.errors import ConfigError
from kbench.resume import differences, restore


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
    as_json = resolve(None, environ={"KBENCH_BASELINES": '["eager"]', "KBENCH_PROBLEMS": " 2/1 , 2/3 "})
    assert as_json.baselines == ["eager"] and as_json.problems == ["2/1", "2/3"]  # JSON, or a,b with spaces
    with pytest.raises(ConfigError, match="KBENCH_BASELINES: not a JSON list"):
        resolve(None, environ={"KBENCH_BASELINES": '["eager"'})


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


def test_scratch_root_choices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kbench.config as config

    cache = tmp_path / "cache"
    assert config.scratch_root(RunConfig(cache_dir=cache, scratch_dir="cache")) == cache
    assert config.scratch_root(RunConfig(cache_dir=cache, scratch_dir=str(tmp_path / "s"))) == tmp_path / "s"
    assert (tmp_path / "s").is_dir()
    shm = tmp_path / "shm"
    shm.mkdir()
    monkeypatch.setattr(config, "SHM", shm)
    monkeypatch.setattr(config, "SCRATCH_MIN_FREE", 1 << 62)  # no file system has that much free
    assert config.scratch_root(RunConfig(cache_dir=cache)) == cache
    monkeypatch.setattr(config, "SCRATCH_MIN_FREE", 1)
    root = config.scratch_root(RunConfig(cache_dir=cache))
    assert root.parent == shm and root.is_dir()
    monkeypatch.setattr(config, "SHM", tmp_path / "absent")
    assert config.scratch_root(RunConfig(cache_dir=cache)) == cache
    monkeypatch.setenv("KBENCH_SCRATCH_DIR", "cache")
    assert resolve().scratch_dir == "cache"


def test_scratch_sweep_removes_dead_processes_job_folders(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys
    import time

    import kbench.config as config

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    gone = tmp_path / f"kbench-job-{dead.stdout.strip()}-abc"
    mine = tmp_path / f"{config.job_prefix()}def"
    other = tmp_path / "unrelated"
    recent = tmp_path / f"kbench-job-{dead.stdout.strip()}-ghi"  # another PID namespace's live job
    for folder in (gone, mine, other, recent):
        folder.mkdir()
        (folder / "out_0.bin").write_bytes(b"x")
    old = time.time() - config.STALE_JOB_S - 60
    for folder in (gone, mine, other):
        os.utime(folder, (old, old))
    config.scratch_root(RunConfig(cache_dir=tmp_path / "cache", scratch_dir=str(tmp_path)))
    assert not gone.exists() and mine.exists() and other.exists() and recent.exists()


def test_sampling_temperature_defaults_to_differing_samples() -> None:
    assert RunConfig().sampling_temperature == 0.0
    assert RunConfig(samples=4).sampling_temperature == SAMPLING_TEMPERATURE == 0.7
    assert RunConfig(samples=4, temperature=0.0).sampling_temperature == 0.0  # given explicitly: kept
    for bad in ({"samples": 0}, {"turns": 0}, {"top_p": 1.5}, {"temperature": -1}, {"noise_floor": -0.1}):
        with pytest.raises(ConfigError, match=f"'{next(iter(bad))}'"):
            resolve(flags=bad, environ={})


def test_resume_restores_and_lists_every_difference() -> None:
    stored = RunConfig(model="openai/m", backend="cpp", preset="small", samples=2, temperature=0.7)
    data = stored.model_dump(mode="json") | {"a_setting_of_an_older_kbench": 1}
    assert restore("r1", data, RunConfig()) == stored  # nothing given: the stored run, whole
    given = resolve(flags={"concurrency": 2, "base_url": "http://other:8000/v1", "samples": 2}, environ={})
    back = restore("r1", data, given)  # where the server is and how many requests at once may change
    assert (back.concurrency, back.base_url, back.backend, back.samples) == (
        2,
        "http://other:8000/v1",
        "cpp",
        2,
    )
    with pytest.raises(ConfigError) as err:
        restore("r1", data, resolve(flags={"backend": "cuda", "samples": 3, "temperature": 0.7}, environ={}))
    message = str(err.value)
    assert "backend 'cuda' (stored 'cpp'); samples 3 (stored 2)" in message and "temperature" not in message
    assert set(differences(stored, resolve(flags={"model": "openai/x"}, environ={}))) == {
        "model 'openai/x' (stored 'openai/m')"
    }


def test_an_unknown_kbench_variable_is_an_error_naming_close_matches() -> None:
    with pytest.raises(
        ConfigError, match="KBENCH_SAMPLSE is not a kbench setting: did you mean KBENCH_SAMPLES"
    ):
        resolve(environ={"KBENCH_SAMPLSE": "3"})
    with pytest.raises(ConfigError, match="KBENCH_ZZZ is not a kbench setting"):
        resolve(environ={"KBENCH_ZZZ": "1"})
    internal = {
        "KBENCH_OWNER": "1:2",
        "KBENCH_KEY_FIFO": "/x",
        "KBENCH_TEST_TAG": "m",
        "KBENCH_BUILD_PCH": "off",
    }
    assert resolve(environ=internal) == RunConfig()


def test_settings_read_by_other_modules_are_fields_and_set_by_the_environment() -> None:
    env = {"KBENCH_COMPILE_ARCH": "sm_80", "KBENCH_LEASE_DIR": "/tmp/leases", "KBENCH_HF_DATASET": "me/kb"}
    cfg = resolve(environ=env)
    assert (cfg.compile_arch, str(cfg.lease_dir), cfg.hf_dataset) == ("sm_80", "/tmp/leases", "me/kb")
    assert "compile_arch" in cfg.model_dump() and "lease_dir" in cfg.model_dump()  # stored with the run


def test_reference_fields_come_from_the_model() -> None:
    from kbench.evaluate.reference_pool import REFERENCE_FIELDS

    assert "timing_batch_ms" in REFERENCE_FIELDS and "preset" in REFERENCE_FIELDS
    assert "timeout_s" not in REFERENCE_FIELDS and "model" not in REFERENCE_FIELDS


def test_an_optional_package_missing_or_not_importing_is_told_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`require`: a package that is absent names the extra to install; one that is installed but whose
    import fails (made for another torch, say) says so, with the import's own error."""
    from kbench.errors import MissingExtraError, require

    with pytest.raises(
        MissingExtraError, match=r"needs the optional package 'kb_absent_pkg'; .*'kbench\[x\]'"
    ):
        require("kb_absent_pkg", "x")
    (tmp_path / "kb_broken_pkg").mkdir()
    (tmp_path / "kb_broken_pkg" / "__init__.py").write_text("import kb_absent_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(
        MissingExtraError,
        match=r"'kb_broken_pkg' is installed but does not import here "
        r"\(ModuleNotFoundError: No module named 'kb_absent_dependency'\)",
    ):
        require("kb_broken_pkg", "x")
