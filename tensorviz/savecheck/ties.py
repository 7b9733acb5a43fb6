"""Three kinds of tie, side by side: storage, Python object, declared.

* **storage** ties: names whose tensors read one storage (from the layout; exact relation given);
* **object** ties: one ``Parameter`` object under several names -- all that accelerate's
  ``find_tied_parameters`` (device maps, offloading, re-tying) sees;
* **declared** ties: what transformers promises to restore on load (``all_tied_weights_keys``,
  from ``_tied_weights_keys`` and ``config.tie_word_embeddings``).

They disagree more often than one would hope; every disagreement is spelled out in
``mismatches``. Computed up front from the module; the report keeps names only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from tensorviz.core.layout import Layout

__all__ = ["TieGroup", "TieReport", "module_ties"]


@dataclass(frozen=True)
class TieGroup:
    """Names tied by at least one rule, and which rules hold.

    ``relations[i]`` is the exact relation of ``names[i]`` to ``names[0]`` (``""`` for the first).
    """

    names: tuple[str, ...]
    storage: bool
    object: bool
    declared: bool
    relations: tuple[str, ...]


@dataclass(frozen=True)
class TieReport:
    """Storage, object and declared ties of a module, and where they disagree."""

    groups: tuple[TieGroup, ...]
    storage: tuple[tuple[str, ...], ...]
    object: tuple[tuple[str, ...], ...]
    declared: tuple[tuple[str, str], ...]
    object_source: str
    declared_source: str
    config: tuple[tuple[str, Any], ...]
    mismatches: tuple[str, ...]
    broken: tuple[tuple[str, ...], ...] = ()  # names the model's class ties, stored apart here
    broken_source: str = ""  # who says the class ties them (transformers' declaration, or the class rebuilt)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["config"] = dict(self.config)
        return out


def module_ties(module: Any, layout: Layout) -> TieReport:
    """The three kinds of tie of ``module`` (whose layout is ``layout``).

    >>> import torch, tensorviz as tv
    >>> from tensorviz.savecheck.ties import module_ties
    >>> m = torch.nn.ModuleDict({"a": torch.nn.Linear(2, 2), "b": torch.nn.Linear(2, 2)})
    >>> m["b"].weight = m["a"].weight
    >>> module_ties(m, tv.analyze(m)).object
    (('a.weight', 'b.weight'),)
    """
    storage = tuple(tuple(g.names) for g in layout.shared("storage"))
    objects, object_source = _object_ties(module)
    declared, declared_source, config = _declared_ties(module)
    groups = _merge(layout, storage, objects, declared)
    mismatches = _mismatches(layout, groups, declared_source, config)
    broken, broken_source = _broken_ties(module, layout, groups, declared_source)
    return TieReport(
        groups, storage, objects, declared, object_source, declared_source, config, mismatches, broken, broken_source
    )


def _broken_ties(module: Any, layout: Layout, groups, declared_source: str) -> tuple[tuple[tuple[str, ...], ...], str]:
    """Names the model's own class ties that this instance stores apart (``to_empty`` untied
    them, or a copy did): a reload into the class keeps one tensor for them. For a transformers
    model, its declared ties; for another module whose class builds without arguments, the
    class itself, built again on meta (nothing allocated), and its shared Parameter objects."""
    if declared_source.startswith("transformers"):
        broken = tuple(g.names for g in groups if g.declared and not g.storage and all(n in layout for n in g.names))
        return broken, declared_source
    fresh = _rebuilt_on_meta(module)
    if fresh is None:
        return (), ""
    by_id: dict[int, list[str]] = {}
    for name, p in fresh.named_parameters(remove_duplicate=False):
        by_id.setdefault(id(p), []).append(name)
    apart = [
        tuple(sorted(names, key=layout.position))
        for names in by_id.values()
        if len(names) > 1 and all(n in layout for n in names) and len({layout[n].storage for n in names}) > 1
    ]
    return tuple(apart), f"{type(module).__qualname__}() built again on meta"


def _rebuilt_on_meta(module: Any) -> Any:
    """``type(module)()`` on the meta device when its ``__init__`` needs no argument (else None;
    also None when it raises). Nothing is allocated; the instance is dropped after use."""
    import inspect

    import torch

    cls = type(module)
    if cls.__module__.startswith("torch.") or cls.__init__ is torch.nn.Module.__init__:
        return None  # torch's own containers tie nothing by construction
    try:
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    except (TypeError, ValueError):
        return None
    if any(
        p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params
    ):
        return None
    try:
        with torch.device("meta"):
            return cls()
    except Exception:  # noqa: BLE001 - a class that cannot be built so tells nothing
        return None


def _object_ties(module: Any) -> tuple[tuple[tuple[str, ...], ...], str]:
    try:
        from accelerate.utils import find_tied_parameters

        from tensorviz.savecheck.savers.common import version

        found = find_tied_parameters(module)
        return tuple(tuple(g) for g in found), f"accelerate.utils.find_tied_parameters ({version('accelerate')})"
    except Exception:  # noqa: BLE001 - accelerate missing or changed: same rule, done here
        by_id: dict[int, list[str]] = {}
        for name, p in module.named_parameters(remove_duplicate=False):
            by_id.setdefault(id(p), []).append(name)
        return (
            tuple(tuple(sorted(g)) for g in by_id.values() if len(g) > 1),
            "tensorviz (same Parameter object under several names)",
        )


def _declared_ties(module: Any) -> tuple[tuple[tuple[str, str], ...], str, tuple[tuple[str, Any], ...]]:
    config = getattr(module, "config", None)
    if config is None or not hasattr(module, "_tied_weights_keys"):
        return (), "none: not a transformers model (nothing declares ties)", ()
    facts: list[tuple[str, Any]] = []
    for key in ("tie_word_embeddings", "tie_encoder_decoder"):
        if hasattr(config, key):
            facts.append((f"config.{key}", getattr(config, key)))
    facts.append(("class _tied_weights_keys", _plain(getattr(type(module), "_tied_weights_keys", None))))
    tied = getattr(module, "all_tied_weights_keys", None)
    source = "transformers all_tied_weights_keys"
    if tied is None:
        tied = getattr(module, "_tied_weights_keys", None) or {}
        source = "transformers _tied_weights_keys"
    if isinstance(tied, dict):
        pairs = tuple((str(t), str(s)) for t, s in tied.items())
    else:  # transformers 4.x: a list of target patterns; the source is the input embedding
        pairs = tuple((str(t), "") for t in tied)
    emb_in, emb_out = _embeddings(module)
    if emb_in is not None and emb_out is not None:
        facts.append(("output embeddings is input embeddings", emb_in is emb_out))
    return pairs, source, tuple(facts)


def _plain(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): str(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [str(v) for v in x]
    return x


def _embeddings(module: Any) -> tuple[Any, Any]:
    try:
        emb_in = module.get_input_embeddings()
        emb_out = module.get_output_embeddings()
        return getattr(emb_in, "weight", None), getattr(emb_out, "weight", None)
    except Exception:  # noqa: BLE001 - models without embeddings raise NotImplementedError
        return None, None


def _merge(layout: Layout, storage, objects, declared) -> tuple[TieGroup, ...]:
    """Union the three kinds into connected groups of names, in layout order."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for names in (*storage, *objects, *[tuple(p) for p in declared if p[1]]):
        for n in names[1:]:
            parent[find(n)] = find(names[0])
    comps: dict[str, list[str]] = {}
    order = {n: i for i, n in enumerate(layout.names)}
    for n in sorted(parent, key=lambda n: order.get(n, len(order))):
        comps.setdefault(find(n), []).append(n)
    obj_sets = [set(g) for g in objects]
    decl = {frozenset(p) for p in declared if p[1]}
    out = []
    for names in comps.values():
        if len(names) < 2:
            continue
        known = [n for n in names if n in layout]
        same_storage = len(known) == len(names) and len({layout[n].storage for n in names}) == 1
        rels = tuple(
            "" if i == 0 or names[0] not in layout or n not in layout else layout.relation(n, names[0])
            for i, n in enumerate(names)
        )
        out.append(
            TieGroup(
                tuple(names), same_storage, any(set(names) <= g for g in obj_sets), _declared_cover(names, decl), rels
            )
        )
    return tuple(out)


