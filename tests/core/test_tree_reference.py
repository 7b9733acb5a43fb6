"""The module tree against a brute-force reference written from its definition (issue 22).

The reference below derives every field of every node from the definition in
:mod:`tensorviz.core.tree` in the plainest way: each view's byte runs (the footprint engine,
itself checked against the byte-set oracle in ``test_oracle.py``), first reader wins by set
algebra in source order, overlap groups by comparing every pair, per prefix the sums over the
names under it and the distinct bytes its grouped names read. Nodes, printed text (every depth
and fold), HTML and the model map's cells must be equal -- exact values -- for random dotted
names over random views and for hand-picked models: tied weights, overlapping views, column
slices (one overlap group past 64 names too), empty tensors, skipped values, files, deep
names, a name that is also a prefix, training state and 100-layer transformers on meta.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import save_file
from torch import nn

import tensorviz as tv
from tensorviz.core import footprint as fp
from tensorviz.core.attribution import attribution as owners_of
from tensorviz.core.categories import category_bytes, optimizer_name, role
from tensorviz.core.keepalive import storages_kept_alive
from tensorviz.core.tree import MAX_DEPTH, RELATION_WORDS, ModelTree, Node, _file_name, model_tree, tree_text
from tensorviz.explorer.modelmap import map_cells
from tensorviz.render.html.tree import tree_html
from tests.core.test_oracle import SETTINGS, derive, view_of, view_specs
from tests.helpers.models import FusedQKV, TiedLM

# -- the reference ----------------------------------------------------------------------------


def chain(name: str) -> list[str]:
    """ "" and every prefix of ``name`` down to ``name``; parts past MAX_DEPTH form the leaf."""
    parts = name.split(".")
    if len(parts) > MAX_DEPTH:
        parts = parts[: MAX_DEPTH - 1] + [".".join(parts[MAX_DEPTH - 1 :])]
    return [".".join(parts[:k]) for k in range(len(parts) + 1)]


def union(runs: list[np.ndarray]) -> np.ndarray:
    out = fp.EMPTY
    for r in runs:
        out = fp.union(out, r)
    return out


def attribution(layout) -> tuple[list[int], dict[str, tuple], dict[str, tuple], list[list[int]]]:
    """Owned bytes (first reader wins), partners, counted_in and the overlap groups, by brute force."""
    views = layout.views
    runs = [fp.as_runs(layout.footprint_runs(v.name)) for v in views]
    seen: dict = {}
    own = []
    for v, r in zip(views, runs):
        before = seen.get(v.storage, fp.EMPTY)
        own.append(fp.total(r) - fp.intersection_nbytes(r, before))
        seen[v.storage] = fp.union(before, r)
    n = len(views)
    meets = [
        [
            j
            for j in range(n)
            if j != i and views[j].storage == views[i].storage and fp.intersection_nbytes(runs[i], runs[j])
        ]
        for i in range(n)
    ]
    group_of = list(range(n))
    for i in range(n):  # connected components: the smallest index reachable
        stack, found = [i], {i}
        while stack:
            for j in meets[stack.pop()]:
                if j not in found:
                    found.add(j)
                    stack.append(j)
        group_of[i] = min(found)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(group_of[i], []).append(i)
    partners, counted = {}, {}
    for members in groups.values():
        if len(members) < 2:
            continue
        for i in members:
            near = [j for j in members if j in meets[i]]  # exact, however big the group
            partners[views[i].name] = tuple(views[j].name for j in near)
            earlier = next((j for j in near if j < i), None)
            if earlier is not None and own[i] < views[i].footprint_nbytes:
                counted[views[i].name] = (layout.relation(views[i].name, views[earlier].name), views[earlier].name)
    return own, partners, counted, [m for m in groups.values() if len(m) > 1]


def reference_tree(layout) -> ModelTree:
    views, skipped = layout.views, layout.skipped
    own, partners, counted, groups = attribution(layout)
    mods = layout.facts.modules
    classes = mods.get("classes", {})
    buffers, unsaved = set(mods.get("buffers", ())), set(mods.get("not_saved", ()))
    roles = [role(v.name, v.category, bool(mods), buffers, unsaved) for v in views]
    grouped = {i for g in groups for i in g}
    kept = storages_kept_alive(layout)
    cats = category_bytes(layout, own, chain)
    total = sum(own)
    under: dict[str, list[int]] = {}
    skipped_under: dict[str, list[int]] = {}
    order: dict[str, dict[str, None]] = {}
    for i, name in enumerate([v.name for v in views] + [s.name for s in skipped]):
        c = chain(name)
        for p in c:
            (under if i < len(views) else skipped_under).setdefault(p, []).append(
                i if i < len(views) else i - len(views)
            )
        for parent, child in zip(c, c[1:]):
            order.setdefault(parent, {}).setdefault(child, None)
    leaf = {v.name: i for i, v in enumerate(views)}
    skipped_leaf = {}
    for s in skipped:
        skipped_leaf.setdefault(s.name, s.reason)

    def numel(i: int) -> int:
        v, lg = views[i], views[i].logical
        return (
            own[i] * lg.block // lg.block_nbytes
            if lg and lg.block_nbytes
            else own[i] // v.itemsize
            if v.itemsize
            else 0
        )

    def node(path: str) -> Node:
        kids = sorted((node(c) for c in order.get(path, {})), key=lambda k: -k.nbytes)
        inside = under.get(path, [])
        nbytes = sum(own[i] for i in inside)
        mine = [i for i in inside if i in grouped]
        by_storage: dict = {}
        for i in mine:
            by_storage.setdefault(views[i].storage, []).append(fp.as_runs(layout.footprint_runs(views[i].name)))
        shared = sum(fp.total(union(r)) for r in by_storage.values()) - sum(own[i] for i in mine)
        files = {_file_name(str(views[i].storage[1])) for i in inside if views[i].device == "file"}
        if path in leaf:
            i = leaf[path]
            kind, view, reason = roles[i], views[i], ""
            near, where = partners.get(path, ()), counted.get(path, ())
        else:
            kind, view, near, where = ("skipped", None, (), ()) if path in skipped_leaf else ("", None, (), ())
            reason = skipped_leaf.get(path, "")
        return Node(
            path=path,
            kind=str(classes[path]) if path in classes else kind,
            children=tuple(kids),
            ntensors=len(inside),
            nparams=sum(roles[i] == "parameter" for i in inside),
            nbuffers=sum(roles[i].startswith("buffer") for i in inside),
            numel=sum(numel(i) for i in inside),
            nbytes=nbytes,
            shared_nbytes=shared,
            fraction=nbytes / total if total else 0.0,
            dtypes=tuple(sorted({(views[i].logical or views[i]).dtype for i in inside} - {""})),
            devices=tuple(sorted({views[i].device for i in inside} - {""})),
            files=tuple(sorted(files - {""})),
            nskipped=len(skipped_under.get(path, [])),
            partners=near,
            counted_in=where,
            view=view,
            reason=reason,
            categories=cats.get(path, ()),
            kept=kept.get(path, ()),
        )

    return ModelTree(node(""), total, layout.storage_nbytes, bool(mods), optimizer_name(layout))


# -- the comparison ---------------------------------------------------------------------------

FIELDS = [f for f in Node.__dataclass_fields__ if f != "children"]


class Records:
    """A layout seen only through the reads the tree's protocol names (no numpy columns): the
    tree then reads the view records."""

    def __init__(self, layout) -> None:
        self._of = layout

    def __getattr__(self, name: str):
        if name in ("_table", "_raw", "_view"):
            raise AttributeError(name)
        return getattr(self._of, name)

    def __getitem__(self, name: str):
        return self._of[name]


def assert_same_tree(layout) -> None:
    got, want = layout.tree(), reference_tree(layout)
    compare(got, want)
    assert_borrowers_listed(layout, want)
    compare(model_tree(Records(layout)), want)
    own, partners, counted, _ = attribution(layout)
    got_own, _, got_partners, got_counted, _ = owners_of(layout)
    assert (got_own, dict(got_partners), dict(got_counted)) == (own, partners, counted)
    assert len(got_partners) == len(partners) and len(got_counted) == len(counted)


def assert_borrowers_listed(layout, want: ModelTree) -> None:
    """``print(layout)`` lists the names counted under another name as a walk of the whole
    reference tree finds them: the first four (all five when five), then how many more."""
    found = [n for n in want.nodes() if n.counted_in]
    words = [f"{n.path} {RELATION_WORDS.get(n.counted_in[0], n.counted_in[0])} {n.counted_in[1]}" for n in found]
    if len(layout) + len(layout.skipped) > tv.limits().tree_names:
        return  # the summary leaves the tree out
    text = layout.to_text(full=False)
    if not found:
        assert "names whose bytes are counted under another name" not in text
        return
    head = f"names whose bytes are counted under another name: {len(found)}\n"
    shown = words if len(words) <= 5 else words[:4]
    block = text[text.index(head) + len(head) :].splitlines()
    assert [line.split(" (")[0].strip() for line in block[: len(shown)]] == shown
    if len(words) > 5:
        assert block[4] == f"  … {len(words) - 4} more"


def compare(got: ModelTree, want: ModelTree) -> None:
    assert (got.total_nbytes, got.storage_nbytes, got.has_modules, got.optimizer) == (
        want.total_nbytes,
        want.storage_nbytes,
        want.has_modules,
        want.optimizer,
    )
    stack = [(got.root, want.root)]
    while stack:
        g, w = stack.pop()
        assert {f: getattr(g, f) for f in FIELDS} == {f: getattr(w, f) for f in FIELDS}, w.path
        assert [c.path for c in g.children] == [c.path for c in w.children], w.path
        stack.extend(zip(g.children, w.children))
    for depth, cap in ((None, None), (3, 8), (1, 2), (2, None)):
        assert tree_text(got, depth, cap) == tree_text(want, depth, cap)
    assert str(got) == str(want)
    assert html(got) == html(want)
    for focus in ["", *(c.path for c in want.root.children[:2])]:
        assert json.dumps(map_cells(got, focus)) == json.dumps(map_cells(want, focus))
    assert [n.path for n in got.nodes()] == [n.path for n in want.nodes()]
    borrowers = [n.path for n in want.nodes() if n.counted_in]
    for limit in (None, 1, 5):
        n, first = got.borrowers(limit)
        assert (n, [b.path for b in first]) == (len(borrowers), borrowers[:limit])


def html(tree: ModelTree) -> str:
    """The tree's HTML with its element ids (from a global counter) numbered from 0."""
    text, ids = tree_html(tree), {}
    return re.sub(r"tvt\d+(-\d+)?", lambda m: f"tvt{ids.setdefault(m[0], len(ids))}", text)


