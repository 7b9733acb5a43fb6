# Cells of notebooks/04_a_large_model_on_meta.ipynb (built by tools/build_notebooks.py).
# `md` and `code` are provided by the builder.

CELLS = [
    md("""
    # What is in a 70B model, and where does its memory go?

    A Llama-3-70B-sized model has 131 GiB of weights in bfloat16. You do not need them to see
    its structure: build it on PyTorch's `meta` device, where tensors have shapes, strides and
    dtypes but no data. Nothing here allocates the weights and nothing is downloaded; the model
    is built from a config (the published Llama-3-70B sizes).

    You will see the text summary that fits a screen, the module tree with bytes **counted
    once** (a tied weight is not counted twice), the "where the memory goes" view, and
    `tv.explain` on one real 8192 × 8192 weight.
    """),
    code("""
    %matplotlib inline
    import logging
    import torch
    for quiet in ("torchao", "torch.utils._pytree"):   # import-time notes of a CPU-only torchao
        logging.getLogger(quiet).setLevel(logging.ERROR)
    from transformers import LlamaConfig, LlamaForCausalLM
    import tensorviz as tv

    config = LlamaConfig(
        hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
        num_attention_heads=64, num_key_value_heads=8, vocab_size=128256,
    )
    with torch.device("meta"):              # shapes and dtypes only: no memory is allocated
        model = LlamaForCausalLM(config).to(torch.bfloat16)
    layout = tv.analyze(model)
    """),
    md("""
    ## 1. The summary: `print(layout)`

    A model this size has 725 named tensors. `print(layout)` does not list them all: it gives
    the totals, what shares bytes, and the largest modules. Eighty alike decoder layers are
    one line (`0 … 79  80 × LlamaDecoderLayer`) with one of them opened. The full listing is one
    call away: `layout.to_text(full=True)`.

    *unique bytes* counts every byte once; *sum of views* adds every name's own size, so a
    tied weight is counted under each of its names — that sum is what a "naive" saver that
    copies each name would write.
    """),
    code("""
    print(layout)
    """),
    md("""
    ## 2. The module tree

    `layout.tree()` has the totals of every module: elements, bytes, % of the model, dtypes,
    devices. In a notebook it shows as a collapsible tree (no JavaScript: it still works in a
    saved notebook). Click a ▸ to open a module; the bar is its share of the model.
    """),
    code("""
    tree = layout.tree()
    tree
    """),
    code("""
    layer = tree.find("model.layers.0")
    for part in layer.children:
        print(f"{part.name:26} {part.kind:14} {part.nbytes / 2**20:8,.0f} MiB  {part.nbytes / layer.nbytes:6.1%} of a layer")
    mlp = sum(tree.find(f"model.layers.{i}.mlp").nbytes for i in range(80))
    print(f"all 80 MLPs: {mlp / 2**30:.1f} GiB = {mlp / tree.total_nbytes:.1%} of the model")
    """),
    md("""
    ## 3. Where the memory goes

    The same numbers as bars: each part of a module as wide as its share. Hatching marks bytes a
    module reads but that are counted under another name (a tie). The explorer shows this view
    beside its diagram (`tv.explore(model)`, panel on the left).
    """),
    code("""
    from IPython.display import HTML
    from tensorviz.explorer.tree import memory_html

    HTML(memory_html(tree.root, tree.total_nbytes) + memory_html(layer, tree.total_nbytes))
    """),
    md("""
    ## 4. A tied model: counted once, marked where shared

    Smaller Llamas tie the output head to the input embedding: `lm_head.weight` *is*
    `model.embed_tokens.weight`. Each byte is counted under the first name that reads it
    (state-dict order), so the embedding owns the 1 GiB and the head owns nothing; the summary
    and the tree say which name it is tied to.
    """),
    code("""
    small = LlamaConfig(
        hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
        num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=True,
    )
    with torch.device("meta"):
        tied = LlamaForCausalLM(small).to(torch.bfloat16)
    tied_tree = tv.analyze(tied).tree()
    print(tied_tree.to_text(depth=2))
    """),
    code("""
    HTML(memory_html(tied_tree.root, tied_tree.total_nbytes))
    """),
    md("""
    The diagram by exact byte span shows the tie as one bar carrying both names; the 145 weights
    that share nothing fold into one line.
    """),
    code("""
    tv.show(tied, by="span")
    """),
    md("""
    ## 5. The bytes of one real weight: `tv.explain`

    `tv.explain` draws which storage cell each element reads. A weight of 8192 × 8192 elements
    is too big to draw cell by cell, so it draws the corner (`[:8, :8]`) and says so; the strip
    shows only the rows that corner reads (each 8192 cells apart). `region=` picks another part.
    """),
    code("""
    q = model.model.layers[0].self_attn.q_proj.weight
    tv.explain(q, q.t(), names=["q_proj.weight", "q_proj.weight.t()"])
    """),
    code("""
    tv.explain(q, names=["q_proj.weight"], region=(slice(4096, 4100), slice(0, 16, 4)))
    """),
    md("""
    ## 6. Everything at once

    A layout shown in a notebook carries the diagram (every weight here has a storage of its
    own and nothing is shared, so they fold into one line) and, below it, the module tree.
    From a terminal, the same tree for a checkpoint:
    `tensorviz model.safetensors.index.json --tree --depth 3`.
    """),
    code("""
    layout
    """),
]
