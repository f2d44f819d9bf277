"""How a runner describes each output of a timed call (worker/runner.py): its kind, and which input it
aliases, told from the input slot's memory measured once when the slot was mapped."""

from __future__ import annotations

import torch

from kbench.sandbox.slots import Layout, allocate, attach
from kbench.worker.runner import _describe, _meta, _Spans


def _slot(shapes: list[list[int]]) -> list[torch.Tensor]:
    """The tensors of an input slot as a runner maps them: views of one shared memory file."""
    slot = allocate(1, Layout.of([("float32", s) for s in shapes]), "cpu")
    mapped = attach(slot.ref(), slot.fds(), "cpu")
    return mapped.tensors


def _aliases(value: object, tensors: list[torch.Tensor], literals: list[object]) -> int:
    return _meta(_describe(value, _Spans(tensors), literals)).aliases


def test_a_view_of_an_input_aliases_it_and_a_fresh_tensor_does_not() -> None:
    x, w = _slot([[16, 64], [64, 64]])
    assert _aliases(x[2:], [x, w], [None, None]) == 0
    assert _aliases(x.t(), [x, w], [None, None]) == 0
    assert _aliases(w[3], [x, w], [None, None]) == 1
    assert _aliases(x.clone(), [x, w], [None, None]) == -1
    assert _aliases(torch.empty(0), [x, w], [None, None]) == -1


def test_the_index_counts_the_calls_non_tensor_inputs() -> None:
    x, w = _slot([[8, 8], [8, 8]])
    # inputs: (3, x, 0.5, w): the slot's second tensor is the call's fourth input
    assert _aliases(w.view(-1), [x, w], [3, None, 0.5, None]) == 3
    assert _aliases(x, [x, w], [3, None, 0.5, None]) == 1


def test_memory_written_behind_a_tensor_into_the_slot_still_aliases() -> None:
    x, w = _slot([[4, 4], [4, 4]])
    whole = torch.empty(0).set_(x.untyped_storage())  # the slot's whole file, through another tensor
    assert _aliases(whole, [x, w], [None, None]) in (0, 1)


def test_outputs_that_are_not_tensors_are_described_by_type() -> None:
    (x,) = _slot([[4]])
    meta = _meta(_describe(3.0, _Spans([x]), [None]))
    assert (meta.type, meta.dtype, meta.shape, meta.aliases) == ("float", "", [], -1)
    meta = _meta(_describe(x * 2, _Spans([x]), [None]))
    assert (meta.type, meta.dtype, meta.shape, meta.device, meta.aliases) == (
        "Tensor", "float32", [4], "cpu", -1,
    )  # fmt: skip
