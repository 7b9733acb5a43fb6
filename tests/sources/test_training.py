"""tv.analyze(model, optimizer=opt): gradients and optimizer state named after parameters.

Every mapping is checked against the optimizer's own numbering: ``opt.state_dict()`` numbers
parameters in ``param_groups`` order, and (built from ``named_parameters()``) saves their names;
each state view must be exactly the tensor ``state_dict()["state"][index][key]`` is, named after
the model's first name for that parameter object.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import tensorviz as tv


class Tied(nn.Module):
    """An embedding tied to its output head (one parameter object, two names)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(11, 6)
        self.norm = nn.LayerNorm(6)
        self.mid = nn.Linear(6, 6)
        self.head = nn.Linear(6, 11, bias=False)
        self.head.weight = self.embed.weight
        self.register_buffer("scale", torch.ones(6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.mid(self.norm(self.embed(x))) * self.scale)


def untied() -> nn.Module:
    return nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 3), nn.BatchNorm1d(3))


OPTIMIZERS = {
    "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
    "adam": lambda ps: torch.optim.Adam(ps),
    "adamw_fused": lambda ps: torch.optim.AdamW(ps, fused=True),
    "adamw_foreach": lambda ps: torch.optim.AdamW(ps, foreach=True),
    "adafactor": lambda ps: torch.optim.Adafactor(ps),
}


def stepped(model: nn.Module, make, named: bool = True, steps: int = 2):
    torch.manual_seed(0)
    opt = make(model.named_parameters() if named else model.parameters())
    x = torch.randint(0, 11, (4,)) if isinstance(model, Tied) else torch.randn(4, 5)
    for _ in range(steps):
        opt.zero_grad()
        model(x).square().sum().backward()
        opt.step()
    return opt


def first_names(model: nn.Module) -> dict[int, str]:
    out: dict[int, str] = {}
    for n, p in model.named_parameters(remove_duplicate=False):
        out.setdefault(id(p), n)
    return out


def expected_state(model: nn.Module, opt) -> dict[str, torch.Tensor]:
    """{view name: tensor} from the optimizer's own state_dict numbering."""
    sd = opt.state_dict()
    names = first_names(model)
    out = {}
    for group, saved in zip(opt.param_groups, sd["param_groups"]):
        saved_names = saved.get("param_names")
        for i, (p, index) in enumerate(zip(group["params"], saved["params"], strict=True)):
            if saved_names:  # built from named_parameters(): torch saved the same first name
                assert saved_names[i] == names[id(p)]
            for key, value in sd["state"].get(index, {}).items():
                assert value is opt.state[p][key]  # state_dict() hands out the live tensors
                out[f"optimizer.{names[id(p)]}.{key}"] = value
    return out


def check_view(layout: tv.Layout, name: str, t: torch.Tensor) -> None:
    v = layout[name]
    assert (v.shape, v.stride, v.offset, v.dtype) == (tuple(t.shape), t.stride(), t.storage_offset(), str(t.dtype)[6:])
    assert v.start == t.storage_offset() * t.element_size()
    assert layout.storage(v.storage).nbytes == t.untyped_storage().nbytes()


@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
@pytest.mark.parametrize("model_kind", ["tied", "untied"])
def test_state_named_after_parameters(kind: str, model_kind: str) -> None:
    model = Tied() if model_kind == "tied" else untied()
    opt = stepped(model, OPTIMIZERS[kind])
    layout = tv.analyze(model, optimizer=opt)
    want = expected_state(model, opt)
    got = [v.name for v in layout.views if v.category == "optimizer"]
    assert got == list(want)  # param_groups order, then each state's own key order
    for name, t in want.items():
        check_view(layout, name, t)
    grads = {f"{n}.grad": p.grad for p, n in ((p, first_names(model)[id(p)]) for p in model.parameters())}
    assert [v.name for v in layout.views if v.category == "gradients"] == list(grads)
    for name, g in grads.items():
        check_view(layout, name, g)
    sd = model.state_dict()
    assert layout.names[: len(sd)] == tuple(sd)
    buffers = {n for n, _ in model.named_buffers()}
    assert {v.name for v in layout.views[: len(sd)] if v.category == "buffers"} == buffers
    assert all(v.category == "weights" for v in layout.views[: len(sd)] if v.name not in buffers)
    assert layout.metadata["training"]["optimizer"] == type(opt).__name__
    # every state tensor has storage of its own: no two state views share bytes, nor with weights
    state_storages = [layout[n].storage for n in want]
    assert len(set(state_storages)) == len(state_storages)


