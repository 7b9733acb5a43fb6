"""``tv.explain_view``: torch's own view rule, checked against torch on random tensors.

Every prediction is compared with what torch does: ``x.view`` raises or not (and the strides it
gives), ``x.reshape`` shares the storage or not, ``x.contiguous()`` copies or not, each suggested
alternative runs, and each pair the reason names is a pair torch refuses to merge.
"""

from __future__ import annotations

import math
import subprocess
import sys
import weakref

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorviz as tv
from tensorviz.core.errors import TensorvizError
from tensorviz.plan import viewrule as rule
from tensorviz.render.mpl import layer
from tests.helpers.pictures import embedded_images


def shares(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage()._cdata == b.untyped_storage()._cdata


def strided(shape, stride, offset) -> torch.Tensor:
    """A view of a fresh storage just big enough (zero and overlapping strides allowed)."""
    n = math.prod(shape)
    size = offset + (sum((s - 1) * t for s, t in zip(shape, stride)) + 1 if n else 1)
    return torch.arange(float(size)).as_strided(shape, stride, offset)


@st.composite
def cases(draw):
    nd = draw(st.integers(0, 4))
    zero = draw(st.integers(0, 9)) == 0
    shape = tuple(draw(st.sampled_from((1, 2, 3, 4, 6) if not zero else (0, 1, 2, 3))) for _ in range(nd))
    if zero and nd:
        shape = shape[:-1] + (0,)
    # strides: often the contiguous ones of some permutation, sometimes anything (0, overlapping)
    base = rule.contiguous_strides(shape)
    order = draw(st.permutations(range(nd)))
    permuted = [base[order[d]] * draw(st.sampled_from((1, 1, 1, 2))) for d in range(nd)]
    stride = tuple(draw(st.one_of(st.just(s), st.just(0), st.integers(0, 30))) for s in permuted)
    offset = draw(st.integers(0, 5))
    return shape, stride, offset, draw(targets(math.prod(shape)))


@st.composite
def targets(draw, n):
    if n == 0:
        out = [draw(st.integers(0, 3)) for _ in range(draw(st.integers(1, 3)))]
        out[draw(st.integers(0, len(out) - 1))] = 0
    else:
        dims = draw(st.integers(1, 4))
        out = [1] * dims
        for f in primes(n):
            out[draw(st.integers(0, dims - 1))] *= f
    if draw(st.integers(0, 4)) == 0:
        out[draw(st.integers(0, len(out) - 1))] = -1
    if draw(st.integers(0, 9)) == 0:  # sometimes a wrong number of elements
        out.append(draw(st.integers(2, 3)))
    return tuple(out)


def primes(n: int) -> list[int]:
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


def torch_view(x, shape):
    try:
        return x.view(shape), None
    except RuntimeError as err:
        return None, str(err)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_view_and_reshape_are_predicted_as_torch_decides(case):
    shape, stride, offset, target = case
    x = strided(shape, stride, offset)
    view, err = torch_view(x, target)
    try:
        reshaped = x.reshape(target)
    except RuntimeError as reshape_err:
        with pytest.raises(rule.ShapeError):  # torch refuses the shape itself: so do we
            tv.explain_view(x, target)
        assert err is not None and str(reshape_err).split(":")[0][:20] in err
        return
    e = tv.explain_view(x, target)
    assert e.view_works == (view is not None), (case, err)
    assert e.reshape_copies == (not shares(x, reshaped)), case
    assert e.new_shape == tuple(reshaped.shape)
    if view is not None:
        assert e.view_stride == view.stride() and e.blocked == () and e.reason == ""
    else:
        assert "view size is not compatible" in err
        assert e.blocked and e.reason.startswith(f"output dim {e.blocked[0].out_dim} ")
    assert (e.contiguous_nbytes == 0) == x.is_contiguous()
    assert e.contiguous_nbytes in (0, x.numel() * x.element_size())
    for b in e.blocked:
        check_torch_refuses_the_pair(x, e, b)
    for alt in e.alternatives:
        check_alternative(x, e, alt)


def check_torch_refuses_the_pair(x, e, b):
    """The pair named cannot merge in torch: viewing x with just those dims merged fails, and
    the named output dim runs across the boundary between them."""
    k, k2 = b.pair
    assert x.shape[k] != 1 and x.shape[k2] != 1 and all(x.shape[d] == 1 for d in range(k + 1, k2))
    merged = x.shape[:k] + (math.prod(x.shape[k : k2 + 1]),) + x.shape[k2 + 1 :]
    assert torch_view(x, merged)[0] is None, (x.shape, x.stride(), b)
    assert b.actual == x.stride(k) != b.needed == x.shape[k2] * x.stride(k2)
    boundary = math.prod(x.shape[k2:])
    j = b.out_dim
    assert math.prod(e.new_shape[j + 1 :]) < boundary < math.prod(e.new_shape[j:])
    assert k in b.in_dims and k2 in b.in_dims


def check_alternative(x, e, alt):
    out = eval(alt.code, {"x": x})  # the suggestion, run as written
    assert alt.works and tuple(out.shape) == e.new_shape, alt
    assert shares(x, out) == (not alt.copies), alt
    if "permute" not in alt.code:
        assert torch.equal(out, x.reshape(e.target)), alt


def test_a_transpose_cannot_be_flattened_and_the_reason_names_its_dims():
    x = torch.arange(24.0).reshape(2, 3, 4).transpose(1, 2)  # (2, 4, 3), stride (12, 1, 4)
    e = tv.explain_view(x, (2, 12))
    assert (e.view_works, e.reshape_copies, e.view_stride) == (False, True, None)
    assert e.blocked == (rule.Blocked(out_dim=1, in_dims=(1, 2), pair=(1, 2), needed=12, actual=1),)
    assert e.reason == (
        "output dim 1 (size 12) runs across input dims 1, 2 (sizes 4, 3), but dims 1 and 2 cannot merge: "
        "dim 1 has stride 1, and to continue dim 2 (size 3, stride 4) it needs stride 3·4 = 12"
    )
    assert e.contiguous_nbytes == 96
    assert [a.code for a in e.alternatives] == [
        "x.reshape(2, 12)",
        "x.contiguous().view(2, 12)",
        "x.permute(0, 2, 1).view(2, 12)",
    ]
    assert [a.copies for a in e.alternatives] == [True, True, False]
    text = str(e)
    assert "x.view(2, 12) fails" in text and "why: output dim 1 (size 12)" in text
    assert "x.contiguous() allocates a new 96 B storage (24 float32 elements)" in text


def test_two_blocked_places_are_both_named_torchs_first_first():
    x = torch.zeros(2, 3, 4).permute(2, 1, 0)  # (4, 3, 2), stride (1, 4, 12): nothing merges
    e = tv.explain_view(x, (24,))
    assert [b.pair for b in e.blocked] == [(1, 2), (0, 1)]
    assert [b.out_dim for b in e.blocked] == [0, 0]
    assert e.alternatives[-1].code == "x.permute(2, 1, 0).view(24)"


def test_size_one_dims_zero_strides_and_empty_tensors():
    col = torch.zeros(5, 1)[:, :1].expand(5, 3)  # stride (1, 0)
    assert tv.explain_view(col, (15,)).view_works is False
    assert tv.explain_view(col, (5, 1, 3)).view_works is True  # a size-1 dim never splits
    odd = torch.zeros(12).as_strided((3, 1, 4), (4, 99, 1))  # size-1 dim with any stride
    e = tv.explain_view(odd, (12,))
    assert (e.view_works, e.view_stride, e.contiguous_nbytes) == (True, (1,), 0)
    empty = torch.zeros(0, 3).t()
    e = tv.explain_view(empty, (-1,))
    assert (e.view_works, e.new_shape, e.view_stride) == (True, (0,), (1,))
    with pytest.raises(rule.ShapeError, match="unspecified dimension size -1 can be any value"):
        tv.explain_view(empty, (0, -1))
    with pytest.raises(rule.ShapeError, match=r"shape \[5\] is invalid for input of size 12"):
        tv.explain_view(odd, 5)
    with pytest.raises(rule.ShapeError, match="only one dimension can be inferred"):
        tv.explain_view(odd, (-1, -1))


def test_bad_input_is_named():
    with pytest.raises(TensorvizError, match="takes a torch.Tensor, got list"):
        tv.explain_view([1, 2], (2,))
    with pytest.raises(TensorvizError, match="strided tensor"):
        tv.explain_view(torch.eye(3).to_sparse(), (9,))
    with pytest.raises(TensorvizError, match="shape is an int or a sequence of ints"):
        tv.explain_view(torch.zeros(4), (2.0, 2))
    with pytest.raises(TensorvizError, match="shape is an int or a sequence of ints"):
        tv.explain_view(torch.zeros(4), None)


def test_x_is_never_read_changed_or_kept():
    meta = torch.empty(4096, 4096, device="meta").t()  # no data at all: metadata must suffice
    e = tv.explain_view(meta, (-1,))
    assert (e.view_works, e.contiguous_nbytes) == (False, 4096 * 4096 * 4)
    x = torch.arange(12.0).reshape(3, 4).t()
    version, ref = x._version, weakref.ref(x)
    e = tv.explain_view(x, (12,))
    e.figure()
    assert x._version == version and x.stride() == (1, 4)
    del x
    assert ref() is None  # the explanation keeps no tensor


def test_a_slice_says_what_it_keeps_alive():
    big = torch.empty(100 * 2**20, dtype=torch.float32, device="meta")  # 400 MiB, nothing allocated
    piece = big[1024:2048]  # 4 KiB
    e = tv.explain_view(piece, (32, 32), name="piece")
    assert (e.keeps.storage_nbytes, e.keeps.read_nbytes) == (400 * 2**20, 4096)
    assert e.keeps.sentence() == (
        "piece reads 4.0 KiB but keeps its whole 400.0 MiB storage alive; piece.clone() would hold "
        "4.0 KiB (419,426,304 bytes fewer)"
    )
    assert "keeps alive: piece reads 4.0 KiB but keeps its whole 400.0 MiB" in str(e)


def test_figure_marks_the_dims():
    x = torch.arange(24.0).reshape(2, 3, 4).transpose(1, 2)
    fig = tv.explain_view(x, (2, 12)).figure()
    dims_in, dims_out = layer(fig, "dims-in"), layer(fig, "dims-out")
    assert dims_in.tensorviz_owner.tolist() == [0, 1, 2] and dims_out.tensorviz_owner.tolist() == [0, 1]
    red = (0.8, 0.2, 0.06666666666666667, 1.0)
    assert [tuple(c) == red for c in dims_out.get_edgecolor()] == [False, True]  # output dim 1 is blocked
    words = [t.get_text() for t in fig.axes[0].texts]
    assert any(t.get_gid() == "dims-blocked-1" and t.get_text() == "✗" for t in fig.axes[0].texts)
    assert "x.view(2, 12) fails: view cannot merge the dims marked ✗" in words
    assert layer(fig, "dims-links").tensorviz_owner == [(0, 0), (1, 1), (1, 2)]
    with pytest.raises(KeyError):
        layer(fig, "dims-merge")  # no two dims of x are contiguous with each other
    ok = tv.explain_view(torch.arange(12.0).reshape(3, 4), (2, 6)).figure()
    assert layer(ok, "dims-merge").tensorviz_owner.tolist() == [1]  # dims 0 and 1 merge
    assert layer(ok, "grid-1").tensorviz_owner.tolist() == list(range(12))  # the view, drawn
    assert "x.view(2, 6)" in [t.get_text() for t in ok.axes[0].texts]


def test_the_suggested_fixes_run_in_a_fresh_interpreter():
    x = torch.arange(24.0).reshape(2, 3, 4).transpose(1, 2)
    e = tv.explain_view(x, (2, 12))
    lines = ["import torch", "x = torch.arange(24.0).reshape(2, 3, 4).transpose(1, 2)"]
    lines += [
        f"y = {a.code}; print(tuple(y.shape), y.untyped_storage()._cdata == x.untyped_storage()._cdata)"
        for a in e.alternatives
    ]
    out = subprocess.run(
        [sys.executable, "-c", "\n".join(lines)], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.splitlines() == [f"(2, 12) {not a.copies}" for a in e.alternatives]


def test_mimebundle_has_text_png_and_escaped_html():
    x = torch.zeros(2, 3).t()
    bundle = tv.explain_view(x, (6,), name="<b>x</b>")._repr_mimebundle_()
    assert bundle["text/plain"].startswith("<b>x</b>: float32[3, 2]")
    assert "&lt;b&gt;x&lt;/b&gt;.view(6) fails" in bundle["text/html"] and "<b>x</b>" not in bundle["text/html"]
    # the picture once, as an inline SVG that fits the output, its pixels kept for sanitizers
    assert "<svg" in bundle["text/html"] and [m for m, _ in embedded_images(bundle["text/html"])] == ["image/webp"]
    assert "image/png" not in bundle


@pytest.mark.parametrize(
    "module", ["tensorviz.plan.viewrule", "tensorviz.core.keepalive", "tensorviz.render.explain_view"]
)
def test_docstring_examples_run(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0


def test_explain_and_the_model_map_say_what_a_slice_keeps_alive():
    big = torch.empty(100 * 2**20, device="meta")
    fig = tv.explain(big[1024:1040].view(4, 4), names=["piece"])
    alive = [t.get_text() for t in fig.axes[0].texts if t.get_gid() == "alive"]
    assert alive == [
        "piece reads 64 B but keeps its whole 400.0 MiB storage alive; piece.clone() would hold 64 B "
        "(419,430,336 bytes fewer)"
    ]
    x = torch.arange(12.0)
    assert [t for t in fig.axes[0].texts if t.get_gid() == "alive"]
    whole = tv.explain(x, x[2:6], names=["x", "x[2:6]"])  # x reads it all: nothing kept in vain
    assert not [t for t in whole.axes[0].texts if t.get_gid() == "alive"]
    lay = tv.analyze({"emb.piece": big[1024:2048], "emb.weight": torch.zeros(3, 3), "head.w": x[2:4], "head.v": x[8:]})
    lines = lay.tree().to_text().splitlines()
    piece = next(line for line in lines if "piece" in line)
    assert piece.endswith(
        "float32[1024]  keeps its 400.0 MiB storage alive; 419,426,304 B of it no tensor reads (.clone() frees them)"
    )
    w = next(line for line in lines if "─ w " in line)
    assert w.endswith("float32[2]  keeps its 48 B storage alive; 24 B of it no tensor reads (.clone() frees them)")
    assert "keeps" not in next(line for line in lines if "weight" in line)
    assert lay.tree().find("head.v").kept == (48, 24)


def test_a_file_storage_is_not_said_to_be_kept_alive(tmp_path):
    from safetensors.torch import save_file

    save_file({"a": torch.zeros(4), "b": torch.zeros(2)}, tmp_path / "m.safetensors")
    lay = tv.analyze(tmp_path / "m.safetensors")
    assert "keeps" not in lay.tree().to_text()


def test_views_too_scattered_to_draw_are_still_explained_in_text():
    far = torch.zeros(4096).as_strided((16, 16), (256, 2))  # 16 runs of 31 cells: over MAX_CELLS
    bundle = tv.explain_view(far, (256,))._repr_mimebundle_()
    assert "x.view(256) fails" in bundle["text/plain"] and "MAX_CELLS=256" in bundle["text/html"]


def test_long_reasons_wrap_inside_the_figure():
    e = tv.explain_view(torch.empty(4096, 4096, device="meta").t(), (-1,), name="w.t()")
    fig = e.figure()
    fig.canvas.draw()
    right = fig.get_window_extent().x1
    words = [t for t in fig.axes[0].texts if t.get_gid() == "view-words"]
    assert len(words) >= 6 and all(t.get_window_extent().x1 <= right for t in words)
