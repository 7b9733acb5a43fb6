"""tv.load_check for transformers' from_pretrained: each scenario predicted, then really loaded.

A folder is written by the zoo's tiny models (nothing downloads); the prediction reads only its
config and headers. Then ``cls.from_pretrained(folder, output_loading_info=True, **kwargs)`` runs
for real, twice, under two torch seeds, and the prediction must equal it: raises or not and the
whole message; missing, unexpected and mismatched keys as transformers reports them; which
weights are newly initialized (a weight is loaded when both loads hold the same values and those
values are a tensor of the files, cast; every other weight was initialised); the casts (the
loaded weight's dtype, and the file tensor it equals in the other); which tied pairs end up one
tensor and which pairs the tie mapping asks for stay apart.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import transformers
from torch import nn

import tensorviz as tv
from tensorviz.core.names import elide
from tensorviz.loadcheck.pretrained import pretrained_class
from tests.helpers import zoo

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


def _saved(name: str, **config: Any) -> Callable[[str], str]:
    """A folder written by ``save_pretrained`` of the zoo's ``name`` (config changes applied)."""

    def make(tmp: str) -> str:
        model = zoo.build(name)
        for k, v in config.items():
            setattr(model.config, k, v)
        folder = os.path.join(tmp, name)
        model.save_pretrained(folder)
        return folder

    return make


def _untied_equal(tmp: str) -> str:
    """An untied llama whose lm_head holds the embedding's very values (two keys, equal)."""
    model = zoo.build("llama")
    with torch.no_grad():
        model.lm_head.weight.copy_(model.model.embed_tokens.weight)
    folder = os.path.join(tmp, "equal")
    model.save_pretrained(folder)
    return folder


def _sharded_one_missing(tmp: str) -> str:
    folder = os.path.join(tmp, "sharded")
    zoo.build("llama").save_pretrained(folder, max_shard_size="2KB")
    with open(os.path.join(folder, "model.safetensors.index.json")) as f:
        files = sorted(set(json.load(f)["weight_map"].values()))
    os.remove(os.path.join(folder, files[1]))
    return folder


def _renamed_keys(old: str, new: str, name: str = "bert") -> Callable[[str], str]:
    """A checkpoint in an older naming (``LayerNorm.weight`` saved as ``LayerNorm.gamma``)."""

    def make(tmp: str) -> str:
        from safetensors.torch import load_file, save_file

        folder = _saved(name)(tmp)
        path = os.path.join(folder, "model.safetensors")
        sd = load_file(path)
        save_file({k.replace(old, new): v for k, v in sd.items()}, path, metadata={"format": "pt"})
        return folder

    return make


def _prefixed(tmp: str) -> str:
    """A DDP-wrapped model's state dict saved as model.safetensors: every key ``module.``-prefixed."""
    from safetensors.torch import load_file, save_file

    folder = _saved("llama")(tmp)
    path = os.path.join(folder, "model.safetensors")
    save_file({"module." + k: v for k, v in load_file(path).items()}, path, metadata={"format": "pt"})
    return folder


class HeadConfig(transformers.LlamaConfig):
    model_type = "tv_head_llama"


class LlamaWithHead(transformers.LlamaForCausalLM):
    """A user's subclass adding a head; its ``_keys_to_ignore_on_load_missing`` silences it."""

    config_class = HeadConfig
    _keys_to_ignore_on_load_missing = [r"value_head"]

    def __init__(self, config: Any):
        super().__init__(config)
        self.value_head = nn.Linear(config.hidden_size, 1)
        self.post_init()


class LlamaIgnoringExtra(transformers.LlamaForCausalLM):
    _keys_to_ignore_on_load_unexpected = [r"extra\."]


def _with_extra(tmp: str) -> str:
    from safetensors.torch import load_file, save_file

    folder = _saved("llama")(tmp)
    path = os.path.join(folder, "model.safetensors")
    sd = load_file(path)
    sd["extra.weight"] = torch.ones(3)
    save_file(sd, path, metadata={"format": "pt"})
    return folder