# -- random names over random views -----------------------------------------------------------

PARTS = ["a", "b", "0", "1", "2", "layers"]


@st.composite
def named_views(draw):
    """Up to 8 views over one or two small storages (some derived from others), under random
    dotted names (a name may be another's prefix), plus now and then a skipped value."""
    sizes = draw(st.lists(st.integers(0, 48), min_size=1, max_size=2))
    storages = [torch.empty(n, dtype=torch.uint8) for n in sizes]
    names = draw(
        st.lists(
            st.lists(st.sampled_from(PARTS), min_size=1, max_size=4).map(".".join), min_size=1, max_size=8, unique=True
        )
    )
    out: dict[str, object] = {}
    for name in names:
        if draw(st.integers(0, 9)) == 0:
            out[name] = "not a tensor"
        elif out and draw(st.integers(0, 2)) == 0:
            tensors = [t for t in out.values() if isinstance(t, torch.Tensor)]
            out[name] = derive(draw, draw(st.sampled_from(tensors))) if tensors else torch.zeros(1)
        else:
            s = draw(st.integers(0, len(storages) - 1))
            out[name] = view_of(storages[s].untyped_storage(), draw(view_specs(sizes[s])))
    return storages, out


@SETTINGS
@given(named_views())
def test_tree_equals_the_reference_on_random_views(case):
    _, views = case
    assert_same_tree(tv.analyze(views))


