"""A PostgreSQL table packed the way docs/python.md ("Databases") shows: a real server started
here in a temporary directory (initdb and pg_ctl from Debian's postgresql package, on 127.0.0.1
at a free port, its unix socket in the same directory), read with psycopg from PyPI into a
pyarrow table, written as Parquet and packed with split_by="split" (and, for the NULL rows, also
passed to pack directly: the same rows are dropped); the timestamptz column is kept with its unit
and zone. Skips when the server
binaries, psycopg or pyarrow are missing. Starting and stopping the server takes about 2 s."""
import datetime
import glob
import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile

import numpy
import pytest
import torch

import gpucache

psycopg = pytest.importorskip("psycopg")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

ROWS = 30
SPLITS = ("train", "val", "test")
# The rows holding a NULL, by id: each is dropped with the reason `null`, naming its column.
NULL_FEATURES, NULL_LABEL, NULL_SPLIT = 3, 7, 11
NULLS = {NULL_FEATURES: "features", NULL_LABEL: "label", NULL_SPLIT: "split"}
PACKED_COLUMNS = ("id", "features", "label", "split", "created_at")
# created_at of row i: 2026-01-01 00:00 at UTC+2, plus i hours, in microseconds since the epoch
# (timestamptz is an instant; psycopg gives it as an aware datetime, pyarrow keeps it in UTC).
FIRST_INSTANT_US = int(datetime.datetime(2025, 12, 31, 22, tzinfo=datetime.timezone.utc)
                       .timestamp()) * 1_000_000


def _server_bin():
    """The folder holding initdb and pg_ctl: on PATH, else Debian's /usr/lib/postgresql/*/bin."""
    found = shutil.which("initdb")
    candidates = [os.path.dirname(os.path.realpath(found))] if found else []
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for folder in candidates:
        if all(os.access(os.path.join(folder, tool), os.X_OK) for tool in ("initdb", "pg_ctl")):
            return folder
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _features(i):
    # float4 values exact in f32, so the packed values must equal them bit for bit.
    return [float(i), i + 0.5, -float(i), 1.0]


