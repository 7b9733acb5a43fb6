"""Training checkpoints (.pt) read through the restricted walker: optimizer state named after its
parameters (saved param_names, else the model's order when unambiguous, else why not), and a
category for every tensor. Every mapping is checked against the live optimizer's own
param_groups order (tv.analyze(model, optimizer=opt), tests/sources/test_training.py) and against what
torch.load gives back for the same file."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import tensorviz as tv
from tests.helpers import env
from tests.sources.test_training import OPTIMIZERS, Tied, stepped, untied


def save(tmp_path, obj, name: str = "ckpt.pt") -> str:
    path = str(tmp_path / name)
    torch.save(obj, path)
    return path


def live_state(model: nn.Module, opt) -> list[tuple[str, tuple, tuple, str]]:
    layout = tv.analyze(model, optimizer=opt, grad=False)
    return [(v.name, v.shape, v.stride, v.dtype) for v in layout.views if v.category == "optimizer"]


def file_state(layout: tv.Layout, prefix: str = "optimizer") -> list[tuple[str, tuple, tuple, str]]:
    out = []
    for v in layout.views:
        if v.category == "optimizer":
            assert v.name.startswith(prefix + ".")
            out.append(("optimizer." + v.name[len(prefix) + 1 :], v.shape, v.stride, v.dtype))
    return out


@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
@pytest.mark.parametrize("model_kind", ["tied", "untied"])
@pytest.mark.parametrize("named", [True, False])
def test_pt_optimizer_state_named(tmp_path, kind: str, model_kind: str, named: bool) -> None:
    model = Tied() if model_kind == "tied" else untied()
    opt = stepped(model, OPTIMIZERS[kind], named=named)
    sched = torch.optim.lr_scheduler.StepLR(opt, 1)
    path = save(
        tmp_path, {"model": model.state_dict(), "optimizer": opt.state_dict(), "lr_scheduler": sched.state_dict()}
    )
    layout = tv.analyze(path)
    if model_kind == "tied" and not named:  # its buffer "scale" could be a parameter: ambiguous
        why = layout.metadata["training"]["optimizers"]["optimizer"]["why_not"]
        assert "numbers 5 parameters while 'model' holds 6 tensors" in why and "1 tied copy" in why
        return
    assert file_state(layout) == live_state(model, opt)
    facts = layout.metadata["training"]["optimizers"]["optimizer"]
    assert facts == {
        "mapped_by": "param_names" if named else "model order",
        "why_not": "",
        "model": "" if named else "model",
    }
    # each renamed view is the tensor torch.load finds at state[index][key]
    loaded = torch.load(path, weights_only=True)
    names = [n for g in opt.param_groups for n in (g.get("param_names") or [])] or [
        n for n, _ in model.named_parameters()
    ]
    for index, name in enumerate(names):
        for key, t in loaded["optimizer"]["state"][index].items():
            v = layout[f"optimizer.{name}.{key}"]
            assert (v.shape, v.stride, v.offset) == (tuple(t.shape), t.stride(), t.storage_offset())
    sd = model.state_dict()
    cats = {v.name: v.category for v in layout.views}
    assert [cats[f"model.{n}"] for n in sd] == [
        "buffers" if "running" in n or "batches" in n else "weights" for n in sd
    ]


def test_two_groups_without_names_say_why(tmp_path) -> None:
    model = untied()
    decay = [p for n, p in model.named_parameters() if n.endswith("weight")]
    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias")]
    opt = torch.optim.AdamW([{"params": decay}, {"params": no_decay, "weight_decay": 0.0}])
    model(torch.randn(4, 5)).sum().backward()
    opt.step()
    layout = tv.analyze(save(tmp_path, {"model": model.state_dict(), "optimizer": opt.state_dict()}))
    facts = layout.metadata["training"]["optimizers"]["optimizer"]
    assert facts["mapped_by"] == "" and "2 parameter groups" in facts["why_not"]
    assert "optimizer.state.0.exp_avg" in layout and layout["optimizer.state.0.exp_avg"].category == "optimizer"


def test_tied_copy_left_out_of_the_model_order(tmp_path) -> None:
    """A tied weight is one record in the file: the model's order maps it once."""
    model = Tied()
    del model._buffers["scale"]
    model.register_buffer("scale", torch.ones(6), persistent=False)  # not in the state dict
    opt = stepped(model, OPTIMIZERS["adam"], named=False)
    layout = tv.analyze(save(tmp_path, {"model": model.state_dict(), "optimizer": opt.state_dict()}))
    assert layout.metadata["training"]["optimizers"]["optimizer"]["mapped_by"] == "model order"
    assert file_state(layout) == live_state(model, opt)
    assert not any(n.startswith("optimizer.head.weight") for n in layout.names)


