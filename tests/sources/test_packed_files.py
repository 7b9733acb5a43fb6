"""Packed quantized checkpoints (GPTQ, AWQ, FP8 block scales) recognised from files.

Tiny checkpoints written with safetensors in the layouts AutoGPTQ/gptqmodel, AutoAWQ (GEMM) and
DeepSeek-V3 write, beside a config.json with the quantization_config transformers writes. Every
piece's byte range is checked against the file's own header (8-byte length + JSON data_offsets).
"""

from __future__ import annotations

import json
import struct

import pytest
import torch
from safetensors.torch import save_file

import tensorviz as tv
from tensorviz.core.records import Piece

N_IN, N_OUT, GROUP = 256, 128, 64
P = "model.layers.0.mlp.down_proj"


def gptq_tensors(bits: int = 4, groups: int = N_IN // GROUP) -> dict[str, torch.Tensor]:
    return {
        f"{P}.qweight": torch.zeros(N_IN * bits // 32, N_OUT, dtype=torch.int32),
        f"{P}.qzeros": torch.zeros(groups, N_OUT * bits // 32, dtype=torch.int32),
        f"{P}.scales": torch.zeros(groups, N_OUT, dtype=torch.float16),
        f"{P}.g_idx": torch.arange(N_IN, dtype=torch.int32) // GROUP,
        f"{P}.bias": torch.zeros(N_OUT, dtype=torch.float16),
    }


def awq_tensors(bits: int = 4) -> dict[str, torch.Tensor]:
    return {
        f"{P}.qweight": torch.zeros(N_IN, N_OUT * bits // 32, dtype=torch.int32),
        f"{P}.qzeros": torch.zeros(N_IN // GROUP, N_OUT * bits // 32, dtype=torch.int32),
        f"{P}.scales": torch.zeros(N_IN // GROUP, N_OUT, dtype=torch.float16),
    }


def fp8_tensors(scale_rows: int = 2) -> dict[str, torch.Tensor]:
    return {
        f"{P}.weight": torch.zeros(N_OUT * 2, N_IN, dtype=torch.float8_e4m3fn),  # 256 × 256
        f"{P}.weight_scale_inv": torch.ones(scale_rows, 2, dtype=torch.float32),
        "model.norm.weight": torch.ones(N_IN, dtype=torch.bfloat16),
    }


GPTQ_CONFIG = {"quant_method": "gptq", "bits": 4, "group_size": GROUP, "desc_act": False, "sym": True,
               "damp_percent": 0.01, "true_sequential": True, "model_name_or_path": None}  # fmt: skip
AWQ_CONFIG = {"quant_method": "awq", "bits": 4, "group_size": GROUP, "zero_point": True, "version": "gemm"}
FP8_CONFIG = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}


def folder(tmp_path, tensors, qc=None, dtype="float16"):
    save_file(tensors, str(tmp_path / "model.safetensors"))
    if qc is not None:
        (tmp_path / "config.json").write_text(json.dumps({"torch_dtype": dtype, "quantization_config": qc}))
    return tmp_path


def header_spans(path) -> dict[str, tuple[int, int]]:
    """Absolute byte spans from the file's own header, as the format defines them."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    return {
        k: (8 + n + v["data_offsets"][0], 8 + n + v["data_offsets"][1])
        for k, v in header.items()
        if k != "__metadata__"
    }


def check_spans(layout, path):
    spans = header_spans(path)
    assert {v.name: (v.start, v.stop) for v in layout.views} == spans


def test_gptq_from_config(tmp_path):
    d = folder(tmp_path, gptq_tensors(), GPTQ_CONFIG)
    layout = tv.analyze(d)
    check_spans(layout, d / "model.safetensors")
    w = Piece(f"{P}.weight", "qweight", "GPTQ", "float16", (N_OUT, N_IN), 4, (GROUP,))
    assert layout[f"{P}.qweight"].piece == w
    assert layout[f"{P}.g_idx"].piece == Piece(f"{P}.weight", "g_idx", "GPTQ", "float16", (N_OUT, N_IN), 4, (GROUP,))
    assert layout[f"{P}.bias"].piece is None
    assert "problems" not in layout.metadata
    assert layout.metadata["quantization"] == {
        "formats": ["GPTQ"], "weights": 1, "from": "config.json quantization_config",
        "bits": 4, "group_size": GROUP, "desc_act": False, "sym": True,
    }  # fmt: skip
    assert (
        f"  {P}.weight  GPTQ 128×256 int4, group 64 (float16 logical) = qweight int32[32×128] + "
        "scales float16[4×128] + qzeros int32[4×16] + g_idx int32[256]: 18.2 KiB stored, 64.0 KiB as float16"
    ) in str(layout).splitlines()
    node = layout.tree().find(P)
    assert (node.piece.of, node.piece.kind, node.piece.shape, node.piece.bits) == (
        f"{P}.weight",
        "GPTQ",
        (N_OUT, N_IN),
        4,
    )
    assert node.unpacked == (N_OUT * N_IN * 2 + N_OUT * 2, ("float16",))
    assert node.nbytes == 32 * 128 * 4 + 4 * 128 * 2 + 4 * 16 * 4 + 256 * 4 + 128 * 2


def test_gptq_3_bit_and_one_group(tmp_path):
    qc = {**GPTQ_CONFIG, "bits": 3, "group_size": -1}
    t = gptq_tensors(bits=3, groups=1)
    t[f"{P}.qzeros"] = torch.zeros(1, -(-N_OUT * 3 // 32), dtype=torch.int32)
    layout = tv.analyze(folder(tmp_path, t, qc))
    assert layout[f"{P}.qweight"].piece.shape == (N_OUT, N_IN)
    assert layout[f"{P}.qweight"].piece.group == (N_IN,)
    assert "problems" not in layout.metadata


def test_awq_from_config(tmp_path):
    d = folder(tmp_path, awq_tensors(), AWQ_CONFIG)
    layout = tv.analyze(d)
    check_spans(layout, d / "model.safetensors")
    assert layout[f"{P}.qweight"].piece == Piece(f"{P}.weight", "qweight", "AWQ", "float16", (N_OUT, N_IN), 4, (GROUP,))
    assert "problems" not in layout.metadata


def test_fp8_block_scales_from_config(tmp_path):
    d = folder(tmp_path, fp8_tensors(), FP8_CONFIG, dtype="bfloat16")
    layout = tv.analyze(d)
    check_spans(layout, d / "model.safetensors")
    piece = Piece(f"{P}.weight", "weight", "FP8", "bfloat16", (256, 256), 0, (128, 128))
    assert layout[f"{P}.weight"].piece == piece
    assert layout[f"{P}.weight_scale_inv"].piece.part == "weight_scale_inv"
    assert layout["model.norm.weight"].piece is None
    assert "problems" not in layout.metadata
    line = f"  {P}.weight  FP8 256×256, group 128×128 (bfloat16 logical) = weight float8_e4m3fn[256×256] + "
    assert any(
        s.startswith(line + "weight_scale_inv float32[2×2]: 64.0 KiB stored, 128.0 KiB as bfloat16")
        for s in str(layout).splitlines()
    )


@pytest.mark.parametrize(("tensors", "kind"), [(gptq_tensors(), "GPTQ"), (awq_tensors(), "AWQ")])
def test_recognised_from_names_without_a_config(tmp_path, tensors, kind):
    layout = tv.analyze(folder(tmp_path, tensors))
    assert layout[f"{P}.qweight"].piece == Piece(f"{P}.weight", "qweight", kind, "float16", (N_OUT, N_IN), 4, (128,))
    assert layout.metadata["quantization"]["from"] == "tensor names and shapes"


def test_packed_shapes_that_do_not_match_bits_and_group_are_problems(tmp_path):
    qc = {**GPTQ_CONFIG, "group_size": 32}  # the tensors were packed with group 64
    layout = tv.analyze(folder(tmp_path, gptq_tensors(), qc))
    assert layout.metadata["problems"] == [
        f"{P}.qzeros is int32[4×16] but GPTQ int4 with group 32 and qweight int32[32×128] (128 × 256) needs "
        "[8×16]; a loader trusting the config reads past it or mis-scales",
        f"{P}.scales is float16[4×128] but GPTQ int4 with group 32 and qweight int32[32×128] (128 × 256) needs "
        "[8×128]; a loader trusting the config reads past it or mis-scales",
    ]
    assert "  problem: " + layout.metadata["problems"][0] in str(layout).splitlines()


def test_fp8_scale_grid_that_does_not_cover_the_weight_is_a_problem(tmp_path):
    layout = tv.analyze(folder(tmp_path, fp8_tensors(scale_rows=1), FP8_CONFIG))
    assert layout.metadata["problems"] == [
        f"{P}.weight_scale_inv is float32[1×2] but weight float8_e4m3fn[256×256] in 128×128 blocks needs [2×2]; "
        "a loader trusting weight_block_size reads past it"
    ]


def test_a_single_file_finds_the_config_beside_it(tmp_path):
    d = folder(tmp_path, awq_tensors(), AWQ_CONFIG)
    layout = tv.analyze(d / "model.safetensors")
    assert layout[f"{P}.scales"].piece.kind == "AWQ"
    assert layout.metadata["quantization"]["from"] == "config.json quantization_config"


def test_a_broken_config_is_said_and_names_still_work(tmp_path):
    d = folder(tmp_path, gptq_tensors())
    (d / "config.json").write_text("{not json")
    layout = tv.analyze(d)
    assert layout[f"{P}.qweight"].piece.kind == "GPTQ"
    assert layout.metadata["problems"][0].startswith("config.json could not be read (JSONDecodeError:")


def bnb_checkpoint(tmp_path):
    bnb = pytest.importorskip("bitsandbytes")
    torch.manual_seed(0)
    m = torch.nn.Sequential(bnb.nn.Linear4bit(64, 32, quant_type="nf4", compress_statistics=True))
    w = bnb.nn.Params4bit(torch.randn(32, 64), requires_grad=False, quant_type="nf4", compress_statistics=True)
    m[0].weight = w._quantize("cpu")
    save_file({k: v.contiguous() for k, v in m.state_dict().items()}, str(tmp_path / "model.safetensors"))
    return bnb, tmp_path / "model.safetensors"


def test_bitsandbytes_checkpoint_keys_and_the_logical_weight_its_state_records(tmp_path):
    bnb, path = bnb_checkpoint(tmp_path)
    layout = tv.analyze(path)
    check_spans(layout, path)
    piece = Piece("0.weight", "packed", "bitsandbytes nf4", "float32", (32, 64), 4, (64,))
    assert layout["0.weight"].piece == piece
    parts = {v.piece.part for v in layout.views if v.piece}
    assert parts == {
        "packed",
        "absmax",
        "quant_map",
        "nested_absmax",
        "nested_quant_map",
        "quant_state.bitsandbytes__nf4",
    }
    # bitsandbytes' own reader of the saved state agrees on the logical shape, dtype and blocks.
    from safetensors.torch import load_file

    saved = load_file(str(path))
    qs = bnb.functional.QuantState.from_dict(
        {k[len("0.weight.") :]: v for k, v in saved.items() if k.startswith("0.weight.")}, device="cpu"
    )
    assert (tuple(qs.shape), str(qs.dtype).removeprefix("torch."), qs.blocksize) == (
        piece.shape,
        piece.dtype,
        piece.group[0],
    )
    assert (
        "  0.weight  bitsandbytes nf4 32×64 int4, group 64 (float32 logical) = packed uint8[1024×1] + absmax uint8[32] + "
        "quant_map float32[16] + nested_absmax float32[1] + nested_quant_map float32[256] + "
        "quant_state.bitsandbytes__nf4 uint8[166]: 2.3 KiB stored, 8.0 KiB as float32"
    ) in str(layout).splitlines()


def test_bitsandbytes_state_that_is_not_json_is_a_problem(tmp_path):
    _, path = bnb_checkpoint(tmp_path)
    spans = header_spans(path)
    a, b = spans["0.weight.quant_state.bitsandbytes__nf4"]
    raw = bytearray(path.read_bytes())
    raw[a : a + 1] = b"["  # still valid UTF-8, no longer the JSON object bitsandbytes wrote
    path.write_bytes(bytes(raw))
    layout = tv.analyze(path)
    assert layout["0.weight"].piece is None
    assert layout.metadata["problems"] == [
        "0.weight.quant_state.bitsandbytes__nf4: its JSON could not be read (JSONDecodeError); the pieces of 0.weight are left as stored"
    ]


def test_cli_json_carries_each_piece(tmp_path, capsys):
    from tensorviz.cli import main

    d = folder(tmp_path, gptq_tensors(), GPTQ_CONFIG)
    assert main([str(d), "--json"]) == 0
    views = {v["name"]: v for v in json.loads(capsys.readouterr().out)["views"]}
    assert views[f"{P}.scales"]["piece"] == {
        "of": f"{P}.weight", "part": "scales", "kind": "GPTQ", "dtype": "float16",
        "shape": [N_OUT, N_IN], "bits": 4, "group": [GROUP],
    }  # fmt: skip
    assert views[f"{P}.bias"]["piece"] is None


# -- compressed-tensors pack-quantized, written by the compressed-tensors package itself ----------
def _compressed_checkpoint(tmp_path, bits: int, group: int, symmetric: bool = True, broken_scale: bool = False):
    ct = pytest.importorskip("compressed_tensors")
    from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
    from compressed_tensors.quantization import QuantizationArgs, QuantizationConfig, QuantizationScheme

    args = QuantizationArgs(num_bits=bits, type="int", symmetric=symmetric, strategy="group", group_size=group)
    scheme = QuantizationScheme(targets=["Linear"], weights=args)
    torch.manual_seed(0)
    w = torch.randn(48, 128, dtype=torch.bfloat16)
    amax = w.float().view(48, 128 // group, group).abs().amax(-1)
    state = {"weight": w, "weight_scale": (amax / (2 ** (bits - 1) - 1)).to(torch.bfloat16)}
    if not symmetric:
        half = 1 << (bits - 1)
        state["weight_zero_point"] = torch.randint(-half, half, (48, 128 // group), dtype=torch.int8)
    out = PackedQuantizationCompressor.compress(state, scheme)
    if broken_scale:
        out["weight_scale"] = out["weight_scale"][:, :1].contiguous()
    tensors = {f"{P}.{k}": v for k, v in out.items()} | {"model.norm.weight": torch.ones(128, dtype=torch.bfloat16)}
    qc = QuantizationConfig(
        config_groups={"group_0": scheme}, format="pack-quantized", quant_method="compressed-tensors"
    )
    d = folder(tmp_path, tensors, qc.model_dump(), dtype="bfloat16")
    return ct, d, out, scheme


@pytest.mark.parametrize(("bits", "group", "symmetric"), [(4, 32, True), (8, 64, True), (4, 32, False)])
def test_compressed_tensors_pack_quantized(tmp_path, bits, group, symmetric):
    """The logical weight is what compressed-tensors' own decompress gives back: its shape, the
    scale's dtype; every piece (packed words, scales, packed zero points, shape) is one of it."""
    _, d, out, scheme = _compressed_checkpoint(tmp_path, bits, group, symmetric)
    from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor

    back = PackedQuantizationCompressor.decompress(out, scheme)["weight"]  # the library's own unpacking
    layout = tv.analyze(d)
    check_spans(layout, d / "model.safetensors")
    piece = Piece(f"{P}.weight", "weight_packed", "compressed-tensors", str(back.dtype)[6:], tuple(back.shape), bits,
                  (group,))  # fmt: skip
    parts = ["weight_packed", "weight_scale", "weight_shape"] + ([] if symmetric else ["weight_zero_point"])
    for part in parts:
        assert layout[f"{P}.{part}"].piece == Piece(*[part if f == "part" else getattr(piece, f) for f in vars(piece)])
    assert layout["model.norm.weight"].piece is None
    assert "problems" not in layout.metadata, layout.metadata.get("problems")
    assert layout[f"{P}.weight_packed"].shape == tuple(out["weight_packed"].shape) == (48, 128 * bits // 32)
    stored = sum(out[p].nbytes for p in parts)
    line = [x for x in str(layout).splitlines() if x.strip().startswith(f"{P}.weight ")][0]
    assert line.endswith(
        f"{tv.core.units.format_bytes(stored)} stored, {tv.core.units.format_bytes(back.nbytes)} as bfloat16"
    )


def test_compressed_tensors_scale_grid_that_does_not_match_is_a_problem(tmp_path):
    _, d, _, _ = _compressed_checkpoint(tmp_path, 4, 32, broken_scale=True)
    (problem,) = tv.analyze(d).metadata["problems"]
    assert problem.startswith(
        f"{P}.weight_scale is bfloat16[48×1] but a 48 × 128 weight in int4, group 32 needs [48×4]"
    )
