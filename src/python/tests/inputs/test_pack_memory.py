"""gpucache.pack from memory: numpy arrays, torch tensors, lists of str and of int lists, and
VarColumn pack to the same values as the equivalent .npy input, through the same checks, with
provenance "memory:NAME"."""
import sys
import types

import numpy
import pytest
import torch

import gpucache
from conftest import embeddings


def as_numpy(tensor):
    return tensor.numpy() if hasattr(tensor, "numpy") else numpy.asarray(tensor)


def loaded(path):
    return gpucache.load(path, device=torch.device("cpu"))


def test_numpy_packs_like_the_same_npy_file(tmp_path):
    vectors = embeddings(40, 24)
    vectors[5, 0] = numpy.inf
    numpy.save(tmp_path / "emb.npy", vectors)
    from_file = gpucache.pack(tmp_path / "emb.npy", tmp_path / "file", dtype="f16")
    from_memory = gpucache.pack({"embedding": vectors}, tmp_path / "memory", dtype="f16")
    assert from_memory["rows"] == from_file["rows"] == 39
    assert from_memory["dropped"] == from_file["dropped"]
    numpy.testing.assert_array_equal(as_numpy(loaded(tmp_path / "memory").tensors["embedding"]),
                                     as_numpy(loaded(tmp_path / "file").tensors["embedding"]))
    inputs = gpucache.inspect(tmp_path / "memory")["provenance"]["inputs"]
    assert [entry["path"] for entry in inputs] == ["memory:embedding"]
    assert inputs[0]["bytes"] == vectors.nbytes


def test_torch_tensors_of_any_layout(tmp_path):
    base = torch.from_numpy(embeddings(32, 16))
    columns = {
        "embedding": base.clone().requires_grad_(True),   # detached for DLPack
        "images": torch.arange(32 * 12, dtype=torch.uint8).reshape(32, 3, 4),
        "weights": torch.linspace(0, 1, 32).to(torch.bfloat16),
        "flag": torch.arange(32) % 3 == 0,
        "strided": torch.arange(64, dtype=torch.int32).reshape(2, 32).t(),  # not contiguous
    }
    result = gpucache.pack(columns, tmp_path / "ds", device="cpu")
    assert result["rows"] == 32
    ds = loaded(tmp_path / "ds")
    torch.testing.assert_close(ds.tensors["embedding"], base, rtol=0, atol=0)
    assert torch.equal(ds.tensors["images"], columns["images"])
    assert torch.equal(ds.tensors["weights"], columns["weights"])
    assert torch.equal(ds.tensors["flag"], columns["flag"])
    assert torch.equal(ds.tensors["strided"], columns["strided"].contiguous())
    roles = {c["name"]: c["role"] for c in gpucache.inspect(tmp_path / "ds")["columns"]}
    assert roles["embedding"] == "embedding" and roles["images"] == "tensor"


def test_lists_of_text_and_token_ids(tmp_path):
    texts = ["hello", "", "naïve ✓", "x" * 300]
    tokens = [[1, 2, 3], [], [2 ** 40], [7] * 9]
    vectors = embeddings(4, 8)
    result = gpucache.pack({"embedding": vectors, "text": texts, "tokens": tokens},
                           tmp_path / "ds")
    assert result["rows"] == 4
    ds = loaded(tmp_path / "ds")
    assert ds.texts("text") == texts
    sequences = ds.sequences["tokens"]
    values, offsets = as_numpy(sequences.values), as_numpy(sequences.offsets)
    assert [values[offsets[i]:offsets[i + 1]].tolist() for i in range(4)] == tokens


