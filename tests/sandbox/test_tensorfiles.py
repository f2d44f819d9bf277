"""Tensor files (sandbox/tensorfiles.py): a large GPU output streamed to its file, the chunked writer and its
digest, a file's digest while a hashing thread still holds its chunk."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kbench.sandbox.tensorfiles import save_tensors


@pytest.mark.gpu
def test_a_large_gpu_output_streams_to_its_file_with_the_same_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kbench.sandbox import tensorfiles
    from kbench.sandbox.tensorfiles import digest, load_tensors

    x = torch.randn(50_000_123, device="cuda")  # ~191 MiB: three full chunks and a ragged one
    (f,) = save_tensors(tmp_path, "out", [x])
    host = x.cpu()
    assert f.digest == digest(host.view(torch.uint8).numpy()) and f.device.startswith("cuda")
    assert torch.equal(load_tensors(tmp_path, [f])[0], host)
    t = x[::2]  # not contiguous: made contiguous on the device first
    (g,) = save_tensors(tmp_path, "strided", [t])
    assert torch.equal(load_tensors(tmp_path, [g])[0], t.cpu())

    def refused(*_: object) -> str:
        raise RuntimeError("no pinned memory")

    monkeypatch.setattr(tensorfiles, "_stream_to_file", refused)
    (h,) = save_tensors(tmp_path, "pageable", [x])  # the pageable copy takes over
    assert h.digest == f.digest and torch.equal(load_tensors(tmp_path, [h])[0], host)


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


def test_an_entry_kept_under_the_digests_old_name_still_reads() -> None:
    from kbench.sandbox.protocol import TensorFile

    old = TensorFile.model_validate_json('{"name": "out_1000_0.bin", "sha256": "abc", "dtype": "float32"}')
    assert old.digest == "abc" and "sha256" not in old.model_dump_json()