@pytest.fixture(scope="module")
def server():
    folder = _server_bin()
    if folder is None:
        pytest.skip("PostgreSQL's initdb and pg_ctl are not installed (Debian: postgresql)")
    # initdb refuses to run as root: the server then runs as an unprivileged user.
    run_as = {}
    workdir = tempfile.mkdtemp(prefix="gpucache-pg-")
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            user = pwd.getpwnam("nobody")
        run_as = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
        os.chown(workdir, user.pw_uid, user.pw_gid)
    data = os.path.join(workdir, "data")
    port = _free_port()
    env = {"PATH": os.environ.get("PATH", ""), "LC_ALL": "C"}

    def tool(*args):
        return subprocess.run([os.path.join(folder, args[0]), *args[1:]], env=env,
                              capture_output=True, text=True, timeout=60, **run_as)

    init = tool("initdb", "-D", data, "-U", "gpucache", "--auth=trust", "--no-sync", "-E", "UTF8",
                "--locale=C")
    if init.returncode != 0:
        shutil.rmtree(workdir, ignore_errors=True)
        pytest.fail(f"initdb failed: {init.stderr}")
    options = (f"-c listen_addresses=127.0.0.1 -p {port} -k {workdir} -c fsync=off "
               "-c synchronous_commit=off -c full_page_writes=off")
    start = tool("pg_ctl", "-D", data, "-l", os.path.join(workdir, "server.log"), "-w", "-o",
                 options, "start")
    try:
        if start.returncode != 0:
            with open(os.path.join(workdir, "server.log")) as log:
                pytest.fail(f"pg_ctl start failed: {start.stderr}{log.read()}")
        yield {"host": "127.0.0.1", "port": port, "user": "gpucache", "dbname": "postgres"}
    finally:
        tool("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def table(server):
    """The table: features float4[], int labels, a text split column, a timestamptz column, and
    a NULL feature array, a NULL label and a NULL split."""
    with psycopg.connect(**server) as conn:
        conn.execute("CREATE TABLE samples (id integer PRIMARY KEY, features float4[], "
                     "label integer, split text, created_at timestamptz)")
        with conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO samples VALUES (%s, %s, %s, %s, "
                "timestamptz '2026-01-01 00:00:00+02' + %s * interval '1 hour')",
                [(i, None if i == NULL_FEATURES else _features(i),
                  None if i == NULL_LABEL else i % 5,
                  None if i == NULL_SPLIT else SPLITS[i % 3], i) for i in range(ROWS)])
    return server


def read_table(connection_info, columns):
    """The query into a pyarrow table, as docs/python.md shows it."""
    with psycopg.connect(**connection_info) as conn:
        cursor = conn.execute(f"SELECT {', '.join(columns)} FROM samples ORDER BY id")
        values = list(zip(*cursor.fetchall()))
    types = {"id": pa.int64(), "features": pa.list_(pa.float32()), "label": pa.int64(),
             "split": pa.string(), "created_at": pa.timestamp("us", tz="UTC")}
    return pa.table({name: pa.array(values[i], types[name]) for i, name in enumerate(columns)})


def test_a_postgres_table_packs_into_complete_disjoint_splits(table, tmp_path):
    pq.write_table(read_table(table, PACKED_COLUMNS), tmp_path / "samples.parquet")
    result = gpucache.pack(tmp_path / "samples.parquet", tmp_path / "ds", split_by="split",
                           rejects=tmp_path / "rejects.jsonl")

    # Every NULL row is dropped with the reason `null`, in the result and in the rejects.
    assert result["input_rows"] == ROWS
    assert result["dropped"]["null"] == len(NULLS)
    assert result["rows"] == ROWS - len(NULLS)
    with open(tmp_path / "rejects.jsonl") as rejects:
        rejected = [json.loads(line) for line in rejects]
    assert sorted((r["row"], r["reason"], r["column"]) for r in rejected) == sorted(
        (row, "null", column) for row, column in NULLS.items())

    # One dataset per value, complete and disjoint by id; every value equal to the table's.
    assert result["split_by"] == "split"
    assert [s["name"] for s in result["splits"]] == sorted(SPLITS)
    kept = [i for i in range(ROWS) if i not in NULLS]
    seen = []
    for split in result["splits"]:
        assert split["value"] == split["name"]
        assert gpucache.verify(split["output"])["ok"]
        ds = gpucache.load(split["output"], device=torch.device("cpu"))
        assert set(PACKED_COLUMNS) <= {c["name"] for c in ds.columns}
        ids = ds.tensors["id"].numpy().tolist()
        assert ids == [i for i in kept if SPLITS[i % 3] == split["name"]]
        assert ds.texts("split") == [split["name"]] * len(ids)
        assert ds.tensors["label"].numpy().tolist() == [i % 5 for i in ids]
        features = ds.tensors["features"].numpy()
        assert features.dtype == numpy.float32
        assert numpy.array_equal(features, numpy.array([_features(i) for i in ids], numpy.float32))
        # The timestamps are kept: i64 microseconds since the epoch with their unit and zone.
        times = {c["name"]: c.get("time") for c in ds.meta["columns"]}
        assert times["created_at"] == {"kind": "timestamp", "unit": "us", "tz": "UTC"}
        assert ds.tensors["created_at"].numpy().tolist() == [
            FIRST_INSTANT_US + i * 3_600_000_000 for i in ids]
        meta = ds.meta["split"]
        assert (meta["by"], meta["value"], meta["name"]) == ("split", split["name"], split["name"])
        assert meta["rows"] == {s["name"]: s["rows"] for s in result["splits"]}
        seen += ids
    assert sorted(seen) == kept and len(seen) == len(set(seen))

    # The table passed to pack directly, without the Parquet file, drops the same NULL rows.
    direct = gpucache.pack(read_table(table, PACKED_COLUMNS), tmp_path / "direct",
                           split_by="split")
    assert direct["dropped"]["null"] == len(NULLS)
    assert [s["rows"] for s in direct["splits"]] == [s["rows"] for s in result["splits"]]


def test_null_rows_can_be_refused_and_a_time_column_cannot_split(table, tmp_path):
    pq.write_table(read_table(table, PACKED_COLUMNS), tmp_path / "samples.parquet")
    with pytest.raises(gpucache.Error, match=r"column 'features' row 3.*--on-null error"):
        gpucache.pack(tmp_path / "samples.parquet", tmp_path / "ds", split_by="split",
                      on_null="error")
    assert not (tmp_path / "ds").exists()
    # A timestamp column is no split column: the error names it.
    with pytest.raises(gpucache.Error, match=r"column 'created_at': holds timestamp"):
        gpucache.pack(tmp_path / "samples.parquet", tmp_path / "ts", split_by="created_at")
