"""Remote datasets (docs/python.md "Remote datasets"): load, stream and verify from an HTTP server
with range requests written here and from moto's S3 server, both on 127.0.0.1 and started and
stopped by the tests, optionally through a fault-injecting proxy of the tests' own. The servers'
request logs show what was sent: no LIST request, every byte of a shard fetched once per node with
a cache, nothing but a 304 on a second run, and no wrong byte ever delivered."""
import contextlib
import hashlib
import http.client
import http.server
import os
import pathlib
import socket
import struct
import subprocess
import threading
import time
import urllib.parse

import numpy
import pytest

import gpucache
from conftest import BUILD, pack

CLI = BUILD / "src" / "cli" / "gpucache"


# ---------------------------------------------------------------------------------------------
# Servers


class RequestLog:
    def __init__(self):
        self._lock = threading.Lock()
        self.entries = []

    def add(self, **entry):
        with self._lock:
            self.entries.append(entry)

    def clear(self):
        with self._lock:
            self.entries.clear()

    def of(self, method=None):
        with self._lock:
            return [e for e in self.entries if method is None or e["method"] == method]


def _parse_range(header, size):
    unit, _, spec = header.partition("=")
    assert unit.strip() == "bytes" and "," not in spec, header
    first, _, last = spec.partition("-")
    begin, end = int(first), min(int(last) + 1, size)
    return begin, end


class _Quiet(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):  # resets and closed clients are expected
        pass


