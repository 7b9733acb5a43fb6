"""The savers the save check knows: one table of rule objects, one entry per saver.

Each :class:`LibraryRule` says which library a call belongs to (its version goes on the verdict),
the call it stands for, when it applies to a subject, and how to replay it on data-free stand-ins
(a :class:`~tensorviz.savecheck.savers.Run`). :func:`tensorviz.savecheck.check.run_check` asks
each wanted rule in turn. Teaching the check a new saver is one entry in :data:`SAVER_RULES` (and
its key and call in :data:`~tensorviz.savecheck.outcomes.SAVERS`); the load check's loaders have
the same shape.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tensorviz.savecheck.outcomes import SAVERS
from tensorviz.savecheck.savers import common as sv
from tensorviz.savecheck.savers import hf as hf
from tensorviz.savecheck.savers import torch_save as svt
from tensorviz.savecheck.savers.peft_adapter import evaluate_peft_save_pretrained
from tensorviz.savecheck.subject import Subject

__all__ = ["LibraryRule", "SAVER_RULES"]


def _always(s: Subject) -> bool:
    return True


def _no_note(s: Subject) -> str:
    return ""


@dataclass(frozen=True)
class LibraryRule:
    """One library call the check replays: a saver here (a loader has the same shape).

    ``key`` names it (``"torch.save"``); ``library`` is the distribution whose version the
    verdict shows; ``call`` the code it stands for, with ``{sd}`` and ``{model}`` to fill in;
    ``applies(subject)`` whether it applies at all (no verdict otherwise), and ``applies_to``
    says to what, in words; ``evaluate(subject)`` replays it on the subject's stand-ins;
    ``note(subject)`` a comment for the call.
    """

    key: str
    library: str
    evaluate: Callable[[Subject], sv.Run]
    applies: Callable[[Subject], bool] = _always
    note: Callable[[Subject], str] = _no_note
    applies_to: str = "any state dict"

    @property
    def call(self) -> str:
        """The call this rule stands for (from :data:`~tensorviz.savecheck.outcomes.SAVERS`)."""
        return SAVERS[self.key]

    def call_text(self, s: Subject) -> str:
        """The call with the subject's names filled in, and its note."""
        sd = "model.state_dict()" if s.kind == "module" else "state_dict"
        note = self.note(s)
        return self.call.format(sd=sd, model="model") + (f"  # {note}" if note else "")


def _real_state_dict(s: Subject) -> Any:
    """What torch.save would be given: ``model.state_dict()`` for a module, made only now."""
    if s.real_state_dict is None:
        return None
    return s.real_state_dict.state_dict() if s.kind == "module" else s.real_state_dict


_COMPILED = "_orig_mod."


def _save_pretrained(model: Any, sd: dict[str, Any]) -> sv.Run:
    """save_pretrained on the model itself; for a torch.compile'd one (names under ``_orig_mod.``,
    which ``compiled.save_pretrained`` forwards to the model) the names are the model's own, and
    each written name is recorded as a rename of the given one."""
    if not sd or not all(k.startswith(_COMPILED) for k in sd):
        return hf.evaluate_save_pretrained(model, sd)
    run = hf.evaluate_save_pretrained(model, {k[len(_COMPILED) :]: v for k, v in sd.items()})
    run.given = tuple(sd)
    for names in (run.dropped, run.carried, run.ignored):  # given names, as the user has them
        names[:] = [_COMPILED + n if _COMPILED + n in sd else n for n in names]
    run.renamed[:0] = [(_COMPILED + k, k) for k in run.written if _COMPILED + k in sd]
    run.notes.append("a torch.compile'd model: save_pretrained writes the model's own names (no _orig_mod. prefix)")
    return run


def _torch_save(s: Subject) -> sv.Run:
    run = svt.evaluate_torch_save(s.standins, _real_state_dict(s))
    if s.materialised and run.file_nbytes is None:
        run.notes.append("file size not computed: torch's dry run of meta tensors writes empty records")
    return run


def _is_module(s: Subject) -> bool:
    return s.kind == "module"


#: Every saver the check knows, in report order (the order of ``SAVERS``).
SAVER_RULES: dict[str, LibraryRule] = {
    rule.key: rule
    for rule in (
        LibraryRule(
            "safetensors.save_file",
            "safetensors",
            lambda s: sv.evaluate_save_file(s.standins, s.memo),
        ),
        LibraryRule(
            "safetensors.save_model",
            "safetensors",
            lambda s: sv.evaluate_save_model(s.standins, s.memo),
            note=lambda s: "" if s.kind == "module" else "a module whose state_dict() is this mapping",
        ),
        LibraryRule("torch.save", "torch", _torch_save),
        LibraryRule(
            "transformers.save_pretrained",
            "transformers",
            lambda s: _save_pretrained(s.pretrained, s.standins),
            applies=lambda s: s.pretrained is not None,
            applies_to="a transformers PreTrainedModel",
        ),
        LibraryRule(
            "peft.save_pretrained",
            "peft",
            lambda s: evaluate_peft_save_pretrained(s.peft, s.standins),
            applies=lambda s: s.peft is not None,
            applies_to="a peft PeftModel",
        ),
        LibraryRule(
            "accelerate.save",
            "accelerate",
            lambda s: hf.evaluate_accelerate_save(s.standins, s.ordered, s.memo),
            note=lambda s: (
                "a plain dict: accelerate does not de-duplicate it" if s.kind == "mapping" and not s.ordered else ""
            ),
        ),
        LibraryRule(
            "Accelerator.save_model",
            "accelerate",
            lambda s: hf.evaluate_accelerator_save_model(s.standins, s.has_meta_parameters),
            applies=_is_module,
            applies_to="an nn.Module",
        ),
    )
}
assert tuple(SAVER_RULES) == tuple(SAVERS), "one rule per saver key, in report order"
