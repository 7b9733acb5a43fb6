"""A hostile server gets a named error, fast: each case is a real server on 127.0.0.1 that lies,
trickles, redirects or fails in its own way (tests/helpers/remote_servers.py ``behave`` hooks). Every read is
bounded in bytes and time; the same header rules as for local files apply unchanged."""

from __future__ import annotations

import json
import os
import shutil
import ssl
import struct
import subprocess
import threading
import time

import pytest
import torch
from safetensors.torch import save_file

import tensorviz as tv
from tensorviz.core.errors import FileFormatError, RemoteError
from tests.helpers.remote_servers import FakeHub, FileServer

SHA = "3" * 40
FAST = {"timeout": 1.0}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("HF_TOKEN", raising=False)


@pytest.fixture
def folder(tmp_path):
    save_file({"a": torch.zeros(4, 4), "b": torch.ones(3)}, str(tmp_path / "model.safetensors"))
    return tmp_path


def _raw(h, lines: list[str], body: bytes = b"") -> bool:
    """Answer with exactly these status/header lines and body (the hook has answered)."""
    h.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
    h.wfile.flush()
    h.close_connection = True
    return True


def _raises_fast(exc, match, fn, seconds: float = 5.0):
    """``fn`` raises ``exc`` (its message matching) promptly. The budget is 2 s (bench/bench_remote.py
    reports the worst case measured); 5 s here keeps a loaded test machine from failing a case
    whose point is that it ends at all (a hung read would run to pytest's timeout)."""
    t = time.monotonic()
    with pytest.raises(exc, match=match):
        fn()
    assert time.monotonic() - t < seconds


# -- lies about the bytes ------------------------------------------------------------------------------
def test_a_length_prefix_that_lies_is_refused_as_locally(tmp_path):
    (tmp_path / "x.safetensors").write_bytes(struct.pack("<Q", 10**12) + b'{"a":1}')
    with FileServer(str(tmp_path)) as srv:
        _raises_fast(FileFormatError, "not a safetensors header length", lambda: tv.analyze(f"{srv.url}/x.safetensors"))
        assert srv.stats.bytes == 15  # one range; the lie is never followed


def test_content_range_that_disagrees_with_the_request(folder):
    def behave(h):
        return _raw(
            h, ["HTTP/1.1 206 Partial Content", "Content-Range: bytes 5-100/196", "Content-Length: 96"], b"x" * 96
        )

    with FileServer(str(folder), behave) as srv:
        _raises_fast(
            RemoteError,
            r"asked for bytes 0-99999, the server's Content-Range says 5-100/196",
            lambda: tv.analyze(f"{srv.url}/model.safetensors"),
        )


def test_declared_length_that_disagrees_with_content_range(folder):
    def behave(h):
        return _raw(
            h, ["HTTP/1.1 206 Partial Content", "Content-Range: bytes 0-195/196", "Content-Length: 50"], b"x" * 50
        )

    with FileServer(str(folder), behave) as srv:
        _raises_fast(
            RemoteError,
            "declares a 50-byte body for the 196 bytes of its Content-Range",
            lambda: tv.analyze(f"{srv.url}/model.safetensors"),
        )


def test_a_body_shorter_than_declared(folder):
    data = (folder / "model.safetensors").read_bytes()

    def behave(h):
        return _raw(
            h,
            [
                "HTTP/1.1 206 Partial Content",
                f"Content-Range: bytes 0-{len(data) - 1}/{len(data)}",
                f"Content-Length: {len(data)}",
            ],
            data[:40],
        )

    with FileServer(str(folder), behave) as srv:
        _raises_fast(
            RemoteError,
            f"the body ended after 40 of the {len(data)} bytes",
            lambda: tv.analyze(f"{srv.url}/model.safetensors"),
        )


def test_a_body_longer_than_its_range(folder):
    data = (folder / "model.safetensors").read_bytes()

    def behave(h):  # no Content-Length: the body runs to the connection's close, past the range
        return _raw(
            h,
            [
                "HTTP/1.1 206 Partial Content",
                f"Content-Range: bytes 0-{len(data) - 1}/{len(data)}",
                "Connection: close",
            ],
            data + b"\0" * 5000,
        )

    with FileServer(str(folder), behave) as srv:
        _raises_fast(
            RemoteError,
            f"sent more than the {len(data)} bytes of its Content-Range",
            lambda: tv.analyze(f"{srv.url}/model.safetensors"),
        )


def _huge_header(total: int) -> bytes:
    """A valid header of one uint8 tensor that fills a ``total``-byte file."""
    for pad in range(200):
        text = json.dumps({"big": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}})
        n = len(text) + pad
        data = total - 8 - n
        text = json.dumps({"big": {"dtype": "U8", "shape": [data], "data_offsets": [0, data]}})
        if len(text) <= n:
            return struct.pack("<Q", n) + text.encode().ljust(n)
    raise AssertionError