def test_frozen_parameter_makes_counts_differ(tmp_path) -> None:
    model = untied()
    model[0].weight.requires_grad_(False)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad])
    model(torch.randn(4, 5)).sum().backward()
    opt.step()
    layout = tv.analyze(save(tmp_path, {"model": model.state_dict(), "optimizer": opt.state_dict()}))
    why = layout.metadata["training"]["optimizers"]["optimizer"]["why_not"]
    assert "numbers 5 parameters while 'model' holds 6 tensors" in why
    assert "0 tied copies and 3 BatchNorm buffer(s) left out" in why


def test_order_not_the_optimizers_is_caught_by_shapes(tmp_path) -> None:
    model = untied()
    opt = torch.optim.SGD(list(model.parameters())[::-1], lr=0.1, momentum=0.9)
    model(torch.randn(4, 5)).sum().backward()
    opt.step()
    layout = tv.analyze(save(tmp_path, {"model": model.state_dict(), "optimizer": opt.state_dict()}))
    why = layout.metadata["training"]["optimizers"]["optimizer"]["why_not"]
    assert why.endswith("the order is not the optimizer's") and "state 0 (momentum_buffer, shape (3,))" in why


def test_optimizer_alone_says_why(tmp_path) -> None:
    model = untied()
    opt = stepped(model, OPTIMIZERS["adam"], named=False)
    layout = tv.analyze(save(tmp_path, {"optimizer": opt.state_dict()}))
    assert "no model state dict beside it" in layout.metadata["training"]["optimizers"]["optimizer"]["why_not"]
    named = stepped(untied(), OPTIMIZERS["adam"], named=True)
    alone = tv.analyze(save(tmp_path, {"optim": named.state_dict()}, "named.pt"))
    assert "optim.0.weight.exp_avg" in alone  # saved param_names need no model


def test_lightning_checkpoint(tmp_path) -> None:
    """Lightning's layout: state_dict (keys under the LightningModule's attribute), a list of
    optimizer states, a list of scheduler states, loop counters."""
    model = untied()
    opt = stepped(model, OPTIMIZERS["adamw_foreach"], named=False)
    ckpt = {
        "epoch": 1,
        "global_step": 2,
        "pytorch-lightning_version": "2.5.0",
        "state_dict": {f"net.{k}": v for k, v in model.state_dict().items()},
        "loops": {"fit_loop": {"state_dict": {}}},
        "callbacks": {},
        "optimizer_states": [opt.state_dict()],
        "lr_schedulers": [torch.optim.lr_scheduler.StepLR(opt, 1).state_dict()],
    }
    layout = tv.analyze(save(tmp_path, ckpt, "last.ckpt"))
    state = [v.name for v in layout.views if v.category == "optimizer"]
    assert state == [n.replace("optimizer.", "optimizer_states.0.net.", 1) for n, *_ in live_state(model, opt)]
    assert layout.metadata["training"]["optimizers"]["optimizer_states.0"]["mapped_by"] == "model order"
    assert {v.category for v in layout.views if v.name.startswith("state_dict.")} == {"weights", "buffers"}


