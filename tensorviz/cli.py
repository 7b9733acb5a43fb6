"""``tensorviz PATH``: where a checkpoint's tensors live, for terminals and CI.

Prints the text summary (storages, views, shared groups, file metadata); ``--json`` writes the
layout as JSON with a stable, versioned schema (see :func:`layout_to_json`), ``--png``/``--html``
write the diagram, ``--save-check`` adds what each saver would do, ``--why-size`` why a torch
checkpoint is this size (bytes per category, slices, copies, fixes), ``--tree [--depth N]`` prints the
module tree instead (bytes counted once per module) and ``--full`` lists every storage. Bad input exits with
status 1 and one line on stderr, never a traceback; usage errors exit with 2.

    $ tensorviz model.safetensors
    $ tensorviz ckpt.pt --by span --json ties.json --png layout.png
    $ tensorviz model.safetensors.index.json --tree --depth 3
    $ python -m tensorviz some/model_dir --save-check
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import dataclasses
import json
import math
import os
import re
import shutil
import sys
from collections.abc import Callable, Sequence
from typing import Any

from tensorviz.core.errors import TensorvizError
from tensorviz.core.names import elide, fit, fit_lines, shown, terminal, unicode_safe
from tensorviz.core.records import GROUPINGS, GroupBy

__all__ = [
    "main",
    "diff_main",
    "build_diff_parser",
    "build_parser",
    "layout_to_json",
    "json_text",
    "JSON_SCHEMA",
    "JSON_SCHEMA_VERSION",
]

JSON_SCHEMA = "tensorviz.layout"
JSON_SCHEMA_VERSION = 1
_GROUPINGS = GROUPINGS  # the one list (tensorviz.core.records)


#: Longest name written whole to JSON unless ``--full`` (``layout_to_json(full=True)``).
JSON_NAME_CAP = 1_000


def layout_to_json(layout: Any, full: bool = False) -> dict[str, Any]:
    """The layout as plain JSON data (schema ``tensorviz.layout``, version 1).

    Top level: ``schema``, ``version``, ``tensorviz_version``, ``source``, ``storages``,
    ``views``, ``groups`` (``{"storage": [...], "span": [...], "overlap": [...]}``),
    ``skipped``, ``metadata`` and ``categories`` (bytes per category of training state, counted
    once; each view's ``category``: weights, buffers, gradients, optimizer, copies, other or
    ""). A storage key is ``[device, identity]``; views and groups
    also give ``storage_index``, the position in ``storages``. New fields may be added within
    a version; a renamed or removed field bumps ``version``. A name longer than
    :data:`JSON_NAME_CAP` characters keeps its start and end around "…" (made unique with
    " #k" where two would read alike) unless ``full``: a 50 MB name stays out of the document.

    >>> import torch, tensorviz as tv
    >>> w = torch.zeros(4, 4)
    >>> doc = layout_to_json(tv.analyze({"w": w, "wt": w.t()}))
    >>> doc["version"], [g["names"] for g in doc["groups"]["span"]]
    (1, [['w', 'wt']])
    """
    from tensorviz import __version__

    storages = layout.storages
    index = {s.key: s.index for s in storages}
    doc = {
        "schema": JSON_SCHEMA,
        "version": JSON_SCHEMA_VERSION,
        "tensorviz_version": __version__,
        "source": layout.source,
        "storages": [_storage_json(s) for s in storages],
        "views": [_view_json(v, index) for v in layout.views],
        "groups": {by: [_group_json(g, index) for g in layout.groups(by)] for by in _GROUPINGS},
        "skipped": [{"name": s.name, "reason": s.reason} for s in layout.skipped],
        "metadata": _plain(layout.metadata),
        "categories": _categories_json(layout),
    }
    return doc if full else _names_elided(doc)


def _names_elided(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with every name past :data:`JSON_NAME_CAP` elided, one elided form per name."""
    forms: dict[str, str] = {}
    taken: set[str] = set()

    def nm(name: str) -> str:
        if len(name) <= JSON_NAME_CAP:
            return name
        if name not in forms:
            form = elide(name, JSON_NAME_CAP)
            if form in taken:
                form = f"{form} #{len(forms)}"
            taken.add(form)
            forms[name] = form
        return forms[name]

    for v in doc["views"]:
        v["name"] = nm(v["name"])
    for s in doc["storages"]:
        s["names"], s["complete_names"] = list(map(nm, s["names"])), list(map(nm, s["complete_names"]))
    for groups in doc["groups"].values():
        for g in groups:
            g["names"] = list(map(nm, g["names"]))
    for sk in doc["skipped"]:
        sk["name"] = nm(sk["name"])
    return doc


