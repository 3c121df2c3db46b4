"""gpucache.pack, verify, inspect, probe and export from Python: the same library as the CLI, so
each result is compared with what the real `gpucache ... --json` prints for the same job."""
import json
import subprocess

import numpy
import pytest

import gpucache
from conftest import _tool, embeddings


def cli_json(*args):
    result = subprocess.run([str(_tool("src/cli/gpucache")), *map(str, args), "--json"],
                            capture_output=True, text=True)
    return result.returncode, json.loads(result.stdout)


def without_paths(result):
    """A pack result with its output paths removed, to compare two packs of the same job."""
    result = dict(result)
    result.pop("output")
    return result


@pytest.fixture
def npy_input(tmp_path):
    vectors = embeddings(50, 12)
    vectors[7, 3] = numpy.nan
    vectors[9] = 0
    numpy.save(tmp_path / "emb.npy", vectors)
    return tmp_path / "emb.npy"


def test_pack_returns_what_the_cli_prints(tmp_path, npy_input):
    result = gpucache.pack(npy_input, tmp_path / "py", dtype="f16", shard_rows=16, device="cpu",
                           rejects=tmp_path / "rejects.jsonl")
    code, expected = cli_json("pack", npy_input, "-o", tmp_path / "cli", "--dtype", "f16",
                              "--shard-rows", 16, "--device", "cpu")
    assert code == 0
    assert without_paths(result) == without_paths(expected)
    assert result["rows"] == 48
    assert result["dropped"]["nan_inf"] == 1 and result["dropped"]["zero"] == 1
    assert result["device"] == {"name": "cpu", "reason": "--device cpu"}
    assert len((tmp_path / "rejects.jsonl").read_text().splitlines()) == 2
    # The shards are byte for byte the CLI's.
    for shard in expected["shards"]:
        assert ((tmp_path / "py" / shard["file"]).read_bytes()
                == (tmp_path / "cli" / shard["file"]).read_bytes())


def test_verify_inspect_probe_export(tmp_path, npy_input):
    gpucache.pack(npy_input, tmp_path / "ds")
    report = gpucache.verify(tmp_path / "ds")
    assert report["ok"] is True and report["problems"] == []
    assert gpucache.verify(tmp_path / "ds", deep=True)["ok"] is True
    inspected = gpucache.inspect(tmp_path / "ds")
    assert inspected == cli_json("inspect", tmp_path / "ds")[1]
    assert inspected["rows"] == 48
    probed = gpucache.probe(npy_input)
    assert probed == cli_json("probe", npy_input)[1][0]
    assert gpucache.probe([npy_input, npy_input]) == [probed, probed]
    exported = gpucache.export(tmp_path / "ds", to="npy", out=tmp_path / "out")
    assert exported["ok"] is True
    back = numpy.load(tmp_path / "out" / "embedding.npy")
    kept = numpy.delete(embeddings(50, 12), [7, 9], axis=0)
    numpy.testing.assert_array_equal(back, kept)


def test_corruption_is_reported_not_raised(tmp_path, npy_input):
    gpucache.pack(npy_input, tmp_path / "ds")
    shard = tmp_path / "ds" / "shard-00000.gcs"
    data = bytearray(shard.read_bytes())
    data[-100] ^= 1
    shard.write_bytes(bytes(data))
    report = gpucache.verify(tmp_path / "ds")
    assert report["ok"] is False and report["problems"]


def test_failures_raise_gpucache_error_with_parts(tmp_path):
    with pytest.raises(gpucache.Error) as raised:
        gpucache.inspect(tmp_path / "missing")
    assert isinstance(raised.value, RuntimeError)
    assert raised.value.file is not None and "missing" in raised.value.file
    assert raised.value.cause and raised.value.cause in str(raised.value)
    with pytest.raises(gpucache.Error, match="unknown options: colour"):
        gpucache.pack({"x": numpy.zeros((3, 4), numpy.float32)}, tmp_path / "o", colour="red")
    with pytest.raises(gpucache.Error, match="--device must be auto, cpu or cuda"):
        gpucache.pack({"x": numpy.ones((3, 4), numpy.float32)}, tmp_path / "o", device="tpu")
    with pytest.raises(gpucache.Error, match="to must be npy or safetensors"):
        gpucache.export(tmp_path, to="csv", out=tmp_path / "x")


def test_progress_callback_counts_input_bytes_once(tmp_path, npy_input):
    reports = []
    gpucache.pack(npy_input, tmp_path / "ds", progress=lambda done, total: reports.append(
        (done, total)))
    size = npy_input.stat().st_size
    assert reports and reports[-1] == (size, size)
    assert all(total == size and 0 <= done <= total for done, total in reports)
    assert [done for done, _ in reports] == sorted(done for done, _ in reports)
    verified = []
    gpucache.verify(tmp_path / "ds", progress=lambda done, total: verified.append((done, total)))
    assert verified and verified[-1][0] == verified[-1][1] > 0


def test_a_callback_that_raises_stops_the_pack(tmp_path, npy_input):
    def stop(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        gpucache.pack(npy_input, tmp_path / "ds", progress=stop)
    assert not (tmp_path / "ds" / "manifest.json").exists()


def test_progress_true_draws_a_tqdm_bar(tmp_path, npy_input, capsys):
    tqdm = pytest.importorskip("tqdm")
    assert tqdm
    gpucache.pack(npy_input, tmp_path / "ds", progress=True)
    assert "pack" in capsys.readouterr().err


def test_max_output_caps_the_shards_pack_writes(tmp_path, npy_input):
    packed = gpucache.pack(npy_input, tmp_path / "fits", device="cpu")
    # A cap of exactly the bytes written passes; one byte less refuses the run before a shard is
    # written, naming the exact figure (docs/cli.md, "The output is checked before it is made").
    assert gpucache.pack(npy_input, tmp_path / "exact", device="cpu",
                         max_output=packed["bytes"])["bytes"] == packed["bytes"]
    with pytest.raises(gpucache.Error, match=f"\\({packed['bytes']} bytes\\) of shards"):
        gpucache.pack(npy_input, tmp_path / "below", device="cpu", max_output=packed["bytes"] - 1)
    assert not (tmp_path / "below").exists()
    with pytest.raises(gpucache.Error, match="more than the cap of 1.0 KiB"):
        gpucache.pack({"x": numpy.ones((100, 4), numpy.float32)}, tmp_path / "mem",
                      max_output="1K")
    assert gpucache.pack({"x": numpy.ones((100, 4), numpy.float32)}, tmp_path / "none",
                         max_output="none")["rows"] == 100
    with pytest.raises(gpucache.Error, match="--max-output 'lots' is not a size"):
        gpucache.pack(npy_input, tmp_path / "bad", max_output="lots")


def test_no_fsync_writes_the_same_dataset(tmp_path, npy_input):
    # What --no-fsync skips (every fsync) is counted in tests/test_pack_durability.cpp; here the
    # keyword reaches the same library and changes no byte.
    synced = gpucache.pack(npy_input, tmp_path / "synced", shard_rows=16, device="cpu")
    unsynced = gpucache.pack(npy_input, tmp_path / "unsynced", shard_rows=16, device="cpu",
                             no_fsync=True)
    assert without_paths(unsynced) == without_paths(synced)
    for name in [shard["file"] for shard in synced["shards"]] + ["manifest.json"]:
        assert (tmp_path / "unsynced" / name).read_bytes() == (tmp_path / "synced" / name).read_bytes()
    assert gpucache.verify(tmp_path / "unsynced")["ok"]
