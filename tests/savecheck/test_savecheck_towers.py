"""The save check past the old run budget: the issue's four cases, predicted, then really saved.

Views of 32 MiB buffers with 16 Mi runs each (the even or odd bytes). The oracle for which bytes
a name reads is a numpy mask of the buffer marked through the same slices, never tensorviz's runs;
what comes back is read from the real file.
"""

from __future__ import annotations

import collections

import numpy as np
import pytest
import torch

import tensorviz as tv

pytestmark = pytest.mark.slow

N = 32 << 20


def _verdict(report, saver):
    return next(v for v in report.verdicts if v.saver == saver)


def _mask(n: int, *slices: slice) -> np.ndarray:
    m = np.zeros(n, dtype=bool)
    for s in slices:
        m[s] = True
    return m


def test_accelerate_save_of_even_and_odd_loses_the_odd_bytes(tmp_path):
    from accelerate.utils import save
    from safetensors.torch import load_file

    y = torch.randint(0, 256, (N + 4,), dtype=torch.uint8)
    sd = collections.OrderedDict(even=y[::2], odd=y[1::2])
    v = _verdict(tv.save_check(sd), "accelerate.save")
    save(sd, tmp_path / "a.safetensors", safe_serialization=True)
    back = load_file(tmp_path / "a.safetensors")
    given = _mask(N + 4, slice(None, None, 2), slice(1, None, 2))
    kept = _mask(N + 4, *[{"even": slice(None, None, 2), "odd": slice(1, None, 2)}[k] for k in back])
    assert all(torch.equal(back[k], sd[k]) for k in back)
    truth = int(given.sum() - kept.sum())
    assert truth == 16_777_218
    assert (v.outcome, v.lost_nbytes, v.kept) == ("drops data", truth, tuple(back))


def test_torch_save_of_the_even_bytes_counts_unique_and_unreferenced_exactly(tmp_path):
    y = torch.zeros(N + 4, dtype=torch.uint8)
    sd = {"even": y[::2]}
    v = _verdict(tv.save_check(sd), "torch.save")
    torch.save(sd, tmp_path / "a.pt")
    back = torch.load(tmp_path / "a.pt")
    written = back["even"].untyped_storage().nbytes()
    unique = int(_mask(N + 4, slice(None, None, 2)).sum())
    assert (written, unique) == (N + 4, 16_777_218)
    assert (v.outcome, v.unique_nbytes, v.unreferenced_nbytes) == (
        "writes unreferenced bytes",
        unique,
        written - unique,
    )


def test_torch_save_with_an_odd_length_writes_one_unreferenced_byte(tmp_path):
    y = torch.zeros(N + 3, dtype=torch.uint8)
    sd = {"even": y[::2], "odd": y[1:-2:2]}
    v = _verdict(tv.save_check(sd), "torch.save")
    torch.save(sd, tmp_path / "a.pt")
    back = torch.load(tmp_path / "a.pt")
    assert back["even"].untyped_storage().data_ptr() == back["odd"].untyped_storage().data_ptr()
    written = back["even"].untyped_storage().nbytes()
    unread = written - int(_mask(N + 3, slice(None, None, 2), slice(1, -2, 2)).sum())
    assert (written, unread) == (N + 3, 1)
    assert (v.outcome, v.unreferenced_nbytes, v.written_nbytes) == ("writes unreferenced bytes", unread, written)


def test_accelerate_save_of_an_expanded_view_duplicates_what_it_copies(tmp_path):
    from accelerate.utils import save
    from safetensors.torch import load_file

    e = torch.zeros(N + 4, dtype=torch.uint8)[::2]
    sd = collections.OrderedDict(wide=e.expand(2, -1))
    v = _verdict(tv.save_check(sd), "accelerate.save")
    path = tmp_path / "a.safetensors"
    save(sd, path, safe_serialization=True)
    back = load_file(path)["wide"]
    distinct = int(_mask(N + 4, slice(None, None, 2)).sum())
    assert back.is_contiguous() and back.nbytes - distinct == 16_777_218
    assert (v.outcome, v.duplicated_nbytes, v.file_nbytes) == (
        "duplicates bytes",
        back.nbytes - distinct,
        path.stat().st_size,
    )


def test_save_check_at_the_old_budget_stays_small_and_fast():
    import resource
    import time

    x = torch.zeros(N, dtype=torch.uint8)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    r = tv.save_check({"even": x[::2], "odd": x[1::2]})
    assert _verdict(r, "torch.save").outcome == "ok" and _verdict(r, "torch.save").unique_nbytes == N
    assert time.perf_counter() - t0 < 10  # was 20 s
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024 < 400 << 20  # was 4.1 GB


