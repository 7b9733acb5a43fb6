"""The diff's words at scale: the C-level passes that fold names, cut renamed names and total
bytes per module give exactly what their plain definitions (kept here, as they were written
first) give, on names hypothesis draws; and print(d) of 100k renamed tensors is a screen."""

from __future__ import annotations

import re

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorviz as tv
from tensorviz.core.diff_modules import prefix_totals
from tensorviz.core.diff_text import _range, _renamed_as, fold

_PLAIN_NUMBER = re.compile(r"(?<=\.)([0-9]+)(?=\.|$)|^([0-9]+)(?=\.|$)")


def plain_fold(items: list[tuple[str, str]], least: int = 3) -> list[tuple[str, str, int]]:
    """fold as first written: a regex per name, numbers replaced by '#' (names here hold no '#')."""
    runs: dict[tuple[str, str], list] = {}
    for name, tail in items:
        numbers = [m.group(0) for m in _PLAIN_NUMBER.finditer(name)]
        key = (_PLAIN_NUMBER.sub("#", name), tail) if numbers else (name, tail)
        runs.setdefault(key, []).append((name, numbers))
    out = []
    for (pattern, tail), members in runs.items():
        if len(members) < least:
            out.extend((name, tail, 1) for name, _ in members)
            continue
        first = members[0][1]
        parts = pattern.split("#")
        shown = [
            _range([m[1][k] for m in members]) if any(m[1][k] != first[k] for m in members) else first[k]
            for k in range(len(first))
        ]
        out.append(("".join(p + v for p, v in zip(parts, shown)) + parts[-1], tail, len(members)))
    return out


def plain_renamed_as(a: str, b: str) -> str:
    k = 0
    while k < min(len(a), len(b)) and a[-1 - k] == b[-1 - k]:
        k += 1
    if k == len(a) and (len(b) == k or b[-k - 1] == "."):
        return b[: len(b) - k] + "…"
    return b


def plain_totals(names: list[str], own: list[int], depth: int | None) -> dict[str, int]:
    totals: dict[str, int] = {}
    for name, n in zip(names, own):
        parts = name.split(".")
        for k in range(1, (len(parts) if depth is None else min(depth, len(parts))) + 1):
            path = ".".join(parts[:k])
            totals[path] = totals.get(path, 0) + n
    return totals


part = st.one_of(
    st.sampled_from(["layers", "h", "w", "0", "1", "12", "007", "x1", "1x", "a1b2", "", "a.b", "\u0663", "\n"]),
    st.integers(0, 40).map(str),
)
names = st.lists(part, min_size=1, max_size=5).map(".".join)


@settings(max_examples=600, deadline=None)
@given(st.lists(st.tuples(names, st.sampled_from(["", "t", "dtype a → b"])), max_size=60), st.integers(1, 4))
def test_fold_is_the_plain_fold(items: list[tuple[str, str]], least: int) -> None:
    assert fold(items, least) == plain_fold(items, least)


def test_fold_does_not_take_a_hash_sign_for_a_number() -> None:
    """The plain fold keyed names by '#' in place of numbers: 'a.#.w' folded with 'a.1.w'."""
    assert fold([("a.#.w", ""), ("a.1.w", ""), ("a.2.w", "")]) == [("a.#.w", "", 1), ("a.1.w", "", 1), ("a.2.w", "", 1)]


@settings(max_examples=300, deadline=None)
@given(names, st.sampled_from(["", "module.", "_orig_mod.module.", "x", "base_model.model."]), names)
def test_renamed_as_is_the_plain_cut(a: str, prefix: str, other: str) -> None:
    pairs = [(a, prefix + a), (a, other), (other, a)]
    assert _renamed_as(pairs) == [(x, "→ " + plain_renamed_as(x, y)) for x, y in pairs]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(names, st.integers(0, 1 << 61)), max_size=30, unique_by=lambda x: x[0]),
    st.one_of(st.none(), st.integers(1, 4)),
)
def test_prefix_totals_are_the_plain_totals(named: list[tuple[str, int]], depth: int | None) -> None:
    ns, own = [n for n, _ in named], [v for _, v in named]
    assert prefix_totals(ns, own, depth) == plain_totals(ns, own, depth)