def _declared_cover(names: list[str], decl: set[frozenset[str]]) -> bool:
    """Every name is joined to the first by declared pairs."""
    reach = {names[0]}
    changed = True
    while changed:
        changed = False
        for pair in decl:
            if pair & reach and not pair <= reach:
                reach |= pair
                changed = True
    return set(names) <= reach


def _mismatches(layout: Layout, groups, declared_source: str, config) -> tuple[str, ...]:
    hf = declared_source.startswith("transformers")
    out = []
    for g in groups:
        names = ", ".join(g.names)
        identical = g.storage and all(r in ("", "identical") for r in g.relations)
        if g.storage and not g.object:
            if identical:
                out.append(
                    f"{{{names}}}: one storage, identical views, but not one Parameter object: "
                    f"accelerate's find_tied_parameters does not see this tie, and accelerate's "
                    f"safetensors path keeps only the first name"
                )
            else:
                rel = ", ".join(f"{n} {r} {g.names[0]}" for n, r in zip(g.names[1:], g.relations[1:]))
                out.append(
                    f"{{{names}}}: share a storage without being a tie ({rel}): savers that "
                    f"de-duplicate by storage treat them as aliases"
                )
        if hf and (g.storage or g.object) and not g.declared and identical:
            out.append(
                f"{{{names}}}: tied in memory but not declared (all_tied_weights_keys): "
                f"save_pretrained drops or refuses them, and from_pretrained will not re-tie them"
            )
        if hf and g.declared and not g.storage:
            out.append(
                f"{{{names}}}: declared tied but stored separately: save_pretrained writes each "
                f"of them; the model no longer shares these weights"
            )
    return tuple(out)
