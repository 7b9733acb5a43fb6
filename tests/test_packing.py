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
from tests.test_packed_files import AWQ_CONFIG, FP8_CONFIG, GPTQ_CONFIG, GROUP, N_IN, N_OUT, P, folder

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

    from tests.test_packed_files import _compressed_checkpoint

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
