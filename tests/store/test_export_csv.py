"""The CSV export: level, tags, protocol, noise floor, both speedup statistics and each protocol's class
at p = 1 per verdict, computed by hand; messages in whole lines and without host paths."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from typer.testing import CliRunner

from kbench.cli import app
from kbench.store import Store, VerdictKey
from kbench.types import BuildResult, Problem, Status, TimingStats, Verdict

FIXTURES = Path(__file__).parents[1] / "fixtures" / "feedback"
HOST_PATH = re.compile(r"(?<![\w.])(?:/|~/)[\w.+-]+/")


def _t(median: float, mean: float, rse: float) -> TimingStats:
    return TimingStats(median, mean, 0.0, 0.0, median, 100, rse, device="cpu")


def test_csv_rows_carry_level_tags_classes_and_clean_messages(tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    store.put_problems([Problem("kbench", 2, 1, "Gemm_ReLU", "", tags=("gemm-epilogue", "activation"))])
    run = store.start_run({"model": "m", "noise_floor": 0.02, "protocol": "kbench"}, {"cpu": "x"}, "r")
    # median speedup 1.0 / 0.99 = 1.0101: under kbench's rule with a 2 % floor, 1.0101 / 1.02 = 0.9903 <= 1 <
    # 1.0101 * 1.02, uncertain; the mean speedup 1.2 / 1.0 = 1.2 is fast under upstream's
    ok = Verdict(Status.OK, "kbench:2/1", "cpp", "small", "fp32", "cpu", timing=_t(0.99, 1.0, 0.0),
                 baselines=(("eager", _t(1.0, 1.2, 0.0)),))  # fmt: skip
    message = (FIXTURES / "cpp_build_message.txt").read_text()
    log = (FIXTURES / "cpp_build_log.txt").read_text()
    broken = Verdict(Status.BUILD_ERROR, "kbench:2/1", "cpp", "small", "fp32", "cpu", message=message,
                     build=BuildResult(False, "cpp", log=log))  # fmt: skip
    assert message.startswith("td=c++20") and HOST_PATH.search(message)  # cut mid-token, with host paths
    store.record(run, VerdictKey("kbench:2/1", 0, 0, "cpp", "m"), ok, "")
    store.record(run, VerdictKey("kbench:2/1", 1, 0, "cpp", "m"), broken, "")
    result = CliRunner().invoke(app, ["export", run, "--store", str(store.path), "--format", "csv"])
    assert result.exit_code == 0, result.output
    good, bad = csv.DictReader(io.StringIO(result.output))
    assert (good["level"], good["tags"], good["protocol"], good["noise_floor"]) == (
        "2", "gemm-epilogue activation", "kbench", "0.02"
    )  # fmt: skip
    assert float(good["speedup_eager"]) == 1.0 / 0.99 and float(good["speedup_eager_mean"]) == 1.2
    assert (good["eager_ms"], good["eager_mean_ms"], good["mean_ms"]) == ("1.0", "1.2", "1.0")
    assert good["class_1_eager_kbench"] == "uncertain" and good["class_1_eager_kernelbench"] == "fast"
    assert good["class_1_compile_kbench"] == good["class_1_compile_kernelbench"] == "untimed"
    assert bad["class_1_eager_kbench"] == "incorrect" and bad["speedup_eager"] == ""
    assert HOST_PATH.search(bad["message"]) is None
    assert bad["message"].startswith("main.cpp:12:22: error: ‘bb’ was not declared in this scope")