def test_var_columns_and_fields_and_roles(tmp_path):
    words = ["a", "bb", "", "dddd"]
    data = "".join(words).encode()
    text = gpucache.VarColumn(offsets=numpy.array([0, 1, 3, 3, 7]),
                              values=numpy.frombuffer(data, numpy.uint8), kind="text")
    ids = gpucache.VarColumn(offsets=numpy.array([0, 2, 2, 3, 6], numpy.int64),
                             values=numpy.arange(6, dtype=numpy.int16), kind="sequence")
    result = gpucache.pack({"vec": embeddings(4, 8), "caption": text, "ids": ids},
                           tmp_path / "ds", fields={"embedding": "vec", "caption": "caption",
                                                    "ids": "ids"})
    assert result["rows"] == 4
    ds = loaded(tmp_path / "ds")
    assert ds.texts("caption") == words
    assert as_numpy(ds.sequences["ids"].values).dtype == numpy.int16
    # The one float vector column is the embedding by role, under its own name (as an HDF5 file's
    # arrays); roles= makes it a plain tensor.
    gpucache.pack({"vec": embeddings(4, 8)}, tmp_path / "e")
    column = gpucache.inspect(tmp_path / "e")["columns"][0]
    assert (column["name"], column["role"]) == ("vec", "embedding")
    gpucache.pack({"vec": embeddings(4, 8)}, tmp_path / "t", roles={"vec": "tensor"})
    column = gpucache.inspect(tmp_path / "t")["columns"][0]
    assert (column["name"], column["role"]) == ("vec", "tensor")


def test_memory_columns_are_checked(tmp_path):
    bad_offsets = gpucache.VarColumn(offsets=numpy.array([0, 2, 1]),
                                     values=numpy.zeros(2, numpy.int32), kind="sequence")
    with pytest.raises(gpucache.Error, match="memory:ids: offsets\\[2\\]"):
        gpucache.pack({"ids": bad_offsets}, tmp_path / "a")
    bad_text = gpucache.VarColumn(offsets=numpy.array([0, 2]),
                                  values=numpy.array([0xC3, 0x28], numpy.uint8), kind="text")
    with pytest.raises(gpucache.Error, match="memory:t: row 0: is not valid UTF-8"):
        gpucache.pack({"e": embeddings(1, 4), "t": bad_text}, tmp_path / "b")
    with pytest.raises(gpucache.Error, match="disagree on the number of rows"):
        gpucache.pack({"e": embeddings(3, 4), "f": embeddings(4, 4)}, tmp_path / "c")
    with pytest.raises(gpucache.Error, match="no row is kept"):
        gpucache.pack({"embedding": numpy.zeros((5, 4), numpy.float32)}, tmp_path / "d")
    with pytest.raises(gpucache.Error, match="empty dict"):
        gpucache.pack({}, tmp_path / "e")
    with pytest.raises(gpucache.Error, match="kind must be 'text' or 'sequence'"):
        gpucache.pack({"v": gpucache.VarColumn(numpy.array([0]), numpy.zeros(0), "bytes")},
                      tmp_path / "f")
    assert not any((tmp_path / name).exists() for name in "abcdef")


def test_tables_go_through_gpucache_arrow(tmp_path, monkeypatch):
    """pyarrow tables, HF datasets and Arrow files are handed to gpucache._arrow.table_columns,
    whose dict of arrays and VarColumns is packed as memory columns."""
    seen = []

    def table_columns(source):
        seen.append(source)
        return {"embedding": embeddings(6, 8),
                "text": gpucache.VarColumn(numpy.arange(7, dtype=numpy.int64),
                                           numpy.frombuffer(b"abcdef", numpy.uint8), "text")}

    module = types.ModuleType("gpucache._arrow")
    module.table_columns = table_columns
    monkeypatch.setitem(sys.modules, "gpucache._arrow", module)
    result = gpucache.pack(str(tmp_path / "part.arrow"), tmp_path / "ds")
    assert seen == [str(tmp_path / "part.arrow")] and result["rows"] == 6
    assert loaded(tmp_path / "ds").texts("text") == list("abcdef")


