"""Training folders: the model's weights file beside the optimizer's state, and DeepSpeed's
universal checkpoints and ZeRO checkpoint folders (per-rank optimizer partitions).

accelerate's ``save_state`` (and transformers' ``Trainer``, whose checkpoint folders hold
``optimizer.pt`` beside ``model.safetensors``, ``scheduler.pt``, ``rng_state.pth`` and
``trainer_state.json``):

``Accelerator.save_state(dir)`` writes ``model.safetensors`` (or ``pytorch_model.bin`` with
``safe_serialization=False``), ``optimizer.bin`` (``optimizer.state_dict()``, ``optimizer_1.bin``
for a second one), ``scheduler.bin``, ``random_states_0.pkl`` and, with a grad scaler,
``scaler.pt``. The optimizer's state is laid out as ``optimizer.<param name>.<key>`` when it can
be mapped (:mod:`tensorviz.sources.ckpt_training`): by its saved ``param_names``, or by the
order of ``pytorch_model.bin``; ``model.safetensors`` stores tensors sorted by dtype and name,
not in the model's order, so without ``param_names`` the state keeps its indices and the
layout says why.
"""

from __future__ import annotations

import os
from dataclasses import replace

from tensorviz.core.facts import OptimizerMapping, TrainingFacts
from tensorviz.core.rows import Field
from tensorviz.sources.ckpt_training import BUFFER_SUFFIXES
from tensorviz.sources.formats.checkpoint import torch_part
from tensorviz.sources.formats.zero_optim import ZERO_FILE
from tensorviz.sources.parts import Part

__all__ = ["training_parts", "is_universal", "universal_parts", "is_zero_folder", "zero_parts"]
_SORTED = (
    "the model file is safetensors, which stores tensors sorted by dtype and name, not in the "
    "model's order (save with safe_serialization=False, or build the optimizer from "
    "named_parameters(), to map them)"
)


def training_parts(folder: str, weights: list[Part], entries: list[str]) -> list[Part]:
    """The optimizer files of ``folder`` as parts named after the parameters of ``weights``
    (the weights files' parts, read already); each part's views prefixed with its file's stem."""
    rows = [row for part in weights for row in part.rows]
    for part in weights:  # the model's tensors are its weights (and BatchNorm's buffers)
        part.categories = {
            row[Field.NAME]: "buffers" if row[Field.NAME].endswith(BUFFER_SUFFIXES) else "weights" for row in part.rows
        }
    model = [
        (
            row[Field.NAME],
            tuple(row[Field.SHAPE]),
            (row[Field.TOKEN], row[Field.START], tuple(row[Field.STRIDE]), row[Field.DTYPE]),
        )
        for row in rows
    ]
    label = ", ".join(part.label for part in weights)
    unordered = _SORTED if any(part.label.endswith(".safetensors") for part in weights) else ""
    out = []
    for name in sorted(entries):  # the optimizer files (files.py picks them)
        part = torch_part(os.path.join(folder, name), beside=(label, model, unordered))
        out.append(_prefixed(part, os.path.splitext(name)[0]))
    return out


def _prefixed(part: Part, prefix: str) -> Part:
    """The part with every view named ``<prefix>.<name>`` (notes and categories follow)."""
    pre = prefix + "."
    part.rows = [(pre + row[Field.NAME], *row[Field.NAME + 1 :]) for row in part.rows]
    part.notes = {pre + k: v for k, v in part.notes.items()}
    part.categories = {pre + k: v for k, v in part.categories.items()}
    facts = part.meta.get("training")
    if isinstance(facts, TrainingFacts) and facts.optimizers:
        # one optimizer state per file: named by the file, its parameters at the top level
        first = next(iter(facts.optimizers.values()))
        part.meta["training"] = replace(facts, optimizers={prefix: replace(first, model="")})
    return part


# -- DeepSpeed universal checkpoints ---------------------------------------------------------------
#: The per-parameter files of a universal checkpoint (``ds_to_universal.py``), and what each is.
UNIVERSAL_STATES = {"fp32": "copies", "exp_avg": "optimizer", "exp_avg_sq": "optimizer", "step": "optimizer"}