# -- hand-picked --------------------------------------------------------------------------------


def test_tied_overlapping_fused_and_empty():
    x, y = torch.zeros(10, 4), torch.zeros(10)
    empty = torch.zeros(0)
    assert_same_tree(tv.analyze(TiedLM(vocab=50, dim=16)))
    assert_same_tree(tv.analyze(FusedQKV()))
    cases = {"a.w": x, "b.rows": x[2:6], "b.tail": x[8:], "c.p": y[:6], "d.q": y[4:], "d": y[1:3]}
    cases |= {"e.empty": empty, "e.also": empty, "e.cut": x[3:3], "f": torch.zeros(0, 5)}
    assert_same_tree(tv.analyze(cases))
    tied = {f"m{i}.w": x for i in range(8)} | {f"m{i}.b": y[i:] for i in range(3)}  # 9 borrowers: 4 shown
    assert_same_tree(tv.analyze(tied))


def test_column_slices_and_a_group_past_64_names():
    w = torch.empty(300, 256, device="meta")
    assert_same_tree(tv.analyze({f"w.{i}": w[:, i * 4 : (i + 1) * 4] for i in range(64)}))
    whole = {"w.all": w} | {f"w.cols.{i}": w[:, i * 3 : i * 3 + 5] for i in range(70)}  # 71 names, chained overlaps
    assert_same_tree(tv.analyze(whole))


