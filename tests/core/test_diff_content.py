"""tv.diff(..., content=True): every pair it calls identical or different is checked with
torch.equal on the real tensors, every redundant copy it names too, from live objects,
safetensors files, torch checkpoints and sharded folders, in chunks smaller than a tensor."""

from __future__ import annotations

import os

import pytest
import torch

import tensorviz as tv
from tensorviz.sources import content as content_mod
from tests.helpers.models import TiedLM

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


def _tensors(obj) -> dict[str, torch.Tensor]:
    """The real tensors behind a side, loaded the ordinary way (the oracle's view)."""
    if isinstance(obj, str) and obj.endswith(".safetensors"):
        from safetensors.torch import load_file

        return load_file(obj)
    if isinstance(obj, str) and os.path.isdir(obj):
        from safetensors.torch import load_file

        out = {}
        for f in sorted(os.listdir(obj)):
            if f.endswith(".safetensors"):
                out.update(load_file(os.path.join(obj, f)))
        return out
    if isinstance(obj, str):
        return torch.load(obj, weights_only=True)
    from tensorviz.sources.live import iter_named_values

    return {n: t for n, t in iter_named_values(obj) if isinstance(t, torch.Tensor)}


def _check_against_torch(d, a, b) -> None:
    ta, tb = _tensors(a), _tensors(b)
    to_b = {n: n for n in ta if n in tb} | dict(d.renamed)
    c = d.content
    assert c is not None and not set(c.identical) & set(c.different)
    for name in c.identical:
        assert torch.equal(ta[name], tb[to_b[name]]), name
    for name in c.different:
        assert ta[name].shape == tb[to_b[name]].shape and not torch.equal(ta[name], tb[to_b[name]]), name
    compared = set(c.identical) | set(c.different)
    same_shape = {n for n, m in to_b.items() if (ta[n].shape, ta[n].dtype) == (tb[m].shape, tb[m].dtype)}
    assert compared == same_shape  # every comparable pair is judged
    for dup in c.duplicates:
        t = ta if dup.side == "a" else tb
        assert torch.equal(t[dup.name], t[dup.of]) and dup.nbytes == t[dup.name].nbytes
    assert not d.same if c.different else True


def _edited() -> tuple[TiedLM, TiedLM]:
    torch.manual_seed(0)
    a = TiedLM()
    b = TiedLM()
    b.load_state_dict(a.state_dict())
    b.lm_head.weight = torch.nn.Parameter(a.wte.weight.detach().clone())  # untied, equal bytes
    with torch.no_grad():
        b.ln.bias.add_(0.5)
    return a, b


@pytest.fixture(params=[64, 1 << 20])
def small_chunks(request, monkeypatch):
    """Hash in 64-byte pieces too (smaller than every tensor here), as well as in big ones."""
    monkeypatch.setattr(content_mod, "CHUNK", request.param)
    return request.param


def test_live_models(small_chunks) -> None:
    a, b = _edited()
    d = tv.diff(a, b, content=True)
    assert set(d.content.identical) == {"wte.weight", "ln.weight", "lm_head.weight"}
    assert d.content.different == ("ln.bias",)
    assert {(x.side, x.name, x.of) for x in d.content.duplicates} == {("b", "lm_head.weight", "wte.weight")}
    assert d.content.unread == ()
    assert d.content.hashed_nbytes == 3200 + 64 + 64 + (3200 + 3200 + 64 + 64)  # a's tie read once
    _check_against_torch(d, a, b)


def test_files_of_each_kind(tmp_path, small_chunks) -> None:
    from safetensors.torch import save_file

    a, b = _edited()
    st = str(tmp_path / "a.safetensors")
    save_file({k: v.detach().clone().contiguous() for k, v in a.state_dict().items()}, st)
    pt = str(tmp_path / "b.pt")
    torch.save(b.state_dict(), pt)
    d = tv.diff(st, pt, content=True)
    assert d.content.different == ("ln.bias",)
    assert {(x.side, x.name, x.of) for x in d.content.duplicates} == {
        ("a", "wte.weight", "lm_head.weight"),  # safetensors sorts names: lm_head.weight comes first
        ("b", "lm_head.weight", "wte.weight"),
    }
    _check_against_torch(d, st, pt)
    d2 = tv.diff(tv.analyze(st), a, content=True)  # a Layout of a file is read from the file
    assert d2.content.different == () and len(d2.content.identical) == 4


