"""The CPU kernel share's attribution: the code symbols the referee reads from a module file itself match
what `nm` lists, and a sample is counted for the candidate only in its own functions."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbench.referee import perfshare

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="ELF modules and perf events: Linux only")


def _nm(path: Path) -> set[tuple[int, int, str]]:
    out = subprocess.run(
        ["nm", "--defined-only", "--print-size", "--no-demangle", str(path)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    rows = (line.split() for line in out.splitlines())
    return {(int(r[0], 16), int(r[1], 16), r[3]) for r in rows if len(r) == 4 and r[2] in "TtWw"}


GLUE_NAME = "_ZN8pybind116detail4glueEv"  # a name pybind11's bindings would give a function
SOURCE = f"""
int {GLUE_NAME}(int x) {{ return x + 1; }}
float kernel(const float* x, int n) {{ float s = 0; for (int i = 0; i < n; ++i) s += x[i]; return s; }}
"""


@pytest.fixture(scope="module")
def module(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small shared object with one function of the candidate's and one of the bindings'."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    folder = tmp_path_factory.mktemp("module")
    (folder / "m.c").write_text(SOURCE)
    subprocess.run(
        [cc, "-shared", "-fPIC", "-O1", "-o", str(folder / "m.so"), str(folder / "m.c")], check=True
    )
    return folder / "m.so"


def _modules(module: Path) -> list[Path]:
    import torch

    lib = Path(torch.__file__).parent / "lib"
    return [module, Path(torch._C.__file__), *sorted(lib.glob("libc10.so*"))[:1]]


@pytest.mark.parametrize("index", [0, 1, 2])
def test_symbols_read_from_the_file_are_the_ones_nm_lists(index: int, module: Path) -> None:
    if shutil.which("nm") is None:
        pytest.skip("nm is not installed")
    path = _modules(module)[index]
    perfshare.symbols.cache_clear()
    ours = perfshare.symbols(str(path))
    assert ours, path
    assert list(ours) == sorted(ours)
    assert set(ours) == _nm(path)


def test_a_file_that_is_no_elf_module_has_no_symbols(tmp_path: Path, module: Path) -> None:
    text = tmp_path / "module.so"
    text.write_bytes(b"not an ELF file at all")
    truncated = tmp_path / "truncated.so"
    truncated.write_bytes(module.read_bytes()[:200])
    assert perfshare.symbols(str(text)) == ()
    assert perfshare.symbols(str(truncated)) == ()
    assert perfshare.symbols(str(tmp_path / "missing.so")) == ()


def test_samples_in_glue_count_for_neither_side(module: Path) -> None:
    table = {name: (address, size) for address, size, name in perfshare.symbols(str(module))}
    assert GLUE_NAME in table and "kernel" in table
    start, lib = 0x7F0000000000, "/usr/lib/libtorch_cpu.so"
    maps = {7: [(start, start + (1 << 20), 0, str(module)), (start + (1 << 20), start + (2 << 20), 0, lib)]}
    at = {name: start + address + size // 2 for name, (address, size) in table.items()}
    samples = [(7, at[GLUE_NAME]), (7, at["kernel"]), (7, at["kernel"]), (7, start + (1 << 20) + 64)]
    share, counted = perfshare.share(samples, maps, lambda path: path == str(module))
    assert counted == 3 and share == pytest.approx(2 / 3)  # the glue sample counts for neither side
    assert perfshare.share([(8, at["kernel"])], maps, lambda path: True) == (None, 0)  # an unmapped pid


SPIN = """
import sys, threading, time
def spin(stop):
    while not stop.is_set():
        sum(i * i for i in range(1000))
stop = threading.Event()
sys.stdout.write("up\\n"); sys.stdout.flush()
sys.stdin.readline()  # then a second thread, as a pool started by a call would be
threading.Thread(target=spin, args=(stop,), daemon=True).start()
sys.stdout.write("two\\n"); sys.stdout.flush()
spin(stop)
"""


@pytest.fixture
def spinner() -> Iterator[subprocess.Popen[str]]:
    """A child spinning on one thread, up and running, that starts a second one when sent a line
    (`second_thread`)."""
    child = subprocess.Popen(
        [sys.executable, "-c", SPIN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        child.stdout.readline()
        yield child
    finally:
        child.kill()
        child.wait()


def second_thread(child: subprocess.Popen[str]) -> None:
    assert child.stdout is not None and child.stdin is not None
    child.stdin.write("\n")
    child.stdin.flush()
    child.stdout.readline()  # the second thread runs now


def watch_of(child: subprocess.Popen[str]) -> perfshare.Watch:
    try:
        return perfshare.Watch([child.pid], 100_000, lambda path: False, wanted=10, counted=0.5)
    except perfshare.Unavailable as exc:
        pytest.skip(f"perf events refused here: {exc}")


def test_a_watch_follows_new_threads_and_drains_its_rings_per_batch(spinner: subprocess.Popen[str]) -> None:
    import time

    watch = watch_of(spinner)
    first_tids = set(watch.sampler.tids)
    second_thread(spinner)
    with watch:
        time.sleep(0.2)
    once = len(watch.samples)
    assert watch.sampler.tids > first_tids  # the thread started since was followed
    assert once > 0 and watch.sampler.instructions() == []  # drained: nothing read twice
    with watch:
        time.sleep(0.2)
    assert len(watch.samples) > once
    assert {pid for pid, _ in watch.samples} == {spinner.pid}
    share, counted = watch.share()
    assert watch.enough() == (counted >= 10) and counted <= len(watch.samples)
    assert watch.wanted_s == pytest.approx(10 * 100_000 / 1e9 / 0.5 * 1.5)
    watch.close()


def test_a_thread_whose_event_is_refused_is_named_not_fatal(
    spinner: subprocess.Popen[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mid-loop, a new thread whose event the kernel refuses (the fd limit, say) is kept apart and counted
    for the verdict's warning; the threads already followed go on being sampled."""
    watch = watch_of(spinner)
    followed = set(watch.sampler.tids)

    def refuse(tid: int, period_ns: int) -> int:
        raise perfshare.Unavailable("perf_event_open: Too many open files")

    monkeypatch.setattr(perfshare, "_open", refuse)
    second_thread(spinner)  # which gets no event
    for _ in range(2):
        with watch:
            pass
    assert len(watch.unfollowed) == 1 and watch.sampler.tids == followed
    with pytest.raises(perfshare.Unavailable):  # without a set to keep them, a refusal raises
        watch.sampler.follow()
    watch.close()