def test_ema_and_other_entries(tmp_path) -> None:
    model = untied()
    ema = {k: v.clone() for k, v in model.state_dict().items()}
    opt = stepped(model, OPTIMIZERS["sgd_momentum"])
    scaler_state = {"scale": torch.tensor(65536.0), "growth_tracker": torch.tensor(0)}
    ckpt = {"model": model.state_dict(), "ema": ema, "optimizer": opt.state_dict(), "scaler": scaler_state}
    layout = tv.analyze(save(tmp_path, ckpt))
    cats = {v.name: v.category for v in layout.views}
    assert {cats[f"ema.{k}"] for k in ema} == {"copies"}
    assert cats["scaler.scale"] == "other" and cats["optimizer.0.weight.momentum_buffer"] == "optimizer"


def test_plain_state_dict_is_unchanged(tmp_path) -> None:
    model = untied()
    layout = tv.analyze(save(tmp_path, model.state_dict()))
    assert layout.names == tuple(model.state_dict()) and {v.category for v in layout.views} == {""}
    assert "training" not in layout.metadata


def test_live_checkpoint_dict_named_as_its_file(tmp_path) -> None:
    """The dict about to be saved is read as its saved file is: same names, same categories."""
    model = Tied()
    opt = stepped(model, OPTIMIZERS["adamw_fused"], named=True)
    ckpt = {
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "ema": {k: v.clone() for k, v in model.state_dict().items()},
    }
    live, saved = tv.analyze(ckpt), tv.analyze(save(tmp_path, ckpt))
    assert [(v.name, v.category) for v in live.views] == [(v.name, v.category) for v in saved.views]
    assert live.metadata["training"] == saved.metadata["training"]


# -- accelerate's save_state folders (written by accelerate itself, in a subprocess: Accelerator
# sets process-wide state) ------------------------------------------------------------------------
_ACCELERATE = """
import sys, torch
from accelerate import Accelerator
from tests.sources.test_training import untied
out, named, safe = sys.argv[1], sys.argv[3] == "named", sys.argv[4] == "safe"
acc = Accelerator(cpu=True)
torch.manual_seed(0)
m = untied()
opt = torch.optim.AdamW(m.named_parameters() if named else m.parameters())
sched = torch.optim.lr_scheduler.StepLR(opt, 1)
m, opt, sched = acc.prepare(m, opt, sched)
acc.backward(m(torch.randn(4, 5)).square().sum())
opt.step()
sched.step()
acc.save_state(out, safe_serialization=safe)
"""


@pytest.fixture(scope="module")
def accelerate_folders(tmp_path_factory) -> dict[str, str]:
    import subprocess
    import sys

    out = {}
    for named, safe in (("unnamed", "safe"), ("unnamed", "bin"), ("named", "safe")):
        folder = str(tmp_path_factory.mktemp(f"acc-{named}-{safe}"))
        proc = subprocess.run(
            [sys.executable, "-c", _ACCELERATE, folder, "-", named, safe],
            capture_output=True,
            text=True,
            timeout=180,
            env=env(),
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        out[f"{named}-{safe}"] = folder
    return out


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["unnamed-safe", "unnamed-bin", "named-safe"])
def test_accelerate_save_state(accelerate_folders, kind: str) -> None:
    import os

    folder = accelerate_folders[kind]
    assert {"optimizer.bin", "scheduler.bin"} <= set(os.listdir(folder))
    layout = tv.analyze(folder)
    facts = layout.metadata["training"]["optimizers"]["optimizer"]
    model = untied()
    weights = set(model.state_dict())
    cats = {v.name: v.category for v in layout.views}
    assert {n for n, c in cats.items() if c in ("weights", "buffers")} == weights
    assert {cats[n] for n in weights if "running" in n or "batches" in n} == {"buffers"}
    saved = torch.load(os.path.join(folder, "optimizer.bin"), weights_only=True)
    if kind == "unnamed-safe":
        assert facts["mapped_by"] == "" and "stores tensors sorted by dtype and name" in facts["why_not"]
        assert "optimizer.state.0.exp_avg" in layout
        return
    assert facts["mapped_by"] == ("model order" if kind == "unnamed-bin" else "param_names")
    names = [n for n, _ in model.named_parameters()]  # the optimizer's own order: parameters()
    for index, name in enumerate(names):
        for key, t in saved["state"][index].items():
            v = layout[f"optimizer.{name}.{key}"]
            assert (v.shape, v.stride, v.category) == (tuple(t.shape), t.stride(), "optimizer")
    mid = dict(layout.tree().find("0").categories)  # the module map counts its state with it
    assert mid == {"weights": (35 + 7) * 4, "optimizer": 2 * (35 + 7) * 4 + 8}


