"""gpucache._arrow: Arrow tables, Parquet files and Hugging Face datasets as pack's columns, with
exact values and zero-copy checked against Arrow's own buffer addresses."""
import json
import sys

import numpy
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

import gpucache  # noqa: E402
from gpucache import Error  # noqa: E402
from gpucache._arrow import ArrowInputError, is_arrow_input, table_columns  # noqa: E402
from gpucache._columns import NullableColumn, VarColumn  # noqa: E402

from conftest import embeddings, pack  # noqa: E402


def address(array: numpy.ndarray) -> int:
    return array.__array_interface__["data"][0]


def data_address(arrow_array, item_offset=0, itemsize=1) -> int:
    """Where an Arrow primitive array's values (its last buffer) start, plus item_offset items."""
    return arrow_array.buffers()[-1].address + (arrow_array.offset + item_offset) * itemsize


def vectors(rows, dim):
    return numpy.arange(rows * dim, dtype=numpy.float32).reshape(rows, dim) * 0.5 - 3.0


def fixed_size_list(matrix):
    return pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1)), matrix.shape[1])


def test_fixed_size_lists_become_matrices_viewing_arrows_buffer():
    matrix = vectors(10, 4)
    arrow = fixed_size_list(matrix)
    columns = table_columns(pa.table({"embedding": arrow}))
    embedding = columns["embedding"]
    assert embedding.shape == (10, 4) and embedding.dtype == numpy.float32
    numpy.testing.assert_array_equal(embedding, matrix)
    assert address(embedding) == data_address(arrow.values, itemsize=4)

    # A slice of the table still views the same buffer, from its first row on.
    sliced = table_columns(pa.table({"embedding": arrow}).slice(3, 5))["embedding"]
    numpy.testing.assert_array_equal(sliced, matrix[3:8])
    assert address(sliced) == data_address(arrow.values, 3 * 4, itemsize=4)


def test_nested_fixed_size_lists_keep_every_dimension():
    images = numpy.arange(6 * 3 * 2, dtype=numpy.uint8).reshape(6, 3, 2)
    inner = pa.FixedSizeListArray.from_arrays(pa.array(images.reshape(-1)), 2)
    outer = pa.FixedSizeListArray.from_arrays(inner, 3)
    column = table_columns(pa.table({"images": outer}))["images"]
    assert column.shape == (6, 3, 2) and column.dtype == numpy.uint8
    numpy.testing.assert_array_equal(column, images)
    assert numpy.shares_memory(column, numpy.frombuffer(inner.values.buffers()[1], numpy.uint8))


def test_lists_of_floats_of_one_length_are_matrices_without_a_copy():
    matrix = vectors(5, 3)
    for list_type in (pa.list_(pa.float32()), pa.large_list(pa.float32())):
        arrow = pa.array(list(matrix), type=list_type)
        column = table_columns(pa.table({"emb": arrow}))["emb"]
        assert column.shape == (5, 3)
        numpy.testing.assert_array_equal(column, matrix)
        assert address(column) == data_address(arrow.values, itemsize=4)
        tail = table_columns(pa.table({"emb": arrow}).slice(2))["emb"]
        numpy.testing.assert_array_equal(tail, matrix[2:])
        assert address(tail) == data_address(arrow.values, 2 * 3, itemsize=4)