def _cls(name: str) -> Any:
    return getattr(transformers, zoo.ARCHITECTURES[name][1])


#: name -> (model class (or a config factory), folder factory, from_pretrained keywords)
SCENARIOS: dict[str, tuple[Any, Callable[[str], str], dict[str, Any]]] = {
    "tied llama, clean": (_cls("llama_tied"), _saved("llama_tied"), {}),
    "tied files, config flipped to untied": (_cls("llama_tied"), _saved("llama_tied"), {"tie_word_embeddings": False}),
    "untied files, config flipped to tied": (_cls("llama"), _saved("llama"), {"tie_word_embeddings": True}),
    "untied files with equal values, config tied": (_cls("llama"), _untied_equal, {"tie_word_embeddings": True}),
    "fp32 files into dtype=bfloat16": (_cls("gpt2"), _saved("gpt2"), {"dtype": torch.bfloat16}),
    "fp32 files into dtype='float16'": (_cls("llama"), _saved("llama"), {"dtype": "float16"}),
    "resized vocabulary raises": (_cls("gpt2"), _saved("gpt2"), {"vocab_size": 100}),
    "resized vocabulary, ignore_mismatched_sizes": (
        _cls("gpt2"),
        _saved("gpt2"),
        {"vocab_size": 100, "ignore_mismatched_sizes": True},
    ),
    "base model from a head checkpoint": (transformers.LlamaModel, _saved("llama"), {}),
    "head model from a base checkpoint": (
        transformers.LlamaForCausalLM,
        lambda t: _base_folder(t),
        {},
    ),
    "T5 encoder from a T5 checkpoint": (transformers.T5EncoderModel, _saved("t5"), {}),
    "sharded folder, one shard missing": (_cls("llama"), _sharded_one_missing, {}),
    "old LayerNorm.gamma names (legacy rename)": (
        _cls("bert"),
        _renamed_keys("LayerNorm.weight", "LayerNorm.gamma"),
        {},
    ),
    "module. prefix in the files": (_cls("llama"), _prefixed, {}),
    "subclass with a head it ignores when missing": (LlamaWithHead, _saved("llama"), {}),
    "subclass ignoring an unexpected key": (LlamaIgnoringExtra, _with_extra, {}),
    "a config object as the model": (lambda: zoo.transformers_model("gpt2_untied").config, _saved("gpt2_untied"), {}),
}

#: the zoo's architectures each saved and loaded back (renamed-on-save, fused experts, encoders).
ROUND_TRIPS = ["gpt2", "gpt2_untied", "gpt_neox", "bert", "t5", "bart", "vit", "mixtral", "whisper", "albert"]


def _base_folder(tmp: str) -> str:
    folder = os.path.join(tmp, "base")
    zoo.build("llama").model.save_pretrained(folder)
    return folder


def _model_arg(spec: Any) -> Any:
    return spec() if not isinstance(spec, type) else spec


def _really_load(cls: Any, folder: str, kwargs: dict, seed: int) -> tuple[Any, dict | None, str | None]:
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model, info = cls.from_pretrained(folder, output_loading_info=True, **kwargs)
        except Exception as err:  # noqa: BLE001
            return None, None, f"{type(err).__name__}: {err}"
    return model, info, None


def _file_tensors(folder: str) -> list[torch.Tensor]:
    from safetensors.torch import load_file

    return [
        t
        for f in sorted(os.listdir(folder))
        if f.endswith(".safetensors")
        for t in load_file(os.path.join(folder, f)).values()
    ]


def _loaded_from(value: torch.Tensor, files: list[torch.Tensor]) -> torch.Tensor | None:
    """The file tensor ``value`` holds (after the load's cast), or None."""
    for t in files:
        if t.shape == value.shape and torch.equal(t.to(value.dtype), value):
            return t
    return None


