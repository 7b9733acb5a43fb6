"""No raw exception from ``analyze`` on valid Python input: every odd value is skipped or
analysed, with the reason in words (issue 10, part 7: the analyze side)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import tensorviz as tv
from tensorviz.sources.live import iter_named_values


def _quiet(make):
    with warnings.catch_warnings():  # torch's own "beta"/"prototype" notes for sparse and nested
        warnings.simplefilter("ignore")
        return make()


@pytest.mark.parametrize(
    ("kind", "make", "reason"),
    [
        ("csr", lambda t: t.to_sparse_csr(), "sparse_csr tensor: its values and compressed indices"),
        ("csc", lambda t: t.to_sparse_csc(), "sparse_csc tensor: its values and compressed indices"),
        ("bsr", lambda t: t.to_sparse_bsr((1, 2)), "sparse_bsr tensor: its blocks and compressed indices"),
        ("bsc", lambda t: t.to_sparse_bsc((1, 2)), "sparse_bsc tensor: its blocks and compressed indices"),
        ("coo", lambda t: t.to_sparse(), "sparse_coo tensor: its values and indices live in separate"),
        (
            "nested",
            lambda t: torch.nested.nested_tensor([t[0], t[1, :3]]),
            "nested tensor: its components live in a packed buffer",
        ),
        (
            "jagged",
            lambda t: torch.nested.nested_tensor([t[0], t[1, :3]], layout=torch.jagged),
            "nested tensor: its components live in a packed buffer",
        ),
    ],
)
def test_layouts_without_one_strided_view_are_skipped_with_the_reason(kind, make, reason):
    t = torch.arange(12.0).reshape(3, 4)
    odd = _quiet(lambda: make(t))
    layout = tv.analyze({"w": t, kind: odd, "row": t[1]})
    assert layout.names == ("w", "row")
    assert layout.relation("w", "row") == "contains"
    (skip,) = layout.skipped
    assert skip.name == kind and reason in skip.reason, skip.reason


def test_mixed_key_types_are_names():
    t = torch.zeros(4, 3)
    layout = tv.analyze({1: t, "x": t[:2], (2, "a"): t[3]})
    assert layout.names == ("1", "x", "(2, 'a')")
    assert layout.relation("1", "x") == "contains" and layout.relation("x", "(2, 'a')") == "disjoint"
    clash = tv.analyze({1: t, "1": t[:2]})  # 1 and "1" make the same name: the second is skipped
    assert clash.names == ("1",)
    assert [(s.name, s.reason) for s in clash.skipped] == [
        ("1", "duplicate name: an earlier value already has this name")
    ]


def test_a_dict_nested_5000_deep_is_walked_without_recursion():
    t = torch.zeros(6)
    d: dict = {"leaf": t, "view": t[2:]}
    for i in range(5000):
        d = {"k": d, f"side{i}": t[i % 6 :]} if i % 1000 == 0 else {"k": d}
    deep = ".".join(["k"] * 5000)
    layout = tv.analyze(d)
    assert layout.names[:2] == (f"{deep}.leaf", f"{deep}.view")  # depth first, in source order
    sides = tuple(".".join(["k"] * (4999 - i)) + f".side{i}" for i in (0, 1000, 2000, 3000, 4000))
    assert layout.names[2:] == sides
    assert len(layout.storages) == 1
    assert layout.relation(f"{deep}.leaf", f"{deep}.view") == "contains"
    assert [n for n, _ in iter_named_values(d)] == list(layout.names)
    assert "7 tensors on 1 storage" in layout.to_text()


def test_public_answers_about_a_deep_dict_do_not_recurse_per_level():
    import matplotlib.pyplot as plt

    from tensorviz.core.tree import MAX_DEPTH

    t = torch.zeros(6)
    d: dict = {"leaf": t, "view": t[2:]}
    for _ in range(5000):
        d = {"k": d}
    layout = tv.analyze(d)
    tree = layout.tree()
    node, depth = tree.root, 0
    while len(node.children) == 1:
        (node,) = node.children
        depth += 1
    deep = ".".join(["k"] * 5000)
    assert depth == MAX_DEPTH - 1 and node.path == ".".join(["k"] * (MAX_DEPTH - 1))
    # the last level holds the rest of each name
    assert [(c.path, c.children) for c in node.children] == [(f"{deep}.leaf", ()), (f"{deep}.view", ())]
    assert node.nbytes == 24 and tree.root.nbytes == 24
    assert str(tree).startswith("(model)")
    assert "text/html" in layout._repr_mimebundle_()
    plt.close(layout.plot())
    assert "2 tensors" in tv.diagram(layout).to_text()
    assert tv.explore(layout).tensor_layout is layout


def test_deep_lists_and_cycles_deep_inside():
    t = torch.zeros(2)
    inner: list = [t]
    inner.append(inner)  # a cycle at the bottom
    x: list = inner
    for _ in range(3000):
        x = [x]
    layout = tv.analyze(x)
    name = ".".join(["0"] * 3000)
    assert layout.names == (name + ".0",)
    assert [s.name for s in layout.skipped] == [name + ".1"]
    assert "reference cycle" in layout.skipped[0].reason
    assert [n for n, _ in iter_named_values(x)] == [name + ".0"]


def test_a_subclass_whose_torch_function_raises_is_skipped_with_its_error():
    class Hostile(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            raise RuntimeError("no metadata for you\nsecond line")

    bad = torch.zeros(3).as_subclass(Hostile)
    layout = tv.analyze({"bad": bad, "ok": torch.zeros(2)})
    assert layout.names == ("ok",)
    assert [(s.name, s.reason) for s in layout.skipped] == [
        ("bad", "its metadata cannot be read (RuntimeError: no metadata for you)")
    ]
    assert tv.analyze(bad).skipped[0].name == "tensor"


DTENSOR = textwrap.dedent(
    """
    import os, socket
    import torch, torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import distribute_tensor, Shard
    import tensorviz as tv

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        mesh = init_device_mesh("cpu", (1,))
        d = distribute_tensor(torch.arange(8.0).reshape(4, 2), mesh, [Shard(0)])
        local = d.to_local()
        layout = tv.analyze({"d": d, "rows": local[1:3], "sparse": torch.eye(2).to_sparse_csr()})
        print(layout.names, layout["d"].note, layout.relation("d", "rows"), [s.name for s in layout.skipped])
    finally:
        dist.destroy_process_group()
    """
)


def test_dtensor_is_its_local_shard_with_a_note():
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", DTENSOR], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == ("('d', 'rows') DTensor: only this rank's local shard is shown contains ['sparse']"), (
        out.stdout
    )


def test_a_large_overlap_group_names_exact_partners_without_a_tuple_per_name():
    from tensorviz.core.attribution import owners

    base = torch.zeros(2008, dtype=torch.uint8)
    layout = tv.analyze({f"s{i}": base[i : i + 8] for i in range(2000)})  # one overlap group of 2,000
    assert owners(layout).partners.known == {}  # partners are made per name when read, not up front
    node = layout.tree().find("s5")
    assert node.partners == ("s0", "s1", "s2", "s3", "s4", *(f"s{i}" for i in range(6, 13)))  # bytes 5..12
    assert node.counted_in == ("overlaps", "s0")
    assert layout.tree().find("s1999").partners == tuple(f"s{i}" for i in range(1992, 1999))
    assert "↔ shared with s1, s2, s3, … 4 more" in str(layout.tree())  # s0 meets s1..s7
    assert "text/html" in layout._repr_mimebundle_()
