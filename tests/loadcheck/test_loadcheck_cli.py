"""``tensorviz load-check SOURCE --model DIR``: the report of tv.load_check on a transformers model
built on meta from its config, checked against the real load into an independently built meta
model; exit status 0 clean, 1 not clean, 2 error."""

from __future__ import annotations

import json

import pytest
import torch

from tensorviz.cli import main

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


def _saved(tmp_path, tied: bool) -> tuple[str, str]:
    from tests.helpers.models import tiny_gpt2

    folder = tmp_path / ("tied" if tied else "untied")
    tiny_gpt2(tied=tied).save_pretrained(folder)
    return str(folder), str(folder / "model.safetensors")


def _real(folder: str, path: str, loader: str) -> str | None:
    from safetensors.torch import load_file, load_model
    from transformers import GPT2Config, GPT2LMHeadModel

    with torch.device("meta"):
        model = GPT2LMHeadModel(GPT2Config.from_pretrained(folder))
    try:
        if loader == "load_state_dict":
            model.load_state_dict(load_file(path), strict=True)
        else:
            load_model(model, path, strict=True)
    except Exception as err:  # noqa: BLE001
        return f"{type(err).__name__}: {err}"
    return None


@pytest.mark.parametrize("loader", ["load_state_dict", "safetensors.load_model"])
@pytest.mark.parametrize("tied", [True, False])
def test_cli_report_equals_the_real_load(tmp_path, capsys, tied: bool, loader: str) -> None:
    folder, path = _saved(tmp_path, tied)
    status = main(["load-check", path, "--model", folder, "--loader", loader, "--json"])
    out = capsys.readouterr().out
    # A library imported by this test's own setup (the save above) may log to the captured stdout
    # (DeepSpeed's logger binds it at import); in a CLI process it is imported inside the run,
    # whose stdout only the report reaches (test_cli's test of a library printing).
    doc = json.loads(out[out.index("{") :])
    error = _real(folder, path, loader)
    assert (doc["raises"], doc["error"]) == (error is not None, error)
    assert status == (0 if doc["clean"] else 1)
    assert main(["load-check", path, "--model", folder, "--loader", loader]) == status
    text = capsys.readouterr().out
    assert max(map(len, text.splitlines())) <= 80 and text.splitlines()[-1] == ("clean" if status == 0 else "not clean")


def test_cli_errors_exit_2(tmp_path, capsys) -> None:
    folder, path = _saved(tmp_path, True)
    assert main(["load-check", path, "--model", str(tmp_path / "nowhere")]) == 2
    assert "tensorviz load-check: error:" in capsys.readouterr().err
    assert main(["load-check", path]) == 2  # --model is required


@pytest.mark.parametrize("tied", [True, False])
def test_cli_from_pretrained_equals_the_real_load(tmp_path, capsys, tied: bool) -> None:
    """``--loader from_pretrained`` with a folder whose files disagree with the config's tie:
    the keys reported are those the real ``from_pretrained`` reports."""
    from transformers import GPT2LMHeadModel

    folder, _ = _saved(tmp_path, tied)
    config = tmp_path / "config"
    config.mkdir()
    other = GPT2LMHeadModel.config_class.from_pretrained(folder)
    other.tie_word_embeddings = not tied
    other.save_pretrained(config)
    status = main(["load-check", folder, "--model", str(config), "--loader", "from_pretrained", "--json"])
    doc = json.loads(capsys.readouterr().out)
    _, info = GPT2LMHeadModel.from_pretrained(folder, config=other, output_loading_info=True)
    assert (doc["missing"], doc["unexpected"]) == (sorted(info["missing_keys"]), sorted(info["unexpected_keys"]))
    assert doc["missing"] == ([] if not tied else ["lm_head.weight"])
    assert doc["not_tied"] == ([["lm_head.weight", "transformer.wte.weight"]] if not tied else [])
    assert status == 1