def _check(spec: Any, make_folder: Callable[[str], str], kwargs: dict, tmp: str) -> Any:
    folder = make_folder(tmp)
    model_arg = _model_arg(spec)
    cls = pretrained_class(model_arg)[0]
    r = tv.load_check(model_arg, folder, loader="from_pretrained", loader_kwargs=kwargs)
    real_kwargs = dict(kwargs, config=model_arg) if not isinstance(model_arg, type) else kwargs
    a, info, error = _really_load(cls, folder, real_kwargs, 1)
    assert (r.raises, r.error) == (error is not None, error)
    if error is not None:
        return r
    b, _, _ = _really_load(cls, folder, real_kwargs, 2)
    assert set(r.missing) == set(info["missing_keys"]) and set(r.unexpected) == set(info["unexpected_keys"])
    assert {(k, m, s) for k, m, s in r.mismatched} == {(k, tuple(m), tuple(s)) for k, s, m in info["mismatched_keys"]}
    files = _file_tensors(folder)
    sa, sb = a.state_dict(), b.state_dict()
    source = {k: _loaded_from(v, files) if torch.equal(v, sb[k]) else None for k, v in sa.items()}
    # a fused weight (experts stacked on load) equals no one file tensor: loaded when both loads
    # agree and it is not a constant (the zoo fills every saved float with noise; inits of
    # ones/zeros are constant, random ones differ between the seeds)
    fused = {k for k, s in source.items() if s is None and torch.equal(sa[k], sb[k]) and sa[k].unique().numel() > 1}
    assert set(r.untouched) == {k for k, s in source.items() if s is None and k not in fused}
    cast = {
        k: (str(s.dtype)[6:], str(sa[k].dtype)[6:])
        for k, s in source.items()
        if s is not None and s.dtype != sa[k].dtype
    }
    assert {n: (s, m) for n, s, m in r.cast} == cast
    params = dict(a.named_parameters(remove_duplicate=False))
    wanted = a.get_expanded_tied_weights_keys(all_submodels=True)
    assert set(r.retied) == {(t, s) for t, s in wanted.items() if params[t] is params[s]}
    assert set(r.not_tied) == {(t, s) for t, s in wanted.items() if params[t] is not params[s]}
    return r


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_prediction_equals_the_real_from_pretrained(name: str, tmp_path) -> None:
    _check(*SCENARIOS[name], str(tmp_path))


@pytest.mark.slow
@pytest.mark.parametrize("arch", ROUND_TRIPS)
def test_zoo_round_trip_equals_the_real_from_pretrained(arch: str, tmp_path) -> None:
    r = _check(_cls(arch), _saved(arch), {}, str(tmp_path))
    assert not r.raises


def test_scenarios_are_not_vacuous(tmp_path) -> None:
    """What each headline scenario predicts (the real load agrees, above)."""
    got = {name: _check(*SCENARIOS[name], str(tmp_path / str(i))) for i, name in enumerate(SCENARIOS)}
    assert got["tied llama, clean"].clean and got["tied llama, clean"].retied == (
        ("lm_head.weight", "model.embed_tokens.weight"),
    )
    flipped = got["tied files, config flipped to untied"]
    assert flipped.missing == ("lm_head.weight",) and flipped.untouched == ("lm_head.weight",)
    assert got["untied files, config flipped to tied"].not_tied == (("lm_head.weight", "model.embed_tokens.weight"),)
    assert got["untied files with equal values, config tied"].retied == (
        ("lm_head.weight", "model.embed_tokens.weight"),
    )
    assert ("transformer.wte.weight", "float32", "bfloat16") in got["fp32 files into dtype=bfloat16"].narrowing
    assert got["resized vocabulary raises"].error.startswith(
        "RuntimeError: You set `ignore_mismatched_sizes` to `False`"
    )
    assert got["resized vocabulary, ignore_mismatched_sizes"].mismatched == (
        ("transformer.wte.weight", (100, 16), (96, 16)),
    )
    assert got["sharded folder, one shard missing"].raises
    head = got["subclass with a head it ignores when missing"]
    assert head.missing == () and set(head.untouched) == {"value_head.weight", "value_head.bias"}  # silent, but seen
    assert got["subclass ignoring an unexpected key"].unexpected == ()
    assert got["old LayerNorm.gamma names (legacy rename)"].clean
    prefixed = got["module. prefix in the files"]
    assert len(prefixed.unexpected) == len(prefixed.missing) == len(prefixed.untouched) == 12


