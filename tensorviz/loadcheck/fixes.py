"""Fixes a load check suggests, as code a user can paste.

Each :class:`~tensorviz.loadcheck.report.Fix` is a few lines of Python over the names the user
has at hand: ``model`` and ``state_dict`` for ``load_state_dict``, ``folder`` and the model class
for ``from_pretrained``. The code ends with the load itself, so pasting it runs the fixed load
(``tests/helpers/loadfix_runner.py`` runs every suggested fix in a subprocess and checks the load).
Pure Python: the rules read the report's facts only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tensorviz.loadcheck.report import NARROWING, Fix

__all__ = ["state_dict_fixes", "pretrained_fixes", "PREFIXES"]

#: Wrapper prefixes a checkpoint's keys carry (DDP/DataParallel, torch.compile, PEFT).
PREFIXES = ("module.", "_orig_mod.", "base_model.model.")


def _prefix(extra: Sequence[str], wanted: Sequence[str]) -> tuple[str, str] | None:
    """``("strip", p)`` when every extra key is a wanted key under the prefix ``p``;
    ``("add", p)`` when every wanted key is an extra key without it."""
    if not extra or not wanted:
        return None
    have, need = set(extra), set(wanted)
    for p in PREFIXES:
        if all(k.startswith(p) for k in have) and need <= {k.removeprefix(p) for k in have}:
            return "strip", p
        if all(k.startswith(p) for k in need) and {k.removeprefix(p) for k in need} <= have:
            return "add", p
    return None


def _call(strict: bool) -> str:
    return "model.load_state_dict(state_dict)" if strict else "model.load_state_dict(state_dict, strict=False)"


def state_dict_fixes(
    facts: Mapping[str, Any], ties: Sequence[Sequence[str]], strict: bool, assign: bool
) -> tuple[Fix, ...]:
    """Fixes for ``load_state_dict``: a wrapper prefix stripped or added; a tie fed one tensor
    (``ties``: the model's span groups of equal-shaped names); a tie re-made after
    ``assign=True``."""
    out = []
    prefix = _prefix(facts["unexpected"], facts["missing"])
    if prefix is not None:
        how, p = prefix
        change = f"k.removeprefix({p!r})" if how == "strip" else f"{p!r} + k"
        out.append(
            Fix(
                f"the checkpoint's keys {'carry' if how == 'strip' else 'lack'} the prefix {p!r}: "
                f"{'strip' if how == 'strip' else 'add'} it",
                f"state_dict = {{{change}: v for k, v in state_dict.items()}}\n{_call(strict)}",
            )
        )
    tied = {frozenset(g) for g in ties}
    for c in facts["conflicts"]:
        if frozenset(c.names) in tied:
            keep, rest = c.names[0], c.names[1:]
            lines = [f"state_dict[{n!r}] = state_dict[{keep!r}]" for n in rest]
            out.append(
                Fix(
                    f"the tie {' = '.join(c.names)} is fed {len(c.names)} tensors: feed it {keep!r}",
                    "\n".join([*lines, _call(strict)]),
                )
            )
    for group in facts.get("ties_broken", ()):
        names = next((list(t) for t in ties if frozenset(t) == group), sorted(group))  # the model's order
        keep, rest = names[0], names[1:]
        lines = [f"model.load_state_dict(state_dict, assign=True{'' if strict else ', strict=False'})"]
        for n in rest:
            parent, _, attr = n.rpartition(".")
            lines.append(f"setattr(model.get_submodule({parent!r}), {attr!r}, model.get_parameter({keep!r}))")
        out.append(Fix(f"assign=True breaks the tie {' = '.join(names)}: re-tie after the load", "\n".join(lines)))
    return tuple(out)


def pretrained_fixes(
    facts: Mapping[str, Any],
    cls_name: str,
    kwargs: Mapping[str, Any],
    tie_targets: Mapping[str, str],
    file_dtype: str | None,
) -> tuple[Fix, ...]:
    """Fixes for ``from_pretrained``: the tie a config flip refuses or forgets, the sizes it
    cannot load, a narrowing ``dtype=``, a wrapper prefix (``key_mapping=``)."""
    out = []

    def fix(title: str, **change: Any) -> Fix:
        merged = {**kwargs, **change}
        words = "".join(f", {k}={_code(v)}" for k, v in merged.items())
        keywords = tuple((k, _value(v)) for k, v in merged.items())
        return Fix(title, f"model = {cls_name}.from_pretrained(folder{words})", keywords)

    missing = set(facts["missing"])
    if missing and missing <= set(tie_targets) and all(tie_targets[m] not in missing for m in missing):
        out.append(fix("the files hold one name of a tie the config does not make: tie it", tie_word_embeddings=True))
    if facts.get("not_tied"):
        out.append(
            fix(
                "the config ties weights the files hold apart, with different values: keep both",
                tie_word_embeddings=False,
            )
        )
    if facts["raises"] and facts["error"] and "ignore_mismatched_sizes" in facts["error"]:
        out.append(fix("sizes differ from the files: load the rest, initialise those", ignore_mismatched_sizes=True))
    if file_dtype and any(NARROWING(s, m) for _, s, m in facts["cast"]):
        out.append(fix(f"the files hold {file_dtype}: load them as they are", dtype=_Code(f"torch.{file_dtype}")))
    prefix = _prefix(facts["unexpected"], facts["missing"])
    if prefix is not None and prefix[0] == "strip":
        pattern = "^" + prefix[1].replace(".", r"\.")
        out.append(fix(f"the files' keys carry the prefix {prefix[1]!r}: rename them", key_mapping={pattern: ""}))
    return tuple(out)


class _Code(str):
    """Text pasted as is (``torch.float32``), not quoted."""


def _value(value: Any) -> Any:
    """The keyword's value for a call (``torch.float32`` for its code)."""
    if isinstance(value, _Code):
        import torch

        return getattr(torch, value.removeprefix("torch."))
    return value


def _code(value: Any) -> str:
    return str(value) if isinstance(value, _Code) else repr(value)  # repr(torch.bfloat16) is its code