def _categories_json(layout: Any) -> dict[str, int]:
    """Bytes per category, counted once (as the module tree counts them); {} unless the layout
    is training state (gradients, optimizer state, copies...)."""
    from tensorviz.core.categories import is_training

    return dict(layout.tree().root.categories) if is_training(layout) else {}


def _storage_json(s: Any) -> dict[str, Any]:
    return {
        "index": s.index,
        "key": list(s.key),
        "device": s.device,
        "label": s.label,
        "nbytes": s.nbytes,
        "covered_nbytes": s.covered_nbytes,
        "unreferenced_nbytes": s.unreferenced_nbytes,
        "header_nbytes": s.header_nbytes,
        "names": list(s.names),
        "complete_names": list(s.complete_names),
        "exact": s.exact,
    }


def _view_json(v: Any, index: dict) -> dict[str, Any]:
    return {
        "name": v.name,
        "storage": list(v.storage),
        "storage_index": index[v.storage],
        "device": v.device,
        "dtype": v.dtype,
        "shape": list(v.shape),
        "stride": list(v.stride),
        "offset": v.offset,
        "itemsize": v.itemsize,
        "start": v.start,
        "stop": v.stop,
        "nbytes": v.nbytes,
        "footprint_nbytes": v.footprint_nbytes,
        "is_contiguous": v.is_contiguous,
        "exact": v.exact,
        "note": v.note,
        "category": v.category,
        "logical": None if v.logical is None else dataclasses.asdict(v.logical),  # quantized bytes: what they hold
        "piece": None if v.piece is None else dataclasses.asdict(v.piece),  # a stored piece of a logical tensor
    }


def _group_json(g: Any, index: dict) -> dict[str, Any]:
    return {
        "names": list(g.names),
        "storage": list(g.storage),
        "storage_index": index[g.storage],
        "start": g.start,
        "stop": g.stop,
    }


