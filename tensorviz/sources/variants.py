"""Weight variants in a model folder, named as ``from_pretrained(..., variant=...)`` reads them.

transformers and diffusers put a variant's name before the extension (their ``_add_variant``):
``model.safetensors`` -> ``model.fp16.safetensors``, shards ``model.fp16-00001-of-00002.safetensors``,
the index ``model.safetensors.index.json`` -> ``model.safetensors.index.fp16.json``, and likewise
``pytorch_model.fp16.bin`` and ``diffusion_pytorch_model.fp16.safetensors``. A folder holding
several variants holds several copies of one model: ``from_pretrained`` reads the default one
(no variant) unless asked for another, so tensorviz does the same and lists the others in
``layout.metadata["variants"]`` instead of merging every copy into "duplicated" problems.

Standard library only.
"""

from __future__ import annotations

import re

from tensorviz.core.errors import FileFormatError

__all__ = ["variant_of", "pick_variant", "DEFAULT"]

#: How the default variant (no variant in the file names) is written in messages and metadata.
DEFAULT = "default"

_EXT = r"(?:safetensors|bin|pt|pth)"
# A variant has a letter in it: "consolidated.00.pth" is a shard number, not a variant.
_VARIANT = r"(?P<variant>[^.]*?[A-Za-z][^.]*?)"
_INDEX = re.compile(rf"^[^.]+\.{_EXT}\.index(?:\.{_VARIANT})?\.json$")
_WEIGHTS = re.compile(rf"^[^.]+?(?:\.{_VARIANT})?(?:-\d+-of-\d+)?\.{_EXT}$")


def variant_of(name: str) -> str | None:
    """The variant a weights file belongs to: its name, or None for the default.

    >>> [variant_of(n) for n in ("model.safetensors", "model.fp16.safetensors",
    ...  "model.fp16-00001-of-00002.safetensors", "model-00001-of-00002.safetensors",
    ...  "model.safetensors.index.json", "model.safetensors.index.fp16.json", "pytorch_model.bf16.bin",
    ...  "consolidated.00.pth")]
    [None, 'fp16', 'fp16', None, None, 'fp16', 'bf16', None]
    """
    m = _INDEX.match(name) or _WEIGHTS.match(name)
    return m.group("variant") if m else None


def pick_variant(folder: str, files: list[str], variant: str | None) -> tuple[list[str], dict[str, object]]:
    """``files`` less the weights of other variants, and the metadata that says which variant
    is read (``variant``) and which others are there (``variants``: {variant: its files}).

    With no ``variant`` the default one is read (as ``from_pretrained``); a folder of only
    variant files with one variant reads it; several variants and no default need a choice.
    Files of one variant only (or no weights at all) are returned as they are.

    Raises:
        FileFormatError: ``variant`` names no variant of the folder, or several variants and
            no default leave the choice open (the message lists the variants and the fix).
    """
    by_variant: dict[str | None, list[str]] = {}
    for name in files:
        if _INDEX.match(name) or _WEIGHTS.match(name):
            by_variant.setdefault(variant_of(name), []).append(name)
    if variant is None and len(by_variant) < 2:
        return files, {}
    names = sorted((v or DEFAULT for v in by_variant), key=lambda v: (v != DEFAULT, v))
    if variant is None and None not in by_variant:
        raise FileFormatError(
            f"{folder}: holds the weight variants {', '.join(names)} and no default one; pass "
            f"variant=, e.g. tv.analyze({folder!r}, variant={names[0]!r})"
        )
    chosen = None if variant in (None, DEFAULT) else variant
    if chosen not in by_variant:
        raise FileFormatError(f"{folder}: no weights of variant {variant!r}; the folder holds: {', '.join(names)}")
    others = {v or DEFAULT: group for v, group in by_variant.items() if v != chosen}
    hidden = {name for group in others.values() for name in group}
    return [f for f in files if f not in hidden], {"variant": chosen or DEFAULT, "variants": others}
