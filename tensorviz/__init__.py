"""tensorviz: see where your PyTorch tensors really live.

>>> import torch, tensorviz as tv
>>> w = torch.zeros(4, 4)
>>> tv.analyze({"w": w, "wt": w.t()}).relation("w", "wt")
'same-bytes'
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from tensorviz.core import hooks
from tensorviz.core.errors import (
    FileFormatError,
    MissingExtraError,
    OptionError,
    TensorvizError,
    TooLargeError,
    UnknownOptionError,
    UnsafeCheckpointError,
)
from tensorviz.core.keywords import extra_message, fill_args, needs_extra, public
from tensorviz.core.layout import Layout
from tensorviz.core.limits import limits as _limits
from tensorviz.core.records import Group, Skipped, Storage, TensorView
from tensorviz.plan.diagram import diagram as _diagram
from tensorviz.plan.options import OPTION_DOCS, by_value

__version__ = "0.1.0"

__all__ = [
    "analyze",
    "diagram",
    "show",
    "explain",
    "explain_view",
    "explain_packing",
    "explore",
    "export_html",
    "save_check",
    "why_size",
    "diff",
    "load_check",
    "load_plan",
    "limits",
    "Layout",
    "TensorView",
    "Storage",
    "Group",
    "Skipped",
    "TensorvizError",
    "FileFormatError",
    "UnsafeCheckpointError",
    "TooLargeError",
    "OptionError",
    "UnknownOptionError",
    "MissingExtraError",
    "__version__",
]


@public
def analyze(
    obj: Any,
    *,
    group: Any = None,
    variant: str | None = None,
    optimizer: Any = None,
    grad: bool | None = None,
    remote_limits: dict[str, float] | None = None,
) -> Layout:
    """Compute the byte layout of every named tensor in ``obj``, from metadata only.

    Args:
        obj: an ``nn.Module`` (state-dict names, tied parameters under every name, plus
            non-persistent buffers), a mapping of names to tensors (nested mappings flattened
            with "."), a tensor, a sequence of tensors, or a path (``str``/``PathLike``) to a
            ``.safetensors`` file, a ``*.safetensors.index.json``, a model folder, or a torch
            checkpoint (``.pt``/``.pth``/``.bin``), or a ``torch.distributed.checkpoint`` folder,
            or a GGUF, NumPy ``.npy``/``.npz`` or ONNX file (each tensor a view of the file at its
            bytes; a file's first bytes, not its name, pick the reader: see
            :mod:`tensorviz.sources.formats.table`); or a URL of a safetensors file, index or model
            folder, read header-only by range requests: ``hf://org/repo[@revision][/path]``
            (through huggingface_hub's endpoint, token and offline settings), ``https://…`` or any
            fsspec URL (``s3://``, ``file://``…; see :mod:`tensorviz.sources.remote`). Needs
            ``pip install 'tensorviz[remote]'``.
        group: a ``torch.distributed`` process group, or True for the default group: then this
            is a collective (every rank calls it) and every rank gets the same global layout,
            each DTensor a global tensor with its ranks' shards as views ``NAME@rankR``
            (see :mod:`tensorviz.sources.distributed.collective`).
        variant: for a model folder holding several weight variants (``model.safetensors``
            and ``model.fp16.safetensors``), the one to read, as ``from_pretrained(variant=)``
            does; None reads the default and lists the others in ``layout.metadata["variants"]``.
        optimizer: with an ``nn.Module``, its ``torch.optim.Optimizer`` (or a
            ``ZeroRedundancyOptimizer``, accelerate or Lightning wrapper of one): each state
            tensor is added as a view named ``optimizer.<param name>.<state key>``, mapped
            through the optimizer's ``param_groups`` order (a tied parameter has one state,
            under its first name). Every view then has a ``category``: weights, buffers,
            gradients or optimizer.
        grad: add each parameter's ``.grad`` as ``<param name>.grad``; None (the default)
            adds them when ``optimizer`` is given, False leaves them out.
        remote_limits: for a URL, what reading it may cost: ``timeout`` (seconds per request,
            default 10), ``max_requests`` (default 10,000) and ``max_bytes`` (default 1 GiB);
            a source that needs more raises :class:`TooLargeError` naming the limit.

    Returns:
        An immutable :class:`Layout`; it keeps no reference to the tensors.

    Raises:
        TypeError: ``obj`` is none of the accepted kinds (the message lists them).
        TensorvizError: a file is malformed, hostile or unsafe to load (names file and fix).

    >>> import torch, tensorviz as tv
    >>> a = torch.rand(8, 10, 50)
    >>> layout = tv.analyze({"a": a, "b": a[2:4]})
    >>> layout["b"].start, layout["b"].stop, layout.relation("a", "b")
    (4000, 8000, 'contains')
    >>> m = torch.nn.Linear(2, 1); opt = torch.optim.Adam(m.parameters())
    >>> m(torch.ones(1, 2)).sum().backward(); opt.step()
    >>> t = tv.analyze(m, optimizer=opt)
    >>> t["optimizer.weight.exp_avg"].category, t["weight.grad"].category, t["bias"].category
    ('optimizer', 'gradients', 'weights')
    """
    from tensorviz.sources import analyze as _analyze

    return _analyze(obj, group=group, variant=variant, optimizer=optimizer, grad=grad, remote_limits=remote_limits)


diagram = public(_diagram)
limits = public(_limits)


@public
@fill_args(OPTION_DOCS)
def show(
    obj: Any,
    *,
    by: str = "storage",
    names: str | None = None,
    storages: Sequence[int] | None = None,
    only_shared: bool = False,
    byte_range: tuple[int, int] | None = None,
    max_lanes: int = 40,
    show_unreferenced: bool = True,
    expand_simple: bool = False,
    overview: bool | None = None,
    color_by: str | None = None,
    dpi: int = 100,
    width: float | None = None,
    max_rows: int = 40,
) -> Any:
    """Render a layout's diagram for display: PNG, an escaped HTML table and the text lane map,
    in one object Jupyter shows with or without a kernel.

    Args:
        obj: a :class:`Layout` or anything :func:`analyze` accepts (not a Diagram: the table
            needs the layout), or a :func:`diff` result: then the two layouts side by side.
        <shared options>
        max_rows: for a :func:`diff` result, the most rows drawn (its one option besides
            ``dpi`` and ``width``).

    Returns:
        A :class:`~tensorviz.render.show.Shown`; Jupyter displays it, ``.png`` holds the bytes,
        ``.to_html()`` the HTML.

    Raises:
        OptionError: an option is out of range, or does not apply to ``obj`` (the diagram's
            options to a diff, ``max_rows`` to a layout).
        MissingExtraError: matplotlib is not installed (the message names
            ``pip install 'tensorviz[plot]'``).

    >>> import torch, tensorviz as tv
    >>> tv.show({"w": torch.zeros(4, 4)}, by="exact span").png[:4]
    b'\\x89PNG'
    """
    from tensorviz.core.diff import LayoutDiff

    options = dict(
        by=by,
        names=names,
        storages=storages,
        only_shared=only_shared,
        byte_range=byte_range,
        max_lanes=max_lanes,
        show_unreferenced=show_unreferenced,
        expand_simple=expand_simple,
        overview=overview,
        color_by=color_by,
    )
    with needs_extra("tv.show() draws the picture with {module}"):
        from tensorviz.render.show import show as _show

        if isinstance(obj, LayoutDiff):
            _only_defaults(options, "a tv.diff result (two layouts side by side; its one option is max_rows)")
            return _show(obj, dpi=dpi, width=width, max_rows=max_rows)
        if max_rows != 40:
            raise OptionError(
                f"max_rows={max_rows!r} applies to a tv.diff result; a layout's diagram limits its rows "
                f"with max_lanes={max_rows!r}"
            )
        return _show(obj, dpi=dpi, width=width, **options)


def _only_defaults(options: dict[str, Any], what: str) -> None:
    """Raise when an option of ``tv.diagram`` was given a value that is not its default: it
    cannot apply to ``what``."""
    import inspect

    defaults = inspect.signature(_diagram).parameters
    given = [k for k, v in options.items() if v != defaults[k].default]
    if given:
        raise OptionError(f"{', '.join(f'{k}=' for k in given)} cannot apply to {what}; leave it out")


@public
def explain(
    *tensors: Any,
    names: Sequence[str] | None = None,
    width: float | None = None,
    region: Any = None,
    interactive: bool = False,
    packed: str | None = None,
) -> Any:
    """Teaching figure: how each view's logical indices map onto its storage's cells (a large
    tensor is drawn as its corner, or as ``region``); with ``packed``, how a quantized weight's
    elements are packed into its stored words.

    Args:
        *tensors: views of one storage share one strip, views of different storages get
            separate strips (see :func:`tensorviz.render.explain.explain`; needs torch).
        names: one label per tensor (default ``t0``, ``t1``, ...).
        width: figure width in inches (default: fits the strip).
        region: the part of every tensor to draw instead, as slices (``t[region]`` with every
            dimension kept), e.g. ``np.s_[100:108, :8]``.
        interactive: the same panel as a widget drawn in the browser: hover an element to
            light its storage cell and formula, hover a cell to light every element reading
            it, and type shapes, strides and offsets into the stride playground (see
            :mod:`tensorviz.explorer.explain_widget`; needs the ``widgets`` extra). Its display
            carries the static PNG for pages without a kernel.
        packed: the name of a packed logical weight (GPTQ, AWQ, bitsandbytes 4-bit or int8,
            FP8, compressed-tensors); then ``tensors`` is one model, folder or Layout, and the
            figure is the corner of that weight, each element coloured by the stored word that
            holds it and labelled with its bits (:func:`explain_packing` gives it as text).

    Returns:
        A ``matplotlib.figure.Figure`` (no pyplot state), or with ``interactive=True`` the widget.

    Raises:
        MissingExtraError: matplotlib (or, interactive, ipywidgets/anywidget) is not installed;
            the message names the ``pip install`` that adds it.

    >>> import torch, tensorviz as tv
    >>> bool(tv.explain(torch.zeros(2, 3)).get_size_inches()[0] >= 6)
    True
    """
    if packed is not None:
        if len(tensors) != 1 or interactive:
            raise OptionError("tv.explain(obj, packed=name) takes one model, folder or Layout and no interactive=True")
        with needs_extra("tv.explain() draws its figure with {module}"):
            from tensorviz.render.mpl.packing import packing_figure

            return packing_figure(explain_packing(tensors[0], packed))
    if interactive:
        with needs_extra("tv.explain(interactive=True) is a widget and needs {module}"):
            from tensorviz.explorer.explain_widget import explain_widget

            return explain_widget(*tensors, names=names, width=width, region=region)
    with needs_extra("tv.explain() draws its figure with {module}"):
        from tensorviz.render.explain import explain as _explain

        return _explain(*tensors, names=names, width=width, region=region)


@public
def explain_packing(obj: Any, name: str, index: Sequence[int] | None = None, *, rows: int = 8, cols: int = 16):
    """Where element ``index`` of a packed logical weight lives: which bits of which byte hold
    it, which scale (and zero point) it is read with, and the rule (GPTQ, AWQ, bitsandbytes
    4-bit and int8, FP8 block scales; see :mod:`tensorviz.core.packing`). Without ``index``,
    the other way round: which logical elements each stored word holds.

    Args:
        obj: anything :func:`analyze` takes (a model, a checkpoint folder), or a Layout.
        name: the logical weight (``"model.layers.0.mlp.up_proj.weight"``, ``"0.weight"``).
        index: ``(output, input)``, the element of the logical ``[out, in]`` weight; None for
            the map of the words holding the ``rows`` × ``cols`` corner.
        rows: rows of the corner mapped when ``index`` is None.
        cols: columns of the corner mapped when ``index`` is None.

    Returns:
        A frozen :class:`~tensorviz.core.packing.PackedPlace`, or without ``index`` a
        :class:`~tensorviz.core.packing.PackingMap` (``tv.explain(obj, packed=name)`` draws
        it); ``print`` either. Byte positions are from the start of the storage (of the file,
        for a file).

    >>> import torch, bitsandbytes as bnb, tensorviz as tv
    >>> m = torch.nn.Sequential(bnb.nn.Linear8bitLt(4, 2, has_fp16_weights=False)).to("cpu")
    >>> print(tv.explain_packing(m, "0.weight", (1, 3)).value)
    all 8 bits of byte 7 (0.weight[1, 3])
    """
    from tensorviz.core.packing import packed_place, packing_map

    layout = obj if isinstance(obj, Layout) else analyze(obj)
    if index is None:
        return packing_map(layout, name, rows, cols)
    return packed_place(layout, name, tuple(int(x) for x in index))


def explain_view(x: Any, shape: Any, *, name: str = "x"):
    """Whether ``x.view(shape)`` works and ``x.reshape(shape)`` copies, exactly as torch decides,
    and why; what ``contiguous()`` allocates, the alternatives that work, what ``x`` keeps alive.

    Args:
        x: a strided ``torch.Tensor`` (any device, also meta); only its metadata is read.
        shape: the target shape, as ``view`` takes it (an int or a sequence; one ``-1``).
        name: how ``x`` is called in the text (``x.view(...)``).

    Returns:
        A frozen :class:`~tensorviz.render.explain_view.ViewExplanation`; ``print`` it, show it,
        or call ``.figure()`` (see :func:`tensorviz.render.explain_view.explain_view`).

    >>> import torch, tensorviz as tv
    >>> tv.explain_view(torch.zeros(3, 4).t(), -1).view_works
    False
    """
    from tensorviz.render.explain_view import explain_view as _explain_view

    return _explain_view(x, shape, name=name)


@public
@fill_args(OPTION_DOCS)
def explore(
    obj: Any,
    *,
    by: str = "storage",
    names: str | None = None,
    only_shared: bool = False,
    show_unreferenced: bool = True,
    storage: int | str | None = None,
    byte_range: tuple[int, int] | None = None,
    expand_simple: bool = False,
    all_storages: bool = False,
    max_lanes: int | None = None,
    dpi: int = 100,
    width: float | None = None,
    snapshot: bool = True,
    load: Any = None,
    loader: str | None = None,
    compare: Any = None,
    compare_choices: dict[str, Any] | None = None,
) -> Any:
    """An interactive explorer of where ``obj``'s tensors live (ipywidgets, in a notebook): the
    controls start as the options say, and the diagram, tensor list and save check follow them.

    Args:
        obj: anything :func:`analyze` accepts, or a :class:`Layout`. Only the layout (metadata)
            is kept: deleting the model frees it.
        storage: start on one storage: its index (as in ``layout.storages``) or the name of a
            tensor on it.
        byte_range: start zoomed to ``(lo, hi)`` bytes of that ``storage`` (it needs one).
        all_storages: draw every storage from the start; by default a model of many storages
            first draws those that matter (every shared or freed one, and the largest), with
            the rest one click away ("show all N storages").
        max_lanes: most lanes drawn, on the live canvas and in the static picture (the rest go
            to a "… N more" row); None (the default): the canvas draws every lane and scrolls
            through them, the static picture 40.
        snapshot: also emit the first state's picture as an ``image/png`` output just before
            the explorer, for every page without a live explorer (nbconvert, GitHub, nbviewer,
            VS Code, a saved notebook whose kernel is gone); the live explorer hides it.
        load: a source to load into the model ``obj`` (as :func:`load_check` takes): a pane beside
            the save check shows what each loader would do (pick one; click a name to select it)
            and the diagram marks the names the load leaves untouched (∅) or casts (⇄).
        loader: the pane's first loader (``tensorviz.explorer.loadpane.CHOICES``, e.g.
            ``"load_state_dict(strict=False)"``, ``"dcp.load"``); None: the most specific.
        compare: anything :func:`diff` takes, or ``diff(obj, b)``'s result (``content=True``: bytes
            too): the canvas also draws a and b row by row as :func:`diff` matches them; hover a
            row for both sides (a view of ``obj`` in the lanes too), click it (or Tab, arrows,
            Enter) to select the pair. The "compare with…" row picks b later: a path or URL.
        compare_choices: named b's for that row's dropdown, e.g. ``{"reloaded": sd, "step 1k":
            "ckpt/"}`` (as ``compare``, not a diff; objects analysed now, paths when picked).
        <shared options>

    ``dpi`` and ``width`` size the static picture (PNG) of the display bundle and the snapshots.

    Returns:
        The :class:`~tensorviz.explorer.widget.Explorer` widget (display it, e.g. as the cell's
        last expression).

    Raises:
        OptionError: a bad pattern, grouping, storage or byte range (the message says which).
        TypeError: ``compare_choices`` is not a mapping of names to sources.
        MissingExtraError: ipywidgets, anywidget or matplotlib is not installed (the message
            names ``pip install 'tensorviz[widgets]'``).

    >>> import torch, tensorviz as tv                                # doctest: +SKIP
    >>> a = torch.rand(8, 10, 50)                                    # doctest: +SKIP
    >>> tv.explore({"a": a, "b": a[2:4]}, by="exact span")           # doctest: +SKIP
    >>> tv.explore({"w": a}, compare={"module.w": a.half()})        # doctest: +SKIP
    """
    by = _explore_by(by)
    _byte_range_needs_storage(byte_range, storage)
    with needs_extra("tv.explore() is an ipywidgets explorer and needs {module}"), _state_errors():
        from tensorviz.explorer.widget import explore as _explore

        return _explore(
            obj, by=by, names=names, only_shared=only_shared, show_unreferenced=show_unreferenced, storage=storage,
            byte_range=byte_range, expand_simple=expand_simple, all_storages=all_storages, max_lanes=max_lanes,
            dpi=dpi, width=width, snapshot=snapshot, load=load, loader=loader, compare=compare,
            compare_choices=compare_choices,
        )  # fmt: skip


@contextmanager
def _state_errors() -> Iterator[None]:
    """The explorer's checks of its starting state (:func:`tensorviz.explorer.state.normalise`:
    a storage out of range, a bad name pattern or zoom) raise ValueError; said as the
    OptionError they are, so :func:`public` names ``tv.explore`` in them."""
    try:
        yield
    except ValueError as err:
        tb = err.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if (
            type(err) is not ValueError
            or tb is None
            or tb.tb_frame.f_globals.get("__name__") != "tensorviz.explorer.state"
        ):
            raise
        raise OptionError(str(err)) from None


def _byte_range_needs_storage(byte_range: Any, storage: Any) -> None:
    """A zoom is into one storage: ``byte_range`` without ``storage`` raises, saying so."""
    if byte_range is not None and storage is None:
        raise OptionError(
            f"byte_range={tuple(byte_range)!r} zooms into the bytes of one storage, and no storage= was "
            f"given; pass it too (its index, or the name of a tensor on it), e.g. storage=0, "
            f"byte_range={tuple(byte_range)!r}"
        )


def _explore_by(by: Any) -> str:
    """The explorer's grouping from ``by`` (its toggle's labels accepted); a value that is
    no grouping or colouring at all raises here, naming the closest (the layout decides the
    rest: ``"rank"`` only for a sharded model)."""
    from tensorviz.plan.options import by_problem

    value = by_value(by)
    if not isinstance(value, str) or not (
        value in ("storage", "span", "overlap", "category", "rank") or value.startswith("mesh:")
    ):
        raise OptionError(by_problem("by", by))
    return value


@public
def export_html(
    obj: Any,
    path: Any,
    *,
    by: str = "storage",
    names: str | None = None,
    only_shared: bool = False,
    show_unreferenced: bool = True,
    storage: int | str | None = None,
    byte_range: tuple[int, int] | None = None,
    expand_simple: bool = False,
    title: str | None = None,
):
    """Write one self-contained HTML page of the canvas explorer: hover, click, drag-zoom, scroll,
    the overview and the model map, with no kernel and no network (for bug reports and docs).

    The page holds the same binary payload a notebook's canvas gets, for each grouping, and the
    explorer's ES modules inline; a Content-Security-Policy forbids every request. Everything from
    the layout is escaped. About 0.3 MB for a 70B-sized model (``bench/bench_export.py``).

    Args:
        obj: anything :func:`analyze` accepts, or a :class:`Layout` (metadata only is read).
        path: the ``.html`` file to write.
        by: the grouping shown first: ``"storage"``, ``"span"`` (exact span) or ``"overlap"``;
            the page switches between all three.
        names: only views whose name matches this regular expression.
        only_shared: only views that share their storage.
        show_unreferenced: draw storage bytes that no view reads.
        storage: one storage only (its index, or the name of a tensor on it).
        byte_range: ``(lo, hi)`` bytes of that storage.
        expand_simple: draw storages whose one view is the whole storage one by one.
        title: the page's heading (default: the explorer's title line).

    Returns:
        The path written (a :class:`pathlib.Path`).

    Raises:
        OptionError: a bad pattern, grouping, storage or byte range (the message says which).

    >>> import torch, tensorviz as tv
    >>> x = torch.zeros(8, 8)
    >>> import tempfile, os
    >>> out = tv.export_html({"x": x, "row": x[1]}, os.path.join(tempfile.mkdtemp(), "x.html"))
    >>> page = out.read_text()
    >>> '<script type="text/x-tvz-module" data-name="canvas.js">' in page, page.count("http")
    (True, 0)
    """
    from tensorviz.core.layout import as_layout
    from tensorviz.explorer.export import write_page
    from tensorviz.explorer.state import ExplorerState

    by = _explore_by(by)
    _byte_range_needs_storage(byte_range, storage)
    layout = as_layout(obj)
    if isinstance(storage, str):
        storage = layout.storage(storage).index
    state = ExplorerState(
        by=by,
        names=names or "",
        only_shared=only_shared,
        show_unreferenced=show_unreferenced,
        storage=storage,
        byte_range=(int(byte_range[0]), int(byte_range[1])) if byte_range is not None else None,
        expand_simple=expand_simple,
    )
    return write_page(layout, path, state, heading=title)


@public
def why_size(obj: Any, *, name: str | None = None):
    """Why a torch checkpoint is this size: bytes written vs bytes any name reads, per category
    (weights, optimizer state, copies...); slices that drag their whole storage into the file;
    EMA copies and fp32 masters beside the weights; fixes to paste, each with the exact size of
    the file it gives (torch.save itself, dry-run: no tensor byte is read or written).

    Args:
        obj: a path to a ``.pt`` checkpoint, or what you would pass to ``torch.save``.
        name: for a live object, the file name it would be saved as (default ``checkpoint.pt``;
            torch names the archive's records after it).

    Returns:
        A :class:`~tensorviz.savecheck.filesize.SizeReport` (``print`` it; ``.fixes``,
        ``.slices``, ``.categories``, ``.file_nbytes``).

    >>> import torch, tensorviz as tv
    >>> r = tv.why_size({"w": torch.zeros(1000)[:10]}, name="w.pt")
    >>> r.slices[0].wasted_nbytes, r.fixes[0].code
    (3960, "ckpt['w'] = ckpt['w'].clone()")
    """
    from tensorviz.savecheck.filesize import size_report

    return size_report(obj, name=name)


@public
def save_check(obj: Any, *, savers: Iterable[str] | None = None) -> Any:
    """What safetensors, torch.save, transformers, peft and accelerate would do with these
    tensors: a dry run from metadata only (no file is written, no tensor byte is read).

    Args:
        obj: an ``nn.Module`` (a transformers ``PreTrainedModel`` adds ``save_pretrained``, a
            peft ``PeftModel`` its adapter-only ``save_pretrained``), a mapping of names to
            tensors (a state dict), a :class:`Layout`, or anything :func:`analyze` accepts.
        savers: keys of :data:`~tensorviz.savecheck.report.SAVERS` to check (default: every
            saver); one whose library is not installed, or that does not apply to ``obj``, is
            listed in ``report.not_run`` with the reason.

    Returns:
        A :class:`~tensorviz.savecheck.report.SaveReport` (``print`` it; ``report["torch.save"]``
        is one saver's verdict).

    Raises:
        OptionError: an unknown saver key (the message names the closest known one).

    >>> import torch, tensorviz as tv
    >>> emb = torch.nn.Embedding(10, 4); head = torch.nn.Linear(4, 10, bias=False)
    >>> head.weight = emb.weight
    >>> r = tv.save_check(torch.nn.ModuleDict({"emb": emb, "head": head}), savers=["torch.save"])
    >>> r["torch.save"].outcome
    'ok'
    """
    from tensorviz.savecheck.report import save_check as _save_check

    return _save_check(obj, savers=savers)


@public
def diff(a: Any, b: Any, *, content: bool = False, progress: bool | None = None) -> Any:
    """What differs between two models, checkpoints or layouts: names, fields, ties, sharing,
    dtypes, files, and (``content=True``) the tensors' bytes.

    Args:
        a: anything :func:`analyze` takes (a model, a state dict, a file, an index, a model or
            DCP folder), or a :class:`Layout`. Files are read header-only.
        b: the same, for the other side.
        content: also read every tensor's bytes (streamed in bounded chunks and hashed, never
            all in memory) to say which matched tensors of equal shape and dtype are
            byte-identical or differ, and which names hold redundant copies of another name's
            bytes. Off by default: the default reads metadata only.
        progress: with ``content=True``, a tqdm progress bar over the bytes hashed: True
            always, False never, None (default) when more than 1 GiB is hashed.

    Returns:
        A frozen :class:`~tensorviz.core.diff.LayoutDiff`: ``same``, ``only_a``, ``only_b``,
        ``renamed`` (and the ``rules`` that matched them), ``changed``, ``ties_lost``,
        ``ties_gained``, ``sharing_lost``, ``sharing_gained``, ``dtypes_a``, ``dtypes_b``,
        ``moved``, ``content``, ``modules()``; ``print(d)``, ``d._repr_html_()``, ``d.to_json()``.

    Raises:
        TypeError: a side is none of the kinds :func:`analyze` accepts.
        TensorvizError: a file is malformed, hostile or unsafe (names the file and the fix).

    >>> import torch, tensorviz as tv
    >>> w = torch.zeros(4, 4)
    >>> d = tv.diff({"emb": w, "head": w}, {"emb": w, "head": w.clone().double()})
    >>> [sorted(g) for g in d.ties_lost], [(c.field, c.a, c.b) for c in d.changed]
    ([['emb', 'head']], [('dtype', 'float32', 'float64'), ('nbytes', 64, 128)])
    """
    from tensorviz.core.diff import diff_layouts
    from tensorviz.core.layout import as_layout
    from tensorviz.core.rows import gc_paused
    from tensorviz.sources.shared import shared_reads

    with gc_paused():
        with shared_reads():  # a tensor on both sides is read once (sources.shared)
            la, lb = as_layout(a), as_layout(b)
        d = diff_layouts(la, lb)  # the reads let go first: the tables free the rows as they go
    if content:
        from tensorviz.sources.content import compare_content

        d = compare_content(d, a, b, progress=progress)
    return d


@public
def load_check(
    model: Any,
    source: Any,
    *,
    loader: str = "load_state_dict",
    strict: bool = True,
    assign: bool = False,
    loader_kwargs: dict[str, Any] | None = None,
) -> Any:
    """What a load will do, before it runs: the loader's own code run on data-free (meta)
    twins of the model and the source. Nothing is loaded, copied or changed.

    Args:
        model: the ``nn.Module`` that would be loaded into; for ``"from_pretrained"`` a
            transformers model class, a model (its class and config) or a config; for
            ``"dcp.load"`` a module (its ``state_dict()``) or the state dict ``dcp.load`` fills.
        source: what would be loaded: a state dict, or anything :func:`analyze` reads (a
            ``.safetensors`` file or index, a model folder, a torch checkpoint; read header-only),
            or a :class:`Layout`; a model folder for ``"from_pretrained"``, a
            ``torch.distributed.checkpoint`` folder for ``"dcp.load"``.
        loader: ``"load_state_dict"``, ``"safetensors.load_model"`` (``source`` a
            ``.safetensors`` file; its own rules for names a tie leaves out of the file),
            ``"from_pretrained"`` (transformers' loading steps with the files' headers: renames,
            dtype, newly initialized weights, ties re-tied or refused) or ``"dcp.load"`` (DCP's
            own load with a reader that reads nothing: the saved chunks and files each tensor
            reads on this rank, casts, a key the checkpoint lacks; with a process group every
            rank calls it, as the real load).
        strict: as ``load_state_dict(strict=)``; for ``"dcp.load"`` False is
            ``DefaultLoadPlanner(allow_partial_load=True)``.
        assign: as ``load_state_dict(assign=)``: parameters become the source tensors (no copy,
            no cast; a tie whose names get different tensors is broken).
        loader_kwargs: the other keywords of the real call: for ``"from_pretrained"`` ``dtype=``,
            ``ignore_mismatched_sizes=``, ``key_mapping=``, ``variant=`` and config keywords such
            as ``tie_word_embeddings=``; for ``"dcp.load"`` ``state_dict_key=`` (the key the
            state dict sits under, as in ``dcp.load({"model": sd})``).

    Returns:
        A :class:`~tensorviz.loadcheck.report.LoadReport`: ``raises``, ``error`` (torch's
        message), ``missing``, ``unexpected`` (as torch computes them), ``mismatched``, ``cast``
        (and ``narrowing``), ``conflicts`` (shared bytes fed by different source tensors, and
        the winner), ``untouched`` (for ``"from_pretrained"``: newly initialized), ``ties_broken``,
        ``retied`` and ``not_tied`` (``"from_pretrained"``), ``reads``, ``files_read`` and
        ``uncovered`` (``"dcp.load"``); ``print(r)``, ``r._repr_html_()``, ``r.to_json()``.

    Raises:
        ValueError: ``loader`` is not one of the known loaders.

    >>> import torch, tensorviz as tv
    >>> model = torch.nn.Linear(2, 2)
    >>> r = tv.load_check(model, {"module.weight": torch.zeros(2, 2), "bias": torch.zeros(2)})
    >>> r.raises, r.missing, r.unexpected
    (True, ('weight',), ('module.weight',))
    """
    from tensorviz.loadcheck.check import load_check as _load_check

    return _load_check(model, source, loader=loader, strict=strict, assign=assign, loader_kwargs=loader_kwargs)


@public
def load_plan(reports: Sequence[Any]) -> Any:
    """``dcp.load``'s load plan across ranks: which saved chunks, files and byte ranges each
    rank reads, from each rank's ``tv.load_check(..., loader="dcp.load")`` (gathered, e.g. with
    ``dist.all_gather_object``), drawn on the checkpoint's global layout and tabled per rank.

    Args:
        reports: one ``dcp.load`` report per rank, in rank order, all of one checkpoint folder.

    Returns:
        A :class:`~tensorviz.loadcheck.plan.LoadPlanReport`: ``rows()`` (per rank: files, bytes,
        chunks), ``print(p)`` and ``p._repr_html_()`` (the table), ``p.figure()`` (the picture).

    Raises:
        OptionError: no report, a report of another loader, or of another folder.

    >>> import torch, tensorviz as tv                                           # doctest: +SKIP
    >>> r = tv.load_check(model.state_dict(), "ckpt", loader="dcp.load")         # doctest: +SKIP
    >>> reports = [None] * world; dist.all_gather_object(reports, r)              # doctest: +SKIP
    >>> print(tv.load_plan(reports))                                              # doctest: +SKIP
    """
    from tensorviz.loadcheck.plan import load_plan as _load_plan

    return _load_plan(reports)


# -- the upward conveniences of the core (Layout.plot, its rich display...), wired here ------------
def _layout_mimebundle(layout: Layout, include: Any = None, exclude: Any = None) -> dict:
    try:
        bundle = show(layout)._repr_mimebundle_(include=include, exclude=exclude)
    except MissingExtraError as err:  # the core alone: the text, and what adds the picture
        bundle = _text_bundle(layout, err, include, exclude)
    if "text/html" in bundle and any("." in n for n in layout.names):  # a tree deeper than a list
        bundle["text/html"] += _tree_html(layout.tree(), title=True)
    return bundle


def _text_bundle(layout: Layout, missing: MissingExtraError, include: Any, exclude: Any) -> dict[str, str]:
    """A layout's display without matplotlib: its text, and a line saying how to get the picture."""
    import html

    text = layout.to_text()
    note = extra_message(missing.name or "matplotlib", f"the picture needs {missing.name or 'matplotlib'}")
    bundle = {
        "text/plain": f"{text}\n({note})",
        "text/html": f"<pre>{html.escape(text)}</pre><p><i>({html.escape(note)})</i></p>",
    }
    return {k: v for k, v in bundle.items() if (not include or k in include) and not (exclude and k in exclude)}


def _tree_html(tree: Any, title: bool = False) -> str:
    from tensorviz.render.html.tree import tree_html

    html = tree_html(tree)
    return f"<details open><summary>module tree</summary>{html}</details>" if title else html


def _layout_plot(layout: Layout, by: str = "storage", **options: Any):
    with needs_extra("Layout.plot() draws with {module}"):
        from tensorviz.render.mpl import render

        return render(_diagram(layout, by=by, **options))


def _diagram_text(d: Any, width: int = 60) -> str:
    from tensorviz.render.text import diagram_text

    return diagram_text(d, width=width)


hooks.register("analyze", analyze)
hooks.register("layout.mimebundle", _layout_mimebundle)
hooks.register("layout.plot", _layout_plot)
hooks.register("layout.save_check", save_check)
hooks.register("diagram.text", _diagram_text)
hooks.register("tree.html", _tree_html)