def test_lists_of_varying_length_are_sequences():
    rows = [[1, 2, 3], [], [4], [5, 6, 7, 8, 9]]
    for list_type, dtype in ((pa.list_(pa.int32()), numpy.int32),
                             (pa.large_list(pa.int64()), numpy.int64)):
        arrow = pa.array(rows, type=list_type)
        tokens = table_columns(pa.table({"tokens": arrow}))["tokens"]
        assert isinstance(tokens, VarColumn) and tokens.kind == "sequence"
        assert tokens.offsets.dtype == numpy.int64
        assert tokens.offsets.tolist() == [0, 3, 3, 4, 9]
        assert tokens.values.tolist() == [1, 2, 3, 4, 5, 6, 7, 8, 9]
        assert tokens.values.dtype == dtype
        assert address(tokens.values) == data_address(arrow.values,
                                                      itemsize=tokens.values.itemsize)
        # Sliced: offsets start at 0 again, values view the slice's part of the buffer.
        sliced = table_columns(pa.table({"tokens": arrow}).slice(2))["tokens"]
        assert sliced.offsets.tolist() == [0, 1, 6]
        assert sliced.values.tolist() == [4, 5, 6, 7, 8, 9]
        assert address(sliced.values) == data_address(arrow.values, 3,
                                                      itemsize=tokens.values.itemsize)
    # Integer lists stay sequences even when every row has one length; floats of varying
    # lengths are sequences of floats.
    same = table_columns(pa.table({"t": pa.array([[1, 2], [3, 4]])}))["t"]
    assert isinstance(same, VarColumn) and same.offsets.tolist() == [0, 2, 4]
    ragged = table_columns(pa.table({"f": pa.array([[0.5], [1.5, 2.5]], pa.list_(pa.float32()))}))
    assert ragged["f"].kind == "sequence" and ragged["f"].values.tolist() == [0.5, 1.5, 2.5]


def test_strings_are_text_viewing_the_utf8_buffer():
    texts = ["héllo", "", "wörld", "a" * 40]
    encoded = [t.encode() for t in texts]
    for string_type in (pa.string(), pa.large_string()):
        arrow = pa.array(texts, type=string_type)
        column = table_columns(pa.table({"text": arrow}))["text"]
        assert isinstance(column, VarColumn) and column.kind == "text"
        assert column.values.dtype == numpy.uint8 and column.offsets.dtype == numpy.int64
        assert column.offsets.tolist() == [0, 6, 6, 12, 52]
        assert [bytes(column.values[a:b]) for a, b in zip(column.offsets, column.offsets[1:])] \
            == encoded
        assert address(column.values) == arrow.buffers()[2].address
        sliced = table_columns(pa.table({"text": arrow}).slice(2))["text"]
        assert sliced.offsets.tolist() == [0, 6, 46]
        assert bytes(sliced.values) == "wörld".encode() + b"a" * 40
        assert address(sliced.values) == arrow.buffers()[2].address + 6
    # large_string offsets are already int64 from 0: they are used in place too.
    large_arrow = pa.array(texts, pa.large_string())
    large = table_columns(pa.table({"t": large_arrow}))["t"]
    assert address(large.offsets) == large_arrow.buffers()[1].address
    categories = pa.array(["b", "a", "b"]).dictionary_encode()
    decoded = table_columns(pa.table({"c": categories}))["c"]
    assert bytes(decoded.values) == b"bab" and decoded.offsets.tolist() == [0, 1, 2, 3]


def test_numeric_scalars_are_1d_arrays_of_their_dtype():
    table = pa.table({
        "i8": pa.array([-1, 2, 3], pa.int8()), "u16": pa.array([1, 2, 65535], pa.uint16()),
        "i64": pa.array([-(2**62), 0, 2**62]), "f16": pa.array(numpy.array([0.5, 1, 2], "f2")),
        "f64": pa.array([0.1, 0.2, 0.3]), "flag": pa.array([True, False, True]),
    })
    columns = table_columns(table)
    assert list(columns) == ["i8", "u16", "i64", "f16", "f64", "flag"]
    assert columns["i8"].dtype == numpy.int8 and columns["i8"].tolist() == [-1, 2, 3]
    assert columns["u16"].tolist() == [1, 2, 65535] and columns["u16"].dtype == numpy.uint16
    assert columns["i64"].tolist() == [-(2**62), 0, 2**62]
    assert columns["f16"].dtype == numpy.float16 and columns["f16"].tolist() == [0.5, 1, 2]
    assert columns["f64"].tolist() == [0.1, 0.2, 0.3]
    assert columns["flag"].dtype == numpy.bool_ and columns["flag"].tolist() == [True, False, True]
    assert address(columns["i64"]) == data_address(table.column("i64").chunk(0), itemsize=8)


