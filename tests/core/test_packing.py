"""``tv.explain_packing``: which bits of which byte hold element (o, i) of a packed weight, and its
scale, checked against each library's own unpacking (issue 26).

- bitsandbytes (live, CPU): flip exactly the predicted bits of the packed weight, or change the
  predicted scale element, and run bitsandbytes' own ``dequantize_4bit`` /
  ``int8_vectorwise_dequant``: exactly element (o, i) changes (the scale: exactly its block/row).
- GPTQ and AWQ (files, random words): the bits read at the predicted byte of the file equal what
  the AutoGPTQ / AutoAWQ unpack formulas (torch bit shifts over the whole tensor, AWQ's column
  reordering included) give for (o, i); the scale's bytes equal ``scales[g, o]``.
- FP8 block scales: the predicted bytes are ``weight[o, i]`` and ``weight_scale_inv[o // 128, i // 128]``.
"""

from __future__ import annotations

import pytest
import torch

import tensorviz as tv
from tests.sources.test_packed_files import AWQ_CONFIG, FP8_CONFIG, GPTQ_CONFIG, GROUP, N_IN, N_OUT, P, folder

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
ELEMENTS = [(0, 0), (0, 1), (1, 0), (3, 5), (31, 63), (17, 42)]


def _changed(a: torch.Tensor, b: torch.Tensor) -> set[tuple[int, int]]:
    return {tuple(x) for x in (a != b).nonzero().tolist()}