class RangeHandler(http.server.BaseHTTPRequestHandler):
    """GET with Range, ETag and If-None-Match; PUT; every request logged."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _target(self):
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path).lstrip("/")
        root = self.server.root.resolve()
        target = (root / path).resolve()
        assert target == root or root in target.parents, self.path
        return path, target

    def _send(self, status, body=b"", headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path, target = self._target()
        query = urllib.parse.urlsplit(self.path).query
        entry = dict(method="GET", path=path, query=query, range=None)
        if not target.is_file():
            self.server.log.add(status=404, bytes=0, **entry)
            return self._send(404)
        info = target.stat()
        size = info.st_size
        etag = '"' + hashlib.md5(f"{info.st_mtime_ns}-{size}".encode()).hexdigest() + '"'
        if self.headers.get("If-None-Match") == etag:
            self.server.log.add(status=304, bytes=0, **entry)
            return self._send(304, headers=[("ETag", etag)])
        header = self.headers.get("Range")
        begin, end = _parse_range(header, size) if header else (0, size)
        with open(target, "rb") as file:  # only the bytes asked for
            file.seek(begin)
            body = file.read(end - begin)
        if header:
            entry["range"] = (begin, end)
            self.server.log.add(status=206, bytes=len(body), **entry)
            return self._send(206, body, [("ETag", etag),
                                          ("Content-Range", f"bytes {begin}-{end - 1}/{size}")])
        self.server.log.add(status=200, bytes=len(body), **entry)
        return self._send(200, body, [("ETag", etag)])

    def do_PUT(self):
        path, target = self._target()
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(body)
        self.server.log.add(method="PUT", path=path, query="", range=None, status=200,
                            bytes=len(body))
        self._send(200)


class FaultProxy(http.server.BaseHTTPRequestHandler):
    """Forwards to the upstream server; the next planned fault (or `always` for one path) hits a
    request: 503 SlowDown, 429, 500, a reset connection, a truncated body or a flipped byte."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _forward(self):
        proxy = self.server
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        path = urllib.parse.urlsplit(self.path).path
        fault = None
        if getattr(proxy, "delay", 0):  # latency of a distant store, per request
            time.sleep(proxy.delay)
        with proxy.lock:
            if self.headers.get("Range") and proxy.plan:
                fault = proxy.plan.pop(0)
            elif proxy.always and path.endswith(proxy.always[0]):
                fault = proxy.always[1]
        proxy.log.add(method=self.command, path=path, query=urllib.parse.urlsplit(self.path).query,
                      range=self.headers.get("Range"), fault=fault)
        if fault in ("503", "429", "500"):
            text = b"<Error><Code>SlowDown</Code><Message>Reduce your request rate</Message></Error>"
            self.send_response(int(fault))
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)
            return
        if fault == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        upstream = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=30)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
            upstream.request(self.command, self.path, body=body, headers=headers)
            response = upstream.getresponse()
            data = response.read()
        finally:
            upstream.close()
        if fault == "flip" and data:
            data = bytearray(data)
            data[len(data) // 2] ^= 0x20
            data = bytes(data)
        self.send_response(response.status)
        for name, value in response.getheaders():
            if name.lower() not in ("content-length", "transfer-encoding", "connection", "date",
                                    "server"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if fault == "truncate":
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(data)

    do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = _forward


@contextlib.contextmanager
def serve(handler, **attributes):
    server = _Quiet(("127.0.0.1", 0), handler)
    server.log = RequestLog()
    server.lock = threading.Lock()
    for name, value in attributes.items():
        setattr(server, name, value)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def url_of(server, name="ds"):
    return f"http://127.0.0.1:{server.server_address[1]}/{name}"


@pytest.fixture
def fast_retries(monkeypatch):
    """Short backoff, so retried faults cost milliseconds."""
    monkeypatch.setenv("GPUCACHE_REMOTE_BACKOFF_MS", "1")
    monkeypatch.delenv("GPUCACHE_CACHE", raising=False)
    monkeypatch.delenv("GPUCACHE_CACHE_LIMIT", raising=False)


# ---------------------------------------------------------------------------------------------
# Datasets: 9000 rows × 256 f32 in two shards of 4500 rows, two 4 MiB chunks each (chunks fetched
# in parallel), plus the same packed with zstd (chunks decompressed on arrival).


@pytest.fixture(scope="session")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("served")
    # Unit-norm-ish rows (pack keeps every one), so all 9000 rows are in the dataset.
    rows = numpy.random.default_rng(0).standard_normal((9000, 256), dtype=numpy.float32) / 16
    numpy.savez(root / "data.npz", emb=rows,
                label=numpy.arange(9000, dtype=numpy.int64) * 7 % 1000)
    pack([root / "data.npz"], root / "ds", "--shard-rows", 4500)
    pack([root / "data.npz"], root / "zds", "--shard-rows", 4500, "--compress", "zstd")
    return root


def shard_sizes(folder):
    return {p.name: p.stat().st_size for p in pathlib.Path(folder).glob("shard-*.gcs")}


def assert_each_byte_once(log, folder):
    """Every shard's bytes were fetched exactly once, by range requests that do not overlap."""
    sizes = shard_sizes(folder)
    ranges = {}
    for entry in log.of("GET"):
        name = pathlib.PurePosixPath(entry["path"]).name
        if name in sizes:
            assert entry["range"] is not None, entry
            span = entry["range"]  # (begin, end) from the range server, the header from the proxy
            if isinstance(span, str):
                span = _parse_range(span, sizes[name])
            ranges.setdefault(name, []).append(span)
    assert set(ranges) == set(sizes)
    for name, spans in ranges.items():
        spans.sort()
        position = 0
        for begin, end in spans:
            assert begin == position, (name, spans)
            position = end
        assert position == sizes[name], name


def assert_no_list(log):
    for entry in log.of():
        assert "list-type" not in entry["query"] and "prefix" not in entry["query"], entry
        name = pathlib.PurePosixPath(entry["path"]).name
        assert name == "manifest.json" or name.startswith("shard-"), entry


def as_numpy(tree):
    if isinstance(tree, dict):
        return {k: as_numpy(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [as_numpy(v) for v in tree]
    return numpy.array(tree)  # a copy: a stream reuses the memory of its batches


def assert_same(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            assert_same(a[key], b[key])
    elif isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    else:
        numpy.testing.assert_array_equal(a, b)


def loaded(path, **options):
    ds = gpucache.load(path, device="cpu", **options)
    return {name: numpy.asarray(tensor) for name, tensor in ds.tensors.items()}


# ---------------------------------------------------------------------------------------------
# HTTP


@pytest.mark.parametrize("name", ["ds", "zds"])
def test_http_load_equals_local_and_fetches_each_byte_once(served, tmp_path, fast_retries, name):
    local = loaded(served / name)
    with serve(RangeHandler, root=served) as server:
        remote = loaded(url_of(server, name), cache_dir=tmp_path / "cache")
        assert_same(remote, local)
        assert_no_list(server.log)
        assert_each_byte_once(server.log, served / name)
        manifests = [e for e in server.log.of("GET") if e["path"].endswith("manifest.json")]
        assert len(manifests) == 1
        # Three requests a shard: the header and tables, the chunk table and footer, and its two
        # adjacent 4 MiB chunks as one range (runs of up to 32 MiB).
        for shard in ("shard-00000.gcs", "shard-00001.gcs"):
            assert len([e for e in server.log.of("GET") if e["path"].endswith(shard)]) == 3

        # A second run with the cache: the manifest is revalidated (304, no body), no shard
        # byte is read.
        server.log.clear()
        assert_same(loaded(url_of(server, name), cache_dir=tmp_path / "cache"), local)
        entries = server.log.of()
        assert [(e["path"].split("/")[-1], e["status"], e["bytes"]) for e in entries] == [
            ("manifest.json", 304, 0)]


def test_http_without_cache_uses_a_temporary_folder(served, fast_retries, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    with serve(RangeHandler, root=served) as server:
        ds = gpucache.load(url_of(server), device="cpu", columns=["label"], rows=(100, 200))
        numpy.testing.assert_array_equal(numpy.asarray(ds.tensors["label"]),
                                         numpy.arange(100, 200) * 7 % 1000)
        assert ds.path == url_of(server)
        assert ds.meta["rows"] == 9000
        # Only the shard holding rows 100-200 was fetched.
        fetched = {e["path"].split("/")[-1] for e in server.log.of("GET")}
        assert fetched == {"manifest.json", "shard-00000.gcs"}
        assert list(tmp_path.glob("gpucache-remote-*"))
        del ds
        import gc
        gc.collect()
        assert not list(tmp_path.glob("gpucache-remote-*"))  # removed with the dataset


def test_http_stream_equals_local(served, tmp_path, fast_retries):
    def batches(path, **options):
        stream = gpucache.stream(path, device="cpu", batch_size=1000, seed=3, **options)
        return [as_numpy(batch) for batch in stream]

    local = batches(served / "ds")
    with serve(RangeHandler, root=served) as server:
        remote = batches(url_of(server), cache_dir=tmp_path / "cache")
        assert len(remote) == len(local) == 9
        for a, b in zip(remote, local):
            assert_same(a, b)
        assert_each_byte_once(server.log, served / "ds")
        # Resuming mid-epoch from the cache reads nothing but the manifest.
        server.log.clear()
        stream = gpucache.stream(url_of(server), device="cpu", batch_size=1000, seed=3,
                                 cache_dir=tmp_path / "cache")
        iterator = iter(stream)
        next(iterator)
        state = stream.state_dict()
        resumed = gpucache.stream(url_of(server), device="cpu", batch_size=1000, seed=3,
                                  cache_dir=tmp_path / "cache")
        resumed.load_state_dict(state)
        rest = [as_numpy(batch) for batch in resumed]
        for a, b in zip(rest, local[1:]):
            assert_same(a, b)
        assert all(e["bytes"] == 0 for e in server.log.of())


def test_ranks_of_a_node_share_one_download(served, tmp_path, fast_retries):
    """Four loads at once (the ranks of a node) with one cache: each byte is fetched once."""
    local = loaded(served / "ds")
    with serve(RangeHandler, root=served) as server:
        results, errors = [None] * 4, []

        def rank(index):
            try:
                results[index] = loaded(url_of(server), cache_dir=tmp_path / "cache")
            except Exception as error:  # noqa: BLE001 (reported below)
                errors.append(error)

        threads = [threading.Thread(target=rank, args=(k,)) for k in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not errors
        for result in results:
            assert_same(result, local)
        assert_each_byte_once(server.log, served / "ds")


def test_verify_and_cli_over_http(served, tmp_path, fast_retries):
    with serve(RangeHandler, root=served) as server:
        report = gpucache.verify(url_of(server), cache_dir=tmp_path / "cache")
        assert report["ok"], report
        local = gpucache.verify(served / "ds")
        assert report["bytes_checked"] == local["bytes_checked"]
        assert report["path"] == url_of(server)
        assert gpucache.inspect(url_of(server))["rows"] == 9000
        out = subprocess.run([str(CLI), "verify", url_of(server), "--cache-dir",
                              str(tmp_path / "cache"), "--json"], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        missing = subprocess.run([str(CLI), "verify", url_of(server, "nothing-here")],
                                 capture_output=True, text=True)
        assert missing.returncode == 2
        assert "HTTP 404" in missing.stderr and "nothing-here/manifest.json" in missing.stderr


def test_push_over_http_then_load(served, tmp_path, fast_retries):
    target = tmp_path / "server"
    target.mkdir()
    with serve(RangeHandler, root=target) as server:
        result = gpucache.push(served / "ds", url_of(server, "pushed/ds"))
        assert result["files"] == 3
        puts = [e["path"] for e in server.log.of("PUT")]
        assert puts[-1] == "pushed/ds/manifest.json"  # the manifest last
        assert sorted(puts[:-1]) == ["pushed/ds/shard-00000.gcs", "pushed/ds/shard-00001.gcs"]
        assert_same(loaded(url_of(server, "pushed/ds"), cache_dir=tmp_path / "c"),
                    loaded(served / "ds"))


# ---------------------------------------------------------------------------------------------
# Faults


def test_every_fault_is_retried_and_nothing_wrong_is_delivered(served, tmp_path, fast_retries):
    local = loaded(served / "zds")
    with serve(RangeHandler, root=served) as upstream, \
            serve(FaultProxy, upstream_port=upstream.server_address[1], plan=[], always=None) as proxy:
        proxy.plan = ["503", "reset", "truncate", "flip", "429", "500", "flip", "reset"]
        remote = loaded(url_of(proxy, "zds"), cache_dir=tmp_path / "cache")
        assert_same(remote, local)
        assert not proxy.plan  # every planned fault was met
        assert {e["fault"] for e in proxy.log.of()} >= {"503", "reset", "truncate", "flip"}
        assert_no_list(proxy.log)


def test_a_fault_that_persists_is_reported_with_url_and_range(served, tmp_path, fast_retries,
                                                              monkeypatch):
    monkeypatch.setenv("GPUCACHE_REMOTE_RETRIES", "3")
    with serve(RangeHandler, root=served) as upstream, \
            serve(FaultProxy, upstream_port=upstream.server_address[1], plan=[],
                  always=("shard-00001.gcs", "flip")) as proxy:
        with pytest.raises(gpucache.Error) as raised:
            gpucache.load(url_of(proxy), device="cpu", cache_dir=tmp_path / "cache")
        message = str(raised.value)
        assert "/ds/shard-00001.gcs" in message and "bytes " in message
        assert "after 3 attempts" in message
        # Nothing of the damaged shard took its name in the cache.
        assert not list((tmp_path / "cache").glob("*/shard-00001.gcs"))
        for throttled in ("503", "reset", "truncate"):
            proxy.always = ("shard-00001.gcs", throttled)
            with pytest.raises(gpucache.Error, match="after 3 attempts"):
                gpucache.load(url_of(proxy), device="cpu", cache_dir=tmp_path / "cache")
        # verify reports it as a problem instead of raising.
        proxy.always = ("shard-00001.gcs", "flip")
        report = gpucache.verify(url_of(proxy), cache_dir=tmp_path / "cache")
        assert not report["ok"]
        assert any("shard-00001.gcs" in p["file"] for p in report["problems"])


def test_a_damaged_cached_shard_is_fetched_again(served, tmp_path, fast_retries):
    with serve(RangeHandler, root=served) as server:
        loaded(url_of(server), cache_dir=tmp_path / "cache")
        cached = next((tmp_path / "cache").glob("*/shard-00000.gcs"))
        data = bytearray(cached.read_bytes())
        data[10] ^= 1  # inside the header: its hash no longer matches the manifest's
        cached.write_bytes(bytes(data))
        server.log.clear()
        assert_same(loaded(url_of(server), cache_dir=tmp_path / "cache"), loaded(served / "ds"))
        fetched = {e["path"].split("/")[-1] for e in server.log.of() if e["bytes"]}
        assert fetched == {"shard-00000.gcs"}


def test_cache_limit_evicts_least_recently_used(served, tmp_path, fast_retries, monkeypatch):
    sizes = shard_sizes(served / "ds")
    monkeypatch.setenv("GPUCACHE_CACHE_LIMIT", str(max(sizes.values()) + 1))
    with serve(RangeHandler, root=served) as server:
        cache = tmp_path / "cache"
        gpucache.load(url_of(server), device="cpu", rows=(0, 10), cache_dir=cache)
        gpucache.load(url_of(server), device="cpu", rows=(8990, 9000), cache_dir=cache)
        assert sorted(p.name for p in cache.glob("*/shard-*.gcs")) == ["shard-00001.gcs"]
    monkeypatch.setenv("GPUCACHE_CACHE_LIMIT", "lots")
    with pytest.raises(gpucache.Error, match="GPUCACHE_CACHE_LIMIT"):
        gpucache.load("http://127.0.0.1:9/ds", device="cpu")


# ---------------------------------------------------------------------------------------------
# S3 (moto's server)


@pytest.fixture
def moto_server():
    server_module = pytest.importorskip("moto.server", reason="moto[s3] is not installed")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield port
    finally:
        server.stop()


def test_s3_push_load_stream_verify(served, tmp_path, monkeypatch, fast_retries, moto_server):
    with serve(FaultProxy, upstream_port=moto_server, plan=[], always=None) as proxy:
        endpoint = f"http://127.0.0.1:{proxy.server_address[1]}"
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        monkeypatch.setenv("AWS_REGION", "us-east-1")
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        monkeypatch.setenv("HOME", str(tmp_path))  # no shared files of this machine
        # The bucket, made directly at moto (creating buckets is not gpucache's business).
        connection = http.client.HTTPConnection("127.0.0.1", moto_server, timeout=30)
        connection.request("PUT", "/train-data")
        assert connection.getresponse().status == 200
        connection.close()

        result = gpucache.push(served / "zds", "s3://train-data/sets/zds")
        assert result["files"] == 3
        assert proxy.log.of("PUT")[-1]["path"] == "/train-data/sets/zds/manifest.json"
        proxy.log.clear()

        url = "s3://train-data/sets/zds"
        assert_same(loaded(url, cache_dir=tmp_path / "cache"), loaded(served / "zds"))
        assert_no_list(proxy.log)
        assert_each_byte_once(proxy.log, served / "zds")
        # Throttling, a reset and a flipped byte on the way from S3: retried, right bytes.
        proxy.plan = ["503", "reset", "flip"]
        assert_same(loaded(url, cache_dir=tmp_path / "faults"), loaded(served / "zds"))
        assert not proxy.plan

        local_batches = [as_numpy(b) for b in gpucache.stream(served / "zds", device="cpu",
                                                              batch_size=2000, seed=5)]
        proxy.log.clear()
        remote_batches = [as_numpy(b) for b in gpucache.stream(url, device="cpu", batch_size=2000,
                                                               seed=5, cache_dir=tmp_path / "cache")]
        for a, b in zip(remote_batches, local_batches):
            assert_same(a, b)
        assert len(remote_batches) == len(local_batches)
        # With the cache: the manifest is revalidated (moto answers 304), no shard is read.
        assert [e["path"].split("/")[-1] for e in proxy.log.of()] == ["manifest.json"]

        report = gpucache.verify(url, cache_dir=tmp_path / "fresh")
        assert report["ok"] and report["path"] == url

        monkeypatch.setenv("AWS_PROFILE", "missing-profile")
        monkeypatch.delenv("AWS_ACCESS_KEY_ID")
        monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
        with pytest.raises(gpucache.Error, match="missing-profile"):
            gpucache.load(url, device="cpu")


# ---------------------------------------------------------------------------------------------
# stream(partition="shards"): each rank fetches only its own shards


def fetched_shards(log):
    return {pathlib.PurePosixPath(e["path"]).name for e in log.of("GET")
            if pathlib.PurePosixPath(e["path"]).name.startswith("shard-")}


def test_shard_partition_ranks_fetch_disjoint_shards_and_equal_local(served, tmp_path,
                                                                      fast_retries):
    options = dict(device="cpu", batch_size=1000, seed=3, world_size=2, partition="shards")
    local = {r: [as_numpy(b) for b in gpucache.stream(served / "ds", rank=r, **options)]
             for r in range(2)}
    # A rank's batches are its own shard's rows in the order of a one-rank stream over them.
    for r in range(2):
        alone = gpucache.stream(served / "ds", device="cpu", batch_size=1000, seed=3,
                                rows=(4500 * r, 4500 * (r + 1)))
        assert len(local[r]) == 5
        for a, b in zip(local[r], alone):
            assert_same(a, as_numpy(b))
    with serve(RangeHandler, root=served) as server:
        seen = []
        for r in range(2):  # two nodes: a cache each
            server.log.clear()
            stream = gpucache.stream(url_of(server), rank=r, cache_dir=tmp_path / f"node{r}",
                                     **options)
            batches = [as_numpy(b) for b in stream]
            assert len(batches) == len(stream) == 5
            for a, b in zip(batches, local[r]):
                assert_same(a, b)
            seen.append(fetched_shards(server.log))
            assert_no_list(server.log)
        assert seen == [{"shard-00000.gcs"}, {"shard-00001.gcs"}]

        # Resuming mid-epoch (rank 1, from its cache) reads no shard bytes again.
        server.log.clear()
        stream = gpucache.stream(url_of(server), rank=1, cache_dir=tmp_path / "node1", **options)
        iterator = iter(stream)
        next(iterator)
        next(iterator)
        state = stream.state_dict()
        resumed = gpucache.stream(url_of(server), rank=1, cache_dir=tmp_path / "node1",
                                  **options)
        resumed.load_state_dict(state)
        rest = [as_numpy(b) for b in resumed]
        assert len(rest) == 3
        for a, b in zip(rest, local[1][2:]):
            assert_same(a, b)
        assert all(e["bytes"] == 0 for e in server.log.of())
        # Another world size has no common place to resume from: refused.
        other = gpucache.stream(url_of(server), rank=0, cache_dir=tmp_path / "node1",
                                **dict(options, world_size=1))
        with pytest.raises(gpucache.Error, match="world_size and batch_size it was saved"):
            other.load_state_dict(state)


def test_shard_partition_uneven_shards(tmp_path):
    # Shards of 4000, 4000 and 1000 rows; each row's index in "row" (--no-checks keeps all).
    emb = numpy.random.default_rng(1).standard_normal((9000, 4), dtype=numpy.float32) / 16
    numpy.savez(tmp_path / "data.npz", emb=emb, row=numpy.arange(9000, dtype=numpy.int64))
    pack([tmp_path / "data.npz"], tmp_path / "ds", "--shard-rows", 4000, "--no-checks")
    options = dict(device="cpu", batch_size=500, world_size=2, partition="shards")
    # Shards go whole to the rank whose even share holds their first row: 8000 and 1000 rows.
    assert gpucache._stream.shard_slices(
        gpucache._stream.NativeDataset.open(str(tmp_path / "ds")).shards(), 0, 9000, 2) == [
            (0, 8000), (8000, 9000)]
    with pytest.raises(gpucache.Error, match="drop_last=True"):
        gpucache.stream(tmp_path / "ds", rank=0, **options)
    counts = []
    for r in range(2):
        stream = gpucache.stream(tmp_path / "ds", rank=r, drop_last=True, **options)
        batches = [as_numpy(b)["row"] for b in stream]
        counts.append((len(stream), len(batches)))
        lo, hi = (0, 8000) if r == 0 else (8000, 9000)
        for batch in batches:
            assert ((batch >= lo) & (batch < hi)).all()
    assert counts == [(2, 2), (2, 2)]  # both ranks yield the fewest (rank 1's 1000 rows)
    with pytest.raises(gpucache.Error, match="shard for every rank"):
        gpucache.stream(tmp_path / "ds", rank=0, **dict(options, world_size=4))
    with pytest.raises(gpucache.Error, match="partition must be"):
        gpucache.stream(tmp_path / "ds", device="cpu", partition="blocks")


def test_stream_in_dataloader_workers_reuses_the_cache(served, tmp_path, fast_retries):
    """Forked DataLoader workers reopen the stream's dataset with its cache_dir: the batches are
    the local stream's, and each byte is fetched once for the parent and both workers."""
    torch = pytest.importorskip("torch")
    local = [as_numpy(b) for b in gpucache.stream(served / "ds", device="cpu", batch_size=1000,
                                                  seed=3)]
    with serve(RangeHandler, root=served) as server:
        stream = gpucache.stream(url_of(server), device="cpu", batch_size=1000, seed=3,
                                 cache_dir=tmp_path / "cache")
        loader = torch.utils.data.DataLoader(stream, batch_size=None, num_workers=2,
                                             multiprocessing_context="fork")
        remote = [as_numpy(b) for b in loader]
        assert len(remote) == len(local) == 9
        for a, b in zip(remote, local):
            assert_same(a, b)
        assert_each_byte_once(server.log, served / "ds")


# ---------------------------------------------------------------------------------------------
# A remote stream opens its shards lazily and fetches the next ones in the background


@pytest.fixture(scope="session")
def eight_shards(tmp_path_factory):
    """8000 rows in 8 shards of 1000 (row index in "row"), so a rank's run and a batch's shards are
    plain to see in the request log."""
    root = tmp_path_factory.mktemp("eight")
    emb = numpy.random.default_rng(2).standard_normal((8000, 64), dtype=numpy.float32) / 16
    numpy.savez(root / "data.npz", emb=emb, row=numpy.arange(8000, dtype=numpy.int64))
    pack([root / "data.npz"], root / "ds", "--shard-rows", 1000, "--no-checks")
    return root / "ds"


def first_fetches(log):
    """Shard names in the order of their first request."""
    order = []
    for entry in log.of("GET"):
        name = pathlib.PurePosixPath(entry["path"]).name
        if name.startswith("shard-") and name not in order:
            order.append(name)
    return order


def test_remote_stream_fetches_its_shards_lazily_and_ahead(eight_shards, tmp_path, monkeypatch,
                                                          fast_retries, moto_server):
    with serve(FaultProxy, upstream_port=moto_server, plan=[], always=None) as proxy:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        monkeypatch.setenv("AWS_REGION", "us-east-1")
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{proxy.server_address[1]}")
        monkeypatch.setenv("HOME", str(tmp_path))
        connection = http.client.HTTPConnection("127.0.0.1", moto_server, timeout=30)
        connection.request("PUT", "/lazy")
        assert connection.getresponse().status == 200
        connection.close()
        gpucache.push(eight_shards, "s3://lazy/ds")
        url = "s3://lazy/ds"
        options = dict(device="cpu", batch_size=250, seed=4, world_size=2, partition="shards",
                       drop_last=True)
        local = {r: [as_numpy(b) for b in gpucache.stream(eight_shards, rank=r, **options)]
                 for r in range(2)}

        # Created: the manifest only. Then, without prefetching, each shard when a batch first
        # needs it: in order (shuffle=False), one shard per four batches.
        proxy.log.clear()
        ordered = dict(options, shuffle=False)
        stream = gpucache.stream(url, rank=1, cache_dir=tmp_path / "plain", prefetch_shards=0,
                                 prefetch=1, **ordered)
        assert first_fetches(proxy.log) == []
        iterator = iter(stream)
        assert as_numpy(next(iterator))["row"].tolist() == list(range(4000, 4250))
        assert first_fetches(proxy.log) == ["shard-00004.gcs"]
        assert stream.stats()["shards_open"] == 1
        rest = [as_numpy(b) for b in iterator]
        assert len(rest) == 15
        assert first_fetches(proxy.log) == [f"shard-0000{k}.gcs" for k in range(4, 8)]

        # Each rank of its own node fetches only its own shards, each byte once, even with every
        # request 20 ms late; the shuffled batches are the local stream's.
        proxy.delay = 0.02
        for r in range(2):
            proxy.log.clear()
            stream = gpucache.stream(url, rank=r, cache_dir=tmp_path / f"node{r}", **options)
            batches = [as_numpy(b) for b in stream]
            assert len(batches) == len(local[r]) == 16
            for a, b in zip(batches, local[r]):
                assert_same(a, b)
            assert sorted(first_fetches(proxy.log)) == [f"shard-0000{k}.gcs"
                                                        for k in range(4 * r, 4 * r + 4)]
            assert_no_list(proxy.log)
            assert_each_byte_once_of(proxy.log, eight_shards, range(4 * r, 4 * r + 4))

        # In order, with prefetching: the first two shards together, the next ones only once those
        # are open (as the batches reach them; two may then be fetched together, in either
        # order); the batches are the local ones.
        proxy.log.clear()
        stream = gpucache.stream(url, rank=0, cache_dir=tmp_path / "ahead", prefetch_shards=2,
                                 **ordered)
        batches = [as_numpy(b) for b in stream]
        local_ordered = [as_numpy(b) for b in gpucache.stream(eight_shards, rank=0, **ordered)]
        for a, b in zip(batches, local_ordered):
            assert_same(a, b)
        order = first_fetches(proxy.log)
        assert sorted(order[:2]) == ["shard-00000.gcs", "shard-00001.gcs"]
        assert sorted(order[2:]) == ["shard-00002.gcs", "shard-00003.gcs"]

        # Resuming mid-epoch into an empty cache fetches only the shards the rest of the epoch
        # reads: batch 9 of rank 0's ordered epoch is in its third shard.
        proxy.delay = 0
        stream = gpucache.stream(url, rank=0, cache_dir=tmp_path / "ahead", **ordered)
        iterator = iter(stream)
        for _ in range(9):
            next(iterator)
        state = stream.state_dict()
        proxy.log.clear()
        resumed = gpucache.stream(url, rank=0, cache_dir=tmp_path / "resumed", **ordered)
        resumed.load_state_dict(state)
        rest = [as_numpy(b) for b in resumed]
        assert len(rest) == 7
        for a, b in zip(rest, local_ordered[9:]):
            assert_same(a, b)
        assert sorted(first_fetches(proxy.log)) == ["shard-00002.gcs", "shard-00003.gcs"]
        with pytest.raises(gpucache.Error, match="prefetch_shards"):
            gpucache.stream(url, rank=0, prefetch_shards=-1, **ordered)


def assert_each_byte_once_of(log, folder, indices):
    """Shards `indices` of `folder` were each fetched exactly once, in ranges that do not overlap;
    no other shard was asked for."""
    sizes = {name: size for name, size in shard_sizes(folder).items()
             if int(name[6:11]) in indices}
    ranges = {}
    for entry in log.of("GET"):
        name = pathlib.PurePosixPath(entry["path"]).name
        if name.startswith("shard-"):
            assert name in sizes, entry
            ranges.setdefault(name, []).append(_parse_range(entry["range"], sizes[name]))
    assert set(ranges) == set(sizes)
    for name, spans in ranges.items():
        spans.sort()
        position = 0
        for begin, end in spans:
            assert begin == position, (name, spans)
            position = end
        assert position == sizes[name], name
