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
    ## What to remember

    * A tensor is `(storage, offset, shape, stride, dtype)`. Slicing, `t()`, `expand`,
      `view(dtype)` and `as_strided` change only the record.
    * Compare views by the **bytes they read** (footprints), not by shapes, start addresses or
      spans. tensorviz names the result: `identical`, `same-bytes`, `contains`/`within`,
      `overlaps`, `disjoint` or `unrelated`.
    * `contiguous()` (and `reshape`, `clone`) may give a new storage. Saving a small view of a
      big storage can write the whole storage; notebook 03 shows that with a real checkpoint.

    Next: [02 — debugging weight tying](02_debugging_weight_tying.ipynb) applies the same ideas
    to models whose parameters share storage.
    """),
]