def test_tied_parameter_has_one_state_under_its_first_name() -> None:
    model = Tied()
    opt = stepped(model, OPTIMIZERS["adam"])
    layout = tv.analyze(model, optimizer=opt)
    state = [n for n in layout.names if n.startswith("optimizer.")]
    assert "optimizer.embed.weight.exp_avg" in state
    assert not any(n.startswith("optimizer.head.weight") for n in state)
    assert "embed.weight.grad" in layout.names and "head.weight.grad" not in layout.names
    assert layout.relation("embed.weight", "head.weight") == "identical"
    assert len(state) == 3 * len(list(model.parameters()))  # step, exp_avg, exp_avg_sq; 5 params


def test_adafactor_factored_state() -> None:
    model = untied()
    opt = stepped(model, OPTIMIZERS["adafactor"])
    layout = tv.analyze(model, optimizer=opt)
    # a matrix keeps a row and a column variance, a vector one full variance
    assert layout["optimizer.0.weight.row_var"].shape == (7, 1)
    assert layout["optimizer.0.weight.col_var"].shape == (1, 5)
    assert layout["optimizer.0.bias.variance"].shape == (7,)
    assert "optimizer.0.weight.variance" not in layout


def test_unnamed_optimizer_maps_through_param_groups_order() -> None:
    """Built from parameters() (no saved names) and in two groups in another order."""
    model = untied()
    ps = dict(model.named_parameters())
    torch.manual_seed(0)
    opt = torch.optim.Adam([{"params": [ps["2.weight"], ps["0.bias"]]}, {"params": [ps["0.weight"]], "lr": 0.1}])
    model(torch.randn(4, 5)).sum().backward()
    opt.step()
    layout = tv.analyze(model, optimizer=opt)
    want = expected_state(model, opt)
    assert list(want)[0] == "optimizer.2.weight.step"
    assert [n for n in layout.names if n.startswith("optimizer.")] == list(want)
    for name, t in want.items():
        check_view(layout, name, t)


def test_grad_false_and_no_optimizer() -> None:
    model = untied()
    opt = stepped(model, OPTIMIZERS["sgd_momentum"])
    no_grad = tv.analyze(model, optimizer=opt, grad=False)
    assert not any(n.endswith(".grad") for n in no_grad.names)
    assert {v.category for v in no_grad.views} == {"weights", "buffers", "optimizer"}
    plain = tv.analyze(model)
    assert plain.names == tuple(model.state_dict())
    only_grads = tv.analyze(model, grad=True)
    assert [v.category for v in only_grads.views].count("gradients") == 6
    assert "training" in only_grads.metadata and only_grads.metadata["training"]["optimizer"] == ""


def test_state_views_of_one_flat_buffer() -> None:
    """An optimizer that keeps its state as views of one flat buffer (apex / DeepSpeed style):
    each state tensor is shown as the view it is, side by side on one storage."""

    class FlatMomentum(torch.optim.Optimizer):
        def __init__(self, params) -> None:
            super().__init__(params, {"lr": 0.1})
            ps = [p for g in self.param_groups for p in g["params"]]
            self.flat = torch.zeros(sum(p.numel() for p in ps))
            at = 0
            for p in ps:
                self.state[p]["momentum"] = self.flat[at : at + p.numel()].view_as(p)
                at += p.numel()

    model = untied()
    opt = FlatMomentum(model.parameters())
    layout = tv.analyze(model, optimizer=opt)
    names = [f"optimizer.{n}.momentum" for n, _ in model.named_parameters()]
    spans = [(layout[n].start, layout[n].stop) for n in names]
    sizes = [p.numel() * 4 for p in model.parameters()]
    assert spans == [(sum(sizes[:i]), sum(sizes[: i + 1])) for i in range(len(sizes))]
    assert len({layout[n].storage for n in names}) == 1
    st = layout.storage(layout[names[0]].storage)
    assert st.nbytes == sum(sizes) and st.unreferenced_nbytes == 0
    assert layout.relation(names[0], names[1]) == "disjoint"