def is_universal(folder: str, files: list[str]) -> bool:
    """A DeepSpeed universal checkpoint: ``zero/<param name>/`` folders beside ``mp_rank_*`` files."""
    return os.path.isdir(os.path.join(folder, "zero")) and any(
        e.startswith("mp_rank_") and e.endswith("_model_states.pt") for e in files
    )


def universal_parts(folder: str, files: list[str]) -> list[Part]:
    """The model states file(s) and, per parameter, ``zero/<name>/{fp32,exp_avg,exp_avg_sq,step}.pt``
    (each ``torch.save({"param": tensor, "cat_dim": ...})``, ``step.pt`` a bare value) as views
    named ``zero.<name>.<state>``: the fp32 master a copy, the rest optimizer state."""
    parts = [torch_part(os.path.join(folder, e)) for e in sorted(files) if e.endswith("_model_states.pt")]
    zero = os.path.join(folder, "zero")
    for param in sorted(os.listdir(zero)):
        where = os.path.join(zero, param)
        if not os.path.isdir(where) or os.path.islink(where):
            continue
        for state, category in UNIVERSAL_STATES.items():
            path = os.path.join(where, f"{state}.pt")
            if os.path.isfile(path):
                parts.append(_renamed(torch_part(path), f"zero.{param}.{state}", category))
    facts = TrainingFacts(optimizers={"zero": OptimizerMapping("folder names", "", "module")})
    parts.append(Part(meta={"training": facts}))
    return parts


def _renamed(part: Part, name: str, category: str) -> Part:
    """A one-tensor file's part (its ``param``, or a bare tensor) as one view named ``name``."""
    rows = [row for row in part.rows if row[Field.NAME] in ("param", "tensor")]
    part.rows = [(name, *rows[0][1:])] if rows else []
    part.notes = {}
    part.categories = {name: category}
    return part


# -- DeepSpeed ZeRO checkpoint folders (global_stepN/) ----------------------------------------------
def is_zero_folder(files: list[str]) -> bool:
    """A ZeRO checkpoint tag folder: ``mp_rank_*_model_states.pt`` beside per-rank optimizer partitions."""
    return any(ZERO_FILE.match(e) for e in files) and any(
        e.startswith(("mp_rank_", "zero_pp_rank_")) and e.endswith("_model_states.pt") for e in files
    )


def zero_parts(folder: str, files: list[str]) -> list[Part]:
    """The model states file(s) and every rank's optimizer partition, its views named
    ``rank<R>.optimizer.<param>.<key>``: each rank's piece of each parameter, the global picture."""
    models = [e for e in sorted(files) if e.startswith("mp_rank_") and e.endswith("_model_states.pt")]
    # ZeRO-3: one model states file per rank, its parameters empty placeholders; rank 0's names them
    models = models or [e for e in sorted(files) if e.startswith("zero_pp_rank_0_") and e.endswith("_model_states.pt")]
    parts = [torch_part(os.path.join(folder, e)) for e in models]
    notes: tuple = ()
    optimizers: dict[str, OptimizerMapping] = {}
    ranked = sorted((int(m.group(2)), int(m.group(1)), e) for e in files if (m := ZERO_FILE.match(e)))
    for mp, rank, name in ranked:
        part = torch_part(os.path.join(folder, name))
        prefix = f"rank{rank}" if mp == 0 and all(m == 0 for m, _, _ in ranked) else f"mp{mp}.rank{rank}"
        part.rows = [(f"{prefix}.{row[Field.NAME]}", *row[Field.NAME + 1 :]) for row in part.rows]
        part.categories = {f"{prefix}.{k}": v for k, v in part.categories.items()}
        part.notes = {f"{prefix}.{k}": v for k, v in part.notes.items()}
        facts = part.meta.pop("training", None)
        if isinstance(facts, TrainingFacts) and not notes:
            notes = facts.notes or ()  # one note for the folder (the first rank's)
        optimizers[f"{prefix}.optimizer"] = OptimizerMapping("param_slice_mappings", "", "module")
        parts.append(part)
    # each rank's pieces belong to their parameter's module (module.<param>) in the model map
    parts.append(Part(meta={"training": TrainingFacts(notes=notes, optimizers=optimizers)}))
    return parts
