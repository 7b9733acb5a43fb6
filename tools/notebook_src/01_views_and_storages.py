# Cells of notebooks/01_views_and_storages.ipynb (built by tools/build_notebooks.py).
# `md` and `code` are provided by the builder.

CELLS = [
    md("""
    # Views and storages: where a tensor's numbers really live

    A PyTorch tensor is not a block of numbers. It is a **view**: a small record that says how to
    read numbers out of a **storage**, a flat run of bytes. The record has four parts:

    | part | meaning |
    |---|---|
    | `storage_offset()` | where element `[0, 0, …]` sits, counted in elements of the view's dtype |
    | `shape` | how many indices along each dimension |
    | `stride()` | how many elements to skip in the storage when an index grows by one |
    | `dtype` | how many bytes one element takes, and how to read them |

    Slicing, transposing, `expand` and `view(dtype)` only write a new record: no number is copied.
    This lesson takes each operation in turn and draws it twice:

    * `tv.explain(...)` draws the storage as a strip of cells and, below it, each view's logical
      grid; the number in a grid cell is the address it reads (in elements of the view's dtype),
      and its colour is the colour of that storage cell.
    * `tv.show(...)` draws the bar diagram used for real models: one row per view, bytes along
      the x axis.
    * `tv.explain(..., interactive=True)` draws the same panel in the browser: hover an element
      to light the storage cell it reads (and its address formula with the numbers filled in),
      hover a storage cell to light every element that reads it, and type a shape, stride and
      offset into the **stride playground** to see where they would read. With no kernel (on
      GitHub) it shows the static picture instead.
    * `tv.explain_view(x, shape)` says whether `x.view(shape)` works, exactly as torch decides,
      and if not, which dimensions cannot merge and why.

    A few **predict, then check** exercises ask you to guess before running a cell.
    """),
    code("""
    %matplotlib inline
    import torch
    import tensorviz as tv
    """),
    md("""
    ## 1. One storage, one view

    `arange(12.).reshape(3, 4)` makes one storage of 12 `float32` numbers (48 bytes) and a view
    with offset 0, shape `(3, 4)` and stride `(4, 1)`: one step down a row skips 4 elements, one
    step along a row skips 1.
    """),
    code("""
    x = torch.arange(12.).reshape(3, 4)
    print("storage:", x.untyped_storage().nbytes(), "bytes")
    print("offset:", x.storage_offset(), "| shape:", tuple(x.shape), "| stride:", x.stride(), "|", x.dtype)
    """),
    md("""
    The panel below writes the address formula with these numbers: element `[i, j]` is storage
    cell `0 + 4·i + 1·j`. Colours and numbers link each grid cell to the storage cell it reads.
    """),
    code("""
    tv.explain(x, names=["x"])
    """),
    md("""
    ## 2. Slicing moves the offset

    `x[1]` is the second row. Its record is offset 4, shape `(4,)`, stride `(1,)`: the same
    storage, read from element 4. Nothing is copied.
    """),
    code("""
    row = x[1]
    print("offset:", row.storage_offset(), "| shape:", tuple(row.shape), "| stride:", row.stride())
    tv.explain(x, row, names=["x", "x[1]"])
    """),
    md("""
    The bar diagram shows the same facts at model scale. The top row is the storage; below it,
    one row per view covers the bytes that view reads (bytes 16 to 32 for `x[1]`). Red
    cross-hatching marks bytes read by more than one view.
    """),
    code("""
    tv.show({"x": x, "x[1]": row})
    """),
    md("""
    ### Predict, then check: a column

    `col = x[:, 1]` is the second column. Before running the next cell, write down:

    1. its storage offset and stride;
    2. the byte range `[start, stop)` from its first to one past its last byte (its **span**);
    3. how many of those bytes it actually reads.
    """),
    code("""
    col = x[:, 1]
    layout = tv.analyze({"x": x, "x[:, 1]": col})
    v = layout["x[:, 1]"]
    print(f"offset {v.offset}, stride {v.stride}, span [{v.start}, {v.stop}), "
          f"reads {v.footprint_nbytes} of those {v.stop - v.start} bytes")
    """),
    md("""
    <details><summary><b>Answer</b> (click)</summary>

    Offset 1 and stride `(4,)`: the column starts at element 1 and jumps a whole row (4
    elements) each step. Its span is bytes `[4, 40)`: from element 1 to the end of element 9.
    It reads only 3 × 4 = 12 of those 36 bytes; the gaps belong to other columns. A span says
    *where* a view lives; the **footprint** says *which bytes* it reads, and only the footprint
    decides whether two views really share data.
    </details>
    """),
    md("""
    ## 3. Transpose swaps the strides

    `x.t()` has shape `(4, 3)` and stride `(1, 4)`. It reads exactly the same 48 bytes as `x`, in
    a different order, so tensorviz calls the pair `same-bytes`. It is not contiguous: walking it
    in row-major order jumps around the storage.
    """),
    code("""
    xt = x.t()
    print("stride:", xt.stride(), "| contiguous:", xt.is_contiguous())
    print("relation:", tv.analyze({"x": x, "x.t()": xt}).relation("x", "x.t()"))
    tv.explain(x, xt, names=["x", "x.t()"])
    """),
    md("""
    ### Predict, then check: which cell does `x.t()[1, 2]` read?

    Use the formula of `x.t()` (offset 0, stride `(1, 4)`) to predict the storage cell of
    `x.t()[1, 2]`, and which elements of `x` and `x.t()` read storage cell 6. Then hover them in
    the interactive panel below (hover the element, then the cell), or run the next cell.
    In the playground, pick `x.t()` and type the stride `5, 1`: the cells past the storage's
    end turn red and the panel says which element leaves the storage first.
    """),
    code("""
    tv.explain(x, xt, names=["x", "x.t()"], interactive=True)
    """),
    code("""
    print("x.t()[1, 2] reads cell", xt.storage_offset() + 1 * xt.stride(0) + 2 * xt.stride(1))
    print("cell 6 is read by x[1, 2] and x.t()[2, 1]:", x[1, 2].item() == xt[2, 1].item() == 6.0)
    """),
    md("""
    <details><summary><b>Answer</b> (click)</summary>

    `0 + 1·1 + 4·2 = 9`: stepping down `x.t()` moves one cell, stepping across moves a row of
    `x`. Cell 6 is `x[1, 2]` (`4·1 + 2`) and, transposed, `x.t()[2, 1]`. The transpose reads
    the same cells in another order; nothing was copied.
    </details>
    """),
    md("""
    ### Predict, then check: every other column

    `x[:, ::2]` takes columns 0 and 2, `x[:, 1::2]` columns 1 and 3. Their spans overlap (both
    run through the middle of the storage). Do they share any byte? Predict the relation:
    `identical`, `same-bytes`, `contains`, `overlaps` or `disjoint`?
    """),
    code("""
    pair = tv.analyze({"x[:, ::2]": x[:, ::2], "x[:, 1::2]": x[:, 1::2]})
    pair.relation("x[:, ::2]", "x[:, 1::2]")
    """),
    md("""
    <details><summary><b>Answer</b> (click)</summary>

    `disjoint`: the two views interleave, one element each in turn, and never read the same
    byte, even though their spans overlap. A check that compares spans (or only start addresses)
    gets this wrong; tensorviz compares exact footprints. In the diagram, the light part of
    each bar is the span and the solid blocks are the bytes actually read.
    </details>
    """),
    code("""
    tv.show(pair)
    """),
    md("""
    ## 4. `expand`: stride 0 repeats without copying

    `b.expand(4, 3)` looks like a 4 × 3 matrix but has stride `(0, 1)`: going down a row does not
    move in the storage at all. Twelve logical elements read the same three cells; the panel
    marks each cell read four times by one view with `×4`.
    """),
    code("""
    b = torch.tensor([1., 2., 3.])
    e = b.expand(4, 3)
    print("shape:", tuple(e.shape), "| stride:", e.stride(), "| storage:", e.untyped_storage().nbytes(), "bytes")
    tv.explain(b, e, names=["b", "b.expand(4, 3)"])
    """),
    md("""
    In the bar diagram a dotted hatch marks the expanded view: it reads its bytes more than
    once. Its logical size is 48 bytes (the title's "naive" total counts it so), its footprint
    12.
    """),
    code("""
    tv.show({"b": b, "b.expand(4, 3)": e})
    """),
    md("""
    ## 5. `view(dtype)`: the same bytes, read as another type

    `x.view(torch.int16)` reinterprets each 4-byte float as two 2-byte integers. Shape, stride
    and offset are now counted in **int16** elements, so the panel draws the storage in 2-byte
    cells. Below, the first row of each: `x[0]` is 4 floats, `x.view(int16)[0]` 8 int16s, and
    both read the same first 16 bytes (cells 0–7). The grid of `x[0]` counts in floats: its
    element 1 is storage cells 2 and 3.
    """),
    code("""
    h = x.view(torch.int16)
    print("shape:", tuple(h.shape), "| stride:", h.stride(), "| itemsize:", h.element_size())
    tv.explain(x[0], h[0], names=["x[0]", "x.view(int16)[0]"])
    """),
    md("""
    ### Predict, then check: offsets count elements, not bytes

    `x.view(torch.int16)[1]` is the second row of the int16 view. What is its storage offset,
    and how does it relate to `x[1]`?
    """),
    code("""
    layout = tv.analyze({"x[1]": x[1], "x.view(int16)[1]": h[1]})
    print("offset:", layout["x.view(int16)[1]"].offset, "int16 elements",
          "| bytes:", (layout["x.view(int16)[1]"].start, layout["x.view(int16)[1]"].stop))
    print("relation:", layout.relation("x[1]", "x.view(int16)[1]"))
    """),
    md("""
    <details><summary><b>Answer</b> (click)</summary>

    Offset 8: one int16 row is 8 elements. In bytes that is 16, exactly where `x[1]` (offset 4
    floats) starts, so the relation is `same-bytes`: equal footprints, different records. Always
    convert offsets to bytes (`offset × itemsize`) before comparing views of different dtypes.
    The diagram flags the int16 view as reinterpreted.
    </details>
    """),
    code("""
    tv.show(layout)
    """),
    md("""
    ## 6. `as_strided`: views that overlap themselves

    `as_strided` writes the record by hand. With `size=(4, 4)` and `stride=(2, 1)` each row starts
    two elements after the previous one but is four long, so consecutive rows share two cells:
    sliding windows with no copy. Cells 2 to 7 are read twice (`×2`, bold border). Writing into
    such a view writes the same cell more than once, which is why PyTorch refuses many in-place
    operations on it.
    """),
    code("""
    a = torch.arange(10.)
    windows = a.as_strided(size=(4, 4), stride=(2, 1))
    print(windows)
    tv.explain(a, windows, names=["a", "windows"])
    """),
    md("""
    ### Predict, then check: which windows share bytes?

    What is the relation of `windows[0]` to `windows[1]`, and of `windows[0]` to `windows[2]`?
    """),
    code("""
    rows = tv.analyze({f"windows[{i}]": windows[i] for i in range(4)})
    for other in ("windows[1]", "windows[2]"):
        print(f"windows[0] vs {other}: {rows.relation('windows[0]', other)}")
    """),
    md("""
    <details><summary><b>Answer</b> (click)</summary>

    `windows[0]` reads bytes `[0, 16)`, `windows[1]` reads `[8, 24)`: they `overlap` (8 bytes in
    common, neither inside the other). `windows[2]` starts at byte 16, right where `windows[0]`
    ends: `disjoint`. Grouping by overlap chains them all together, since each row overlaps
    the next; the diagram packs them onto sub-lanes so none hides another.
    </details>
    """),
    code("""
    tv.show(rows, by="overlap")
    """),
    md("""
    ## 7. `contiguous()` copies only when it must

    `x.t().contiguous()` cannot keep the transpose's record (its elements are not in row-major
    order), so it allocates a **new storage** and copies the numbers: the relation to the
    original is `unrelated`. On a tensor that is already contiguous, `contiguous()` returns the
    tensor itself.
    """),
    code("""
    c = xt.contiguous()
    print("x.contiguous() is x:", x.contiguous() is x)
    print("relation:", tv.analyze({"x.t()": xt, "x.t().contiguous()": c}).relation("x.t()", "x.t().contiguous()"))
    tv.explain(xt, c, names=["x.t()", "x.t().contiguous()"])
    """),
    md("""
    ### Predict, then check: copy or not?

    For each tensor below, does `.contiguous()` copy? (Relation `identical` means no copy,
    `unrelated` means a new storage.)

    `x[1]`, `x[:, 1]`, `b.expand(4, 3)`, `x.view(torch.int16)`, `windows`
    """),
    code("""
    cases = {"x[1]": x[1], "x[:, 1]": x[:, 1], "b.expand(4, 3)": e, "x.view(int16)": h, "windows": windows}
    for name, t in cases.items():
        rel = tv.analyze({"before": t, "after": t.contiguous()}).relation("before", "after")
        print(f"{name:15} -> {rel}")
    """),
    md("""
    <details><summary><b>Answer</b> (click)</summary>

    A row and an int16 reinterpretation are already contiguous: no copy (`identical`). A
    column, an expanded tensor and overlapping windows are not: each gets a fresh storage
    holding its logical elements (`unrelated`). An expanded tensor grows from 12 bytes to 48,
    and the windows from 40 bytes to 64. That is the cost hidden in a harmless-looking
    `.contiguous()` (or `.reshape`, which calls it when it must).
    </details>
    """),
    md("""
    ## 8. Everything at once

    `tv.analyze` takes a whole dictionary of named tensors (or a model) and computes every
    relation from metadata alone: no tensor data is read. Grouped by overlap, every view of `x`
    lands in one group (each one overlaps `x`, which reads every byte); the copy made by
    `contiguous()` is alone on its own storage. `expand_simple=True` draws that storage too,
    instead of folding it into a summary row.
    """),
    code("""
    zoo = tv.analyze({"x": x, "x[1]": x[1], "x[:, 1]": x[:, 1], "x.t()": xt, "x[:, ::2]": x[:, ::2],
                      "x[:, 1::2]": x[:, 1::2], "x.view(int16)": h, "x.t().contiguous()": c})
    for g in zoo.groups(by="overlap"):
        print(g)
    """),
    code("""
    tv.show(zoo, by="overlap", expand_simple=True)
    """),
    md("""
    ## 9. Why `.view` fails: "at least one dimension spans across two contiguous subspaces"

    `x.view(shape)` never copies, so it only works when the new shape can be read with *some*
    strides from the same cells. torch decides it like this (`computeStride` in ATen): the
    dimensions of `x` fall into **chunks** of dimensions that are contiguous with each other
    (`stride[k] == size[k+1] · stride[k+1]`); every chunk boundary must also be a boundary of
    the new shape. When a new dimension has to run across two chunks, `view` raises the error
    above. `reshape` then copies instead (it calls `contiguous()`).

    `tv.explain_view(x, shape)` runs that rule on the tensor's metadata, names the dimensions
    that cannot merge, and lists what works. Three real cases, each from a GitHub issue.

    ### Case 1: top-k accuracy (mit-han-lab/temporal-shift-module#235)

    The classic `accuracy()` of the ImageNet example transposes the top-k predictions, then
    flattens the first k rows of the comparison with `correct[:k].view(-1)`.
    **Predict:** does that view work?
    """),
    code("""
    output, target = torch.randn(8, 10), torch.tensor([3, 1, 4, 1, 5, 9, 2, 6])
    _, pred = output.topk(5, 1, True, True)
    correct = pred.t().eq(target.view(1, -1).expand(5, 8))
    try:
        correct[:3].view(-1)
    except RuntimeError as err:
        print("RuntimeError:", err)
    print(tv.explain_view(correct[:3], -1, name="correct[:3]"))
    """),
    md("""
    `pred.t()` has strides `(1, 5)`: going down a row moves one element, going along a row
    moves five. Flattening needs dim 0 to continue dim 1, i.e. a stride of 8 · 5 = 40; it is 1.
    No permutation helps here, so the fix is `reshape(-1)` (a 24-byte copy), which is what the
    issue suggests.

    ### Case 2: merging attention heads

    Attention code computes `out` as `(batch, heads, tokens, head_dim)`, swaps heads and
    tokens, then merges the last two dims: `out.transpose(1, 2).view(B, T, H * D)` raises.
    The picture marks the pair that cannot merge.
    """),
    code("""
    B, H, T, D = 1, 2, 3, 2
    out = torch.arange(float(B * H * T * D)).view(B, H, T, D)
    tv.explain_view(out.transpose(1, 2), (B, T, H * D), name="out.transpose(1, 2)")
    """),
    md("""
    After the transpose, dim 2 (heads) has stride 6 and dim 3 (head_dim) stride 1: to merge
    them the heads' stride would have to be 2 · 1 = 2. `.contiguous().view(...)` (the usual fix)
    copies 48 bytes first; `reshape` does the same copy. The `permute` that makes a view work
    just undoes the transpose, which gives the numbers in the wrong order for attention.

    ### Case 3: flattening a channels_last activation (`x.view(x.size(0), -1)`, sergeywong/cp-vton#30)

    A convolution on a `channels_last` input returns a `channels_last` output: shape
    `(N, C, H, W)` but strides `(H·W·C, 1, W·C, C)`. The usual flatten before a linear layer
    then fails. **Predict** which dims cannot merge before running the cell.
    """),
    code("""
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 4, 3, padding=1).to(memory_format=torch.channels_last)
    act = conv(torch.randn(1, 3, 3, 3).to(memory_format=torch.channels_last))
    e = tv.explain_view(act, (act.size(0), -1), name="act")
    print("strides:", act.stride(), "| view works:", e.view_works, "| reshape copies:", e.reshape_copies)
    print("why:", e.reason)
    """),
    code("""
    # every prediction checked against torch itself
    for t, shape in [(correct[:3], (-1,)), (out.transpose(1, 2), (B, T, H * D)), (act, (act.size(0), -1))]:
        e = tv.explain_view(t, shape)
        try:
            t.view(shape); works = True
        except RuntimeError:
            works = False
        shares = t.reshape(shape).untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
        print(f"predicted view_works={e.view_works}, torch: {works}; predicted reshape_copies={e.reshape_copies}, torch: {not shares}")
    """),
    md("""
    <details><summary><b>Answer</b> (click)</summary>

    Channels (dim 1, stride 1) cannot continue height (dim 2, stride `W·C` = 12): merging needs
    a stride of 3 · 12 = 36. Height and width *do* merge (12 = 3 · 4: one chunk; `e.figure()`
    draws it as a green bar between their boxes). `act.permute(0, 2, 3, 1).view(1, -1)` works without a copy, but flattens
    in (h, w, c) order, so a linear layer trained on (c, h, w) order would see the features
    shuffled; `reshape` copies and keeps the order.
    </details>

    ## 10. A small slice keeps its whole storage alive

    A view holds a reference to its **whole storage**, not just the bytes it reads. Keep the
    first row of a 4 MB matrix and the other 3.99 MB stay allocated as long as the row lives;
    `torch.save` of the row writes all 4 MB (pytorch/pytorch#152100, #153542). `.clone()` gives
    the row a storage of its own size.
    """),
    code("""
    big = torch.zeros(1000, 1000)
    row = big[0, :16]
    print(tv.explain_view(row, (4, 4), name="row").keeps.sentence())
    tv.explain(row.view(4, 4), names=["row.view(4, 4)"])
    """),
    md("""
    ### Predict, then check: how many bytes does `torch.save(row)` write? And after `.clone()`?
    """),
    code("""
    import io

    def saved_bytes(t):
        buf = io.BytesIO()
        torch.save(t, buf)
        return len(buf.getvalue())

    print(f"torch.save(row):         {saved_bytes(row):>9,} bytes")
    print(f"torch.save(row.clone()): {saved_bytes(row.clone()):>9,} bytes")
    """),
    md("""
    <details><summary><b>Answer</b> (click)</summary>

    About 4 MB for the slice: `torch.save` writes every storage it meets whole, and the row's
    storage is the whole matrix. The clone writes its own 64 bytes plus the file's overhead.
    </details>

    The module tree says the same for a model (or any dictionary of tensors): a tensor whose
    storage no tensor reads in full is marked with what it keeps alive.
    """),
    code("""
    print(tv.analyze({"cache.first_row": row, "cache.bias": torch.zeros(4)}).tree())
    """),
    md("""
    ## What to remember

    * A tensor is `(storage, offset, shape, stride, dtype)`. Slicing, `t()`, `expand`,
      `view(dtype)` and `as_strided` change only the record.
    * Compare views by the **bytes they read** (footprints), not by shapes, start addresses or
      spans. tensorviz names the result: `identical`, `same-bytes`, `contains`/`within`,
      `overlaps`, `disjoint` or `unrelated`.
    * `contiguous()` (and `reshape`, `clone`) may give a new storage. Saving a small view of a
      big storage can write the whole storage; notebook 03 shows that with a real checkpoint.
    * `view` works only when no new dimension runs across two chunks of contiguous dimensions;
      `tv.explain_view(x, shape)` names the pair that cannot merge and what works instead.
    * A slice keeps its whole storage alive; `.clone()` it to keep only what it reads.

    Next: [02 — debugging weight tying](02_debugging_weight_tying.ipynb) applies the same ideas
    to models whose parameters share storage.
    """),
]