def test_dcp_with_optimizer_state_torchtitan_layout(tmp_path) -> None:
    """torchtitan's DCP layout: the model's state dict at the top, the optimizer's flattened
    (state.<fqn>.<key>) under "optimizer", the scheduler under "lr_scheduler"."""
    import warnings

    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, get_optimizer_state_dict

    model = untied()
    opt = stepped(model, OPTIMIZERS["adamw_foreach"], named=False)
    osd = get_optimizer_state_dict(model, opt, options=StateDictOptions(flatten_optimizer_state_dict=True))
    states = {**get_model_state_dict(model), "optimizer": osd, "lr_scheduler": {"last_epoch": torch.tensor(1)}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no process group: DCP says it saves as a single process
        dcp.save(states, checkpoint_id=str(tmp_path / "step-2"))
    layout = tv.analyze(str(tmp_path / "step-2"))
    assert layout.metadata["training"]["optimizers"] == {
        "optimizer.state": {"mapped_by": "fqn", "why_not": "", "model": ""}
    }
    cats = {v.name: v.category for v in layout.views if v.device == "global"}
    for name, t in osd.items():  # state.<fqn>.<key>: each a global tensor of its own
        if not isinstance(t, torch.Tensor):
            continue
        chunk = f"optimizer.{name}[" + ", ".join(f"0:{n}" for n in t.shape) + "]"
        assert cats[chunk] == "optimizer" and layout[chunk].shape == tuple(t.shape)
    assert cats["0.weight[0:7, 0:5]"] == "weights" and cats["lr_scheduler.last_epoch[]"] == "other"
    weights = (35 + 7) * 4
    assert dict(layout.tree().find("0").categories) == {"weights": weights, "optimizer": 2 * weights + 8}
    # a DCP checkpoint without optimizer state is left uncategorised
    dcp.save(get_model_state_dict(model), checkpoint_id=str(tmp_path / "weights"))
    plain = tv.analyze(str(tmp_path / "weights"))
    assert set(plain.categories) == {""} and "training" not in plain.metadata


# -- DeepSpeed, built with the key layout DeepSpeed writes (no deepspeed import) ------------------
def deepspeed_model_states(model: nn.Module) -> dict:
    """``mp_rank_00_model_states.pt`` as DeepSpeedEngine._save_checkpoint writes it under ZeRO
    (the optimizer state lives in the per-rank ``*_optim_states.pt`` files: ``optimizer`` is None)."""
    from collections import OrderedDict

    names = {id(p): n for n, p in reversed(list(model.named_parameters(remove_duplicate=False)))}
    shared = {n: names[id(p)] for n, p in model.named_parameters(remove_duplicate=False) if names[id(p)] != n}
    return {
        "module": model.state_dict(),
        "buffer_names": [n for n, _ in model.named_buffers()],
        "optimizer": None,
        "param_shapes": [OrderedDict((n, p.shape) for n, p in model.named_parameters())],
        "frozen_param_shapes": None,
        "shared_params": shared,
        "frozen_param_fragments": None,
        "lr_scheduler": None,
        "data_sampler": None,
        "random_ltd": None,
        "sparse_tensor_module_names": set(),
        "skipped_steps": 0,
        "global_steps": 2,
        "global_samples": 8,
        "dp_world_size": 2,
        "mp_world_size": 1,
        "ds_config": {"train_batch_size": 4, "zero_optimization": {"stage": 2}},
        "ds_version": "0.16.4",
    }


def test_deepspeed_model_states(tmp_path) -> None:
    model = Tied()
    layout = tv.analyze(save(tmp_path, deepspeed_model_states(model), "mp_rank_00_model_states.pt"))
    cats = {v.name: v.category for v in layout.views}
    assert cats["module.scale"] == "buffers" and cats["module.embed.weight"] == "weights"
    assert layout.relation("module.embed.weight", "module.head.weight") == "identical"
    (note,) = layout.metadata["training"]["notes"]
    assert note.startswith("DeepSpeed model states (ds_version 0.16.4): 5 parameters in 1 group(s), 1 buffers")
    assert "shared: head.weight -> embed.weight" in note and "*_optim_states.pt" in note


def test_deepspeed_universal_checkpoint(tmp_path) -> None:
    """ds_to_universal.py's output: zero/<param>/{fp32,exp_avg,exp_avg_sq}.pt each
    torch.save({"param": tensor, "cat_dim": 0}), step.pt a bare tensor, mp_rank files copied."""
    model = Tied()
    opt = stepped(model, OPTIMIZERS["adam"], named=True)
    folder = tmp_path / "global_step2_universal"
    (folder / "zero").mkdir(parents=True)
    torch.save(deepspeed_model_states(model), folder / "mp_rank_00_model_states.pt")
    for name, p in model.named_parameters():
        where = folder / "zero" / name
        where.mkdir()
        state = opt.state[p]
        for key, t in (
            ("fp32", p.detach().float()),
            ("exp_avg", state["exp_avg"]),
            ("exp_avg_sq", state["exp_avg_sq"]),
        ):
            torch.save({"param": t, "cat_dim": 0}, where / f"{key}.pt")
        torch.save(state["step"], where / "step.pt")
    torch.save({"param_groups": opt.state_dict()["param_groups"]}, folder / "zero" / "optimizer_state.pt")
    layout = tv.analyze(str(folder))
    for name, p in model.named_parameters():
        for key in ("fp32", "exp_avg", "exp_avg_sq", "step"):
            v = layout[f"zero.{name}.{key}"]
            assert v.category == ("copies" if key == "fp32" else "optimizer")
            assert v.shape == (() if key == "step" else tuple(p.shape))
    weights = (11 * 6 + 6 + 6 + 36 + 6) * 4
    tree = layout.tree()
    assert dict(tree.root.categories) == {
        "weights": weights,
        "buffers": 24,
        "optimizer": 2 * weights + 4 * 5,
        "copies": weights,
    }
    mid = dict(tree.find("module.mid").categories)  # zero.mid.* counted with module.mid
    assert mid == {"weights": 42 * 4, "optimizer": 2 * 42 * 4 + 8}
    assert layout.metadata["training"]["optimizers"]["zero"]["mapped_by"] == "folder names"


def test_deepspeed_zero_optim_states_refused_with_the_way_out(tmp_path, monkeypatch) -> None:
    """A native ZeRO-2 optimizer states file pickles DeepSpeed's ZeroStageEnum (and its loss
    scaler): renamed, torch's weights-only load refuses it, and the error says what to do instead.
    (Real partitions, written by DeepSpeed, are read in tests/sources/test_deepspeed_zero.py.)"""
    import enum
    import sys
    import types

    config = types.ModuleType("deepspeed.runtime.zero.config")

    class ZeroStageEnum(int, enum.Enum):
        optimizer_states = 1
        gradients = 2

    ZeroStageEnum.__module__, ZeroStageEnum.__qualname__ = config.__name__, "ZeroStageEnum"
    config.ZeroStageEnum = ZeroStageEnum
    for name in ("deepspeed", "deepspeed.runtime", "deepspeed.runtime.zero"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, config.__name__, config)
    flat = torch.zeros(64)
    state = {
        "optimizer_state_dict": {
            "loss_scaler": None,
            "dynamic_loss_scale": False,
            "overflow": False,
            "clip_grad": 1.0,
            "base_optimizer_state": {
                "state": {0: {"exp_avg": flat.clone(), "exp_avg_sq": flat.clone()}},
                "param_groups": [],
            },
            "single_partition_of_fp32_groups": [flat],
            "zero_stage": ZeroStageEnum.gradients,
            "group_paddings": [0],
            "partition_count": [2],
            "ds_version": "0.16.4",
        },
        "ds_config": {"zero_optimization": {"stage": 2}},
        "ds_version": "0.16.4",
    }
    path = save(tmp_path, state, "renamed_optim.pt")  # not DeepSpeed's file name: torch's loader refuses it
    with pytest.raises(tv.UnsafeCheckpointError, match="deepspeed.runtime.zero.config.ZeroStageEnum") as err:
        tv.analyze(path)
    assert "ds_to_universal.py" in str(err.value) and "never runs code from a file" in str(err.value)
    assert "zero_pp_rank_<R>_mp_rank_<M>_optim_states.pt" in str(err.value)
    # under DeepSpeed's name its records are read as data; this one lacks param_slice_mappings
    path = save(tmp_path, state, "zero_pp_rank_0_mp_rank_00_optim_states.pt")
    with pytest.raises(tv.FileFormatError, match="without param_slice_mappings.*ds_to_universal.py"):
        tv.analyze(path)


def test_zero_partition_refuses_any_other_global(tmp_path) -> None:
    """A file under DeepSpeed's name that needs a global beyond DeepSpeed's data records is refused
    by the scan before anything is unpickled (here a call the scan knows nothing of)."""
    import collections

    state = {"optimizer_state_dict": {"x": collections.Counter("deepspeed")}, "why": print}
    path = tmp_path / "zero_pp_rank_0_mp_rank_00_optim_states.pt"
    torch.save(state, path)
    with pytest.raises(tv.UnsafeCheckpointError, match="the pickle needs print"):
        tv.analyze(str(path))


def test_trainer_checkpoint_folder(tmp_path) -> None:
    """transformers' Trainer: model.safetensors, optimizer.pt (two groups: decay and no decay),
    scheduler.pt, rng_state.pth, trainer_state.json."""
    import json

    from safetensors.torch import save_file

    model = untied()
    ps = dict(model.named_parameters())
    decay = [n for n in ps if n.endswith("weight")]
    groups = [
        {"params": [ps[n] for n in decay]},
        {"params": [ps[n] for n in ps if n not in decay], "weight_decay": 0.0},
    ]
    for named in (False, True):
        if named:
            groups = [
                {**g, "params": [(n, p) for n, p in ps.items() if any(p is q for q in g["params"])]} for g in groups
            ]
        opt = torch.optim.AdamW(groups)
        model(torch.randn(4, 5)).square().sum().backward()
        opt.step()
        folder = tmp_path / f"checkpoint-{int(named)}"
        folder.mkdir()
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, folder / "model.safetensors")
        torch.save(opt.state_dict(), folder / "optimizer.pt")
        torch.save(torch.optim.lr_scheduler.StepLR(opt, 1).state_dict(), folder / "scheduler.pt")
        torch.save({"python": 1}, folder / "rng_state.pth")
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": 1}))
        layout = tv.analyze(str(folder))
        facts = layout.metadata["training"]["optimizers"]["optimizer"]
        if not named:
            assert facts["mapped_by"] == "" and "safetensors" in facts["why_not"]
            assert layout["optimizer.state.0.exp_avg"].category == "optimizer"
            continue
        assert facts["mapped_by"] == "param_names"
        for name in ps:
            assert layout[f"optimizer.{name}.exp_avg"].shape == tuple(ps[name].shape)
        assert layout.metadata["ignored_files"] == ["rng_state.pth", "scheduler.pt"]