def test_load_takes_a_torch_device_and_refuses_unknown_choices(tmp_path):
    gpucache.pack({"embedding": embeddings(8, 4)}, tmp_path / "ds")
    assert loaded(tmp_path / "ds").device == "cpu"
    with pytest.raises(gpucache.Error, match="placement='host-pinned' is not one of"):
        gpucache.load(tmp_path / "ds", device="cpu", placement="host-pinned")
    with pytest.raises(gpucache.Error, match="read_mode='fast' is not one of"):
        gpucache.load(tmp_path / "ds", device="cpu", read_mode="fast")


def test_pack_refuses_a_folder_of_other_files(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(gpucache.Error, match="is not empty and holds no gpucache dataset"):
        gpucache.pack({"embedding": embeddings(8, 4)}, tmp_path, force=True)


PEAK = """
import resource, sys, numpy, gpucache
array = numpy.full((1024 * 1024, 256), 0.05, dtype=numpy.float32)   # 1 GiB, norms 0.8
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
gpucache.pack({"embedding": array}, sys.argv[1], dtype="f16")
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((after - before) * 1024 / array.nbytes)
"""


def test_packing_an_array_does_not_copy_it(tmp_path):
    """The array (1 GiB, as the issue asks) is read where it lies: the peak memory of packing it
    grows by far less than the array (the issue's bound: 1.3x the tensor in all, so under 0.3x
    more)."""
    import subprocess
    growth = subprocess.run([sys.executable, "-c", PEAK, str(tmp_path / "ds")], check=True,
                            capture_output=True, text=True).stdout
    assert float(growth) < 0.3, growth


def test_a_table_without_arrow_support_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "gpucache._arrow", None)  # import fails
    with pytest.raises(gpucache.Error, match="needs pyarrow and gpucache's Arrow support"):
        gpucache.pack(str(tmp_path / "part.arrow"), tmp_path / "ds")


def test_split_by_a_column_in_memory(tmp_path):
    # A dict of columns and a pyarrow table split by their own column, as a file is: one dataset
    # per value, the column kept, integers named in decimal.
    vectors = embeddings(12, 8)
    split = ["train", "val", "test", "train"] * 3
    fold = numpy.arange(12, dtype=numpy.int32) % 3 - 1
    result = gpucache.pack({"embedding": vectors, "split": split, "fold": fold}, tmp_path / "ds",
                           split_by="split")
    assert result["split_by"] == "split"
    assert [(s["name"], s["value"], s["rows"]) for s in result["splits"]] == [
        ("test", "test", 3), ("train", "train", 6), ("val", "val", 3)]
    for entry in result["splits"]:
        ds = loaded(entry["output"])
        rows = [i for i in range(12) if split[i] == entry["name"]]
        assert ds.texts("split") == [entry["name"]] * len(rows)
        assert numpy.array_equal(as_numpy(ds.tensors["embedding"]), vectors[rows])
    by_fold = gpucache.pack({"embedding": vectors, "fold": fold}, tmp_path / "folds",
                            split_by="fold")
    assert [(s["name"], s["value"]) for s in by_fold["splits"]] == [("-1", -1), ("0", 0), ("1", 1)]
    with pytest.raises(gpucache.Error, match="--split and --split-by cannot be combined"):
        gpucache.pack({"embedding": vectors, "split": split}, tmp_path / "both",
                      split_by="split", split={"a": 0.5, "b": 0.5})
    with pytest.raises(gpucache.Error, match="column 'embedding': holds 8 values per row"):
        gpucache.pack({"embedding": vectors}, tmp_path / "vec", split_by="embedding")
    pyarrow = pytest.importorskip("pyarrow")
    table = pyarrow.table({"embedding": pyarrow.array(list(vectors), pyarrow.list_(pyarrow.float32())),
                           "split": split})
    from_table = gpucache.pack(table, tmp_path / "table", split_by="split")
    assert [s["rows"] for s in from_table["splits"]] == [3, 6, 3]
