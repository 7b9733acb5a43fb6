"""A real round trip over the model zoo: save each model with each saver, reload it, and diff the
reloaded object against the original. The diff's ties lost and gained must equal what a brute
force finds from the tensors themselves: names grouped by the addresses they read
(``untyped_storage().data_ptr()``, ``data_ptr()`` and the address one past the last element),
before and after. Names on one side only and changed fields are checked the same way."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

import tensorviz as tv
from tensorviz.sources.live import iter_named_values
from tests.helpers import zoo

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")]


def _torch_save(model: Any, folder: str) -> Any:
    path = os.path.join(folder, "sd.pt")
    torch.save(model.state_dict(), path)
    return torch.load(path, weights_only=True)


def _save_model(model: Any, folder: str) -> Any:
    from safetensors.torch import load_file, save_model

    path = os.path.join(folder, "model.safetensors")
    save_model(model, path)
    return load_file(path)


def _save_pretrained(model: Any, folder: str) -> Any:
    if not hasattr(model, "save_pretrained"):
        pytest.skip("not a transformers model")
    model.save_pretrained(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return type(model).from_pretrained(folder).eval()


SAVERS: dict[str, Callable[[Any, str], Any]] = {
    "torch.save": _torch_save,
    "safetensors.save_model": _save_model,
    "save_pretrained": _save_pretrained,
}


def _tensors(obj: Any) -> dict[str, torch.Tensor]:
    return {n: t for n, t in iter_named_values(obj) if isinstance(t, torch.Tensor)}


def _tie_groups(tensors: dict[str, torch.Tensor]) -> dict[str, tuple]:
    """Brute force: per name with bytes, the addresses it reads from and up to."""
    out = {}
    for name, t in tensors.items():
        if t.numel() == 0:
            continue
        last = t.data_ptr() + sum((s - 1) * st for s, st in zip(t.shape, t.stride())) * t.element_size()
        out[name] = (t.untyped_storage().data_ptr(), t.data_ptr(), last + t.element_size())
    return out


def _not_kept(x: dict[str, tuple], y: dict[str, tuple]) -> set[frozenset[str]]:
    """Groups of two or more names reading the same addresses in x that do not all read one
    place in y (a name missing in y breaks its group)."""
    groups: dict[tuple, list[str]] = {}
    for name, key in x.items():
        groups.setdefault(key, []).append(name)
    lost = set()
    for names in groups.values():
        if len(names) >= 2 and len({y.get(n, ("missing", n)) for n in names}) != 1:
            lost.add(frozenset(names))
    return lost


@pytest.mark.parametrize("saver", list(SAVERS))
@pytest.mark.parametrize("name", zoo.ZOO)
def test_round_trip_ties_match_brute_force(name: str, saver: str, tmp_path) -> None:
    model = zoo.build(name)
    try:
        reloaded = SAVERS[saver](model, str(tmp_path))
    except (RuntimeError, ValueError) as err:  # the saver refuses this model: nothing to diff
        pytest.skip(f"{saver} refuses {name}: {str(err)[:80]}")
    d = tv.diff(model, reloaded)
    before, after = _tensors(model), _tensors(reloaded)
    keys_before, keys_after = _tie_groups(before), _tie_groups(after)
    assert set(d.ties_lost) == _not_kept(keys_before, keys_after)
    assert set(d.ties_gained) == _not_kept(keys_after, keys_before)
    assert not d.renamed and set(d.only_a) == set(before) - set(after) and set(d.only_b) == set(after) - set(before)
    fields = {(c.name, c.field) for c in d.changed}
    truth = set()
    for n in set(before) & set(after):
        ta, tb = before[n], after[n]
        truth |= {(n, "shape")} if ta.shape != tb.shape else set()
        truth |= {(n, "dtype")} if ta.dtype != tb.dtype else set()
        truth |= {(n, "device")} if ta.device != tb.device else set()
        truth |= {(n, "stride")} if ta.shape == tb.shape and ta.stride() != tb.stride() else set()
        truth |= {(n, "offset")} if ta.storage_offset() != tb.storage_offset() else set()
        truth |= {(n, "nbytes")} if ta.nbytes != tb.nbytes else set()
        truth |= {(n, "conjugate")} if ta.is_conj() != tb.is_conj() else set()  # the conj bit a raw save drops
    assert fields == truth