def test_non_contiguous_views_hash_their_logical_bytes(tmp_path, small_chunks) -> None:
    from safetensors.torch import save_file

    x = torch.arange(600, dtype=torch.float32).reshape(20, 30)
    live = {"t": x.t(), "cols": x[:, ::3], "row": x[7], "scalar": x[3, 4]}
    path = str(tmp_path / "c.safetensors")
    save_file({k: v.contiguous() for k, v in live.items()}, path)
    d = tv.diff(live, path, content=True)
    assert sorted(d.content.identical) == sorted(live) and d.content.different == ()
    _check_against_torch(d, live, path)
    flipped = {k: v.clone() for k, v in live.items()}
    flipped["t"][29, 19] += 1  # the last logical element only
    assert tv.diff(live, flipped, content=True).content.different == ("t",)


def test_conjugate_and_negative_views_hash_their_values(tmp_path, small_chunks) -> None:
    """A conjugate view (``x.conj()``) or a negative one holds its values' bytes unconjugated /
    unnegated: its logical bytes are hashed, as a file saved from it holds them (content=True
    raised on both before)."""
    from safetensors.torch import save_file

    z = torch.complex(torch.arange(40.0), torch.arange(40.0) + 1).reshape(4, 10)
    live = {"conj": z.conj(), "conj_t": z.t().conj(), "neg": torch.arange(1.0, 9.0)._neg_view()}
    assert live["conj"].is_conj() and live["neg"].is_neg()
    path = str(tmp_path / "v.safetensors")
    save_file({k: v.resolve_conj().resolve_neg().contiguous() for k, v in live.items()}, path)
    d = tv.diff(live, path, content=True)
    assert sorted(d.content.identical) == sorted(live) and d.content.different == () and d.content.unread == ()
    _check_against_torch(d, live, path)
    plain = {"conj": z, "conj_t": z.t(), "neg": torch.arange(1.0, 9.0)}  # the bytes under the views
    assert sorted(tv.diff(live, plain, content=True).content.different) == sorted(live)


def test_sharded_folder_against_the_model(tmp_path, small_chunks) -> None:
    from tests.helpers.models import tiny_gpt2

    model = tiny_gpt2()
    model.save_pretrained(tmp_path / "sh", max_shard_size="5KB")
    d = tv.diff(model, str(tmp_path / "sh"), content=True)
    assert d.content.different == () and d.content.unread == ()
    assert len(d.content.identical) == len(tv.analyze(str(tmp_path / "sh")))
    _check_against_torch(d, model, str(tmp_path / "sh"))


def test_meta_and_dcp_sides_are_listed_as_unread(tmp_path) -> None:
    import torch.distributed.checkpoint as dcp

    cpu = TiedLM()
    d = tv.diff(cpu, TiedLM(device="meta"), content=True)
    assert d.content.identical == d.content.different == ()
    assert {(s, n) for s, n, _ in d.content.unread} == {("b", n) for n in tv.analyze(cpu).names}
    assert all(why == "on meta: no bytes" for _, _, why in d.content.unread)
    dcp.save(cpu.state_dict(), checkpoint_id=str(tmp_path / "dcp"))
    d = tv.diff(cpu, str(tmp_path / "dcp"), content=True)
    assert {n for s, n, _ in d.content.unread if s == "b"} == set(tv.analyze(cpu).names)


def test_default_reads_no_bytes() -> None:
    a, b = _edited()
    assert tv.diff(a, b).content is None


@pytest.mark.parametrize(
    "shape, chunk", [((3, 1000), 64), ((5000,), 100), ((2, 3, 400), 64), ((1, 7), 4), ((), 64), ((0, 5), 64)]
)
def test_chunks_are_bounded_and_complete(shape, chunk, monkeypatch) -> None:
    monkeypatch.setattr(content_mod, "CHUNK", chunk)
    t = torch.arange(int(torch.tensor(shape).prod().item()) if shape else 1, dtype=torch.float32).reshape(shape)
    for view in (t, t.transpose(0, -1) if t.dim() > 1 else t):
        pieces = [bytes(p) for p in content_mod._tensor_chunks(view)]
        assert all(len(p) <= max(chunk, view.element_size()) for p in pieces)
        assert b"".join(pieces) == view.contiguous().numpy().tobytes()


def test_progress_bar_only_when_asked_or_large(capsys) -> None:
    a, b = _edited()
    tv.diff(a, b, content=True)
    assert "hashing" not in capsys.readouterr().err
    tv.diff(a, b, content=True, progress=True)
    assert "tensorviz diff: hashing" in capsys.readouterr().err