def test_several_chunks_are_combined_and_one_chunk_is_not_copied():
    first, second = vectors(3, 2), vectors(4, 2) + 100
    table = pa.concat_tables([pa.table({"e": fixed_size_list(first)}),
                              pa.table({"e": fixed_size_list(second)})])
    assert table.column("e").num_chunks == 2
    numpy.testing.assert_array_equal(table_columns(table)["e"], numpy.concatenate([first, second]))
    batch = pa.record_batch({"e": fixed_size_list(first), "n": pa.array([1, 2, 3])})
    columns = table_columns(batch)
    numpy.testing.assert_array_equal(columns["e"], first)
    assert columns["n"].tolist() == [1, 2, 3]


def test_null_rows_are_listed_with_their_values_filled():
    columns = table_columns(pa.table({
        "score": pa.array([1.5, None, 3.0]),
        "flag": pa.array([True, None, False]),
        "text": pa.array(["a", "bb", None]),
        "emb": pa.array([[1.0, 2.0], None, [5.0, 6.0]], pa.list_(pa.float32(), 2)),
        "tokens": pa.array([[1], None, [2, 3]]),
        "rows": pa.array([[1.0], None, [2.0]], pa.list_(pa.float32())),
    }))
    assert isinstance(columns["score"], NullableColumn)
    assert columns["score"].values.tolist() == [1.5, 0.0, 3.0]
    assert columns["score"].null_rows.tolist() == [1]
    assert columns["flag"].values.tolist() == [True, False, False]
    assert columns["text"].null_rows.tolist() == [2]
    assert columns["text"].offsets.tolist() == [0, 1, 3, 3]
    assert columns["emb"].values.tolist() == [[1.0, 2.0], [0.0, 0.0], [5.0, 6.0]]
    assert columns["emb"].null_rows.tolist() == [1]
    assert columns["tokens"].offsets.tolist() == [0, 1, 1, 3]
    assert columns["tokens"].null_rows.tolist() == [1]
    # Float vectors of one length (ignoring the null row) stay a matrix, zeros at the null row.
    assert columns["rows"].values.tolist() == [[1.0], [0.0], [2.0]]
    assert columns["rows"].null_rows.tolist() == [1]


def test_a_null_row_with_values_behind_it_is_emptied():
    # Arrow lets a null list or string slot own values; they must not reach the column.
    tokens = pa.ListArray.from_arrays(pa.array([0, 1, 3, 4], pa.int32()), pa.array([1, 2, 3, 4]),
                                      mask=pa.array([False, True, False]))
    columns = table_columns(pa.table({"tokens": tokens}))
    assert columns["tokens"].offsets.tolist() == [0, 1, 1, 2]
    assert columns["tokens"].values.tolist() == [1, 4]


def test_a_null_inside_a_list_names_the_column_and_row():
    cases = {
        "emb": pa.FixedSizeListArray.from_arrays(pa.array([1.0, 2.0, None, 4.0, 5.0, 6.0]), 2),
        "tokens": pa.array([[1], [2, 3], [4, None]]),
    }
    expected_rows = {"emb": 1, "tokens": 2}
    for name, array in cases.items():
        row = expected_rows[name]
        with pytest.raises(ArrowInputError, match=rf"column '{name}': row {row} holds a null inside"):
            table_columns(pa.table({name: array}))
    # It is a gpucache.Error, as every pack failure is.
    with pytest.raises(Error):
        table_columns(pa.table({"tokens": cases["tokens"]}))


def test_types_gpucache_cannot_store_are_refused_by_name():
    from decimal import Decimal

    with pytest.raises(ArrowInputError, match="column 'price' holds decimal128"):
        table_columns(pa.table({"price": pa.array([Decimal("1.5")], pa.decimal128(5, 2))}))
    with pytest.raises(ArrowInputError, match="column 's' holds lists of string"):
        table_columns(pa.table({"s": pa.array([["a"], ["b"]])}))
    with pytest.raises(TypeError, match="not dict"):
        table_columns({"a": numpy.zeros(3)})
    assert not is_arrow_input({"a": 1}) and not is_arrow_input("x.npy")


