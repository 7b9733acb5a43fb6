"""Checkpoints you have not downloaded: ``hf://``, ``http(s)://`` and fsspec URLs, headers only.

A URL is read the way a local path is, with the same strict rules (``st_rules``) applied to the
same bytes, but only the bytes a layout needs ever cross the network:

* a **safetensors file**: one range request of its first :data:`FIRST_RANGE` bytes (as
  ``huggingface_hub.get_safetensors_metadata`` does), and a second one only when the header is
  longer. The storage is the file (``device == "file"``, key ``("file", url)``) and every tensor's
  span its absolute byte range, exactly as for the file on disk.
* a **GGUF file**: the same first range, then windows that double from 256 KiB until ggml's
  header (and its vocabulary) is read, through the local reader (:mod:`.gguf`).
* an **index** (``*.safetensors.index.json``): the index, then every shard's header, concurrently
  (a pool of :data:`WORKERS`). The index says which tensors each shard holds, so the first range
  of a shard is sized to its header (names + a fixed allowance per entry) instead of 100 KB: a
  72-shard index costs 72 small requests, not 7 MB.
* a **folder** (``hf://org/repo``, ``hf://org/repo@rev/sub``, a folder of an fsspec file system,
  an ``https://…/`` URL ending in ``/``): chosen as a local model folder is (index first, one
  weight variant; see :mod:`.files`). Over plain HTTP a folder cannot be listed, so the index,
  then ``model.safetensors``, is asked for.

``hf://`` goes through huggingface_hub's own settings: its endpoint (``HF_ENDPOINT``), the token
the user logged in with (sent only to the endpoint's host), offline mode (``HF_HUB_OFFLINE``:
only cached headers are read) and revision resolution (a branch or tag becomes the commit it
names, by one API request that also lists the files). Any other scheme that fsspec knows
(``s3://``, ``gs://``, ``az://``, ``file://``, ``memory://``) is read through fsspec when it and the
scheme's implementation are installed.

Every source is bounded (:class:`~tensorviz.sources.http.Meter`: requests, bytes and seconds,
raised with ``remote_limits=``) and the layout says what it cost and what it read
(``layout.metadata["remote"]``: URL, revision, requests, bytes, files). Headers are cached on disk
(:class:`HeaderCache`) under the revision or ETag that names their content, so a second look at an
immutable revision makes no request, and at a plain URL one conditional request with no body.

Imports huggingface_hub only for ``hf://`` and fsspec only for its schemes; never torch.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import unquote, urlsplit

from tensorviz.core.errors import FileFormatError, RemoteError
from tensorviz.core.facts import RemoteFacts
from tensorviz.core.layout import Layout
from tensorviz.core.names import terminal
from tensorviz.core.rows import gc_paused
from tensorviz.sources import http
from tensorviz.sources.files import weight_groups
from tensorviz.sources.hub import hf_location
from tensorviz.sources.packed import MAX_CONFIG_BYTES, annotate_with, has_packed, quant_config_from
from tensorviz.sources.parts import MAX_HEADER_BYTES, Part, merge
from tensorviz.sources.remote_files import HeaderCache, Location, fsspec_location, http_location, part_of
from tensorviz.sources.shards import index_layout, index_object, shard_names
from tensorviz.sources.variants import pick_variant

__all__ = ["analyze_url", "FIRST_RANGE", "WORKERS", "LIMITS"]

#: Bytes asked for in a safetensors file's first range when its header size is not known.
FIRST_RANGE = 100_000
#: Shard headers read at once.
WORKERS = 8
#: The limits ``remote_limits=`` may change, with their defaults.
LIMITS = {"timeout": 10.0, "max_requests": 10_000, "max_bytes": 1 << 30}

_PER_ENTRY = 160  # header bytes allowed per tensor beyond its quoted name (dtype, shape, offsets)
_SLACK = 4096  # __metadata__, padding


# -- reading a location -----------------------------------------------------------------------------
def analyze_url(url: str, variant: str | None = None, remote_limits: Mapping[str, float] | None = None) -> Layout:
    """Lay out a remote file, index or folder from its headers alone (see the module docstring).

    Raises:
        RemoteError: the server failed, lied or was too slow (named, with the fix).
        FileFormatError: the bytes break a rule the local reader enforces (the same message).
        TooLargeError: the source needs more requests, bytes or time than ``remote_limits``.
    """
    meter = http.Meter(**_limits(remote_limits))
    cache = HeaderCache.default()
    scheme = urlsplit(url).scheme.lower()  # a URL by sources.is_url, so it has one
    with gc_paused():
        try:
            loc, name = _location(url, scheme, meter, cache)
            return _read(loc, name, variant, url)
        finally:
            meter.close()


def _location(url: str, scheme: str, meter: http.Meter, cache: HeaderCache | None) -> tuple[Location, str | None]:
    """Where the files are, and the file name when ``url`` names one file."""
    if scheme == "hf":
        return hf_location(url, meter, cache)
    if scheme in ("http", "https"):
        base, name = (url, "") if urlsplit(url).path.endswith("/") else url.rsplit("/", 1)
        base = base if base.endswith("/") else base + "/"
        return http_location(base, meter, {}, cache), (unquote(name) or None)
    return fsspec_location(url, meter)


def _limits(given: Mapping[str, float] | None) -> dict[str, Any]:
    out: dict[str, Any] = dict(LIMITS)
    for k, v in (given or {}).items():
        if k not in LIMITS:
            raise TypeError(f"remote_limits: unknown limit {k!r}; the limits are {', '.join(LIMITS)}")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
            raise ValueError(f"remote_limits[{k!r}] must be a positive number, got {v!r}")
        out[k] = float(v) if k == "timeout" else int(v)
    return out


def _read(loc: Location, name: str | None, variant: str | None, url: str) -> Layout:
    if name is None and loc.files is None:  # plain HTTP cannot list a folder: ask as from_pretrained
        try:
            return _index(loc, "model.safetensors.index.json", url)
        except RemoteError as err:
            if err.status != 404:
                raise
        return _files(loc, ["model.safetensors"], url, "safetensors")
    if name is None:
        name, kind = _pick(loc, variant, url)
    else:
        if variant is not None:
            raise ValueError(f"variant= picks weights in a model folder; {terminal(url)} is a file")
        kind = "index" if name.endswith(".json") else "file"
    if kind == "index":
        return _index(loc, name, url)
    return _files(loc, name.split(","), url, "safetensors" if kind == "file" else "folder")


def _pick(loc: Location, variant: str | None, url: str) -> tuple[str, str]:
    """The file(s) a listed folder is read through: its index, else its safetensors files."""
    files, _ = pick_variant(url, loc.files or [], variant)
    for kind, group in weight_groups(files):
        if not group:
            continue
        if kind == "index":
            return (group[0] if len(group) == 1 else "model.safetensors.index.json"), "index"
        if group[0].endswith(".safetensors"):
            if len(group) > 1:
                return ",".join(group), "folder"
            return group[0], "file"
        raise FileFormatError(
            f"{terminal(url)}: holds only torch pickles ({', '.join(group[:3])}); tensorviz reads remote "
            f"safetensors headers and indexes, not pickles: download the file and analyse it locally"
        )
    shown = ", ".join((loc.files or [])[:8]) or "nothing"
    raise FileFormatError(f"{terminal(url)}: no weights found: expected *.safetensors or an index; it holds: {shown}")


def _files(loc: Location, names: list[str], url: str, fmt: str) -> Layout:
    parts = _parallel(loc, [(n, FIRST_RANGE) for n in names])
    if len(names) == 1:
        fmt = "gguf" if "gguf" in parts[0].meta else "safetensors"
    config = _quant_config(loc, parts)
    return _packed(merge(parts, fmt, source=url, extra=_facts(loc, url, names)), config)


def _index(loc: Location, name: str, url: str) -> Layout:
    index_file = loc.open(name)
    raw = index_file.prefix(MAX_HEADER_BYTES + 1)
    if (index_file.size or 0) > MAX_HEADER_BYTES:
        raise FileFormatError(f"{terminal(index_file.label)}: over the {MAX_HEADER_BYTES}-byte limit for an index")
    obj, wm = index_object(index_file.label, raw)
    index_file.remember(raw)
    wm, names_in = shard_names(index_file.label, wm)
    firsts = [(shard, _first_range(names)) for shard, names in names_in.items()]
    parts = _parallel(loc, firsts)
    config = _quant_config(loc, parts)
    facts = _facts(loc, url, [name, *names_in])
    return _packed(index_layout(index_file.label, obj, wm, parts, "safetensors-index", url, facts), config)


def _quant_config(loc: Location, parts: list[Part]) -> tuple[dict[str, Any], str] | None:
    """The folder's ``quantization_config`` when the files hold packed weights (GPTQ/AWQ, FP8
    block scales, bitsandbytes), read from ``config.json`` beside them as a local folder's is;
    None (no request) when they hold none."""
    if not has_packed(n for p in parts for n in p.names()):
        return None
    if loc.files is not None and "config.json" not in loc.files:
        return {}, ""
    f = loc.open("config.json")
    try:
        raw = f.prefix(MAX_CONFIG_BYTES + 1)
    except RemoteError as err:
        if err.status == 404:
            return {}, ""
        raise
    if (f.size or 0) > MAX_CONFIG_BYTES:
        return {}, f"config.json is over {MAX_CONFIG_BYTES:,} B; its quantization_config was not read"
    config, problem = quant_config_from(raw)
    if not problem:
        f.remember(raw)
    return config, problem


def _packed(layout: Layout, config: tuple[dict[str, Any], str] | None) -> Layout:
    """``layout`` with its packed weights annotated (see :mod:`.packed`)."""
    return layout if config is None else annotate_with(layout, *config)


def _first_range(names: list[str]) -> int:
    """Bytes that hold a header of these tensor names (a second request reads a longer one)."""
    est = 8 + _SLACK + sum(len(json.dumps(n)) + _PER_ENTRY for n in names)
    return min(est, FIRST_RANGE)


def _parallel(loc: Location, todo: list[tuple[str, int]]):
    """Each file's part, its header read in a bounded pool (a progress bar past 16 files)."""

    def one(item: tuple[str, int]):
        shard, first = item
        return part_of(loc.open(shard), first)

    with ThreadPoolExecutor(max_workers=min(WORKERS, max(1, len(todo)))) as pool:
        results = pool.map(one, todo)
        if len(todo) > 16:
            results = _progress(results, len(todo))
        return list(results)


def _progress(results, total: int):
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return results
    return tqdm(results, total=total, desc="safetensors headers", unit="file", disable=None, leave=False)


def _facts(loc: Location, url: str, files: list[str]) -> dict[str, RemoteFacts]:
    m = loc.meter
    return {"remote": RemoteFacts(url, loc.revision, tuple(files), m.requests, m.bytes)}
