# Cells of notebooks/03_exploring_a_checkpoint.ipynb (built by tools/build_notebooks.py).
# `md` and `code` are provided by the builder.

CELLS = [
    md("""
    # Exploring a checkpoint without loading it

    `tv.analyze` also opens files, and reads only their metadata:

    * a **`.safetensors`** file: the 8-byte length and the JSON header, nothing else;
    * a **sharded** checkpoint: the `*.safetensors.index.json` (or the model folder) and every
      shard's header, checked against each other;
    * a **torch checkpoint** (`.pt`, `.pth`, `.bin`): `torch.load(weights_only=True, mmap=True)`,
      which maps the file without reading tensor bytes and never runs code from the file.

    This notebook writes three small checkpoints into a temporary folder, opens each one and
    reads its layout: where every tensor's bytes sit in the file, which bytes nothing reads,
    and what the metadata says. Then the same from the command line.
    """),
    code("""
    %matplotlib inline
    import json, os, sys, tempfile
    from pathlib import Path
    import torch
    from torch import nn
    from safetensors.torch import load_model, save_file, save_model
    import tensorviz as tv

    home = os.getcwd()
    workdir = tempfile.mkdtemp(prefix="tensorviz-03-")
    os.chdir(workdir)          # every file below is written here, never in the repository
    """),
    md("""
    ## 1. A sharded safetensors checkpoint

    Large models are saved in several files ("shards") plus an index whose `weight_map` says
    which shard holds each tensor. We write a small one by hand: six tensors in two shards.
    """),
    code("""
    torch.manual_seed(0)
    weights = {"embed.weight": torch.randn(256, 32),
               "layers.0.qkv.weight": torch.randn(96, 32), "layers.0.mlp.weight": torch.randn(128, 32),
               "layers.1.qkv.weight": torch.randn(96, 32), "layers.1.mlp.weight": torch.randn(128, 32),
               "norm.weight": torch.ones(32)}
    shards = {"model-00001-of-00002.safetensors": ["embed.weight", "layers.0.qkv.weight", "layers.0.mlp.weight"],
              "model-00002-of-00002.safetensors": ["layers.1.qkv.weight", "layers.1.mlp.weight", "norm.weight"]}

    os.mkdir("sharded")
    weight_map = {}
    for file, names in shards.items():
        save_file({n: weights[n] for n in names}, f"sharded/{file}", metadata={"format": "pt"})
        weight_map.update({n: file for n in names})
    index = {"metadata": {"total_size": sum(t.nbytes for t in weights.values())}, "weight_map": weight_map}
    Path("sharded/model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    sorted(os.listdir("sharded"))
    """),
    md("""
    Open the index. For a file, the **storage is the file itself**: every tensor's span is its
    absolute byte range in the shard, after the header.
    """),
    code("""
    layout = tv.analyze("sharded/model.safetensors.index.json")
    print(layout.to_text(max_views=3))
    """),
    md("""
    The diagram draws each shard as one storage, its tensors in file order. safetensors writes
    them in its own order (by dtype, then name), which is why `layers.0.mlp.weight` comes before
    `layers.0.qkv.weight`. The tiny `norm.weight` (128 bytes) is a sliver at the end of the
    second shard.
    """),
    code("""
    tv.show(layout)
    """),
    md("""
    Each file starts with its header, which no tensor reads: 280 bytes, too thin to see at this
    scale. Zoom into the first KiB of the second shard (`storages` picks storages by index,
    `byte_range` zooms in):
    """),
    code("""
    tv.show(layout, storages=[1], byte_range=(0, 1024))
    """),
    md("""
    Inside one file every tensor is on the same storage, so "shared by storage" just means "in
    the same file". Real aliasing (two names over the same bytes) shows up when grouping by
    exact span or overlap, and here there is none:
    """),
    code("""
    print("shared by storage:", len(layout.shared("storage")), "groups (one per shard)")
    print("shared by span:   ", layout.shared("span"))
    print("shared by overlap:", layout.shared("overlap"))
    """),
    md("""
    ### Check it against the raw header

    A safetensors file starts with 8 bytes (little-endian header length), then the JSON header,
    whose `data_offsets` count from the end of the header. So the tensor's bytes in the file are
    `8 + header length + data_offsets`. Reading the header by hand gives the same numbers:
    """),
    code("""
    with open("sharded/model-00002-of-00002.safetensors", "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    lo, hi = header["norm.weight"]["data_offsets"]
    print("header says:   ", header["norm.weight"], "-> file bytes", (8 + n + lo, 8 + n + hi))
    print("tensorviz says:", (layout["norm.weight"].start, layout["norm.weight"].stop))
    """),
    md("""
    ### A stale index

    Indexes go stale when shards are rewritten by hand. Here the index claims `norm.weight` is in
    the first shard and forgets `layers.1.mlp.weight`. Loaders that trust the index fail, or
    silently skip the forgotten tensor. tensorviz compares the index with the shards' headers:
    """),
    code("""
    stale = dict(weight_map, **{"norm.weight": "model-00001-of-00002.safetensors"})
    del stale["layers.1.mlp.weight"]
    Path("sharded/stale.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": stale}))
    for problem in tv.analyze("sharded/stale.safetensors.index.json").metadata["problems"]:
        print("-", problem)
    """),
    md("""
    ## 2. A `save_model` file with dropped names

    `safetensors.torch.save_model` writes a tied weight once and records each dropped alias in
    the file's `__metadata__`. Here is a tiny language model whose head is tied to its
    embedding:
    """),
    code("""
    class TiedLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(50, 16)
            self.ln = nn.LayerNorm(16)
            self.lm_head = nn.Linear(16, 50, bias=False)
            self.lm_head.weight = self.wte.weight          # the tie

    torch.manual_seed(0)
    lm = TiedLM()
    save_model(lm, "tied.safetensors")
    tied = tv.analyze("tied.safetensors")
    print("names in the file:", tied.names)
    print("dropped (alias -> kept):", tied.metadata["dropped"])
    """),
    md("""
    The file holds three tensors; the fourth name, `wte.weight`, lives only in the metadata. The
    picture shows the header, then the kept tensors: the 3,200-byte embedding matrix, written
    once under the name `lm_head.weight`.
    """),
    code("""
    tv.show(tied)
    """),
    md("""
    `load_model` reads that metadata and restores the tie in a fresh model. Check it, and check
    the weights came back bit for bit:
    """),
    code("""
    restored = TiedLM()
    print("load_model (missing, unexpected):", load_model(restored, "tied.safetensors"))
    print("tie restored:", restored.lm_head.weight is restored.wte.weight)
    print("bit-exact:", all(torch.equal(a.view(torch.int32), b.view(torch.int32))
                            for a, b in zip(lm.state_dict().values(), restored.state_dict().values())))
    """),
    md("""
    ## 3. A torch checkpoint where a slice keeps a big storage alive

    A common surprise: you keep a few rows of a large tensor and save them. `vocab[:16]` is a
    view, so `torch.save` writes its **whole storage**: 2 MiB for 4 KiB of data.
    """),
    code("""
    vocab = torch.randn(8192, 64)                 # 2 MiB
    special = vocab[:16]                          # the 16 rows we want: 4 KiB, but a view
    torch.save({"special_tokens": special, "step": 100}, "special.pt")
    print(f"file size: {os.path.getsize('special.pt'):,} bytes")
    """),
    md("""
    tensorviz opens the checkpoint (no tensor bytes read) and shows where the size comes from:
    one saved storage of 2 MiB, of which the only tensor reads the first 4 KiB. Non-tensor
    values (`step`) are listed in the metadata.
    """),
    code("""
    ckpt = tv.analyze("special.pt")
    print(ckpt)
    """),
    code("""
    tv.show(ckpt)
    """),
    md("""
    At 4 KiB of 2 MiB the tensor is too thin to see; zoomed to the first 16 KiB it is plain:
    """),
    code("""
    tv.show(ckpt, byte_range=(0, 16 * 1024))
    """),
    md("""
    The unreferenced byte ranges, exactly (per storage, as `[start, stop)` pairs). The fix is a
    `.clone()`, which gives the rows a storage of their own:
    """),
    code("""
    print("unreferenced:", ckpt.unreferenced_runs(0).tolist())
    torch.save({"special_tokens": special.clone(), "step": 100}, "special-fixed.pt")
    fixed = tv.analyze("special-fixed.pt")
    print(f"fixed file: {os.path.getsize('special-fixed.pt'):,} bytes; "
          f"unreferenced: {fixed.storages[0].unreferenced_nbytes} bytes")
    """),
    md("""
    ## 4. The command line

    The same reading is available as `tensorviz PATH` (or `python -m tensorviz PATH`) for
    terminals and CI: a text report, `--png`/`--html` for the diagram, `--json` for scripts and
    `--save-check` for what each saver would do. (`{sys.executable}` runs this notebook's
    Python, so it works whether or not the environment is activated.)
    """),
    code("""
    !{sys.executable} -m tensorviz sharded --max-views 2
    """),
    md("""
    `--json` prints a stable, versioned schema that scripts can check, for example in CI: fail
    when a checkpoint carries more than 10 % unreferenced bytes.
    """),
    code("""
    import subprocess
    out = subprocess.run([sys.executable, "-m", "tensorviz", "special.pt", "--json"],
                         capture_output=True, text=True, check=True).stdout
    doc = json.loads(out)
    for s in doc["storages"]:
        share = s["unreferenced_nbytes"] / s["nbytes"]
        print(f"{s['label']}: {s['nbytes']:,} bytes, {share:.1%} unreferenced", "-> FAIL" if share > 0.1 else "")
    """),
    md("""
    `--png` writes the diagram, for a report or a pull-request comment (the text report on
    standard output is discarded here):
    """),
    code("""
    from IPython.display import Image
    !{sys.executable} -m tensorviz tied.safetensors --png tied.png > /dev/null
    Image("tied.png")
    """),
    md("""
    ## What to remember

    * `tv.analyze(path)` reads safetensors headers, index files, model folders and torch
      checkpoints from metadata only, and never runs code from a file.
    * In a file, a tensor's span is its absolute byte range. The header is drawn as such; other
      bytes no tensor reads are unreferenced (in a torch checkpoint: bytes written for nothing).
    * Check a sharded index against its shards, read `save_model`'s dropped names, and find
      the slice that drags a whole storage into a `torch.save` checkpoint before it ships.
    """),
    code("""
    import shutil
    os.chdir(home)
    shutil.rmtree(workdir)
    """),
]