def test_parquet_files_and_folders(tmp_path):
    matrix = vectors(8, 3)
    table = pa.table({"embedding": fixed_size_list(matrix),
                      "text": pa.array([f"row {i}" for i in range(8)]),
                      "label": pa.array(numpy.arange(8, dtype=numpy.int32))})
    pq.write_table(table, tmp_path / "one.parquet", row_group_size=3)
    assert is_arrow_input(tmp_path / "one.parquet")
    assert is_arrow_input(str(tmp_path / "one.parquet"))
    columns = table_columns(str(tmp_path / "one.parquet"))
    numpy.testing.assert_array_equal(columns["embedding"], matrix)
    assert columns["label"].tolist() == list(range(8))
    assert bytes(columns["text"].values[columns["text"].offsets[7]:]) == b"row 7"

    folder = tmp_path / "parts"
    folder.mkdir()
    pq.write_table(table.slice(4), folder / "part-1.parquet")
    pq.write_table(table.slice(0, 4), folder / "part-0.parquet")
    (folder / "README.txt").write_text("not parquet")
    assert is_arrow_input(folder)
    parts = table_columns(folder)
    numpy.testing.assert_array_equal(parts["embedding"], matrix)  # part-0 first, by name
    assert parts["label"].tolist() == list(range(8))