def _plain(x: Any) -> Any:
    """JSON-safe copy: tuples become lists, keys strings, anything else its ``str``."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    return str(x)


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def json_text(doc: Any) -> str:
    """Strict JSON text of ``doc`` (RFC 8259, ASCII): a float that is not finite is written as
    a string (``"nan"``, ``"inf"``), never ``NaN``/``Infinity``, and a lone surrogate in a
    name as U+FFFD (strict parsers refuse its escape).
    """
    try:
        text = json.dumps(doc, indent=1, allow_nan=False)
    except ValueError:  # a NaN or an infinity
        text = None
    if text is None or _SURROGATE_ESCAPE.search(text):
        text = json.dumps(_strict(doc), indent=1, allow_nan=False)
    return text


def _strict(x: Any) -> Any:
    if isinstance(x, dict):
        return {unicode_safe(str(k)): _strict(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_strict(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, str):
        return unicode_safe(x)
    return x


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests)."""
    p = argparse.ArgumentParser(
        prog="tensorviz",
        description="Show where the tensors of a checkpoint live, reading only its metadata "
        "(safetensors, GGUF, NumPy and ONNX headers, indexes, or torch.load(weights_only=True, mmap=True)).",
    )
    p.add_argument(
        "path",
        help="a .safetensors file, a *.index.json, a model folder, a .pt/.pth/.bin, a DCP checkpoint folder, "
        "a GGUF, .npy, .npz or .onnx file (a file's first bytes decide how it is read); or a URL read "
        "header-only: hf://org/repo[@rev][/path], https://..., s3://... (tensorviz[remote])",
    )
    p.add_argument(
        "--by",
        choices=(*_GROUPINGS, "rank"),
        default="storage",
        help="grouping for the shared groups and the diagram (default: storage); 'rank' colours the "
        "chunks of a torch.distributed.checkpoint folder by the rank that saved them (text: by storage)",
    )
    p.add_argument(
        "--variant",
        metavar="NAME",
        help="for a model folder with several weight variants (model.safetensors, model.fp16.safetensors): "
        "the one to read, as from_pretrained(variant=NAME) (default: the one without a variant)",
    )
    p.add_argument("--png", metavar="OUT", help="write the diagram as a PNG (needs matplotlib)")
    p.add_argument(
        "--html",
        metavar="OUT",
        help="write one self-contained HTML page of the canvas explorer (hover, zoom, groupings, model map; "
        "no kernel, no network)",
    )
    p.add_argument(
        "--json",
        metavar="OUT",
        nargs="?",
        const="-",
        help="write the layout as JSON to OUT, or to stdout (instead of the text) if no OUT",
    )
    p.add_argument(
        "--save-check", action="store_true", help="also report what each saver (safetensors, torch.save, ...) would do"
    )
    p.add_argument(
        "--why-size",
        action="store_true",
        help="also say why a torch checkpoint is this size: bytes per category, slices, copies, fixes with their sizes",
    )
    p.add_argument(
        "--max-views",
        type=_count,
        metavar="N",
        help="views listed per storage in the text (default: 12; every view with --full)",
    )
    p.add_argument(
        "--full",
        action="store_true",
        help="list every storage even when the listing is long, and every line whole (no name shortened)",
    )
    p.add_argument(
        "--width",
        type=_count,
        metavar="N",
        help="columns of the text (default: the terminal's width; 80 when not a terminal, or $COLUMNS)",
    )
    p.add_argument("--tree", action="store_true", help="print the module tree (bytes counted once per module) instead")
    p.add_argument("--depth", type=_count, metavar="N", help="with --tree: levels of the tree shown (default: all)")
    return p


