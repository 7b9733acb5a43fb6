# Cells of notebooks/02_debugging_weight_tying.ipynb (built by tools/build_notebooks.py).
# `md` and `code` are provided by the builder.

CELLS = [
    md("""
    # Debugging weight tying and fused weights

    Models share storage on purpose: a language model's output head reuses the input
    embedding (weight tying), and a fused attention layer keeps q, k and v in one matrix whose
    rows other modules read as views. Savers must then decide what to write, and they decide
    differently: one refuses, one drops names, one writes bytes nobody reads, and one can lose
    weights while only logging a line.

    This notebook looks at three models with tensorviz, checks what every installed saver
    would do (a dry run, from metadata only), and verifies the fix by saving, reloading and
    comparing bit for bit. Nothing is downloaded: every model is built from code or a config.
    """),
    code("""
    %matplotlib inline
    import os, tempfile
    import torch
    from torch import nn
    import tensorviz as tv

    workdir = tempfile.mkdtemp(prefix="tensorviz-02-")   # every file this notebook writes goes here
    """),
    md("""
    ## 1. A fused qkv layer whose q and v are views

    `qkv` holds 30 output rows. The `q` and `v` layers do not own weights: their `weight`
    parameters are views of rows 0–9 and 10–19 of `qkv.weight`, so training one trains the other.
    """),
    code("""
    class FusedQKV(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(20, 30)
            self.q = nn.Linear(20, 10)
            self.v = nn.Linear(20, 10)
            self.q.weight = nn.Parameter(self.qkv.weight[:10])     # rows 0-9 of qkv.weight
            self.v.weight = nn.Parameter(self.qkv.weight[10:20])   # rows 10-19

    torch.manual_seed(0)
    fused = FusedQKV()
    layout = tv.analyze(fused)
    layout
    """),
    md("""
    The diagram has one storage with three views: `qkv.weight` reads all 2400 bytes, `q.weight`
    the first 800, `v.weight` the next 800. The three biases are separate storages that only
    their own parameter reads; they are folded into the "simple storages" row. The relations
    say the same in words:
    """),
    code("""
    for a, b in [("q.weight", "qkv.weight"), ("v.weight", "qkv.weight"), ("q.weight", "v.weight")]:
        print(f"{a:9} vs {b:10}: {layout.relation(a, b)}")
    """),
    md("""
    ## 2. A tiny GPT-2: tied and untied

    transformers builds a GPT-2 from a config with random weights, so a model of a few kilobytes
    behaves exactly like the real one. With `tie_word_embeddings=True` (the default)
    `lm_head.weight` *is* `transformer.wte.weight`: one parameter, two names.
    """),
    code("""
    import logging
    for quiet in ("torchao", "torch.utils._pytree"):   # import-time notes of a CPU-only torchao
        logging.getLogger(quiet).setLevel(logging.ERROR)
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()

    config = GPT2Config(vocab_size=64, n_positions=16, n_embd=8, n_layer=2, n_head=2,
                        bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    tied = GPT2LMHeadModel(config)
    untied = GPT2LMHeadModel(GPT2Config(**{**config.to_dict(), "tie_word_embeddings": False}))

    for name, model in [("tied", tied), ("untied", untied)]:
        print(f"{name:6}: {tv.analyze(model)!r}; shared: {[g.names for g in tv.analyze(model).shared()]}")
    """),
    md("""
    Only the tied model has a shared group. Drawn with `only_shared=True`, the picture keeps just
    that storage: two names over the same 2 KiB, both cross-hatched because every byte is read
    twice.
    """),
    code("""
    tv.show(tied, only_shared=True)
    """),
    md("""
    ## 3. The same model on the meta device

    Big models are often built on `torch.device("meta")` first: shapes and dtypes, no memory.
    Every meta tensor reports address 0, so any check built on `data_ptr()` sees one big
    shared blob. tensorviz keys storages by identity, not address, and still finds exactly
    one tie.
    """),
    code("""
    with torch.device("meta"):
        meta = GPT2LMHeadModel(config)

    print("distinct data_ptr() values:", {p.data_ptr() for p in meta.parameters()})
    print("tensorviz shared groups:   ", [g.names for g in tv.analyze(meta).shared()])
    """),
    md("""
    Sharing checks built on addresses go wrong here. accelerate's `id_tensor_storage` groups
    tensors by (device, address, size); on meta that glues unrelated weights of equal size
    together:
    """),
    code("""
    from collections import defaultdict
    from accelerate.utils.modeling import id_tensor_storage

    by_id = defaultdict(list)
    for name, t in meta.state_dict().items():
        by_id[id_tensor_storage(t)].append(name)
    glued = [names for names in by_id.values() if len(names) > 1]
    print(f"id_tensor_storage on meta: {len(glued)} groups of 'shared' names, the largest has {max(map(len, glued))}")
    print("e.g.", max(glued, key=len)[:3], "...")
    """),
    md("""
    No saver can write meta tensors (they have no data). What you want to know of a meta model
    is what each saver will do once it has weights, so the save check says once that meta holds
    no data and judges the model as if materialised with the same sharing -- the same verdicts
    as the model built on CPU:
    """),
    code("""
    meta_report = tv.save_check(meta)
    print(meta_report.notes[0], end="\\n\\n")
    for v in meta_report:
        print(f"{v.saver:30} {v.outcome:10} dropped: {', '.join(v.dropped) or '-'}")
    """),
    md("""
    ## 4. Explore

    `tv.explore` opens an interactive explorer: grouping (storage, exact span, overlap), a
    name filter, "only shared", a storage picker with a byte-range zoom, and a details pane
    that lists each drawn view's facts and relations. Here it shows the tied GPT-2 with every
    storage drawn. Without a running kernel (on GitHub, or a saved notebook) you see its
    static snapshot instead.
    """),
    code("""
    tv.explore(tied, expand_simple=True, max_lanes=16)
    """),
    md("""
    ## 5. What would each saver do?

    `tv.save_check(model)` runs every installed saver's own sharing logic on data-free stand-ins
    and reports, per saver: the outcome, names kept and dropped, bytes written, lost or written
    for nothing, and code that fixes each problem. Nothing is written. For the fused model:
    """),
    code("""
    report = tv.save_check(fused)
    report
    """),
    md("""
    What is true here:

    * **`safetensors.save_file` raises**: the three weights share memory, and safetensors refuses
      to write a storage twice. The error suggests `save_model`.
    * **`save_model` and accelerate drop the names `q.weight` and `v.weight`** and keep
      `qkv.weight`, which covers every byte of the storage. No weight is lost: the bytes are in
      `qkv.weight`, and `FusedQKV()` re-creates the views when it is built again. But a file
      that lacks two of the model's names surprises any other loader.
    * **`torch.save` is fine**: it writes each storage once and keeps the views.

    The registration order matters: `qkv` is registered first, so the name that covers the
    whole storage wins. The dangerous case is a model whose shared storage has **no** name that
    covers it.
    """),
    md("""
    ## 6. The silent loss: views of a hidden storage

    Here `q.weight` and `v.weight` are rows 0–9 and 20–29 of a 30-row matrix that no module
    registers. They share a storage but not a single byte. accelerate's check compares storages,
    not bytes, so it treats `v.weight` as a duplicate of `q.weight` and drops it: its 800 bytes
    are simply not written. The only sign is a log line.
    """),
    code("""
    class QVOnly(nn.Module):
        def __init__(self):
            super().__init__()
            hidden = torch.randn(30, 20)                    # registered nowhere
            self.q = nn.Linear(20, 10)
            self.v = nn.Linear(20, 10)
            self.q.weight = nn.Parameter(hidden[:10])       # rows 0-9
            self.v.weight = nn.Parameter(hidden[20:30])     # rows 20-29

    torch.manual_seed(1)
    qv = QVOnly()
    tv.show(qv)
    """),
    md("""
    The picture shows the problem at a glance: one storage of 2.3 KiB, two views with a gap
    of 800 unreferenced bytes (rows 10–19) between them, and no byte in common. The save check
    (text form this time, without the fix code):
    """),
    code("""
    qv_report = tv.save_check(qv)
    print(repr(qv_report))
    v = qv_report["accelerate.save"]
    print(f"\\naccelerate.save: {v.outcome}; dropped {v.dropped}; lost {v.lost_nbytes} bytes")
    for m in v.misfires:
        print(f"  accelerate thinks: {m.library}\\n  tensorviz reads:   {m.tensorviz}")
    print("  the only sign, a log line:", *v.logs)
    """),
    md("""
    The other savers have their own trouble with this model: `save_model` refuses it (no name
    covers the whole storage) and `torch.save` writes the 800 unused bytes. But only accelerate
    loses data. Let us check that the report is right by really saving with accelerate, exactly
    as the report's `call` line says, and loading the file into a fresh model:
    """),
    code("""
    from accelerate.utils import save as accelerate_save
    from safetensors.torch import load_file

    path = os.path.join(workdir, "qv-accelerate.safetensors")
    accelerate_save(qv.state_dict(), path, safe_serialization=True)
    print("names in the file:", sorted(load_file(path)))
    """),
    code("""
    fresh = QVOnly()
    result = fresh.load_state_dict(load_file(path), strict=False)
    print("missing:", result.missing_keys)
    print("v.weight came back:", torch.equal(fresh.v.weight, qv.v.weight))
    """),
    md("""
    `v.weight` is gone from the file; a non-strict load (common when fine-tuning) leaves the
    freshly initialised random values in its place without an error.

    ## 7. The fix, verified

    The report carries code for each problem. For accelerate it clones the two views, so each
    is written as its own small tensor, not a view of the hidden storage:
    """),
    code("""
    fix = qv_report["accelerate.save"].fixes[0]
    print(fix.code(path="qv-fixed.safetensors"))
    """),
    md("""
    Apply it, check the fixed dict first (every saver should now be happy), then save, reload
    and compare every tensor bit for bit with the original:
    """),
    code("""
    from collections import OrderedDict

    fixed = OrderedDict((name, t.clone()) for name, t in qv.state_dict().items())
    print(repr(tv.save_check(fixed)))
    """),
    code("""
    def same_bits(a, b):
        \"\"\"Equal dtype, shape and every byte (not just numerically close).\"\"\"
        return (a.dtype == b.dtype and a.shape == b.shape
                and torch.equal(a.flatten().view(torch.uint8), b.flatten().view(torch.uint8)))

    path = os.path.join(workdir, "qv-fixed.safetensors")
    accelerate_save(fixed, path, safe_serialization=True)
    reloaded = QVOnly()
    reloaded.load_state_dict(load_file(path))            # strict: every name must be there
    print({name: same_bits(t, reloaded.state_dict()[name]) for name, t in qv.state_dict().items()})
    print("file size:", os.path.getsize(path), "bytes")
    """),
    md("""
    Every name is back, bit-exact. For the fused model, the first fix the report lists for
    `save_file` is `save_model`: it writes the storage once, records the dropped aliases in the
    file's metadata, and `load_model` rebuilds the model's views. Verified the same way:
    """),
    code("""
    from safetensors.torch import load_model, save_model

    path = os.path.join(workdir, "fused.safetensors")
    save_model(fused, path)
    restored = FusedQKV()
    print("load_model (missing, unexpected):", load_model(restored, path))
    print({name: same_bits(t, restored.state_dict()[name]) for name, t in fused.state_dict().items()})
    print("q.weight still a view of qkv.weight:", tv.analyze(restored).relation("q.weight", "qkv.weight"))
    """),
    md("""
    ## What to remember

    * Shared storage is normal: weight tying, fused projections, slices. What matters is which
      **bytes** each name reads, and whether a saver's check looks at bytes or only at storages
      and addresses.
    * `tv.analyze` finds ties on real and meta models alike; `tv.show`/`tv.explore` draw them.
    * Before saving a model with unusual sharing, run `tv.save_check(model)`: it tells you
      which saver raises, drops names, loses bytes or writes unreferenced ones, and gives the
      fix. Verify a fix by reloading and comparing bits, as above.

    Next: [03 — exploring a checkpoint](03_exploring_a_checkpoint.ipynb) reads files without
    loading them.
    """),
    code("""
    import shutil
    shutil.rmtree(workdir)
    """),
]
