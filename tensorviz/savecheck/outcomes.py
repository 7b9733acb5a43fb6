"""The save check's vocabulary: the outcomes (most severe first) and the savers it knows."""

from __future__ import annotations

__all__ = ["OUTCOMES", "SAVERS", "FSDP_MID_STEP", "renames"]

#: Outcomes, most severe first. A verdict's ``outcome`` is the first of its ``problems`` (or "ok").
OUTCOMES = ("could not evaluate", "raises", "drops data", "duplicates bytes", "writes unreferenced bytes", "ok")

#: Saver keys, in report order, with the call each one stands for.
SAVERS = {
    "safetensors.save_file": "safetensors.torch.save_file({sd}, path)",
    "safetensors.save_model": "safetensors.torch.save_model({model}, path)",
    "torch.save": "torch.save({sd}, path)",
    "transformers.save_pretrained": "{model}.save_pretrained(directory)",
    "peft.save_pretrained": "{model}.save_pretrained(directory)  # a PeftModel: the adapter only",
    "accelerate.save": "accelerate.utils.save({sd}, path, safe_serialization=True)",
    "Accelerator.save_model": "Accelerator().save_model({model}, directory)",
}


def renames(pairs, limit: int = 6) -> str:
    """``a → b, c → d`` for (given, written) pairs; a given name split into several is listed once."""
    by: dict[str, list[str]] = {}
    for old, new in pairs:
        by.setdefault(old or "(a conversion)", []).append(new)
    parts = [
        f"{old} → {', '.join(news[:3])}" + (f" (+{len(news) - 3})" if len(news) > 3 else "") for old, news in by.items()
    ]
    more = f" … +{len(parts) - limit}" if len(parts) > limit else ""
    return "; ".join(parts[:limit]) + more


#: The note on an FSDP2 model checked between forward and backward: it is judged as the mapping
#: its ``state_dict()`` would return, made without calling it (FSDP2's pre-save hook would
#: reshard the model, freeing the gathered parameters the coming backward needs).
FSDP_MID_STEP = (
    "FSDP2 model between forward and backward: checked as the sharded parameters its state_dict() "
    "returns, without calling state_dict() (that would reshard the model) or save_pretrained; save "
    "after the step, or with torch.distributed.checkpoint"
)