def test_parameter_not_in_the_model_named_by_its_place() -> None:
    model = untied()
    extra = nn.Parameter(torch.zeros(3))
    opt = torch.optim.SGD([*model.parameters(), extra], lr=0.1, momentum=0.9)
    model(torch.randn(4, 5)).sum().backward()
    extra.grad = torch.ones(3)
    opt.step()
    layout = tv.analyze(model, optimizer=opt)
    assert layout["optimizer.param_groups.0.6.momentum_buffer"].shape == (3,)
    assert "not parameters of this model" in layout.metadata["training"]["notes"][0]


def test_optimizer_needs_a_module() -> None:
    model = untied()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(TypeError, match="need the model"):
        tv.analyze(model.state_dict(), optimizer=opt)
    with pytest.raises(TypeError, match="torch.optim.Optimizer"):
        tv.analyze(model, optimizer=object())


# -- state on several ranks: ZeroRedundancyOptimizer and FSDP2 (2 spawned gloo ranks) ------------
@pytest.fixture(scope="module")
def spawned(tmp_path_factory) -> dict:
    import json
    import subprocess

    out = tmp_path_factory.mktemp("training-ranks")
    from tests.helpers import env, script

    proc = subprocess.run(
        [*script("training_worker"), str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        env=env(),
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return {f.stem: json.loads(f.read_text()) for f in out.glob("*.json")}


@pytest.mark.slow
@pytest.mark.spawn
@pytest.mark.parametrize("scenario", ["zero", "zero_bucket", "fsdp"])
def test_state_across_ranks(spawned: dict, scenario: str) -> None:
    ranks = [spawned[f"{scenario}.rank{r}"] for r in range(2)]
    assert [r["failures"] for r in ranks] == [[], []]
    if scenario == "fsdp":  # every rank holds its shard of every state: 10 rows split 5 + 5
        assert ranks[0]["names"] == ranks[1]["names"] and len(ranks[0]["names"]) == 18
        assert ranks[0]["facts"]["exp_avg_shape"] == [5, 6]
        return
    local = [r["facts"]["local_params"] for r in ranks]
    # ZeRO partitions whole parameters: each on exactly one rank, state only there
    assert sorted(local[0] + local[1]) == sorted(["0.weight", "0.bias", "2.weight", "2.bias", "3.weight", "3.bias"])
    for r, facts in enumerate(ranks):
        assert facts["names"] == [f"optimizer.{p}.{k}" for p in local[r] for k in ("step", "exp_avg", "exp_avg_sq")]
        assert facts["facts"]["notes"] == [
            f"ZeroRedundancyOptimizer: only rank {r}'s partition of the optimizer state is here"
        ]
    # as bucket views, the parameters are views of one flat bucket per rank
    assert ranks[0]["facts"]["weight_storages"] == (2 if scenario == "zero_bucket" else 6)


# -- categories in the model map, the text summary and JSON ----------------------------------------
def test_category_totals_counted_once() -> None:
    model = Tied()
    opt = stepped(model, OPTIMIZERS["adam"])
    layout = tv.analyze(model, optimizer=opt)
    params = list(model.parameters())  # 5 objects: the tied weight once
    weights = sum(p.numel() * 4 for p in params)
    assert weights == (11 * 6 + 6 + 6 + 36 + 6) * 4
    tree = layout.tree()
    assert tree.optimizer == "Adam"
    assert dict(tree.root.categories) == {
        "weights": weights,  # head.weight is embed.weight: counted once
        "buffers": 6 * 4,
        "gradients": weights,
        "optimizer": 2 * weights + 4 * len(params),  # exp_avg, exp_avg_sq and a float32 step each
    }
    assert sum(dict(tree.root.categories).values()) == layout.unique_nbytes
    # a module's optimizer state is counted where its parameters are
    mid = dict(tree.find("mid").categories)
    assert mid == {"weights": 42 * 4, "gradients": 42 * 4, "optimizer": 2 * 42 * 4 + 8}
    line = next(line for line in str(layout).splitlines() if line.startswith("by category"))
    assert line == "by category (counted once): weights 480 B · buffers 24 B · grads 480 B · Adam 980 B"
    mid_line = next(
        line for line in tree.to_text().splitlines() if line.startswith("├─ mid") or line.startswith("└─ mid")
    )
    assert mid_line.endswith("weights 168 B · grads 168 B · Adam 344 B")
    assert "6 parameters, 1 buffers" in str(layout)  # names; grads and state are not parameters


def test_categories_in_json_and_cli(tmp_path) -> None:
    from tensorviz.cli import layout_to_json, main

    model = untied()
    opt = stepped(model, OPTIMIZERS["sgd_momentum"])
    doc = layout_to_json(tv.analyze(model, optimizer=opt, grad=False))
    cats = {v["name"]: v["category"] for v in doc["views"]}
    assert cats["0.weight"] == "weights" and cats["3.running_mean"] == "buffers"
    assert cats["optimizer.0.weight.momentum_buffer"] == "optimizer"
    weights = sum(p.numel() * 4 for p in model.parameters())
    assert doc["categories"] == {"weights": weights, "buffers": 3 * 4 * 2 + 8, "optimizer": weights}
    assert layout_to_json(tv.analyze(model))["categories"] == {}
    path = tmp_path / "ckpt.pt"
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, path)
    out = tmp_path / "out.json"
    assert main([str(path), "--json", str(out)]) == 0
    import json

    doc = json.loads(out.read_text())
    assert doc["categories"] == {"weights": weights, "buffers": 3 * 4 * 2 + 8, "optimizer": weights}
    assert doc["metadata"]["training"]["optimizers"]["optimizer"]["mapped_by"] == "param_names"


def test_diagram_coloured_by_category() -> None:
    from tensorviz.core.categories import COLOURS
    from tensorviz.plan.model import DiagramOptionError
    from tensorviz.render.mpl import to_png

    model = untied()
    opt = stepped(model, OPTIMIZERS["adam"])
    layout = tv.analyze(model, optimizer=opt)
    d = tv.diagram(layout, by="category", expand_simple=True, max_lanes=200)
    cats = dict(zip(layout.names, layout.categories))
    assert all(b.color == COLOURS[cats[n]] for b in d.bars for n in b.names)
    assert {cats[b.names[0]] for b in d.bars} == {"weights", "buffers", "gradients", "optimizer"}
    assert d.header.legend == (
        ("weights", COLOURS["weights"]),
        ("buffers", COLOURS["buffers"]),
        ("grads", COLOURS["gradients"]),
        ("Adam", COLOURS["optimizer"]),
    )
    weights = sum(p.numel() * 4 for p in model.parameters())
    assert d.header.text.endswith(
        f"· weights {weights} B · buffers 32 B · grads {weights} B · Adam {2 * weights + 24} B"
    )
    assert to_png(d)[:4] == b"\x89PNG"
    plain = tv.diagram(layout)  # coloured by span group as before, totals still in the header
    assert plain.header.legend == () and "Adam" in plain.header.text
    with pytest.raises(DiagramOptionError, match="no categories"):
        tv.diagram({"w": torch.zeros(2)}, by="category")


def test_model_map_html_shows_categories() -> None:
    model = Tied()
    opt = stepped(model, OPTIMIZERS["adam"])
    html = tv.analyze(model, optimizer=opt)._repr_mimebundle_()["text/html"]
    assert '<span class="tvt-kind">weights 168 B · grads 168 B · optimizer state 344 B</span>' in html  # mid
