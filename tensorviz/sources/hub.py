"""``hf://`` URLs through huggingface_hub's own settings: where a repository's files are.

``hf://[datasets/|spaces/|models/]org/name[@revision][/path]`` names a repository, a revision
(a branch, tag or commit; ``main`` by default) and a file or folder in it. The endpoint is
huggingface_hub's (``HF_ENDPOINT``), the token the user logged in with (``HF_TOKEN`` or
``hf auth login``) is sent to that host only, offline mode (``HF_HUB_OFFLINE``) reads only what
the header cache holds, and a revision becomes the commit it names by one API request, which
also lists the files. Files are then read at that commit, so their headers are cached for good.
huggingface_hub is imported only when an ``hf://`` URL is given.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import quote, unquote

from tensorviz.core.errors import RemoteError
from tensorviz.core.names import terminal
from tensorviz.sources import http
from tensorviz.sources.parts import TORCH_EXTS
from tensorviz.sources.remote_files import HeaderCache, Location, RemoteFile, http_location

__all__ = ["HfPath", "hf_location"]

_SHA = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class HfPath:
    """``hf://[datasets/|spaces/|models/]org/name[@revision][/path]`` in parts."""

    repo_type: str
    repo_id: str
    revision: str
    path: str

    @classmethod
    def parse(cls, url: str) -> HfPath:
        rest = url[len("hf://") :].strip("/")
        repo_type = "model"
        for prefix, kind in (("datasets/", "dataset"), ("spaces/", "space"), ("models/", "model")):
            if rest.startswith(prefix):
                repo_type, rest = kind, rest[len(prefix) :]
        segs = rest.split("/")
        if len(segs) < 2 or not segs[0] or not segs[1]:
            raise ValueError(f"{terminal(url)}: an hf:// URL names org/repo (hf://org/repo[@revision][/path])")
        name, _, revision = segs[1].partition("@")
        if not name or (("@" in segs[1]) and not revision):
            raise ValueError(f"{terminal(url)}: an empty repository name or revision")
        return cls(repo_type, f"{segs[0]}/{name}", unquote(revision) or "main", "/".join(segs[2:]))


def hf_location(url: str, meter: http.Meter, cache: HeaderCache | None) -> tuple[Location, str | None]:
    """The repository folder (at its resolved commit) and the file name when ``url`` names one."""
    try:
        from huggingface_hub import constants, get_token
    except ImportError:
        raise ImportError(f"{terminal(url)} needs huggingface_hub: pip install 'tensorviz[remote]'") from None
    hp = HfPath.parse(url)
    endpoint = constants.ENDPOINT.rstrip("/")
    token = get_token()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    headers["User-Agent"] = "tensorviz; huggingface_hub"
    ref = f"{endpoint}|{hp.repo_type}|{hp.repo_id}|{hp.revision}"
    sha, files = _resolve(endpoint, hp, headers, meter, cache, ref, constants.is_offline_mode())
    folder, name = _split_path(hp.path, files)
    plural = {"model": "", "dataset": "datasets/", "space": "spaces/"}[hp.repo_type]
    base = f"{endpoint}/{plural}{hp.repo_id}/resolve/{sha}/" + (quote(folder, safe="/") + "/" if folder else "")
    key_base = f"hf:{endpoint}|{hp.repo_type}|{hp.repo_id}@{sha}/{folder}"
    inside = None
    if files is not None:
        pre = f"{folder}/" if folder else ""
        inside = sorted(f[len(pre) :] for f in files if f.startswith(pre) and "/" not in f[len(pre) :])
    loc = http_location(base, meter, headers, cache, sha, inside, key_base)
    if constants.is_offline_mode():
        loc.opener = _offline(loc.opener, cache, url)
    return loc, name


def _resolve(
    endpoint: str,
    hp: HfPath,
    headers: Mapping[str, str],
    meter: http.Meter,
    cache: HeaderCache | None,
    ref: str,
    offline: bool,
) -> tuple[str, list[str] | None]:
    """The commit a revision names and the repository's files (one API request, or the cache)."""
    if offline:
        sha = hp.revision if _SHA.match(hp.revision) else (cache.get_ref(ref) if cache else None)
        if not sha:
            raise RemoteError(
                f"hf://{hp.repo_id}@{hp.revision}: offline mode (HF_HUB_OFFLINE) and no cached look at this "
                f"revision; unset HF_HUB_OFFLINE, or look once while online"
            )
        listing = cache.get(f"files:{ref}@{sha}") if cache else None
        return sha, json.loads(listing[1]) if listing else None
    plural = {"model": "models", "dataset": "datasets", "space": "spaces"}[hp.repo_type]
    api = f"{endpoint}/api/{plural}/{hp.repo_id}/revision/{quote(hp.revision, safe='')}"
    resp = http.get_all(api, 64 << 20, meter, headers)
    try:
        info = json.loads(resp.body)
        sha = info["sha"]
        files = [s["rfilename"] for s in info.get("siblings") or []]
    except (ValueError, KeyError, TypeError):
        raise RemoteError(f"{terminal(api)}: the Hub's answer is not a repository's revision info") from None
    if not isinstance(sha, str) or not _SHA.match(sha) or not all(isinstance(f, str) for f in files):
        raise RemoteError(f"{terminal(api)}: the Hub's answer names no commit (sha) or files")
    if cache:
        cache.put_ref(ref, sha)
        cache.put(f"files:{ref}@{sha}", 0, json.dumps(files).encode(), None)
    return sha, files


def _offline(opener: Callable[[str], RemoteFile], cache: HeaderCache | None, url: str) -> Callable[[str], RemoteFile]:
    def reader(start: int, stop: int, etag: str | None) -> http.Response:
        raise RemoteError(
            f"{terminal(url)}: offline mode (HF_HUB_OFFLINE) and this header is not cached; unset HF_HUB_OFFLINE"
        )

    def open_offline(name: str) -> RemoteFile:
        f = opener(name)
        f.reader = reader
        return f

    return open_offline


def _split_path(path: str, files: list[str] | None) -> tuple[str, str | None]:
    """(folder, file name) of a path inside a repository: a listed file, else a folder."""
    if not path:
        return "", None
    if (files is not None and path in files) or _looks_like_file(path):
        folder, name = posixpath.split(path)
        return folder, name
    return path.strip("/"), None


def _looks_like_file(name: str) -> bool:
    return name.endswith((".safetensors", ".json") + TORCH_EXTS)