def test_print_of_100k_renamed_tensors_is_one_screen() -> None:
    """Every name renamed by one rule, 1 % cast: the renames, changes and module totals fold."""
    w = torch.zeros(2)
    a = {f"layers.{i}.{p}": w[:1] if p == "w" else w for i in range(25_000) for p in ("w", "b", "q", "k")}
    b = {"module." + k: (v.half() if k.endswith(".q") and int(k.split(".")[1]) % 100 == 0 else v) for k, v in a.items()}
    lines = str(tv.diff(a, b)).splitlines()
    assert max(map(len, lines)) <= 80 and len(lines) <= 40
    assert "  layers.{0…24999}.w  (25000×)  → module.…" in lines
    assert "  layers.{0,100,200,300,…}.q  (250×)  dtype float32 → float16, nbytes 8 → 4" in lines
    assert "  layers.0.b = layers.0.q = layers.0.k = … (75000 names)" in lines  # b, q, k: one tie in a
    assert "  layers.0.q  0 B → 4 B (+4 B)" in lines  # a cast q owns bytes of its own in b
    assert "  layers.{100,200,300,400,…}  (249×)  0 B → 4 B (+4 B)" in lines


def plain_modules(d, depth: int | None) -> list[tuple[str, int, int]]:
    """Bytes per module as first written: every prefix of a's names and of b's (in a's words)."""
    from tensorviz.core.diff_modules import owned_bytes

    in_a = {nb: na for na, nb in d.renamed}
    ta = plain_totals(list(d.layout_a.names), owned_bytes(d.layout_a), depth)
    tb = plain_totals([in_a.get(n, n) for n in d.layout_b.names], owned_bytes(d.layout_b), depth)
    out = [(p, ta.get(p, 0), tb.get(p, 0)) for p in ta.keys() | tb.keys() if ta.get(p, 0) != tb.get(p, 0)]
    return sorted(out, key=lambda m: (-abs(m[2] - m[1]), m[0]))


@settings(max_examples=120, deadline=None)
@given(
    st.lists(st.sampled_from(["keep", "cast", "clone", "drop", "tie", "grow"]), min_size=1, max_size=12),
    st.sampled_from(["", "module."]),
    st.one_of(st.none(), st.integers(1, 3)),
    st.booleans(),
)
def test_module_bytes_and_matches_are_the_plain_ones(edits: list[str], prefix: str, depth, extra_b: bool) -> None:
    """Side b edits side a name by name (a cast, a copy, a name dropped, a tie made, a bigger
    tensor), maybe under a wrapper prefix and with a name of its own: the module totals from the
    changed names alone equal the totals of every prefix of both sides, and ``matches`` pairs
    each name of a with its own name in b."""
    base = torch.zeros(64)
    a = {f"layers.{k}.{'w' if k % 2 else 'b'}": base[k : k + 4] if k % 3 else torch.zeros(4) for k in range(len(edits))}
    b: dict = {}
    first = next(iter(a.values()))
    for (name, t), edit in zip(a.items(), edits):
        if edit == "drop":
            continue
        t = {"cast": t.half(), "clone": t.clone(), "tie": first, "grow": torch.zeros(9)}.get(edit, t)
        b[prefix + name] = t
    if extra_b:
        b[prefix + "head.extra"] = torch.zeros(3)
    d = tv.diff(a, b)
    assert [(m.path, m.a, m.b) for m in d.modules(depth)] == plain_modules(d, depth)
    by_rule, only = dict(d.renamed), set(d.only_a)
    names_b = d.layout_b.names
    for i, name in enumerate(d.layout_a.names):
        j = int(d.matches[i])
        assert (j < 0) == (name in only) and (j < 0 or names_b[j] == by_rule.get(name, name))


def test_names_of_one_shape_that_do_not_fold_stay_apart() -> None:
    """100k names of a few shapes, none numbered (w0 ... w99999): each is its own run, in order
    (cutting them by shape once sliced each run out of the whole shape: 73 s; now 0.7 s)."""
    items = [(f"w{i}", "t") for i in range(100_000)]
    assert fold(items) == [(n, "t", 1) for n, _ in items]
