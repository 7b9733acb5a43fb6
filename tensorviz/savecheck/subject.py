"""The subject of one save check: everything the check needs, gathered once (no tensors kept)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tensorviz.core.layout import Layout

__all__ = ["Subject"]


@dataclass
class Subject:
    """Everything the check needs, gathered once; holds stand-ins, never tensors."""

    source: str
    layout: Layout
    kind: str  # "module" | "mapping" | "layout"
    standins: dict[str, Any]
    ordered: bool
    real_state_dict: Any = None  # torch.save's dry run only (the module itself for a module); dropped after
    pretrained: Any = None  # the transformers model, only while its verdict is computed
    peft: Any = None  # the PeftModel, likewise
    has_meta_parameters: bool = False
    memo: dict = field(default_factory=dict)  # library answers every saver of this check shares
    sub_layouts: dict = field(default_factory=dict)  # frozenset(names given) -> their layout
    storage_of: dict | None = None  # name -> storage key, for every name of the layout
    pieces: dict | None = None  # a tensor subclass's name -> its inner tensors' names in the layout
    key_problem: str = ""  # why only torch.save is replayed (a mapping with keys that are not str)
    ties: Any = None
    notes: list[str] = field(default_factory=list)
    not_run: list[tuple[str, str]] = field(default_factory=list)  # (saver, why it was not run)
    materialised: bool = False  # meta storages judged as if on CPU (see savecheck.materialise)
