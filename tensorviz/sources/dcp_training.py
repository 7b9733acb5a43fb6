"""Training state in a DCP checkpoint (torchtitan's layout), from the names in ``.metadata``.

torchtitan saves ``{**model_state_dict, "optimizer": optimizer_state_dict, "lr_scheduler": ...,
"dataloader": ..., "train_state": ...}`` with ``dcp.save``, the optimizer's state flattened by
``get_optimizer_state_dict(..., flatten_optimizer_state_dict=True)``: its keys are
``state.<param fqn>.<key>``, already named after parameters, so the DCP names are
``optimizer.state.<param fqn>.<key>``. No torch: the DCP reader reads headers only.

>>> from tensorviz.core.rows import Rows
>>> rows = Rows(); rows.rows = [("0.weight[0:5, 0:4]",), ("optimizer.state.0.weight.exp_avg[0:5, 0:4]",)]
>>> dcp_categories(rows).optimizers, rows.categories
({'optimizer.state': OptimizerMapping(mapped_by='fqn', why_not='', model='')}, {0: 'weights', 1: 'optimizer'})
"""

from __future__ import annotations

from tensorviz.core.facts import OptimizerMapping, TrainingFacts
from tensorviz.core.rows import Field, Rows

__all__ = ["dcp_categories"]

_OTHER = ("lr_scheduler.", "dataloader.", "train_state.", "optimizer.")


def dcp_categories(rows: Rows, files: dict[str, int] | None = None) -> TrainingFacts | None:
    """Set each row's category when the checkpoint holds optimizer state (``optimizer.state.*``);
    a file row (``<file>:<chunk>``) gets its chunk's. Returns the facts, or None."""
    names = [_chunk(row[Field.NAME], files) for row in rows.rows]
    if not any(n.startswith("optimizer.state.") for n in names):
        return None
    for i, n in enumerate(names):
        if n.startswith("optimizer.state."):
            rows.categories[i] = "optimizer"
        else:
            rows.categories[i] = "other" if n.startswith(_OTHER) else "weights"
    return TrainingFacts(optimizers={"optimizer.state": OptimizerMapping("fqn")})


def _chunk(name: str, files: dict[str, int] | None) -> str:
    """A file row's chunk name (``__0_0.distcp:0.weight[0:4]`` -> ``0.weight[0:4]``)."""
    head, sep, tail = name.partition(":")
    return tail if sep and files is not None and head in files else name
