"""gpucache.pack on Parquet files: read by the C++ reader (as `gpucache pack` reads them), not by
pyarrow, with the values the .npy twins give; folders of Parquet files; the pyarrow path kept
for builds without the reader; Arrow IPC files memory-mapped through pyarrow."""
import shutil
import sys

import numpy
import pytest

import gpucache
from gpucache import _gpucache

from conftest import ROOT, embeddings, pack

DATA = ROOT / "tests" / "data" / "parquet"
needs_native = pytest.mark.skipif("parquet" not in _gpucache.built_input_formats(),
                                  reason="built without the Parquet reader (libsnappy-dev)")


def input_paths(path):
    return [item["path"] for item in gpucache.inspect(path)["provenance"]["inputs"]]


def packed_column(path, name):
    dataset = gpucache.load(str(path), device="cpu")
    return numpy.asarray(dataset.tensors[name])  # a torch tensor, or numpy's without torch


@needs_native
def test_pack_reads_parquet_natively_without_pyarrow(tmp_path, monkeypatch):
    # pyarrow cannot be imported: the file is read by gpucache's own reader.
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    result = gpucache.pack(DATA / "pack_twin.parquet", tmp_path / "ds")
    assert result["rows"] == 200
    assert input_paths(tmp_path / "ds")[0].endswith("pack_twin.parquet")
    numpy.testing.assert_array_equal(packed_column(tmp_path / "ds", "embedding"),
                                     numpy.load(DATA / "pack_twin.embedding.npy"))
    numpy.testing.assert_array_equal(packed_column(tmp_path / "ds", "label"),
                                     numpy.load(DATA / "pack_twin.label.npy"))


@needs_native
def test_pack_from_parquet_equals_pack_from_npy_through_the_cli(tmp_path):
    numpy.save(tmp_path / "embedding.npy", numpy.load(DATA / "pack_twin.embedding.npy"))
    expected = packed_column(pack([tmp_path / "embedding.npy"], tmp_path / "npy"), "embedding")
    gpucache.pack(str(DATA / "pack_twin.parquet"), tmp_path / "pq", fields={"embedding": "embedding"})
    numpy.testing.assert_array_equal(packed_column(tmp_path / "pq", "embedding"), expected)


@needs_native
def test_a_folder_of_parquet_files_packs_them_in_name_order(tmp_path):
    folder = tmp_path / "shards"
    folder.mkdir()
    shutil.copy(DATA / "plain.parquet", folder / "part-1.parquet")
    shutil.copy(DATA / "snappy.parquet", folder / "part-0.parquet")
    (folder / "README.md").write_text("not data")
    result = gpucache.pack(folder, tmp_path / "ds", no_checks=True, dtype={"score": "f32"})
    assert result["rows"] == 600
    assert [path.rsplit("/", 1)[-1] for path in input_paths(tmp_path / "ds")] == [
        "part-0.parquet", "part-1.parquet"]
    twin = numpy.load(DATA / "plain.embedding.npy")
    numpy.testing.assert_array_equal(packed_column(tmp_path / "ds", "embedding"),
                                     numpy.concatenate([twin, twin]))
    # A list of files may name several Parquet files.
    result = gpucache.pack([DATA / "pack_twin.parquet", DATA / "pack_twin.parquet"], tmp_path / "two")
    assert result["rows"] == 400


@needs_native
def test_parquet_nulls_are_dropped_or_refused_naming_the_row(tmp_path):
    # nulls.parquet: embedding row 7, label row 3 and name row 5 are null.
    result = gpucache.pack(DATA / "nulls.parquet", tmp_path / "ds")
    assert result["rows"] == 7 and result["dropped"]["null"] == 3
    with pytest.raises(gpucache.Error, match=r"nulls.parquet: column 'label' row 3: is null"):
        gpucache.pack(DATA / "nulls.parquet", tmp_path / "refused", on_null="error")
    assert not (tmp_path / "refused").exists()
    with pytest.raises(gpucache.Error, match="--on-null must be drop or error"):
        gpucache.pack(DATA / "nulls.parquet", tmp_path / "bad", on_null="keep")


def test_without_the_reader_parquet_goes_through_pyarrow(tmp_path, monkeypatch):
    pytest.importorskip("pyarrow.parquet")
    monkeypatch.setattr(_gpucache, "built_input_formats", lambda: ["npy"])
    result = gpucache.pack(DATA / "pack_twin.parquet", tmp_path / "ds")
    assert result["rows"] == 200 and input_paths(tmp_path / "ds")[0] == "memory:embedding"
    numpy.testing.assert_array_equal(packed_column(tmp_path / "ds", "embedding"),
                                     numpy.load(DATA / "pack_twin.embedding.npy"))


