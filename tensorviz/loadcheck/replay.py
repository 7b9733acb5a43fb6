"""torch's ``Module.load_state_dict``, run on a twin, with each module's share of the state dict
found in one pass instead of one scan per child.

torch's own ``load`` builds every child's state dict with
``{k: v for k, v in local_state_dict.items() if k.startswith(child_prefix)}``: one scan of the
parent's whole dict per child, so a ``ModuleList`` of 750 blocks scans its 9,000 keys 750 times
(6.8 million ``startswith`` on a 9,005-tensor GPT-2: most of a real load's time, and all of the
replay's). :func:`load_state_dict` below is the same function, step for step -- the same calls
to each module's own ``_load_from_state_dict`` with the same arguments, its pre-hooks, the same
post-hooks, the same messages -- except that after a module's ``_load_from_state_dict`` its
children's dicts are cut from its dict in one pass: a key belongs to the child named by its
first component after the prefix (a child's name has no dot, so one key starts one child's
prefix at most). Each child still gets its own dict, in the parent's order, built after the
parent's ``_load_from_state_dict`` ran (a pre-hook that renamed keys is seen by the children).
Children named with a dot or an empty name (only reachable by writing ``_modules`` directly)
keep torch's scan. tests/loadcheck/test_loadcheck_replay.py checks, scenario by scenario and on
generated trees, that the replay and torch's own ``load_state_dict`` leave the same keys, the same
message and the same twin.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

__all__ = ["load_state_dict", "replays"]


def replays(module: Any) -> bool:
    """Whether ``module.load_state_dict`` is torch's own (not a subclass's override, not one set
    on the instance, nor a wrapper put over torch's): only then is :func:`load_state_dict` the
    same call."""
    import torch

    own = torch.nn.Module.load_state_dict
    code = getattr(own, "__code__", None)
    return (
        type(module).load_state_dict is own
        and "load_state_dict" not in getattr(module, "__dict__", {})
        and getattr(own, "__wrapped__", None) is None
        and code is not None
        and code.co_filename.replace("\\", "/").endswith("torch/nn/modules/module.py")
    )


def load_state_dict(module: Any, state_dict: Mapping, strict: bool = True, assign: bool = False) -> Any:
    """``module.load_state_dict(state_dict, strict=strict, assign=assign)`` as torch runs it
    (same hooks, keys and errors), each child's share of the dict cut in one pass."""
    from torch.nn.modules.module import _IncompatibleKeys

    if not isinstance(state_dict, Mapping):
        raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
    missing_keys: list[str] = []
    unexpected_keys: list[str] = []
    error_msgs: list[str] = []
    metadata = getattr(state_dict, "_metadata", None)
    state_dict = OrderedDict(state_dict)
    if metadata is not None:
        state_dict._metadata = metadata  # type: ignore[attr-defined]

    def load(module: Any, local_state_dict: Mapping, prefix: str = "") -> None:
        local_metadata = {} if metadata is None else metadata.get(prefix[:-1], {})
        if assign:
            local_metadata["assign_to_params_buffers"] = assign
        module._load_from_state_dict(
            local_state_dict, prefix, local_metadata, True, missing_keys, unexpected_keys, error_msgs
        )
        shares = _shares(module._modules, local_state_dict, prefix)
        for name, child in module._modules.items():
            if child is not None:
                child_prefix = prefix + name + "."
                share = shares.get(name) if shares is not None else None
                if share is None:  # torch's own scan: a child named with a dot, or added meanwhile
                    share = {k: v for k, v in local_state_dict.items() if k.startswith(child_prefix)}
                load(child, share, child_prefix)
        incompatible_keys = _IncompatibleKeys(missing_keys, unexpected_keys)
        for hook in module._load_state_dict_post_hooks.values():
            out = hook(module, incompatible_keys)
            if out is not None:
                raise AssertionError(
                    "Hooks registered with ``register_load_state_dict_post_hook`` are not "
                    "expected to return new values, if incompatible_keys need to be modified, "
                    "it should be done inplace."
                )

    load(module, state_dict)
    _raise_errors(module, strict, missing_keys, unexpected_keys, error_msgs)
    return _IncompatibleKeys(missing_keys, unexpected_keys)


def _shares(children: Mapping, local_state_dict: Mapping, prefix: str) -> dict[str, dict] | None:
    """Each child's dict (its keys in ``local_state_dict``'s order), in one pass; None where a
    child's name could overlap another's prefix (a dot in it, or empty): torch's scan then."""
    names = [n for n, c in children.items() if c is not None]
    if not names:
        return {}
    if any(not isinstance(n, str) or not n or "." in n for n in names):
        return None
    out: dict[str, dict] = {n: {} for n in names}
    start = len(prefix)
    for k, v in local_state_dict.items():
        if k.startswith(prefix):  # a key that is not a str raises here as torch's scan would
            head, dot, _ = k[start:].partition(".")
            if dot:
                share = out.get(head)
                if share is not None:
                    share[k] = v
    return out


def _raise_errors(module: Any, strict: bool, missing: list, unexpected: list, error_msgs: list) -> None:
    """torch's closing step: the keys' lines first (when strict), then one RuntimeError."""
    if strict:
        if len(unexpected) > 0:
            error_msgs.insert(
                0, "Unexpected key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in unexpected))
            )
        if len(missing) > 0:
            error_msgs.insert(0, "Missing key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in missing)))
    if len(error_msgs) > 0:
        raise RuntimeError(
            "Error(s) in loading state_dict for {}:\n\t{}".format(module.__class__.__name__, "\n\t".join(error_msgs))
        )