def _count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be a count (0 or more), got {text}")
    return n


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 bad input, 2 usage).

    ``tensorviz diff A B`` is :func:`diff_main` (a path named ``diff`` is ``./diff``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["diff"]:
        return diff_main(argv[1:])
    if argv[:1] == ["load-check"]:
        return load_check_main(argv[1:])
    args = build_parser().parse_args(argv)
    return _guarded(lambda: _run(args), "tensorviz", 1)


#: The stream the CLI's own output goes to while it runs: the stdout it was started with. Anything
#: else printed to ``sys.stdout`` meanwhile (a library's logger or progress bar, say DeepSpeed's
#: "Setting accelerator to CPU" when transformers imports it) goes to stderr, so ``--json`` on
#: stdout stays one JSON document.
_STDOUT: contextvars.ContextVar[Any] = contextvars.ContextVar("tensorviz_cli_stdout", default=None)


def _stdout() -> Any:
    """Where the CLI's own output goes (see ``_STDOUT``)."""
    return _STDOUT.get() or sys.stdout


def _guarded(run: Callable[[], int], prog: str, error_status: int) -> int:
    """``run()``; bad input is one line on stderr and ``error_status``, never a traceback.
    While it runs, only the CLI's own output reaches stdout (``_STDOUT``)."""
    token = _STDOUT.set(_stdout())
    try:
        with contextlib.redirect_stdout(sys.stderr):
            return run()
    except BrokenPipeError:
        # The reader stopped early (``| head``). Point stdout at /dev/null so that the flush at
        # exit does not fail again, and stop without a message, as other Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return error_status
    except (TensorvizError, OSError, ImportError, ValueError, TypeError, KeyError) as err:
        print(f"{prog}: error: {terminal(_one_line(err))}", file=sys.stderr)
        return error_status
    except KeyboardInterrupt:
        return 130
    finally:
        _STDOUT.reset(token)


def text_width(given: int | None = None) -> int:
    """Columns for the text: ``given`` (``--width``), else ``$COLUMNS``, else the terminal's
    width when stdout is a terminal, else 80; at least 40."""
    if given is None:
        columns = os.environ.get("COLUMNS", "")
        if columns.isdigit():
            given = int(columns)
        else:
            given = shutil.get_terminal_size((80, 24)).columns if _stdout().isatty() else 80
    return max(int(given), 40)


#: Parts of a text line left out first when it is too wide (``--full`` keeps them): a byte count's
#: exact form "(148824 B)", a view's stride and its offset, a storage's ".safetensors" before its
#: size (the shard's number stays).
_DETAILS = (r" \(\d+ B\)", r" stride=\([^)]*\)", r" offset=\d+", r"\.safetensors(?= \d)")

#: The CLI's pointer to the whole listing (``print(layout)`` names Python instead).
FULL_HINT = "full listing: --full · module tree: --tree · every name: --json"


def _say(text: str, full: bool = False, file: Any = None, width: int = 80) -> int:
    """Print text for a terminal: every line through :func:`~tensorviz.core.names.shown` (the one
    escaping function: a name or skip reason from a file can neither restyle the terminal nor,
    unless ``--full``, fill it) and, unless ``--full``, fitted to ``width`` columns
    (:func:`~tensorviz.core.names.fit`: the longest name shortened first). Returns how many lines
    were shortened."""
    lines = [shown(line, bool(full)) for line in text.split("\n")]
    fitted = lines if full else fit_lines(lines, width, _DETAILS)
    print("\n".join(fitted), file=file or _stdout())
    return sum(a != b for a, b in zip(lines, fitted))


def _run(args: argparse.Namespace) -> int:
    from tensorviz.sources import analyze

    layout = analyze(args.path, variant=args.variant)
    json_to_stdout = args.json == "-"
    if args.depth is not None and not args.tree:
        raise ValueError("--depth sets the levels of --tree; add --tree (tensorviz PATH --tree --depth 2)")
    width, out = text_width(args.width), sys.stderr if json_to_stdout else _stdout()
    shortened = 0
    if json_to_stdout:
        pass
    elif args.tree:
        shortened += _say(layout.tree().to_text(depth=args.depth), args.full, width=width)
    else:
        shortened += _say(_layout_text(layout, args), args.full, width=width)
    if args.save_check:
        from tensorviz.savecheck.report import save_check

        shortened += _say(save_check(layout).to_text(), args.full, file=out, width=width)
    if args.why_size:
        from tensorviz.savecheck.filesize import size_report

        shortened += _say(str(size_report(args.path)), args.full, file=out, width=width)
    if shortened:
        lines = f"{shortened} line{'s' * (shortened != 1)}"
        print(fit(f"({lines} shortened to {width} columns; whole with --full, every name in --json)", width), file=out)
    if args.json:
        text = json_text(layout_to_json(layout, full=bool(args.full)))
        if json_to_stdout:
            print(text, file=_stdout())
        else:
            _write(args.json, text.encode())
    if args.png:
        from tensorviz.plan.diagram import diagram
        from tensorviz.render.mpl import to_png

        _write(args.png, to_png(diagram(layout, by=args.by)))
    if args.html:
        from tensorviz.explorer.export import page_html
        from tensorviz.explorer.state import ExplorerState

        _write(args.html, unicode_safe(page_html(layout, ExplorerState(by=args.by))).encode())
    return 0


def _layout_text(layout: Any, args: argparse.Namespace) -> str:
    """The layout's text as ``print(layout)`` writes it (``--full``: every storage and view),
    its closing pointer naming the CLI's flags."""
    from tensorviz.core.text import compact_text, fits_screen

    by: GroupBy = "storage" if args.by == "rank" else args.by  # rank is a colouring of storage lanes
    if args.full:
        return layout.to_text(by=by, max_views=args.max_views, full=True)
    max_views = 12 if args.max_views is None else args.max_views
    return fits_screen(layout, by, max_views) or compact_text(layout, by=by, hint=FULL_HINT)


def build_diff_parser() -> argparse.ArgumentParser:
    """The parser of ``tensorviz diff`` (exposed for documentation and tests)."""
    p = argparse.ArgumentParser(
        prog="tensorviz diff",
        description="What differs between two checkpoints (files, indexes, model or DCP folders), read "
        "header-only: names, shapes, dtypes, strides, offsets, ties, sharing, files. Exit status: 0 same, "
        "1 different, 2 error (as diff(1)).",
    )
    p.add_argument("a", help="the first checkpoint")
    p.add_argument("b", help="the second checkpoint")
    p.add_argument("--json", action="store_true", help="write the difference as JSON (schema tensorviz.diff)")
    p.add_argument("--content", action="store_true", help="also hash every tensor's bytes (reads all data, streamed)")
    p.add_argument("--width", type=_count, default=80, metavar="N", help="columns of the text (default: 80)")
    return p


def diff_main(argv: Sequence[str]) -> int:
    """``tensorviz diff A B [--json] [--content]``: 0 when the same, 1 when they differ, 2 on error."""
    try:
        args = build_diff_parser().parse_args(argv)
    except SystemExit as stop:  # argparse: 0 for --help, 2 for a usage error
        return int(stop.code or 0)
    return _guarded(lambda: _diff_run(args), "tensorviz diff", 2)


def _diff_run(args: argparse.Namespace) -> int:
    from tensorviz import diff

    d = diff(args.a, args.b, content=args.content)
    print(json_text(d.to_json()) if args.json else d.to_text(width=max(args.width, 40)), file=_stdout())
    return 0 if d.same else 1


def build_load_check_parser() -> argparse.ArgumentParser:
    """The parser of ``tensorviz load-check`` (exposed for documentation and tests)."""
    p = argparse.ArgumentParser(
        prog="tensorviz load-check",
        description="What loading a checkpoint into a transformers model would do, before it runs: the model "
        "is built on meta from its config, the checkpoint read header-only, and the loader's own code run on "
        "data-free twins. Exit status: 0 clean, 1 it would raise or leave keys missing, unexpected, "
        "mismatched, conflicting or untouched, 2 error.",
    )
    p.add_argument("source", help="the checkpoint: a .safetensors file, an index, a model folder, a .pt/.bin")
    p.add_argument("--model", required=True, metavar="DIR_OR_CONFIG", help="a model folder or its config.json")
    p.add_argument(
        "--loader",
        choices=("load_state_dict", "safetensors.load_model", "from_pretrained", "dcp.load"),
        default="load_state_dict",
    )
    p.add_argument("--no-strict", action="store_true", help="strict=False")
    p.add_argument("--json", action="store_true", help="write the report as JSON (schema tensorviz.load_check)")
    return p


def load_check_main(argv: Sequence[str]) -> int:
    """``tensorviz load-check SOURCE --model DIR [--loader ...] [--no-strict] [--json]``."""
    try:
        args = build_load_check_parser().parse_args(argv)
    except SystemExit as stop:
        return int(stop.code or 0)
    return _guarded(lambda: _load_check_run(args), "tensorviz load-check", 2)


def _load_check_run(args: argparse.Namespace) -> int:
    from tensorviz.loadcheck.check import config_from, load_check, meta_model_from_config

    build = config_from if args.loader == "from_pretrained" else meta_model_from_config
    r = load_check(build(args.model), args.source, loader=args.loader, strict=not args.no_strict)
    print(json_text(r.to_json()) if args.json else r.to_text(), file=_stdout())
    return 0 if r.clean else 1


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
    print(f"wrote {terminal(path)} ({len(data)} bytes)", file=sys.stderr)


_EXTRAS = {"matplotlib": "plot", "PIL": "plot", "ipywidgets": "widgets", "safetensors": "files"}


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    if isinstance(err, KeyError) and len(err.args) == 1:
        text = str(err.args[0])
    extra = _EXTRAS.get((getattr(err, "name", None) or "").split(".")[0]) if isinstance(err, ImportError) else None
    if extra:
        text = f"{text} (install it: pip install 'tensorviz[{extra}]')"
    return text if os.environ.get("TENSORVIZ_FULL_ERRORS") or len(text) <= 500 else text[:499] + "…"