def test_parquet_that_cannot_be_read_is_a_gpucache_error(tmp_path):
    (tmp_path / "bad.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(Error, match=r"bad.parquet: cannot read it as Parquet"):
        table_columns(tmp_path / "bad.parquet")
    with pytest.raises(Error, match=r"missing.parquet: cannot read it as Parquet"):
        table_columns(str(tmp_path / "missing.parquet"))
    folder = tmp_path / "mixed"
    folder.mkdir()
    pq.write_table(pa.table({"a": pa.array([1])}), folder / "0.parquet")
    pq.write_table(pa.table({"b": pa.array(["x"])}), folder / "1.parquet")
    with pytest.raises(Error, match="different schemas"):
        table_columns(folder)


def test_pandas_dataframes_convert_through_arrow():
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame({"label": numpy.arange(4, dtype=numpy.int16),
                              "text": ["a", "bb", "", "dddd"]})
    assert is_arrow_input(frame)
    columns = table_columns(frame)
    assert columns["label"].dtype == numpy.int16 and columns["label"].tolist() == [0, 1, 2, 3]
    assert columns["text"].offsets.tolist() == [0, 1, 3, 3, 7]
    assert bytes(columns["text"].values) == b"abbdddd"


def test_hugging_face_datasets_read_through_their_arrow_table():
    datasets = pytest.importorskip("datasets")
    matrix = vectors(6, 4)
    dataset = datasets.Dataset.from_dict(
        {"embedding": matrix.tolist(), "text": [f"t{i}" for i in range(6)]},
        features=datasets.Features({"embedding": datasets.Sequence(datasets.Value("float32")),
                                    "text": datasets.Value("string")}))
    assert is_arrow_input(dataset)
    columns = table_columns(dataset)
    numpy.testing.assert_array_equal(columns["embedding"], matrix)
    assert bytes(columns["text"].values) == b"t0t1t2t3t4t5"
    chosen = table_columns(dataset.select([4, 1]))
    numpy.testing.assert_array_equal(chosen["embedding"], matrix[[4, 1]])
    assert bytes(chosen["text"].values) == b"t4t1"


def test_datasets_is_not_imported_to_recognise_inputs():
    had = "datasets" in sys.modules
    table_columns(pa.table({"n": pa.array([1])}))
    is_arrow_input(object())
    assert ("datasets" in sys.modules) == had



# gpucache.pack over these inputs: packed values must equal those of the same array packed from a
# .npy file by the CLI.
needs_pack = pytest.mark.skipif(not hasattr(gpucache, "pack"), reason="gpucache.pack not built")


def _packed_embedding(path):
    # A torch tensor, or a numpy array where torch is not installed.
    return numpy.asarray(gpucache.load(str(path), device="cpu").tensors["embedding"])


@needs_pack
def test_pack_from_parquet_table_and_batch_equals_pack_from_npy(tmp_path):
    matrix = embeddings(50, 12)
    numpy.save(tmp_path / "emb.npy", matrix)
    expected = _packed_embedding(pack([tmp_path / "emb.npy"], tmp_path / "from_npy"))
    numpy.testing.assert_array_equal(expected, matrix)
    table = pa.table({"embedding": fixed_size_list(matrix)})
    pq.write_table(table, tmp_path / "emb.parquet", row_group_size=16)
    for name, source in (("parquet", tmp_path / "emb.parquet"), ("table", table),
                         ("batch", table.to_batches()[0])):
        gpucache.pack(source, tmp_path / name)
        numpy.testing.assert_array_equal(_packed_embedding(tmp_path / name), expected, err_msg=name)


@needs_pack
def test_pack_from_hugging_face_dataset_equals_pack_from_npy(tmp_path):
    datasets = pytest.importorskip("datasets")
    matrix = embeddings(20, 8)
    numpy.save(tmp_path / "emb.npy", matrix)
    expected = _packed_embedding(pack([tmp_path / "emb.npy"], tmp_path / "from_npy"))
    dataset = datasets.Dataset.from_dict(
        {"embedding": matrix.tolist()},
        features=datasets.Features({"embedding": datasets.Sequence(datasets.Value("float32"))}))
    gpucache.pack(dataset, tmp_path / "hf")
    numpy.testing.assert_array_equal(_packed_embedding(tmp_path / "hf"), expected)


# Null rows, as a Parquet file's: label row 1, score row 3, text row 5, emb row 7 are null.
NULLS = {1: "label", 3: "score", 5: "text", 7: "emb"}


def _table_with_nulls(rows=10):
    matrix = embeddings(rows, 4)
    return pa.table({
        "label": pa.array([None if i == 1 else i for i in range(rows)], pa.int64()),
        "score": pa.array([None if i == 3 else i / 4 for i in range(rows)], pa.float32()),
        "text": pa.array([None if i == 5 else f"t{i}" for i in range(rows)]),
        "emb": pa.array([None if i == 7 else row.tolist() for i, row in enumerate(matrix)],
                        pa.list_(pa.float32(), 4)),
    }), matrix


@needs_pack
def test_null_rows_of_a_table_are_dropped_with_the_reason_null(tmp_path):
    table, matrix = _table_with_nulls()
    result = gpucache.pack(table, tmp_path / "ds", rejects=tmp_path / "rejects.jsonl")
    kept = [i for i in range(10) if i not in NULLS]
    assert result["dropped"]["null"] == len(NULLS) and result["rows"] == len(kept)
    with open(tmp_path / "rejects.jsonl") as rejects:
        rejected = [json.loads(line) for line in rejects]
    assert sorted((r["row"], r["reason"], r["column"]) for r in rejected) == sorted(
        (row, "null", column) for row, column in NULLS.items())
    ds = gpucache.load(str(tmp_path / "ds"), device="cpu")
    assert numpy.asarray(ds.tensors["label"]).tolist() == kept
    assert numpy.asarray(ds.tensors["score"]).tolist() == [i / 4 for i in kept]
    assert ds.texts("text") == [f"t{i}" for i in kept]
    numpy.testing.assert_array_equal(numpy.asarray(ds.tensors["emb"]), matrix[kept])


@needs_pack
def test_null_rows_of_a_table_can_be_refused_and_count_only_when_packed(tmp_path):
    table, _ = _table_with_nulls()
    with pytest.raises(Error, match=r"column 'label' row 1.*--on-null error"):
        gpucache.pack(table, tmp_path / "ds", on_null="error")
    assert not (tmp_path / "ds").exists()
    # Only the packed columns' nulls count: the text column alone loses row 5 only.
    result = gpucache.pack(table, tmp_path / "text", fields={"text": "text"})
    assert result["dropped"]["null"] == 1 and result["rows"] == 9


@needs_pack
def test_pandas_nullable_integers_drop_their_na_rows(tmp_path):
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame({"label": pandas.array([3, pandas.NA, 5, 6], dtype="Int64")})
    result = gpucache.pack(frame, tmp_path / "ds")
    assert result["dropped"]["null"] == 1 and result["rows"] == 3
    labels = gpucache.load(str(tmp_path / "ds"), device="cpu").tensors["label"]
    assert numpy.asarray(labels).tolist() == [3, 5, 6]
    with pytest.raises(Error, match=r"column 'label' row 1"):
        gpucache.pack(frame, tmp_path / "refused", on_null="error")
