# Cells of notebooks/05_sharded_models.ipynb (built by tools/build_notebooks.py).
# `md` and `code` are provided by the builder.

CELLS = [
    md("""
    # Sharded models: FSDP2 × tensor parallelism on 4 ranks, and the checkpoint they save

    A model sharded with FSDP2 or tensor parallelism lives on many processes: each rank holds
    a *shard* of every parameter (a `DTensor`), and no single process sees the whole picture.
    `tv.analyze(model, group=True)` is a **collective**: every rank calls it, the ranks exchange
    their metadata over `torch.distributed`, and every rank gets the same **global layout**:

    * every parameter is a *global tensor* (a storage of device `"global"`);
    * every rank's shard is a view `NAME@rankR`, placed at the elements it holds.

    A notebook is one process, so the 4-rank job runs as a script,
    [`docs/sharded_run.py`](../docs/sharded_run.py) — four processes on CPU with the `gloo`
    backend, a 2 × 2 mesh (`dp` × `tp`): a tiny language model whose embedding is tied to its
    output head, MLPs in tensor parallel (`ColwiseParallel` up, `RowwiseParallel` down), and
    FSDP2 over `dp`. Each rank runs one training step (forward and backward), then calls
    `tv.analyze(model, group=True)`; rank 0 also writes the
    exchanged record, from which this notebook rebuilds exactly the layout every rank computed;
    then all ranks save the model with `torch.distributed.checkpoint` (DCP).
    """),
    code("""
    %matplotlib inline
    import json, os, subprocess, sys, tempfile
    import tensorviz as tv
    from tensorviz.sources.distributed.global_layout import layout_from_record

    out = tempfile.mkdtemp(prefix="tensorviz-05-")     # nothing is written into the repository
    command = [sys.executable, os.path.join("..", "docs", "sharded_run.py"), out]
    print("$ python docs/sharded_run.py OUT_DIR   # OUT_DIR: a fresh temporary folder")
    subprocess.run(command, check=True, capture_output=True, text=True)
    print(open(os.path.join(out, "summary.json")).read())
    """),
    md("""
    `ranks_agree`: the four ranks computed the same layout (compared by a digest of each one's
    JSON). Rebuild it here from the exchanged record:
    """),
    code("""
    with open(os.path.join(out, "exchange.json")) as f:
        record = json.load(f)
    layout = layout_from_record(record)
    print(layout.metadata["exchange"])
    print(len(layout), "shard views on", len(layout.storages), "global tensors")
    """),
    md("""
    **Two distinct descriptions.** The tensor-parallel weights live on the whole 2 × 2 mesh, but
    FSDP2 shards the other parameters over `dp` only, and `dp` is a different sub-mesh on
    ranks 0, 2 (`tp` = 0) and on ranks 1, 3 (`tp` = 1). So the ranks describe their tensors in
    two different ways; each description travels once (from its lowest rank), and the layout is
    the union.

    ## 1. Every shard, coloured by rank

    `by="rank"` keeps one block per global tensor and colours every shard by the rank that
    holds it (names carry the rank too).
    """),
    code("""
    tv.show(layout, by="rank", names=r"^(embed|head|blocks\\.0\\.up)\\.")
    """),
    md("""
    Read it:

    * **The tied embedding is one global tensor** under both names: `embed.weight@rank0` and
      `head.weight@rank0` are the same bytes. FSDP2 shards it over `dp` and replicates it
      over `tp`, so ranks 0 and 1 hold the same rows (hatched: read by two bars).
    * **`blocks.0.up.weight` is FSDP2 over tensor parallelism**: placements
      `(_S(0, 2), S(0))`. Tensor parallelism splits the rows in two (`tp`), FSDP2 splits each
      half again (`dp`), so **rank order is not row order**: rows 0–2 are rank 0's, 3–5 rank
      2's, 6–8 rank 1's, 9–11 rank 3's.
    """),
    code("""
    for r in range(4):
        v = layout[f"blocks.0.up.weight@rank{r}"]
        print(f"rank {r}: rows {v.offset // 8}-{(v.offset + v.numel) // 8 - 1}  bytes [{v.start}, {v.stop})  {v.note}")
    print(layout.relation("embed.weight@rank0", "head.weight@rank0"),
          layout.relation("embed.weight@rank0", "embed.weight@rank1"),
          layout.relation("embed.weight@rank0", "embed.weight@rank2"))
    """),
    md("""
    ## 2. By mesh dimension

    `by="mesh:tp"` colours each shard by its `tp` coordinate: the row-parallel `down.weight`
    is split by columns across `tp` (one colour per column half, strided in the global
    tensor) and by rows across `dp`.
    """),
    code("""
    tv.show(layout, by="mesh:tp", names=r"^blocks\\.0\\.(down|up)\\.weight")
    """),
    md("""
    ## 3. What each rank holds in memory

    `layout.metadata["ranks"]` gives each rank's local bytes and the bytes of the storages
    behind them (FSDP2 pads uneven shards: the embedding's 10 rows split 5 + 5, the
    LayerNorm's 8 values 4 + 4, so nothing is padded here).
    """),
    code("""
    layout.metadata["ranks"]
    """),
    md("""
    ## 4. What FSDP2 gathers and frees between steps

    The layout above is the *logical* side. The physical side is in `layout.metadata["fsdp"]`,
    per FSDP2 unit (each `fully_shard`ed module) and per rank: every parameter's shard sits at
    the start of a padded **sharded storage**; for forward, and again for backward, the unit's
    all-gather re-creates the **unsharded** parameters (padded, over `dp` only: the tensor-parallel
    weights stay split over `tp`); units with `reshard_after_forward` free them after forward.
    The run did one step, so every unsharded storage exists but is **freed** (0 bytes) now.
    The peak is an estimate, and the last line says exactly what it adds up.
    """),
    code("""
    from tensorviz.core.fsdp import fsdp_lines
    from tensorviz.sources.distributed.fsdp_facts import rank_record

    print("\\n".join(fsdp_lines(layout.metadata["fsdp"])))
    """),
    md("""
    One rank in full: each sharded storage with the bytes its local shard occupies, and each
    all-gather output with its size and state.
    """),
    code("""
    for unit in rank_record(layout, 3)[:2]:
        print(f"unit {unit['module'] or '(root)'}: reshard_after_forward={unit['reshard_after_forward']}")
        for storage, gathered in zip(unit["storages"], unit["unsharded"]):
            (shard,) = storage["shards"]
            print(f"  {', '.join(shard['names']):22} sharded {storage['nbytes']:4} B, shard at "
                  f"[{shard['start']}, {shard['stop']})  all-gathered {gathered['nbytes']:4} B, {gathered['state']}")
    """),
    md("""
    ## 5. The checkpoint the ranks saved

    `tv.analyze(folder)` reads a DCP folder from its `.metadata` alone, with a restricted
    unpickler that knows only DCP's own metadata classes (anything else raises
    `UnsafeCheckpointError`; no code from the file runs, and torch is not even imported).
    Every saved chunk is a view `NAME[a:b, c:d]` of its global tensor, and a byte range of the
    `.distcp` file that holds it; `by="rank"` colours both by the rank that saved it.
    """),
    code("""
    ckpt = tv.analyze(os.path.join(out, "dcp"))
    print(sorted(os.listdir(os.path.join(out, "dcp"))))
    {name: (c["file"], c["offset"], c["length"]) for name, c in ckpt.metadata["chunks"].items()
     if name.startswith("blocks.0.up.weight")}
    """),
    code("""
    tv.show(ckpt, by="rank", names=r"blocks\\.0\\.up\\.weight|^__0_0")
    """),
    md("""
    Each file range is longer than the chunk's data: DCP writes a serialized tensor record there.
    DCP saves a replicated chunk once, from one of the ranks that hold it, and spreads that
    work over the ranks. But it does **not** know about ties: the tied embedding is saved
    twice, once as `embed.weight` (by ranks 0 and 2) and once as `head.weight` (by ranks 1
    and 3), because the state dict has both names:
    """),
    code("""
    {name: c["file"] for name, c in ckpt.metadata["chunks"].items() if name.startswith(("embed", "head"))}
    """),
    md("""
    The same from a terminal: `tensorviz ckpt_dir/ --json` writes every chunk, file and byte
    range as JSON.
    """),
]