def test_skipped_files_deep_names_and_a_name_that_is_a_prefix(tmp_path):
    deep = ".".join(f"p{k}" for k in range(70))
    assert_same_tree(
        tv.analyze(
            {
                "enc.w": torch.zeros(2, 2),
                "enc.step": 3,
                "dec.w": torch.zeros(3),
                deep: torch.zeros(2),
                deep[:50]: torch.zeros(1),
            }
        )
    )
    assert_same_tree(tv.analyze({"a": torch.zeros(3), "a.b": torch.zeros(2), "a.b.c": 1, "a.": torch.zeros(1)}))
    save_file(
        {"enc.w": torch.zeros(4, 4), "enc.b": torch.zeros(4, dtype=torch.float16), "dec.w": torch.zeros(2)},
        tmp_path / "m.safetensors",
    )
    assert_same_tree(tv.analyze(tmp_path / "m.safetensors"))
    x = torch.zeros(4, 4)
    torch.save({"a.w": x, "b.row": x[1], "c": x[:, 1]}, tmp_path / "ck.pt")
    assert_same_tree(tv.analyze(tmp_path / "ck.pt"))


def test_seventy_shards_more_files_than_one_mask_holds(tmp_path):
    weight_map = {}
    for k in range(70):
        save_file(
            {f"layers.{k}.w": torch.zeros(k + 1), f"layers.{k % 3}.b{k}": torch.zeros(2)},
            tmp_path / f"m-{k}.safetensors",
        )
        weight_map |= {f"layers.{k}.w": f"m-{k}.safetensors", f"layers.{k % 3}.b{k}": f"m-{k}.safetensors"}
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    layout = tv.analyze(index)
    assert len(layout.tree().find("layers.0").files) == 24
    assert_same_tree(layout)


def test_buffers_and_training_state():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm1d(3)
            self.fc = nn.Linear(3, 3)
            self.register_buffer("scratch", torch.zeros(5), persistent=False)

    net = Net()
    assert_same_tree(tv.analyze(net))
    opt = torch.optim.Adam(net.parameters())
    net.fc(torch.zeros(2, 3)).sum().backward()
    opt.step()
    assert_same_tree(tv.analyze(net, optimizer=opt))


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.attn = nn.Linear(dim, 3 * dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.norm = nn.LayerNorm(dim)


class Transformer(nn.Module):
    def __init__(self, layers: int = 100, dim: int = 64, vocab: int = 1000) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Block(dim) for _ in range(layers))
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.embed.weight


def test_a_100_layer_transformer_on_meta():
    with torch.device("meta"):
        model = Transformer()
    model.layers[7].norm.weight = model.layers[3].norm.weight  # one more tie, breaking the fold
    assert_same_tree(tv.analyze(model))


def test_llama_on_meta():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=100,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=512,
        tie_word_embeddings=True,
    )
    with torch.device("meta"):
        assert_same_tree(tv.analyze(transformers.LlamaForCausalLM(cfg)))


# -- overlap groups of more than 64 names (attributed in columns, partners exact) ----------------


