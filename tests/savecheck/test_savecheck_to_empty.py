"""Issue 22, cause 6: weights that ``to_empty`` untied. A model built on meta and moved with
``to_empty(device="cpu")`` holds its tied weights apart (torch gives each module a new
Parameter); reloading what a saver wrote into the model's own class ties them again, and
``load_state_dict`` copies both names into the one shared tensor: the last name's values stay.
Each verdict predicts that loss; each prediction is checked by a real save and a real reload
into a fresh instance of the class (``from_pretrained`` for ``save_pretrained``).
"""

from __future__ import annotations

import os
import warnings

import pytest
import torch
from torch import nn

import tensorviz as tv
from tests.helpers.models import tiny_gpt2


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.emb.weight


def _untied(make):
    with torch.device("meta"):
        model = make()
    model.to_empty(device="cpu")
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for t in model.state_dict().values():
            t.copy_(torch.randn(t.shape, generator=gen).to(t.dtype))
    return model


def _reload(model, make, saver: str, folder: str):
    """Really save ``model`` with ``saver`` and load it into a fresh ``make()`` as its loader does."""
    from safetensors.torch import load_file, load_model, save_file, save_model

    path = os.path.join(folder, "saved")
    fresh = make()
    if saver == "safetensors.save_file":
        save_file(model.state_dict(), path)
        fresh.load_state_dict(load_file(path))
    elif saver == "safetensors.save_model":
        save_model(model, path)
        load_model(fresh, path)
    elif saver == "torch.save":
        torch.save(model.state_dict(), path)
        fresh.load_state_dict(torch.load(path, weights_only=True))
    elif saver == "accelerate.save":
        from accelerate.utils import save

        save(model.state_dict(), path, safe_serialization=True)
        fresh.load_state_dict(load_file(path))
    elif saver == "Accelerator.save_model":
        from accelerate import Accelerator

        Accelerator().save_model(model, path)
        fresh.load_state_dict(load_file(os.path.join(path, "model.safetensors")))
    else:
        model.save_pretrained(path)
        fresh = type(model).from_pretrained(path)
    return fresh.state_dict()


def _lost(before: dict, after: dict) -> int:
    return sum(t.nbytes for n, t in before.items() if n not in after or not torch.equal(after[n], t))


MODELS = {"plain": (Tied, 160), "gpt2": (tiny_gpt2, 2048)}
SAVERS = (
    "safetensors.save_file",
    "safetensors.save_model",
    "torch.save",
    "accelerate.save",
    "Accelerator.save_model",
    "transformers.save_pretrained",
)


def test_plain_module_broken_tie_is_found_from_its_class():
    model = _untied(Tied)
    assert model.emb.weight is not model.head.weight  # what to_empty does on torch 2.13
    report = tv.save_check(model)
    assert report.ties.broken == (("emb.weight", "head.weight"),)
    assert report.ties.broken_source == "Tied() built again on meta"
    v = report["torch.save"]
    assert (v.outcome, v.lost_nbytes) == ("drops data", 160)
    assert any(n.startswith("reloading into Tied loses 160 B: the class ties emb.weight, head.weight") for n in v.notes)
    assert 'Unexpected key(s) in state_dict: "head.weight"' in " ".join(report["safetensors.save_model"].notes)
    tied = Tied()  # intact ties, and a class that needs arguments: nothing is broken
    assert tv.save_check(tied).ties.broken == () and tv.save_check(tied)["torch.save"].outcome == "ok"
    assert tv.save_check(nn.Linear(2, 2)).ties.broken == ()


@pytest.mark.slow
@pytest.mark.parametrize("saver", SAVERS)
@pytest.mark.parametrize("kind", sorted(MODELS))
def test_predicted_loss_is_what_a_reload_into_the_class_loses(tmp_path, kind, saver):
    make, nbytes = MODELS[kind]
    model = _untied(make)
    report = tv.save_check(model)
    if saver not in {v.saver for v in report}:
        pytest.skip(f"{saver} does not apply to {kind}")
    verdict = report[saver]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if saver == "safetensors.save_model":  # load_model copies, then refuses the file's second name
            with pytest.raises(RuntimeError, match="Unexpected key") as info:
                _reload(model, make, saver, str(tmp_path))
            assert str(info.value).split("\n")[-1].strip() in " ".join(verdict.notes)
            assert verdict.lost_nbytes == nbytes
            return
        after = _reload(model, make, saver, str(tmp_path))
    assert verdict.lost_nbytes == _lost(before, after)
    assert verdict.lost_nbytes == (0 if saver == "transformers.save_pretrained" else nbytes)