@pytest.mark.parametrize("quant_type", ["nf4", "fp4"])
def test_params4bit_bits_and_block_against_bitsandbytes_dequantize(quant_type):
    bnb = pytest.importorskip("bitsandbytes")
    import bitsandbytes.functional as F

    torch.manual_seed(0)
    m = torch.nn.Sequential(bnb.nn.Linear4bit(64, 32, quant_type=quant_type, compress_statistics=False)).to("cpu")
    w = m[0].weight
    qs, packed = w.quant_state, w.data
    base = F.dequantize_4bit(packed, qs)
    raw = packed.view(-1)
    for o, i in ELEMENTS:
        place = tv.explain_packing(m, "0.weight", (o, i))
        v = place.value
        assert (v.name, v.hi - v.lo) == ("0.weight", 4)
        flipped = raw.clone()
        flipped[v.byte] ^= ((1 << (v.hi - v.lo)) - 1) << v.lo  # the predicted nibble, all its bits
        assert _changed(F.dequantize_4bit(flipped.view_as(packed), qs), base) == {(o, i)}
        s = place.scale
        assert s.name == "0.weight.absmax" and s.byte % 4 == 0 and (s.hi - s.lo) == 32
        saved = qs.absmax.clone()
        try:
            qs.absmax = saved.clone()
            qs.absmax[s.byte // 4] *= 2  # the predicted scale element
            block = _changed(F.dequantize_4bit(packed, qs), base)
        finally:
            qs.absmax = saved
        n = o * 64 + i
        assert block == {divmod(k, 64) for k in range(n // 64 * 64, n // 64 * 64 + 64) if base.view(-1)[k] != 0}
        assert (o, i) in block or base[o, i] == 0
        assert place.group == (n // 64,)


def test_int8params_byte_and_row_scale_against_bitsandbytes_dequantize():
    bnb = pytest.importorskip("bitsandbytes")
    import bitsandbytes.functional as F

    torch.manual_seed(0)
    m = torch.nn.Sequential(bnb.nn.Linear8bitLt(64, 32, has_fp16_weights=False)).to("cpu")
    w = m[0].weight
    base = F.int8_vectorwise_dequant(w.CB, w.SCB)
    for o, i in ELEMENTS:
        place = tv.explain_packing(m, "0.weight", (o, i))
        cb = w.CB.clone()
        cb.view(-1)[place.value.byte] += 1  # int8: the predicted byte is the element
        assert _changed(F.int8_vectorwise_dequant(cb, w.SCB), base) == {(o, i)}
        scb = w.SCB.clone()
        scb[place.scale.byte // 4] *= 2
        assert _changed(F.int8_vectorwise_dequant(w.CB, scb), base) == {(o, r) for r in range(64) if base[o, r] != 0}
    print(place)
    assert str(place).startswith("0.weight[17, 42] (Int8Params): all 8 bits of byte 1,130 (0.weight[17, 42])")


def _random_words(*shape: int) -> torch.Tensor:
    return torch.randint(-(2**31), 2**31 - 1, shape, dtype=torch.int32)


def _file_bits(data: bytes, cell) -> int:
    word = int.from_bytes(data[cell.byte : cell.byte + 1], "little")
    return (word >> cell.lo) & ((1 << (cell.hi - cell.lo)) - 1)


def test_gptq_bits_against_the_autogptq_unpack_formula(tmp_path):
    torch.manual_seed(0)
    groups = N_IN // GROUP
    t = {f"{P}.qweight": _random_words(N_IN // 8, N_OUT), f"{P}.qzeros": _random_words(groups, N_OUT // 8),
         f"{P}.scales": torch.randn(groups, N_OUT, dtype=torch.float16),
         f"{P}.g_idx": torch.arange(N_IN, dtype=torch.int32) // GROUP}  # fmt: skip
    d = folder(tmp_path, t, GPTQ_CONFIG)
    data = (d / "model.safetensors").read_bytes()
    wf = torch.arange(0, 32, 4, dtype=torch.int32)  # AutoGPTQ: shifts of the 8 values in a word
    weight = ((t[f"{P}.qweight"].unsqueeze(1) >> wf.view(1, -1, 1)) & 15).reshape(N_IN, N_OUT)  # [in, out]
    zeros = ((t[f"{P}.qzeros"].unsqueeze(2) >> wf.view(1, 1, -1)) & 15).reshape(groups, N_OUT)
    for o, i in [(0, 0), (5, 9), (127, 255), (64, 130), (1, 7), (100, 64)]:
        place = tv.explain_packing(d, f"{P}.weight", (o, i))
        g = int(t[f"{P}.g_idx"][i])
        assert place.group == (g,)
        assert _file_bits(data, place.value) == int(weight[i, o])
        assert _file_bits(data, place.zero) == int(zeros[g, o])
        s = place.scale
        assert data[s.byte : s.byte + 2] == t[f"{P}.scales"][g, o].reshape(1).view(torch.uint8).numpy().tobytes()


def test_awq_bits_against_the_autoawq_unpack_formula(tmp_path):
    torch.manual_seed(0)
    groups = N_IN // GROUP
    t = {f"{P}.qweight": _random_words(N_IN, N_OUT // 8), f"{P}.qzeros": _random_words(groups, N_OUT // 8),
         f"{P}.scales": torch.randn(groups, N_OUT, dtype=torch.float16)}  # fmt: skip
    d = folder(tmp_path, t, AWQ_CONFIG)
    data = (d / "model.safetensors").read_bytes()
    shifts = torch.arange(0, 32, 4, dtype=torch.int32)
    reverse = [0, 4, 1, 5, 2, 6, 3, 7]  # AutoAWQ's AWQ_REVERSE_ORDER

    def unpack(q: torch.Tensor) -> torch.Tensor:  # AutoAWQ's unpack_awq + reverse_awq_order
        w = ((q[:, :, None] >> shifts[None, None, :]) & 15).view(q.shape[0], -1)
        return w.view(-1, 8)[:, reverse].view(q.shape[0], -1)

    weight, zeros = unpack(t[f"{P}.qweight"]), unpack(t[f"{P}.qzeros"])  # [in, out], [groups, out]
    for o, i in [(0, 0), (5, 9), (127, 255), (64, 130), (1, 7), (6, 64)]:
        place = tv.explain_packing(d, f"{P}.weight", (o, i))
        g = i // GROUP
        assert _file_bits(data, place.value) == int(weight[i, o])
        assert _file_bits(data, place.zero) == int(zeros[g, o])
        s = place.scale
        assert data[s.byte : s.byte + 2] == t[f"{P}.scales"][g, o].reshape(1).view(torch.uint8).numpy().tobytes()


def test_fp8_byte_and_block_scale(tmp_path):
    torch.manual_seed(0)
    t = {f"{P}.weight": torch.randn(256, 256).to(torch.float8_e4m3fn),
         f"{P}.weight_scale_inv": torch.randn(2, 2, dtype=torch.float32)}  # fmt: skip
    d = folder(tmp_path, t, FP8_CONFIG, dtype="bfloat16")
    data = (d / "model.safetensors").read_bytes()
    for o, i in [(0, 0), (200, 3), (129, 255)]:
        place = tv.explain_packing(d, f"{P}.weight", (o, i))
        assert (
            data[place.value.byte : place.value.byte + 1]
            == t[f"{P}.weight"][o, i].reshape(1).view(torch.uint8).numpy().tobytes()
        )
        s = place.scale
        assert place.group == (o // 128, i // 128)
        assert data[s.byte : s.byte + 4] == t[f"{P}.weight_scale_inv"][o // 128, i // 128].numpy().tobytes()


def test_bad_requests_say_why():
    with pytest.raises(KeyError, match="not a logical weight stored in pieces"):
        tv.explain_packing({"w": torch.zeros(2, 2)}, "w", (0, 0))
    from torch.testing._internal.two_tensor import TwoTensor

    with pytest.raises(ValueError, match="knows where the elements of GPTQ"):
        tv.explain_packing({"w": TwoTensor(torch.zeros(2, 2), torch.ones(2, 2))}, "w", (0, 0))


@pytest.mark.parametrize(("bits", "group", "symmetric"), [(4, 32, True), (3, 32, True), (8, 64, True), (4, 32, False)])
def test_compressed_tensors_bits_against_its_own_unpack(tmp_path, bits, group, symmetric):
    """compressed-tensors packs each row densely (3-bit values cross bytes and words): the bits
    read at the predicted place, less 2^(bits-1), are what its own unpack_from_int32 gives."""
    pytest.importorskip("compressed_tensors")
    from compressed_tensors.compressors.pack_quantized.helpers import unpack_from_int32

    from tests.sources.test_packed_files import _compressed_checkpoint

    _, d, out, _ = _compressed_checkpoint(tmp_path, bits, group, symmetric)
    data = (d / "model.safetensors").read_bytes()
    q = unpack_from_int32(out["weight_packed"], bits, torch.Size((48, 128)))  # the library's own
    for o, i in [(0, 0), (0, 1), (5, 9), (47, 127), (20, 63), (33, 100)]:
        place = tv.explain_packing(d, f"{P}.weight", (o, i))
        v = place.value
        word = int.from_bytes(data[v.byte : v.byte + 4], "little")
        assert ((word >> v.lo) & ((1 << bits) - 1)) - (1 << (bits - 1)) == int(q[o, i]), (o, i)
        s = place.scale
        assert place.group == (i // group,)
        assert (
            data[s.byte : s.byte + 2]
            == out["weight_scale"][o, i // group].reshape(1).view(torch.uint8).numpy().tobytes()
        )


# -- the other way round: which elements each stored word holds (tv.explain(obj, packed=name)) -------
def _word_bits(data: bytes, word, lo: int, hi: int) -> int:
    value = int.from_bytes(data[word.byte : word.byte + word.nbytes], "little")
    return (value >> lo) & ((1 << (hi - lo)) - 1)


def _check_words(pm, data: bytes, weight: torch.Tensor) -> None:
    """Every element of the corner is in exactly one word, at bits whose value in the file is the
    library's unpacked weight[i, o] ([in, out] as the unpack formulas give it)."""
    seen = [e for w in pm.words for e, _, _ in w.elements]
    assert sorted(seen) == [(o, i) for o in range(pm.rows) for i in range(pm.cols)]
    for w in pm.words:
        assert len(w.elements) == w.holds == 8  # an int32 holds 8 int4 values, all in the corner
        for (o, i), lo, hi in w.elements:
            assert hi - lo == 4 and _word_bits(data, w, lo, hi) == int(weight[i, o])


def test_gptq_words_against_the_autogptq_unpack_formula(tmp_path):
    torch.manual_seed(1)
    groups = N_IN // GROUP
    t = {f"{P}.qweight": _random_words(N_IN // 8, N_OUT), f"{P}.qzeros": _random_words(groups, N_OUT // 8),
         f"{P}.scales": torch.randn(groups, N_OUT, dtype=torch.float16),
         f"{P}.g_idx": torch.arange(N_IN, dtype=torch.int32) // GROUP}  # fmt: skip
    d = folder(tmp_path, t, GPTQ_CONFIG)
    wf = torch.arange(0, 32, 4, dtype=torch.int32)
    weight = ((t[f"{P}.qweight"].unsqueeze(1) >> wf.view(1, -1, 1)) & 15).reshape(N_IN, N_OUT)
    pm = tv.explain_packing(d, f"{P}.weight")
    _check_words(pm, (d / "model.safetensors").read_bytes(), weight)
    first = pm.words[pm.word_of(1, 8)]  # GPTQ: a word holds 8 consecutive inputs of one output
    assert first.name == f"{P}.qweight" and first.index == (1, 1)
    assert [e for e, _, _ in first.elements] == [(1, i) for i in range(8, 16)]
    assert [(lo, hi) for _, lo, hi in first.elements] == [(4 * j, 4 * j + 4) for j in range(8)]


def test_awq_words_against_the_autoawq_unpack_formula(tmp_path):
    torch.manual_seed(2)
    groups = N_IN // GROUP
    t = {f"{P}.qweight": _random_words(N_IN, N_OUT // 8), f"{P}.qzeros": _random_words(groups, N_OUT // 8),
         f"{P}.scales": torch.randn(groups, N_OUT, dtype=torch.float16)}  # fmt: skip
    d = folder(tmp_path, t, AWQ_CONFIG)
    shifts = torch.arange(0, 32, 4, dtype=torch.int32)
    q = t[f"{P}.qweight"]
    weight = ((q[:, :, None] >> shifts[None, None, :]) & 15).view(q.shape[0], -1)
    weight = weight.view(-1, 8)[:, [0, 4, 1, 5, 2, 6, 3, 7]].view(q.shape[0], -1)  # AutoAWQ's reverse order
    pm = tv.explain_packing(d, f"{P}.weight")
    _check_words(pm, (d / "model.safetensors").read_bytes(), weight)
    w = pm.words[pm.word_of(0, 3)]  # AWQ: a word holds 8 outputs of one input, interleaved
    assert w.index == (3, 0) and [e for e, _, _ in w.elements] == [(o, 3) for o in range(8)]
    assert [lo for _, lo, _ in w.elements] == [0, 16, 4, 20, 8, 24, 12, 28]


def test_explain_draws_the_packing_map(tmp_path):
    """tv.explain(obj, packed=name): one cell per element at (i, o), its word's colour, the text
    'w<k> <bits>'; the word list and the rule under it."""
    from matplotlib.patches import Rectangle

    from tensorviz.plan.colors import PALETTE

    t = {
        f"{P}.qweight": _random_words(N_IN // 8, N_OUT),
        f"{P}.scales": torch.ones(N_IN // GROUP, N_OUT, dtype=torch.float16),
    }
    d = folder(tmp_path, t, GPTQ_CONFIG)
    fig = tv.explain(d, packed=f"{P}.weight")
    pm = tv.explain_packing(d, f"{P}.weight")
    ax = fig.axes[0]
    texts = {(t.get_position()[0], t.get_position()[1]): t.get_text() for t in ax.texts}
    assert len(texts) == pm.rows * pm.cols == 8 * 16
    assert texts[(9.5, 1.5)] == "w3 4–7"  # element [1, 9]: word qweight[1, 1], bits 4-7 (value 9 % 8)
    cells = {(r.get_x(), r.get_y()): r.get_facecolor() for r in ax.patches if isinstance(r, Rectangle)}
    from matplotlib.colors import to_rgba

    assert cells[(9, 1)] == to_rgba(PALETTE[pm.word_of(1, 9) % len(PALETTE)])
    assert "rule: qweight[i // 8, o]" in fig.texts[0].get_text()
    with pytest.raises(tv.OptionError, match="one model, folder or Layout"):
        tv.explain(d, d, packed=f"{P}.weight")