def test_a_server_that_ignores_range_and_streams_10_gb(tmp_path):
    total = 10 << 30
    head = _huge_header(total)
    sent = []

    def behave(h):
        h.wfile.write(f"HTTP/1.1 200 OK\r\nContent-Length: {total}\r\n\r\n".encode() + head)
        try:
            for _ in range(200_000):  # ~12.5 GiB at most; the client hangs up long before
                h.wfile.write(b"\0" * 65536)
                sent.append(1)
        except OSError:
            pass
        h.close_connection = True
        return True

    with FileServer(str(tmp_path), behave) as srv:
        t = time.monotonic()
        layout = tv.analyze(f"{srv.url}/big.safetensors")
        assert time.monotonic() - t < 5.0
    assert layout["big"].stop == total
    assert layout.metadata["remote"]["bytes"] <= 100_000  # read only what was asked, then hung up


def test_a_server_that_ignores_range_for_a_second_range(tmp_path):
    tensors = {f"t.{i}.{'x' * 60}": torch.zeros(1) for i in range(1500)}
    save_file(tensors, str(tmp_path / "long.safetensors"))
    data = (tmp_path / "long.safetensors").read_bytes()

    def behave(h):
        return _raw(h, ["HTTP/1.1 200 OK", f"Content-Length: {len(data)}"], data)

    with FileServer(str(tmp_path), behave) as srv:
        _raises_fast(
            RemoteError,
            r"ignores Range requests \(it answered 200 to bytes=100000-\)",
            lambda: tv.analyze(f"{srv.url}/long.safetensors"),
        )


# -- redirects --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("location", "match"),
    [
        ("ftp://127.0.0.1/model.safetensors", "follows only http.s. redirects"),
        ("file:///etc/passwd", "follows only http.s. redirects"),
        ("/loop-b", "redirects loop back to"),
        ("/hop-0", r"more than 5 redirects"),
    ],
)
def test_redirects_tensorviz_does_not_follow(folder, location, match):
    def behave(h):
        path = h.path
        if path == "/loop-b":
            return _raw(h, ["HTTP/1.1 302 Found", "Location: /model.safetensors", "Content-Length: 0"])
        if path.startswith("/hop-"):
            k = int(path.split("-")[1])
            return _raw(h, ["HTTP/1.1 302 Found", f"Location: /hop-{k + 1}", "Content-Length: 0"])
        if path == "/model.safetensors":
            return _raw(h, ["HTTP/1.1 301 Moved", f"Location: {location}", "Content-Length: 0"])
        return False

    with FileServer(str(folder), behave) as srv:
        _raises_fast(RemoteError, match, lambda: tv.analyze(f"{srv.url}/model.safetensors"))


def test_credentials_are_not_sent_to_the_host_a_hub_redirects_to(folder, monkeypatch):
    from huggingface_hub import constants

    seen = []

    def cdn_behave(h):
        seen.append(h.headers.get("Authorization"))
        return False

    with FileServer(str(folder), cdn_behave) as cdn:

        def hub_behave(h):
            if "/resolve/" in h.path:  # the Hub sends LFS files to its CDN, as huggingface.co does
                name = h.path.rsplit("/", 1)[1]
                return _raw(h, ["HTTP/1.1 302 Found", f"Location: {cdn.url}/{name}", "Content-Length: 0"])
            return False

        repos = {"org/m": {"commits": {SHA: str(folder)}, "refs": {"main": SHA}, "token": "hf_secret"}}
        with FakeHub(repos, hub_behave) as hub:
            monkeypatch.setattr(constants, "ENDPOINT", hub.url)
            monkeypatch.setenv("HF_TOKEN", "hf_secret")
            layout = tv.analyze("hf://org/m")
    assert [v.name for v in layout.views] == ["a", "b"]
    assert seen == [None]  # the CDN never saw the token


# -- slow, failing and untrusted servers -------------------------------------------------------------------
@pytest.mark.parametrize("where", ["status", "headers", "body"])
def test_a_server_that_trickles_is_cut_at_the_timeout(folder, where):
    data = (folder / "model.safetensors").read_bytes()
    stop = threading.Event()

    def behave(h):
        lines = f"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-{len(data) - 1}/{len(data)}\r\nContent-Length: {len(data)}\r\n\r\n".encode()
        slow = {"status": lines, "headers": lines[20:], "body": data}[where]
        fast = {"status": b"", "headers": lines[:20], "body": lines}[where]
        h.wfile.write(fast)
        for i in range(len(slow)):
            if stop.wait(0.05):
                break
            try:
                h.wfile.write(slow[i : i + 1])
                h.wfile.flush()
            except OSError:
                break
        h.close_connection = True
        return True

    with FileServer(str(folder), behave) as srv:
        try:
            _raises_fast(
                RemoteError,
                r"no complete answer within 1 s .*remote_limits=\{'timeout': SECONDS\}",
                lambda: tv.analyze(f"{srv.url}/model.safetensors", remote_limits=FAST),
            )
        finally:
            stop.set()


