"""The type tables of GGUF: ggml's tensor types (with their quantization blocks) and GGUF's
metadata value types."""

from __future__ import annotations

__all__ = ["GGML_TYPES", "VALUE_TYPES", "SCALAR"]

#: ggml type id -> (name, elements per block, bytes per block, torch dtype name or "" when the
#: type is block-quantized). ggml's own table (``ggml.c`` type_traits; gguf-py's
#: ``GGML_QUANT_SIZES``); ids 4, 5, 31-33 and 36-38 were removed from ggml and are refused.
GGML_TYPES: dict[int, tuple[str, int, int, str]] = {
    0: ("F32", 1, 4, "float32"), 1: ("F16", 1, 2, "float16"), 2: ("Q4_0", 32, 18, ""),
    3: ("Q4_1", 32, 20, ""), 6: ("Q5_0", 32, 22, ""), 7: ("Q5_1", 32, 24, ""), 8: ("Q8_0", 32, 34, ""),
    9: ("Q8_1", 32, 40, ""), 10: ("Q2_K", 256, 84, ""), 11: ("Q3_K", 256, 110, ""),
    12: ("Q4_K", 256, 144, ""), 13: ("Q5_K", 256, 176, ""), 14: ("Q6_K", 256, 210, ""),
    15: ("Q8_K", 256, 292, ""), 16: ("IQ2_XXS", 256, 66, ""), 17: ("IQ2_XS", 256, 74, ""),
    18: ("IQ3_XXS", 256, 98, ""), 19: ("IQ1_S", 256, 50, ""), 20: ("IQ4_NL", 32, 18, ""),
    21: ("IQ3_S", 256, 110, ""), 22: ("IQ2_S", 256, 82, ""), 23: ("IQ4_XS", 256, 136, ""),
    24: ("I8", 1, 1, "int8"), 25: ("I16", 1, 2, "int16"), 26: ("I32", 1, 4, "int32"),
    27: ("I64", 1, 8, "int64"), 28: ("F64", 1, 8, "float64"), 29: ("IQ1_M", 256, 56, ""),
    30: ("BF16", 1, 2, "bfloat16"), 34: ("TQ1_0", 256, 54, ""), 35: ("TQ2_0", 256, 66, ""),
    39: ("MXFP4", 32, 17, ""), 40: ("NVFP4", 64, 36, ""), 41: ("Q1_0", 128, 18, ""),
}  # fmt: skip

# GGUF value types: id -> (name, fixed size in bytes; 0 for STRING and ARRAY).
VALUE_TYPES = {
    0: ("UINT8", 1), 1: ("INT8", 1), 2: ("UINT16", 2), 3: ("INT16", 2), 4: ("UINT32", 4), 5: ("INT32", 4),
    6: ("FLOAT32", 4), 7: ("BOOL", 1), 8: ("STRING", 0), 9: ("ARRAY", 0), 10: ("UINT64", 8), 11: ("INT64", 8),
    12: ("FLOAT64", 8),
}  # fmt: skip
SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