@st.composite
def big_groups(draw):
    """About 80 views, mostly over a first storage of at most 96 bytes read whole by one of
    them (so they form one overlap group of more than 64 names), some over a second one,
    under names of one to three parts: gap-free blocks (chains, nested and tied blocks),
    strided views, now and then an empty one; the whole-storage view at a random place."""
    sizes = draw(st.lists(st.integers(16, 96), min_size=2, max_size=2))
    storages = [torch.empty(n, dtype=torch.uint8) for n in sizes]
    spec = st.tuples(st.integers(0, 95), st.integers(0, 95), st.integers(0, 11), st.integers(0, 8))
    specs = draw(st.lists(spec, min_size=78, max_size=84))
    spine = draw(st.integers(0, len(specs)))
    out: dict[str, object] = {}
    for i, (x, y, kind, where) in enumerate(specs):
        if i == spine:
            out["whole"] = storages[0][:]
        s = 1 if kind == 11 else 0
        a = x % sizes[s]
        b = a if kind == 10 else a + 1 + y % (sizes[s] - a)
        prefix = [PARTS[where % len(PARTS)]] * (where // len(PARTS) + where % 2)
        out[".".join([*prefix, f"v{i}"])] = storages[s][a : b : 2 + kind % 2] if kind < 3 else storages[s][a:b]
    if spine == len(specs):
        out["whole"] = storages[0][:]
    on_first = sum(1 for t in out.values() if t.untyped_storage().data_ptr() == storages[0].data_ptr() and t.numel())
    for k in range(max(0, 66 - on_first)):  # enough names on the first storage for a group past 64
        out[f"pad{k}"] = storages[0][k % sizes[0] :][:2]
    return storages, out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(big_groups())
def test_groups_past_64_names_equal_the_reference(case):
    _, views = case
    layout = tv.analyze(views)
    assert any(len(g) > 64 for g in layout.shared("overlap"))
    assert_same_tree(layout)


def test_a_chain_of_100_names_counts_each_under_its_neighbour():
    buf = torch.zeros(100 * 32 + 32)
    layout = tv.analyze({f"p{i}": buf[i * 32 : i * 32 + 64] for i in range(100)})
    tree = layout.tree()
    p5 = tree.find("p5")
    assert (p5.counted_in, p5.partners, p5.nbytes, p5.shared_nbytes) == (("overlaps", "p4"), ("p4", "p6"), 128, 128)
    assert tree.find("p0").partners == ("p1",) and tree.find("p99").partners == ("p98",)
    assert tree.root.nbytes == (100 * 32 + 32) * 4
    assert_same_tree(layout)


def test_past_the_pair_budget_partners_are_the_group_and_bytes_stay_exact(monkeypatch):
    import tensorviz.core.attribution as attribution_module
    import tensorviz.core.tree as tree_module

    monkeypatch.setattr(attribution_module, "BIG_PAIRS", 10)
    monkeypatch.setattr(tree_module, "BIG_PAIRS", 10)
    buf = torch.zeros(70 * 8 + 8)
    views = {f"m{i % 3}.p{i}": buf[i * 8 : i * 8 + 16] for i in range(70)}
    layout = tv.analyze(views)
    got, want = layout.tree(), reference_tree(layout)
    for g, w in zip(got.nodes(), want.nodes()):
        assert (g.path, g.nbytes, g.shared_nbytes, g.counted_in) == (w.path, w.nbytes, w.shared_nbytes, w.counted_in)
    p5 = got.find("m2.p5")
    assert len(p5.partners) == 69 and "m0.p0" in p5.partners  # the whole group, not only m1.p4 and m0.p6


def test_partners_found_per_name_when_every_pair_would_pass_the_budget(monkeypatch):
    """(piece, reader) pairs within the budget, but every member's partners at once past it:
    each member's partners are found when read, and equal the reference's."""
    import tensorviz.core.attribution as attribution_module
    import tensorviz.core.tree as tree_module

    monkeypatch.setattr(attribution_module, "BIG_PAIRS", 200)
    monkeypatch.setattr(tree_module, "BIG_PAIRS", 200)
    buf = torch.zeros(70 * 8 + 8)
    layout = tv.analyze({f"m{i % 3}.p{i}": buf[i * 8 : i * 8 + 16] for i in range(70)})  # 140 pairs, 278 at once
    assert_same_tree(layout)
    assert layout.tree().find("m2.p5").partners == ("m1.p4", "m0.p6")