def test_the_check_changes_nothing(tmp_path) -> None:
    """The replay builds its own meta model; a model instance passed in is left as it was."""
    folder = _saved("llama_tied")(str(tmp_path))
    model = zoo.build("llama_tied")
    params = dict(model.named_parameters(remove_duplicate=False))
    values = {k: v.detach().clone() for k, v in params.items()}
    default = torch.get_default_dtype()
    r = tv.load_check(model, folder, loader="from_pretrained", loader_kwargs={"dtype": torch.float16})
    assert r.cast and torch.get_default_dtype() == default
    after = dict(model.named_parameters(remove_duplicate=False))
    assert all(after[k] is params[k] and torch.equal(after[k], values[k]) for k in params)
    assert model.lm_head.weight is model.model.embed_tokens.weight and model.dtype == torch.float32


def test_text_json_and_html(tmp_path) -> None:
    folder = _saved("llama_tied")(str(tmp_path))
    r = tv.load_check(
        _cls("llama_tied"), folder, loader="from_pretrained", loader_kwargs={"tie_word_embeddings": False}
    )
    lines = str(r).splitlines()
    assert lines[0] == elide(f"from_pretrained(tie_word_embeddings=False): {folder} -> LlamaForCausalLM", 80)
    assert lines[1:] == [
        "does not raise",
        "missing (1):",
        "  lm_head.weight",
        "newly initialized (random, not from the files) (1):",
        "  lm_head.weight",
        "fixes (1), code to paste:",
        "  # the files hold one name of a tie the config does not make: tie it",
        "    model = LlamaForCausalLM.from_pretrained(folder, tie_word_embeddings=True)",
        "not clean",
    ]
    data = r.to_json()
    assert (data["missing"], data["untouched"], data["keywords"]) == (
        ["lm_head.weight"],
        ["lm_head.weight"],
        "tie_word_embeddings=False",
    )
    assert "<script" not in r._repr_html_() and "newly initialized" in r._repr_html_()


def test_an_instance_is_predicted_with_its_own_config_and_says_so(tmp_path) -> None:
    """A model instance brings its config: the prediction is of ``from_pretrained(folder,
    config=model.config)`` and its first line says so; given the class, the folder's config.json
    is read. Both predictions are checked against the real calls (the folder's config ties the
    head, the instance's does not)."""
    import transformers

    small = dict(n_layer=1, n_embd=8, n_head=2, vocab_size=16, n_positions=8, bos_token_id=0, eos_token_id=0)
    folder = str(tmp_path / "tied")
    transformers.GPT2LMHeadModel(transformers.GPT2Config(**small, tie_word_embeddings=True)).save_pretrained(folder)
    untied = transformers.GPT2LMHeadModel(transformers.GPT2Config(**small, tie_word_embeddings=False))
    by_instance = tv.load_check(untied, folder, loader="from_pretrained")
    by_class = tv.load_check(transformers.GPT2LMHeadModel, folder, loader="from_pretrained")
    assert str(by_instance).splitlines()[0] == elide(
        f"from_pretrained(config=model.config): {folder} -> GPT2LMHeadModel", 80
    )
    assert str(by_class).splitlines()[0] == elide(f"from_pretrained(): {folder} -> GPT2LMHeadModel", 80)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, real = transformers.GPT2LMHeadModel.from_pretrained(folder, config=untied.config, output_loading_info=True)
        _, real_class = transformers.GPT2LMHeadModel.from_pretrained(folder, output_loading_info=True)
    assert list(by_instance.missing) == sorted(real["missing_keys"]) == ["lm_head.weight"]
    assert list(by_class.missing) == sorted(real_class["missing_keys"]) == [] and by_class.clean