@pytest.mark.parametrize(
    ("status", "said", "match"),
    [
        (
            401,
            "Invalid credentials in Authorization header",
            r"401 .*Invalid credentials.*`hf auth login` or set HF_TOKEN",
        ),
        (403, "Access to this resource is disabled.", r"403 .*disabled.*gated repository"),
        (
            429,
            "You have been rate-limited; you can retry this action in about 5 minutes.",
            r"429 .*rate-limited.*wait and try again",
        ),
        (500, "Internal Error - We're working hard to fix this as soon as possible!", r"answered 500 .*Internal Error"),
    ],
)
def test_error_statuses_quote_the_servers_words(folder, status, said, match):
    def behave(h):
        return _raw(h, [f"HTTP/1.1 {status} Whatever", f"X-Error-Message: {said}", "Content-Length: 0"])

    with FileServer(str(folder), behave) as srv:
        _raises_fast(RemoteError, match, lambda: tv.analyze(f"{srv.url}/model.safetensors"))


def test_error_text_from_a_server_is_escaped_and_bounded(folder):
    evil = "\x1b]8;;http://evil\x07click\x1b]8;;\x07 " + "A" * 5000

    def behave(h):
        body = json.dumps({"error": evil}).encode()
        return _raw(h, ["HTTP/1.1 404 Not Found", f"Content-Length: {len(body)}"], body)

    with FileServer(str(folder), behave) as srv, pytest.raises(RemoteError) as err:
        tv.analyze(f"{srv.url}/model.safetensors")
    text = str(err.value)
    assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b]8;;http://evil" in text
    assert len(text) < 800


def test_a_connection_refused_is_named(folder):
    with FileServer(str(folder)) as srv:
        url = srv.url
    _raises_fast(RemoteError, r"ConnectionRefusedError", lambda: tv.analyze(f"{url}/model.safetensors"))


@pytest.fixture
def tls_server(folder, tmp_path):
    """An https FileServer with a self-signed certificate for 127.0.0.1 (openssl makes it)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (it makes the test's certificate)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    srv = FileServer(
        str(folder),
        lambda h: (
            h.path == "/down"
            and _raw(h, ["HTTP/1.1 302 Found", "Location: http://127.0.0.1:9/model.safetensors", "Content-Length: 0"])
        ),
    )
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(str(cert), str(key))
    srv.httpd.socket = ctx.wrap_socket(srv.httpd.socket, server_side=True)
    srv.url = srv.url.replace("http://", "https://")
    with srv:
        yield srv, str(cert)


def test_an_untrusted_certificate_is_a_named_tls_error(tls_server, monkeypatch):
    srv, _ = tls_server
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    _raises_fast(
        RemoteError,
        r"TLS failed \(CERTIFICATE_VERIFY_FAILED\).*SSL_CERT_FILE",
        lambda: tv.analyze(f"{srv.url}/model.safetensors"),
    )


def test_a_trusted_certificate_reads_and_never_downgrades_to_http(tls_server, folder, monkeypatch):
    srv, cert = tls_server
    monkeypatch.setenv("SSL_CERT_FILE", cert)
    layout = tv.analyze(f"{srv.url}/model.safetensors")
    assert [(v.name, v.start, v.stop) for v in layout.views] == [
        (v.name, v.start, v.stop) for v in tv.analyze(str(folder / "model.safetensors")).views
    ]
    _raises_fast(RemoteError, "redirects from https to plain http", lambda: tv.analyze(f"{srv.url}/down"))


def test_a_torch_file_at_a_url_is_named_not_parsed(tmp_path):
    torch.save({"w": torch.zeros(3)}, str(tmp_path / "model.bin"))
    with FileServer(str(tmp_path)) as srv:
        _raises_fast(
            FileFormatError,
            r"is a torch checkpoint \(a zip archive or pickle\); tensorviz reads remote safetensors and GGUF",
            lambda: tv.analyze(f"{srv.url}/model.bin"),
        )


def test_a_shard_name_that_leaves_the_folder_is_refused(tmp_path):
    os.makedirs(tmp_path / "m")
    (tmp_path / "m" / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "../secret.safetensors"}})
    )
    with FileServer(str(tmp_path)) as srv:
        _raises_fast(
            FileFormatError,
            "a path outside the index's folder",
            lambda: tv.analyze(f"{srv.url}/m/model.safetensors.index.json"),
        )
        assert len(srv.stats.requests) == 1