def test_the_parquet_suffixes_come_from_the_library():
    from gpucache import _tools
    assert _gpucache.input_format_suffixes()["parquet"] == [".parquet", ".pq"]
    assert _tools._PARQUET_SUFFIXES == (".parquet", ".pq")


@needs_native
def test_a_file_the_reader_refuses_for_a_feature_it_lacks_goes_through_pyarrow(tmp_path,
                                                                                monkeypatch):
    pytest.importorskip("pyarrow.parquet")
    # No writer of today uses a feature the reader lacks (LZO pages): the native pack refuses the
    # file as it would such a file, and the pack falls back to pyarrow with a warning.
    real = _gpucache.pack_json
    file = str(DATA / "pack_twin.parquet")

    def refuse_natively(files, *args):
        if files:
            raise gpucache.Error(f"{file}: column 'label' row group 0: compressed with LZO, which "
                                 "gpucache cannot read (no writer of today's Parquet uses it)")
        return real(files, *args)
    monkeypatch.setattr(_gpucache, "pack_json", refuse_natively)
    with pytest.warns(RuntimeWarning, match="refused .*pack_twin.parquet .*LZO.* through pyarrow"):
        result = gpucache.pack(file, tmp_path / "ds")
    assert result["rows"] == 200 and input_paths(tmp_path / "ds")[0] == "memory:embedding"
    numpy.testing.assert_array_equal(packed_column(tmp_path / "ds", "embedding"),
                                     numpy.load(DATA / "pack_twin.embedding.npy"))

    # Bad data is not passed on through pyarrow: the refusal stands.
    def refuse_data(files, *args):
        raise gpucache.Error(f"{file}: column 'label' row group 0: value 300 is out of range for "
                             "its i8 annotation")
    monkeypatch.setattr(_gpucache, "pack_json", refuse_data)
    with pytest.raises(gpucache.Error, match="out of range"):
        gpucache.pack(file, tmp_path / "bad")


def test_arrow_ipc_files_are_read_memory_mapped(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.feather
    import pyarrow.ipc
    matrix = embeddings(30, 8)
    table = pa.table({"embedding": pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1)), 8)})
    pyarrow.feather.write_feather(table, tmp_path / "file.arrow", compression="uncompressed")
    with pa.OSFile(str(tmp_path / "stream.arrow"), "wb") as sink:  # as HF datasets writes them
        with pyarrow.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
    for name in ("file", "stream"):
        gpucache.pack(tmp_path / f"{name}.arrow", tmp_path / name)
        numpy.testing.assert_array_equal(packed_column(tmp_path / name, "embedding"), matrix)
    (tmp_path / "bad.arrow").write_bytes(b"not arrow")
    with pytest.raises(gpucache.Error, match="bad.arrow: cannot read it as Arrow"):
        gpucache.pack(tmp_path / "bad.arrow", tmp_path / "bad")


@needs_native
@pytest.mark.parametrize("name", ["plain_pages", "plain_pages_pyarrow12"])
def test_uncompressed_plain_pages_pack_the_values_pyarrow_reads(tmp_path, name):
    # Values of UNCOMPRESSED PLAIN pages are read where they lie in the file (pyarrow 12's pages
    # end inside rows); pages with nulls, empty lists or a dictionary are decoded.
    import json

    writers = ROOT / "tests" / "data" / "parquet_writers"
    contents = json.loads((writers / f"{name}.expected.json").read_text())
    expected = {column["name"]: column for column in contents["columns"]}
    result = gpucache.pack(writers / f"{name}.parquet", tmp_path / "ds")
    null_rows = set()
    for column in expected.values():
        null_rows.update(column["null_rows"])
    kept = [row for row in range(contents["rows"]) if row not in null_rows]
    assert result["rows"] == len(kept) and result["dropped"]["null"] == contents["rows"] - len(kept)
    for column, dtype in (("emb", numpy.float32), ("pairs", numpy.float32), ("x", numpy.float32),
                          ("ids", numpy.int64), ("f64", numpy.float64)):
        want = numpy.array([expected[column]["values"][row] for row in kept], dtype=dtype)
        numpy.testing.assert_array_equal(packed_column(tmp_path / "ds", column), want)
