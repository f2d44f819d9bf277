"""Sampled outputs of timed calls: whole copies up to a size, random elements above it, checked by the host."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from kbench.evaluate.judge import WorkerOutcome, check_samples
from kbench.sandbox.protocol import SAMPLE_ELEMENTS, ForgedResult, WorkerResult, read_result, write_result
from kbench.sandbox.tensorfiles import Subsample, save_tensors
from kbench.types import Status
from kbench.worker.sampling import sample_outputs

KEY = b"k" * 32


def _signed(jobdir: Path, outs: list[object]) -> WorkerResult:
    result = WorkerResult(samples=[(3, 0, save_tensors(jobdir, "sample_3", outs))])
    write_result(jobdir, result, KEY)
    got = read_result(jobdir, KEY)
    assert got is not None
    return got


def test_small_outputs_come_back_whole_and_large_ones_at_random_elements() -> None:
    small, large = torch.arange(10.0), torch.randn(3000, 500)
    kept = sample_outputs([small, large, 7], whole_bytes=1024)
    assert torch.equal(kept[0], small) and kept[0].data_ptr() != small.data_ptr()
    sub = kept[1]
    assert isinstance(sub, Subsample) and sub.shape == (3000, 500)
    assert sub.index.shape == (SAMPLE_ELEMENTS,) and sub.index.dtype == torch.int64
    assert bool((sub.index[1:] >= sub.index[:-1]).all())  # sorted
    assert torch.equal(sub.values, large.reshape(-1)[sub.index])
    assert kept[2] == 7
    again = sample_outputs([large], whole_bytes=1024)[0]
    assert not torch.equal(again.index, sub.index)  # positions are drawn anew for every call


def test_subsample_round_trip_and_host_check(tmp_path: Path) -> None:
    ref = torch.randn(2000, 600)
    result = _signed(tmp_path, sample_outputs([ref.clone()], whole_bytes=0))
    (f,) = result.samples[0][2]
    assert f.index is not None and f.whole_shape == [2000, 600] and f.shape == [SAMPLE_ELEMENTS]
    data = SimpleNamespace(outputs={7: [ref]})
    ok = check_samples(WorkerOutcome(Status.OK, result=result), tmp_path, data, [7], 1e-4)
    assert ok.status is Status.OK


def test_an_output_wrong_in_a_small_region_is_caught(tmp_path: Path) -> None:
    ref = torch.randn(4 << 20)
    out = ref.clone()
    out[1_000_000:1_010_000] += 1.0  # 0.24 % of the elements: a million draws hit it ~2,400 times
    result = _signed(tmp_path, sample_outputs([out], whole_bytes=0))
    data = SimpleNamespace(outputs={7: [ref]})
    got = check_samples(WorkerOutcome(Status.OK, result=result), tmp_path, data, [7], 1e-4)
    assert (got.status, got.rule) == (Status.CHEAT, "timing-output-mismatch")


@pytest.mark.parametrize("flaw", ["shape", "dtype", "index-range", "few-elements"])
def test_a_subsample_that_does_not_describe_the_reference_fails(tmp_path: Path, flaw: str) -> None:
    ref = torch.randn(1000, 100)
    sub = sample_outputs([ref.clone()], whole_bytes=0)[0]
    if flaw == "shape":
        sub.shape = (100, 1000)
    elif flaw == "dtype":
        sub.values = sub.values.double()
    elif flaw == "index-range":
        sub.index[-1] = ref.numel()
        sub.values[-1] = 0.0
    else:
        sub.index, sub.values = sub.index[:10], sub.values[:10]
    result = _signed(tmp_path, [sub])
    data = SimpleNamespace(outputs={7: [ref]})
    got = check_samples(WorkerOutcome(Status.OK, result=result), tmp_path, data, [7], 1e-4)
    assert got.rule == "timing-output-mismatch"


def test_an_altered_index_file_is_a_forged_result(tmp_path: Path) -> None:
    _signed(tmp_path, sample_outputs([torch.randn(512, 512)], whole_bytes=0))
    path = tmp_path / "sample_3_0.index.bin"
    raw = bytearray(path.read_bytes())
    raw[0] ^= 1
    path.write_bytes(bytes(raw))
    with pytest.raises(ForgedResult, match="index"):
        read_result(tmp_path, KEY)


@pytest.mark.gpu
def test_a_large_gpu_output_streams_to_its_file_with_the_same_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kbench.sandbox import tensorfiles
    from kbench.sandbox.tensorfiles import digest, load_tensors

    x = torch.randn(50_000_123, device="cuda")  # ~191 MiB: three full chunks and a ragged one
    (f,) = save_tensors(tmp_path, "out", [x])
    host = x.cpu()
    assert f.sha256 == digest(host.view(torch.uint8).numpy()) and f.device.startswith("cuda")
    assert torch.equal(load_tensors(tmp_path, [f])[0], host)
    t = x[::2]  # not contiguous: made contiguous on the device first
    (g,) = save_tensors(tmp_path, "strided", [t])
    assert torch.equal(load_tensors(tmp_path, [g])[0], t.cpu())

    def refused(*_: object) -> str:
        raise RuntimeError("no pinned memory")

    monkeypatch.setattr(tensorfiles, "_stream_to_file", refused)
    (h,) = save_tensors(tmp_path, "pageable", [x])  # the pageable copy takes over
    assert h.sha256 == f.sha256 and torch.equal(load_tensors(tmp_path, [h])[0], host)


@pytest.mark.gpu
def test_gpu_samples_are_checked_where_the_reference_lies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reference delivered to the device: whole samples and subsamples are compared there, not on the
    host's CPU (whose parallel loops stall on cores other processes hold); wrong ones are still caught."""
    from kbench.evaluate import judge

    seen: list[str] = []
    real = judge.compare

    def spy(out: torch.Tensor, ref: torch.Tensor, *args: object, **kw: object) -> object:
        seen.append(out.device.type)
        return real(out, ref, *args, **kw)

    monkeypatch.setattr(judge, "compare", spy)
    small, large = torch.randn(1000, device="cuda"), torch.randn(2000, 600, device="cuda")
    result = _signed(tmp_path, sample_outputs([small.cpu(), large.cpu()], whole_bytes=8192))
    data = SimpleNamespace(outputs={7: [small, large]})
    assert (
        check_samples(WorkerOutcome(Status.OK, result=result), tmp_path, data, [7], 1e-4).status is Status.OK
    )
    assert seen == ["cuda", "cuda"]
    wrong = large.cpu()
    wrong += 1.0
    result = _signed(tmp_path, sample_outputs([small.cpu(), wrong], whole_bytes=8192))
    got = check_samples(WorkerOutcome(Status.OK, result=result), tmp_path, data, [7], 1e-4)
    assert got.rule == "timing-output-mismatch"


