"""`gpucache export` read back by the real libraries: numpy for .npy files, and huggingface's
`safetensors` package (tests skip when it is not installed; scripts/test.sh installs it) for
.safetensors files. The dataset has a column of every kind export writes (written by
gpucache_make_export_dataset, tests/export_test_dataset.hpp, whose formulas expected() repeats);
a packed dataset is re-packed from its own export."""
import json
import subprocess
import zipfile

import numpy
import pytest

from conftest import _tool, pack

ROWS = 23
SHARD_ROWS = 10  # three shards, the last one partial


def gpucache(*args):
    return subprocess.run([str(_tool("src/cli/gpucache")), *map(str, args)], check=True,
                          capture_output=True, text=True)


def expected(rows=ROWS):
    """Every array the export must hold, named as in the safetensors file, from the formulas of
    tests/export_test_dataset.hpp. Floats are exact in their dtypes (bf16 ones as f32)."""
    r = numpy.arange(rows)
    per_row = lambda count, value: [value(row, k) for row in range(rows) for k in range(count(row))]
    offsets = lambda count: numpy.concatenate([[0], numpy.cumsum([count(row) for row in range(rows)])])
    captions = ["" if row % 5 == 3 else f"row {row} ✓" for row in range(rows)]
    encoded = [caption.encode() for caption in captions]
    return {
        "image": ((7 * r[:, None] + numpy.arange(60)) % 251).astype(numpy.uint8).reshape(rows, 3, 4, 5),
        "pixels": (r[:, None] + numpy.arange(6) / 8).astype(numpy.float32).reshape(rows, 2, 3),
        "patches": (r[:, None] - numpy.arange(6) / 4).astype(numpy.float32).reshape(rows, 2, 3),
        "embedding": (r[:, None] % 32 + numpy.arange(5) / 4 - 2).astype(numpy.float32),  # bf16
        "half": (r[:, None] / 2 + numpy.arange(3)).astype(numpy.float16),
        "dense": (10 * r[:, None] + numpy.arange(7)).astype(numpy.float32),
        "label": (7 * r - 3).astype(numpy.int64),
        "flag": r % 3 == 0,
        "tokens.values": numpy.array(per_row(lambda row: row % 4, lambda row, k: 100 * row + k),
                                     dtype=numpy.int32),
        "tokens.offsets": offsets(lambda row: row % 4).astype(numpy.int64),
        "weights.values": numpy.array(per_row(lambda row: row % 3, lambda row, k: row + k / 2),
                                      dtype=numpy.float32),  # bf16
        "weights.offsets": offsets(lambda row: row % 3).astype(numpy.int64),
        "caption.bytes": numpy.frombuffer(b"".join(encoded), dtype=numpy.uint8),
        "caption.offsets": numpy.concatenate([[0], numpy.cumsum([len(e) for e in encoded])]).astype(numpy.int64),
        "captions": captions,
    }


BF16 = {"embedding", "weights.values"}


