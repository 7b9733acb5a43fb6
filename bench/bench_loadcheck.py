"""How fast is ``tv.load_check`` next to the real ``load_state_dict``, on a 9,005-tensor GPT-2?

The model is bench_savecheck's GPT-2 (750 blocks of 8-wide layers, 9,005 names, one tie) and the
source a state dict of independent copies of its tensors (so the tie is fed twice: a conflict to
find). Prints the best CPU time of ``--repeat`` interleaved runs of:

* load_check       -- ``tv.load_check(model, source, strict=False)`` (twins, torch's own load
                      steps on them through loadcheck/replay.py, the layouts' memory effects);
* load_state_dict  -- the real ``load_state_dict(source, strict=False)`` into a second model;
* analyze          -- ``tv.analyze(model)`` (for scale: the check reads the same names and groups
                      from the state dict as a mapping, loadcheck.check.model_layout);

and the ratio. Target (issue 24): the load check within 1 s for this model.

``--70b`` also times a Llama-70B-sized model built on meta (80 layers, 723 tensors, 141 GB in
bfloat16) against its checkpoint's headers: 30 safetensors shards and an index, written sparse
(a header and a hole: no data on disk). The peer is the real ``load_state_dict(strict=False)``
of the same meta model from meta tensors of the same shapes (all a loader can do without data);
``from_pretrained`` of the folder is timed too, without a peer (the real one reads every byte).

    .venv/bin/python bench/bench_loadcheck.py [--layers 750] [--repeat 3] [--70b]
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import tempfile

from bench_savecheck import best_of, model

import tensorviz as tv


def llama_70b():
    import torch
    from _models import llama_70b_on_meta

    model = llama_70b_on_meta(torch.bfloat16)
    model.config.dtype = "bfloat16"  # written to config.json: the checkpoint's dtype, as from_pretrained reads it
    return model


def sparse_checkpoint(model, folder: str, shards: int = 30) -> None:
    """``model.safetensors.index.json`` and ``shards`` safetensors files holding the model's
    state-dict entries: each file a real header, then a hole as long as its data (sparse)."""
    items = list(model.state_dict().items())
    per = -(-len(items) // shards)
    weight_map = {}
    for i in range(shards):
        name = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        header, offset = {}, 0
        for key, t in items[i * per : (i + 1) * per]:
            n = t.numel() * t.element_size()
            header[key] = {"dtype": "BF16", "shape": list(t.shape), "data_offsets": [offset, offset + n]}
            offset += n
            weight_map[key] = name
        raw = json.dumps(header).encode()
        raw += b" " * (-len(raw) % 8)
        with open(os.path.join(folder, name), "wb") as f:
            f.write(struct.pack("<Q", len(raw)) + raw)
            f.truncate(8 + len(raw) + offset)
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)


def bench_70b(repeat: int) -> None:
    import torch

    model = llama_70b()
    with tempfile.TemporaryDirectory() as folder:
        sparse_checkpoint(model, folder)
        model.config.save_pretrained(folder)
        twin = {k: torch.empty(v.shape, dtype=v.dtype, device="meta") for k, v in model.state_dict().items()}
        rows = [
            ("load_check", lambda: tv.load_check(model, folder, strict=False)),
            ("load_state_dict", lambda: model.load_state_dict(twin, strict=False)),
            ("from_pretrained", lambda: tv.load_check(type(model), folder, loader="from_pretrained")),
        ]
        t = best_of(rows, repeat)
        r = tv.load_check(model, folder, strict=False)
    n = len(twin)
    print(
        f"Llama-70B on meta, {n:,} tensors, header-only checkpoint (CPU s): load_check {t['load_check']:6.3f}   "
        f"real load_state_dict on meta {t['load_state_dict']:6.3f}   ratio {t['load_check'] / t['load_state_dict']:5.2f}x"
    )
    print(
        f"    conflicts: {[(c.names, c.winner) for c in r.conflicts]}, untouched: {len(r.untouched)}, clean: {r.clean}"
    )
    print(
        f"    load_check(loader='from_pretrained') of the folder {t['from_pretrained']:6.3f} (no peer: the real "
        "from_pretrained reads every byte, 141 GB, even with device_map='meta')"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=750)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--70b", dest="big", action="store_true", help="also the Llama-70B-sized meta model")
    args = parser.parse_args()
    m, target = model(args.layers), model(args.layers)
    source = {k: v.clone() for k, v in m.state_dict().items()}
    rows = [
        ("load_check", lambda: tv.load_check(m, source, strict=False)),
        ("load_state_dict", lambda: target.load_state_dict(source, strict=False)),
        ("analyze", lambda: tv.analyze(m)),
    ]
    t = best_of(rows, args.repeat)
    r = tv.load_check(m, source, strict=False)
    print(
        f"{len(source):,} tensors (CPU s): load_check {t['load_check']:6.3f}   real load_state_dict "
        f"{t['load_state_dict']:6.3f}   ratio {t['load_check'] / t['load_state_dict']:5.2f}x   analyze {t['analyze']:6.3f}"
    )
    print(f"    conflicts: {[(c.names, c.winner) for c in r.conflicts]}, untouched: {len(r.untouched)}")
    print(f"    target: load_check <= 1 s: {'met' if t['load_check'] <= 1 else 'NOT met'}")
    if args.big:
        bench_70b(args.repeat)


if __name__ == "__main__":
    main()
