#!/usr/bin/env python3
"""The "remote" section (issue #30, item 7): gpucache.stream against MosaicML streaming's
StreamingDataset and litdata's StreamingDataset reading the same rows from the same local S3
server (moto's, on 127.0.0.1, in a process of its own): rows per second, requests sent and bytes
fetched per epoch.

  remote_child.py --scratch DIR --rows N --dim D --reps R [--batch-size B]   # prints one JSON line
  remote_child.py --serve PORTFILE                                          # the server (internal)
  remote_child.py --read NAME --url URL --cache DIR ...                     # one run (internal)

Set-up (untimed): the rows (an f32 embedding of `dim` and an i64 label) are written by each
library's own writer into shards of about 64 MB (gpucache.pack --shard-size 64M, MDSWriter
size_limit 64 MB, litdata.optimize chunk_bytes 64MB) and put into the bucket (gpucache.push; boto3
upload_file for the peers). Each timed run is a fresh process with an empty cache folder, so every
byte comes from the server: the clock runs from creating the dataset to the last row of the epoch
(shuffled, batch_size rows a batch, each batch's tensors touched), process start and imports
excluded. The server counts the requests and response bytes of each run. Runs are interleaved
(gpucache, streaming, litdata, gpucache, ...) so that the drift of a shared machine hits all alike.
Peers run in the main process (DataLoader num_workers=0), as gpucache.stream does with its own
reader threads.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

BUCKET = "bench"
SHARD_BYTES = 64 << 20


# ---------------------------------------------------------------------------------------------
# The server: moto's S3 app behind a WSGI layer that counts requests and response bytes.


def serve(port_file: Path) -> None:
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    app = DomainDispatcherApplication(create_backend_app)
    lock = threading.Lock()
    counts = {"requests": 0, "gets": 0, "lists": 0, "bytes": 0}

    def counted(environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path.startswith("/__bench__/"):
            with lock:
                body = json.dumps(counts).encode()
                if path.endswith("/reset"):
                    for key in counts:
                        counts[key] = 0
            start_response("200 OK", [("Content-Length", str(len(body)))])
            return [body]
        method, query = environ.get("REQUEST_METHOD"), environ.get("QUERY_STRING", "")
        # GET of a bucket (/bench or /bench/) or with list-type: a LIST request.
        listing = method == "GET" and (path.rstrip("/").count("/") <= 1 or "list-type" in query)
        with lock:
            counts["requests"] += 1
            counts["gets"] += method == "GET"
            counts["lists"] += listing

        def add(data):
            with lock:
                counts["bytes"] += len(data)
            return data

        return (add(chunk) for chunk in app(environ, start_response))

    server = make_server("127.0.0.1", 0, counted, threaded=True)
    port_file.write_text(str(server.server_address[1]))
    server.serve_forever()


class Server:
    def __init__(self, scratch: Path):
        port_file = scratch / "port"
        port_file.unlink(missing_ok=True)
        self.process = subprocess.Popen([sys.executable, __file__, "--serve", str(port_file)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(600):
            if port_file.exists() and port_file.read_text():
                break
            time.sleep(0.05)
        self.port = int(port_file.read_text())
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def counts(self, reset=False) -> dict:
        path = "reset" if reset else "counts"
        with urllib.request.urlopen(f"{self.endpoint}/__bench__/{path}") as response:
            return json.loads(response.read())

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=30)


def s3_environment(endpoint: str) -> dict:
    return {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": endpoint, "S3_ENDPOINT_URL": endpoint}


# ---------------------------------------------------------------------------------------------
# Set-up: the same rows written by each library, put into the bucket.


def make_rows(rows: int, dim: int):
    import numpy as np
    rng = np.random.default_rng(30)
    emb = rng.standard_normal((rows, dim), dtype=np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)  # valid rows: every writer keeps them all
    return emb, rng.integers(0, 1000, rows, dtype=np.int64)


def upload(folder: Path, prefix: str) -> None:
    import boto3
    client = boto3.client("s3")
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            client.upload_file(str(path), BUCKET, f"{prefix}/{path.relative_to(folder)}")


def write_gpucache(emb, label, out: Path) -> None:
    import gpucache
    gpucache.pack({"emb": emb, "label": label}, out, shard_size="64M")
    gpucache.push(out, f"s3://{BUCKET}/gpucache")


def write_mds(emb, label, out: Path) -> None:
    from streaming import MDSWriter
    with MDSWriter(out=str(out), columns={"emb": "ndarray:float32", "label": "int64"},
                   compression=None, size_limit=SHARD_BYTES) as writer:
        for i in range(len(label)):
            writer.write({"emb": emb[i], "label": int(label[i])})
    upload(out, "mds")


_LIT: dict = {}
LIT_BLOCK = 8192


def _lit_rows(start: int):
    emb, label = _LIT["emb"], _LIT["label"]
    for i in range(start, min(start + LIT_BLOCK, len(label))):
        yield {"emb": emb[i], "label": int(label[i])}


def write_litdata(emb, label, out: Path) -> None:
    from litdata import optimize
    _LIT.update(emb=emb, label=label)
    # fork: the worker sees the rows in _LIT without pickling them.
    optimize(fn=_lit_rows, inputs=list(range(0, len(label), LIT_BLOCK)), output_dir=str(out),
             chunk_bytes="64MB", num_workers=1, mode="overwrite", start_method="fork")
    _LIT.clear()
    upload(out, "litdata")


# ---------------------------------------------------------------------------------------------
# One timed run (a process of its own): the epoch's rows, from an empty cache.


def read(name: str, url: str, cache: Path, batch_size: int) -> dict:
    import torch
    rows = 0
    checksum = 0.0
    if name == "gpucache":
        import gpucache
        start = time.perf_counter()
        stream = gpucache.stream(url, device="cpu", batch_size=batch_size, shuffle=True, seed=0,
                                 cache_dir=cache)
        for batch in stream:
            rows += len(batch["label"])
            checksum += float(batch["emb"][:, 0].sum())
    elif name == "streaming":
        from streaming import StreamingDataset
        start = time.perf_counter()
        dataset = StreamingDataset(remote=url, local=str(cache), shuffle=True, shuffle_seed=0,
                                   batch_size=batch_size)
        loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, num_workers=0)
        for batch in loader:
            rows += len(batch["label"])
            checksum += float(batch["emb"][:, 0].sum())
    elif name == "litdata":
        from litdata import StreamingDataset
        from litdata.streaming.resolver import Dir
        start = time.perf_counter()
        dataset = StreamingDataset(Dir(path=str(cache), url=url), shuffle=True, seed=0)
        # litdata's StreamingDataLoader asks torch 1.13 for prefetch_factor without workers,
        # which it refuses: torch's DataLoader over the same IterableDataset.
        loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, num_workers=0)
        for batch in loader:
            rows += len(batch["label"])
            checksum += float(batch["emb"][:, 0].sum())
    else:
        raise ValueError(name)
    seconds = time.perf_counter() - start
    return {"rows": rows, "seconds": seconds, "checksum": checksum}


# ---------------------------------------------------------------------------------------------


def versions() -> dict:
    out = {}
    for module in ("gpucache", "streaming", "litdata", "torch", "moto"):
        try:
            out[module] = __import__(module).__version__
        except Exception as error:  # noqa: BLE001 - reported, not fatal
            out[module] = f"not importable: {error}"
    return out


def measure(args) -> dict:
    scratch = args.scratch.resolve()
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    server = Server(scratch)
    env = dict(os.environ, **s3_environment(server.endpoint))
    os.environ.update(s3_environment(server.endpoint))
    try:
        import boto3
        boto3.client("s3").create_bucket(Bucket=BUCKET)
        emb, label = make_rows(args.rows, args.dim)
        names = ["gpucache", "streaming", "litdata"]
        writers = {"gpucache": write_gpucache, "streaming": write_mds, "litdata": write_litdata}
        urls = {"gpucache": f"s3://{BUCKET}/gpucache", "streaming": f"s3://{BUCKET}/mds",
                "litdata": f"s3://{BUCKET}/litdata"}
        unavailable, written_bytes = {}, {}
        for name in names:
            out = scratch / f"written-{name}"
            try:
                writers[name](emb, label, out)
                written_bytes[name] = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
            except Exception as error:  # noqa: BLE001 - recorded as not available
                unavailable[name] = f"{type(error).__name__}: {error}"
        del emb, label
        results = {name: [] for name in names if name not in unavailable}
        failed = {}
        for rep in range(args.reps):
            for name in list(results):
                cache = scratch / f"cache-{name}"
                shutil.rmtree(cache, ignore_errors=True)
                cache.mkdir()
                server.counts(reset=True)
                command = ["nice", "-n", str(args.nice), sys.executable, __file__, "--read",
                           name, "--url", urls[name], "--cache", str(cache), "--batch-size",
                           str(args.batch_size)]
                done = subprocess.run(command, env=env, capture_output=True, text=True)
                counts = server.counts()
                shutil.rmtree(cache, ignore_errors=True)
                if done.returncode != 0:
                    failed[name] = done.stderr[-2000:]
                    del results[name]
                    continue
                run = json.loads(done.stdout.strip().splitlines()[-1])
                run.update(counts)
                results[name].append(run)
                print(f"remote: rep {rep} {name}: {run['rows'] / run['seconds']:,.0f} rows/s, "
                      f"{counts['requests']} requests, {counts['bytes'] / 2**20:.0f} MiB",
                      file=sys.stderr, flush=True)
        return {"rows": args.rows, "dim": args.dim, "batch_size": args.batch_size,
                "reps": args.reps, "versions": versions(), "written_bytes": written_bytes,
                "unavailable": unavailable, "failed": failed, "results": results}
    finally:
        server.stop()
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--serve", type=Path)
    parser.add_argument("--read")
    parser.add_argument("--url")
    parser.add_argument("--cache", type=Path)
    parser.add_argument("--scratch", type=Path)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--nice", type=int, default=19)
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return 0
    if args.read:
        print(json.dumps(read(args.read, args.url, args.cache, args.batch_size)))
        return 0
    if not args.scratch:
        parser.error("--scratch is required")
    # The writers print (litdata's workers too): everything but the result goes to stderr.
    result = os.dup(1)
    os.dup2(2, 1)
    try:
        text = json.dumps(measure(args))
    finally:
        sys.stdout.flush()
        os.dup2(result, 1)
    print(text, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