@pytest.fixture(scope="module", params=[0, 3], ids=["raw", "zstd"])
def every_kind(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("every_kind") / "ds"
    subprocess.run([str(_tool("tests/gpucache_make_export_dataset")), str(out), str(ROWS),
                    str(SHARD_ROWS), str(request.param)], check=True)
    return out


def assert_same(actual, wanted, name):
    assert actual.shape == wanted.shape, name
    assert actual.dtype == wanted.dtype, name
    assert numpy.array_equal(actual, wanted), name


def test_npy_files_load_with_numpy(every_kind, tmp_path):
    result = json.loads(gpucache("export", every_kind, "--to", "npy", tmp_path, "--json").stdout)
    assert result["format"] == "npy" and result["rows"] == ROWS
    want = expected()
    for name, array in want.items():
        if name.startswith("caption"):
            continue
        assert_same(numpy.load(tmp_path / f"{name}.npy"), array, name)
    lines = (tmp_path / "caption.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == want["captions"]
    widened = {entry["path"].rsplit("/", 1)[1]: entry.get("note") for entry in result["files"]}
    assert widened["embedding.npy"] == "bf16 widened to f32: numpy has no bf16"
    assert widened["label.npy"] is None


def test_safetensors_numpy_load_file(every_kind, tmp_path):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    from safetensors import safe_open
    want = expected()
    # numpy has no bf16, so safetensors.numpy cannot load those two tensors: leave them out.
    columns = ["image", "pixels", "patches", "half", "dense", "label", "flag", "tokens", "caption"]
    path = tmp_path / "out.safetensors"
    gpucache("export", every_kind, "--to", "safetensors", path,
             *[arg for column in columns for arg in ("--column", column)])
    loaded = safetensors_numpy.load_file(str(path))
    assert sorted(loaded) == sorted(name for name in want if name not in BF16 | {"weights.offsets", "captions"})
    for name, array in loaded.items():
        assert_same(array, want[name], name)
    with safe_open(str(path), framework="np") as opened:
        metadata = opened.metadata()
    assert metadata["gpucache.rows"] == str(ROWS)
    manifest = json.loads((every_kind / "manifest.json").read_text())
    assert metadata["gpucache.manifest_hash"] == manifest["manifest_hash"]
    described = {column["name"]: column for column in json.loads(metadata["gpucache.columns"])}
    assert described["tokens"]["kind"] == "sequence"
    assert described["tokens"]["shape"] == [ROWS, None]
    assert described["tokens"]["tensors"] == {"values": "tokens.values", "offsets": "tokens.offsets"}
    assert described["caption"]["tensors"] == {"bytes": "caption.bytes", "offsets": "caption.offsets"}
    offsets = loaded["caption.offsets"]
    text = loaded["caption.bytes"].tobytes()
    assert [text[offsets[i]:offsets[i + 1]].decode() for i in range(ROWS)] == want["captions"]


def test_safetensors_torch_load_file_keeps_bf16(every_kind, tmp_path):
    safetensors_torch = pytest.importorskip("safetensors.torch")
    import torch
    path = tmp_path / "all.safetensors"
    gpucache("export", every_kind, "--to", "safetensors", path)
    loaded = safetensors_torch.load_file(str(path))
    want = expected()
    assert sorted(loaded) == sorted(name for name in want if name != "captions")
    for name, tensor in loaded.items():
        if name in BF16:
            assert tensor.dtype == torch.bfloat16, name
            assert_same(tensor.float().numpy(), want[name], name)
        else:
            assert_same(tensor.numpy(), want[name], name)


def test_npy_export_repacks_to_the_same_columns(text_dataset, tmp_path):
    """The .npy files of an export, stored unchanged in an .npz, pack back into the same columns
    (a vector column and a scalar one)."""
    gpucache("export", text_dataset, "--to", "npy", tmp_path / "a")
    archive = tmp_path / "a.npz"
    with zipfile.ZipFile(archive, "w") as npz:
        for name in ("emb", "label"):
            npz.write(tmp_path / "a" / f"{name}.npy", f"{name}.npy")
    pack([archive], tmp_path / "b", "--field", "embedding=emb", "--field", "label=label",
         "--norm-max", "1e9")
    gpucache("export", tmp_path / "b", "--to", "npy", tmp_path / "b_npy")
    assert_same(numpy.load(tmp_path / "b_npy" / "embedding.npy"), numpy.load(tmp_path / "a" / "emb.npy"),
                "emb")
    assert_same(numpy.load(tmp_path / "b_npy" / "label.npy"), numpy.load(tmp_path / "a" / "label.npy"),
                "label")


def test_safetensors_export_of_a_packed_dataset(packed, tmp_path):
    """A dataset pack wrote (an f32 embedding padded to 16, i32 and i64 provenance columns)."""
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    path = tmp_path / "packed.safetensors"
    gpucache("export", packed, "--to", "safetensors", path)
    loaded = safetensors_numpy.load_file(str(path))
    gpucache("export", packed, "--to", "npy", tmp_path / "npy")
    assert sorted(loaded) == ["@source", "@source_row", "embedding"]
    for name, array in loaded.items():
        assert_same(array, numpy.load(tmp_path / "npy" / f"{name}.npy"), name)
    assert loaded["embedding"].shape == (103, 10)
    assert loaded["@source_row"].dtype == numpy.int64


def test_empty_dataset_exports_empty_tensors(tmp_path):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    subprocess.run([str(_tool("tests/gpucache_make_export_dataset")), str(tmp_path / "ds"), "0",
                    "10"], check=True)
    gpucache("export", tmp_path / "ds", "--to", "safetensors", tmp_path / "empty.safetensors",
             "--column", "image", "--column", "tokens", "--column", "caption")
    loaded = safetensors_numpy.load_file(str(tmp_path / "empty.safetensors"))
    assert {name: array.shape for name, array in loaded.items()} == {
        "image": (0, 3, 4, 5), "tokens.values": (0,), "tokens.offsets": (1,),
        "caption.bytes": (0,), "caption.offsets": (1,)}
    assert loaded["tokens.offsets"].tolist() == [0]