def test_a_figure_that_is_only_a_bound_derives_no_outcome(monkeypatch):
    from tensorviz.core import footprint as fp

    monkeypatch.setattr(fp, "RUN_BUDGET", 3)  # x[:, ::2] then has too many runs to list...
    monkeypatch.setattr(fp, "EXPLICIT_BUDGET", 1 << 40)  # ...and is never made a tower
    x = torch.zeros(6, 8)
    r = tv.save_check({"a": x[:, ::2], "b": torch.zeros(3)})
    v = _verdict(r, "torch.save")
    assert v.outcome == "could not evaluate" and v.problems == ("could not evaluate",)
    assert any("upper bounds" in n and "(a)" in n for n in v.notes)
    bound = "unique tensor bytes is an upper bound, not exact: some footprints could not be measured exactly (a)"
    assert bound in r.notes and f"note: {bound}" in r.to_text().splitlines()
    assert r.unique_nbytes == 6 * 8 * 4 - 4 + 12  # the span of a (its last column unread) and b
    monkeypatch.undo()  # within budget again: no note
    exact = tv.save_check({"a": x[:, ::2]})
    assert not any("upper bound" in n for n in exact.notes) and exact.unique_nbytes == 6 * 4 * 4


# -- two strided levels (rows of progressions) and interleaving levels, really saved -----------
ROWS, COLS = 4, 1 << 24  # a: the even elements of each row's first half, b: the odd ones; 2**24 runs each


def _rows_of_halves():
    x = torch.randint(0, 256, (ROWS, COLS), dtype=torch.uint8)
    sd = collections.OrderedDict(a=x[:, : COLS // 2 : 2], b=x[:, 1 : COLS // 2 : 2])
    mask = np.zeros((ROWS, COLS), dtype=bool)
    marks = {"a": (slice(None), slice(None, COLS // 2, 2)), "b": (slice(None), slice(1, COLS // 2, 2))}
    return x, sd, mask, marks


def test_torch_save_of_rows_of_progressions_counts_unique_and_unreferenced_exactly(tmp_path):
    x, sd, mask, marks = _rows_of_halves()
    v = _verdict(tv.save_check(sd), "torch.save")
    torch.save(sd, tmp_path / "a.pt")
    back = torch.load(tmp_path / "a.pt")
    written = back["a"].untyped_storage().nbytes()
    for k in sd:
        mask[marks[k]] = True
        assert torch.equal(back[k], sd[k])
    unique = int(mask.sum())
    assert (written, unique) == (ROWS * COLS, ROWS * COLS // 2)
    assert (v.outcome, v.unique_nbytes, v.unreferenced_nbytes, v.written_nbytes) == (
        "writes unreferenced bytes",
        unique,
        written - unique,
        written,
    )
    assert not any("upper bounds" in n for n in v.notes)


def test_accelerate_save_of_rows_of_progressions_loses_what_it_drops(tmp_path):
    from accelerate.utils import save
    from safetensors.torch import load_file

    x, sd, mask, marks = _rows_of_halves()
    v = _verdict(tv.save_check(sd), "accelerate.save")
    given = dict(sd)
    save(sd, tmp_path / "a.safetensors", safe_serialization=True)  # accelerate deletes 'b' from sd itself
    back = load_file(tmp_path / "a.safetensors")
    assert all(torch.equal(back[k], given[k]) for k in back)
    kept = np.zeros_like(mask)
    for k in given:
        mask[marks[k]] = True
    for k in back:
        kept[marks[k]] = True
    truth = int(mask.sum() - kept.sum())
    assert truth == ROWS * COLS // 4  # one name of the two comes back
    assert (v.outcome, v.lost_nbytes, v.kept) == ("drops data", truth, tuple(back))


def test_save_file_of_an_interleaving_view_raises_and_torch_save_leaves_its_gaps(tmp_path):
    from safetensors.torch import save_file

    n = 1 << 24
    y = torch.zeros(2 * n + 8, dtype=torch.uint8)
    sd = {"pair": y.as_strided((2, n), (3, 2))}  # {2i} and {3 + 2i}: 2**25 bytes, byte 1 and 2n not
    r = tv.save_check(sd)
    with pytest.raises(ValueError, match="non contiguous"):
        save_file(sd, tmp_path / "a.safetensors")
    assert _verdict(r, "safetensors.save_file").outcome == "raises"
    v = _verdict(r, "torch.save")
    torch.save(sd, tmp_path / "a.pt")
    written = torch.load(tmp_path / "a.pt")["pair"].untyped_storage().nbytes()
    read = np.zeros(2 * n + 8, dtype=bool)
    read[0 : 2 * n : 2] = True
    read[3 : 2 * n + 2 : 2] = True
    assert (written, int(read.sum())) == (2 * n + 8, 2 * n)
    assert (v.outcome, v.unique_nbytes, v.unreferenced_nbytes) == ("writes unreferenced bytes", 2 * n, 8)
