"""What a transformers quantizer hands ``save_pretrained``: its ``get_state_dict_and_metadata``.

``save_pretrained`` on a model loaded with a ``quantization_config`` refuses it when the
quantizer says it is not serializable, then asks it for the state dict and the safetensors
metadata to write; most quantizers (bitsandbytes, GPTQ, AWQ...) keep the base answer, ``(None,
{})``: the model's own state dict. For torchao (``TorchAoHfQuantizer``,
transformers 5.x) that is torchao's ``flatten_tensor_state_dict(model.state_dict())``: every
tensor subclass torchao lists in ``ALLOWED_TENSORS_SUBCLASSES`` becomes its inner tensors, each
``detach().clone()``'d, named ``<module>._<param>_<inner>`` (``mlp.up_proj._weight_qdata``), and
its JSON description (``TensorSubclassAttributeJSONEncoder``: type, non-tensor attributes, inner
names) goes into the metadata under the parameter's name; a plain tensor keeps its name with
``{"_type": "Tensor"}``; anything else raises ``ValueError("Unsupported tensor type: ...")``.
Replayed here rule for rule on stand-ins (the clones are fresh pretend storages); only the JSON
is asked of the real tensors, which reads their Python attributes, never their data.

Read from torchao 0.18 (``torchao/prototype/safetensors/safetensors_support.py``) and
transformers 5.24 (``quantizers/quantizer_torchao.py``, ``modeling_utils.save_pretrained``).
Imported only from inside :func:`tensorviz.savecheck.report.save_check`.
"""

from __future__ import annotations

import json
from typing import Any

from tensorviz.savecheck.savers.common import Run, Unavailable, _helper
from tensorviz.savecheck.standin import StandIn, SubclassStandIn

__all__ = ["quantizer_state"]

_AO = "torchao.prototype.safetensors.safetensors_utils"


def quantizer_state(run: Run, model: Any, sd: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """``(state dict, metadata)`` as ``save_pretrained`` writes them for ``model``: ``sd`` and
    ``{"format": "pt"}`` without a quantizer, torchao's flattened dict and metadata with one.
    Subclass names written as their inner tensors are recorded as carried and renamed."""
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is None:
        return sd, {"format": "pt"}
    kind = type(quantizer).__name__
    if not quantizer.is_serializable():
        method = quantizer.quantization_config.quant_method
        raise ValueError(
            f"The model is quantized with {getattr(method, 'value', method)} and is not serializable - check out the "
            "warnings from the logger on the traceback to understand the reason why the quantized model is not "
            "serializable."
        )
    base = _helper("transformers.quantizers.base", "HfQuantizer").get_state_dict_and_metadata
    if type(quantizer).get_state_dict_and_metadata is base:
        return sd, {"format": "pt"}  # the base hands back (None, {}): save_pretrained's own state dict
    if kind != "TorchAoHfQuantizer":
        raise Unavailable(f"a model quantized with {kind}: the state dict its quantizer saves is not replayed")
    allowed = set(_helper(_AO, "ALLOWED_TENSORS_SUBCLASSES"))
    encoder = _helper(_AO, "TensorSubclassAttributeJSONEncoder")
    real = model.state_dict(keep_vars=True)  # the very tensors (no copy): only their JSON is asked
    out: dict[str, Any] = {}
    metadata: dict[str, str] = {}
    for name, t in sd.items():
        if isinstance(t, SubclassStandIn) and t.kind in allowed:
            parts = _flattened(name, t)
            metadata[name] = json.dumps(real[name], cls=encoder)
            out.update(parts)
            run.carried.append(name)
            run.renamed.extend((name, k) for k in parts)
        elif isinstance(t, StandIn):
            metadata[name] = json.dumps({"_type": "Tensor"})
            out[name] = t
        else:
            raise ValueError(f"Unsupported tensor type: {type(real.get(name, t))}")
    metadata["tensor_names"] = json.dumps(list(sd))
    metadata["format"] = "pt"
    return out, metadata


def _flattened(name: str, t: SubclassStandIn) -> dict[str, Any]:
    """The subclass's inner tensors under torchao's names, each a clone (a fresh storage)."""
    module, dot, param = name.rpartition(".")
    if not dot:
        raise IndexError("list index out of range")  # torchao's name.rsplit(".", 1)[1] on a name without "."
    prefix = f"{module}._{param}_"
    names = [n for n in t.inner if "." not in n]
    if len(names) != len(t.inner) or not names:
        raise Unavailable(f"{name!r} nests tensor subclasses: torchao would clone a subclass, not replayed")
    return {prefix + n: t.inner[n].clone() for n in names}