def test_the_chunked_writer_gives_the_bytes_and_digest_of_a_whole_write(tmp_path: Path) -> None:
    """The path a GPU output above 64 MiB takes (there through pinned buffers), on a CPU tensor."""
    from kbench.sandbox.tensorfiles import DIGEST_CHUNK_BYTES, _stream_to_file, digest

    for n in (DIGEST_CHUNK_BYTES, 2 * DIGEST_CHUNK_BYTES + 12345):  # one whole chunk; two and a ragged one
        x = torch.randint(0, 256, (n,), dtype=torch.uint8)
        path = tmp_path / f"x{n}.bin"
        assert _stream_to_file(x, path) == digest(x.numpy())
        assert path.read_bytes() == x.numpy().tobytes()


def test_a_file_digest_closes_its_map_while_a_hashing_thread_still_holds_its_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pool thread may drop its chunk a moment after its result arrived: the map closes regardless."""
    from kbench.sandbox import tensorfiles

    held: list[object] = []
    real = tensorfiles._hash

    def lingering(data: object, threads: int = 1) -> bytes:
        held.append(data)  # a reference that outlives the hash, as a pool thread's work item can
        return real(data, threads)

    path = tmp_path / "t.bin"
    path.write_bytes(bytes(range(256)) * 64)
    expected = tensorfiles.digest(path.read_bytes())
    monkeypatch.setattr(tensorfiles, "_hash", lingering)
    assert tensorfiles.digest_file(path) == expected  # no BufferError from closing the map
    assert held
