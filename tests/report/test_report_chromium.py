"""The HTML report in a real headless Chromium: it loads without console errors or network access, the
tables hold the expected rows, and a screenshot is produced. Skipped (with the fix) without chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from report_fakes import MODELS, PROBLEMS

from kbench.report import load_series, sections, write_html
from kbench.store import Store

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium on PATH (install it with: apt-get install -y chromium)"
)


def chromium(page: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    cmd = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp / 'profile'}",
        "--enable-logging=stderr", "--v=0",
        "--host-resolver-rules=MAP * ~NOTFOUND",  # any network fetch fails and shows up as a console error
        *args, page.as_uri(),
    ]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def console_messages(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if re.search(r":CONSOLE[:(]", line)]


def test_console_check_catches_a_broken_page(tmp_path: Path) -> None:
    """The detector itself: a page with a script error and a remote fetch must be caught."""
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<html><body><img src="https://example.invalid/x.png"><script>nope();</script></body></html>'
    )
    found = console_messages(chromium(bad, tmp_path, "--dump-dom").stderr)
    assert any("nope" in line for line in found)


def test_report_renders_in_chromium(example: tuple[Store, list[str]], tmp_path: Path) -> None:
    store, runs = example
    page = write_html(store, runs, tmp_path / "report.html")
    dom = chromium(page, tmp_path, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert console_messages(dom.stderr) == []
    assert dom.stdout.count('class="problems-row"') == len(PROBLEMS)
    rows = sum(len(r) for _, r in sections(load_series(store, runs)))
    assert dom.stdout.count('class="headline-row"') == rows and "GPU NVIDIA H200, full, fp32" in dom.stdout
    assert dom.stdout.count("<polyline") == 2 * len(MODELS)  # vs eager and vs compile per series

    shot = tmp_path / "report.png"
    result = chromium(page, tmp_path, f"--screenshot={shot}", "--window-size=1400,2400")
    assert result.returncode == 0 and console_messages(result.stderr) == []
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
