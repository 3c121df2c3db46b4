"""The ingest contract's round trip over every input kind (issue 27): the same small table (an
int64 label, an f32 score, an f64 weight, an f32 vector per row, a text) given as each input kind
gpucache takes, packed, then read back with load and export: every field comes back equal to the
input (values, dtype, name) or is listed in the result's left_out with a reason, and nothing else
appears. Kinds whose writer is not importable (pandas, Hugging Face datasets) skip; scripts/test.sh
installs both, so CI runs them. .pt files written by torch 2.x come from ../shared/data/torch2 and
examples/data/unified (their writers are not in CI)."""
import json
import pathlib

import numpy
import pytest
import torch

import gpucache

ROOT = pathlib.Path(__file__).resolve().parents[4]
ROWS = 5


def table():
    r = numpy.arange(ROWS)
    return {
        "label": (r * 7 - 3).astype(numpy.int64),
        "score": (r / 4 + 0.5).astype(numpy.float32),
        "weight": (r / 3 + 1).astype(numpy.float64),  # not exact in f32: f64 must stay f64
        "vec": (numpy.arange(ROWS * 4, dtype=numpy.float32).reshape(ROWS, 4) / 8 + 1),
        "text": [f"row {i} ✓" for i in range(ROWS)],
    }


def numeric(fields):
    return {name: values for name, values in fields.items() if not isinstance(values, list)}


def check_round_trip(result, out, fields, tmp_path, rename=None):
    """Every field of `fields` is a column of the same name, dtype and values in load and export
    (or of a dtype the result's stored_as reports), or in left_out with a reason; the dataset
    holds no other column. `rename` maps an input field
    to the column name a reader gives it where the name is not the field's own (HDF5 paths)."""
    rename = rename or {}
    ds = gpucache.load(out, device="cpu")
    names = [c["name"] for c in ds.columns]
    left_out = {entry["field"]: entry["reason"] for entry in result["left_out"]}
    exported = tmp_path / "export"
    gpucache.export(out, "npy", exported)
    packed = set()
    for field, values in fields.items():
        name = rename.get(field, field)
        if name not in names:
            reasons = [reason for key, reason in left_out.items()
                       if key.replace("[*].", "").lstrip("/") == field]
            assert reasons and all(reasons), (f"{field} is neither a column ({names}) nor left "
                                              f"out ({left_out})")
            continue
        packed.add(name)
        if isinstance(values, list):
            assert ds.texts(name) == values, field
            lines = (exported / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
            assert [json.loads(line) for line in lines] == values, field
            continue
        expected = torch.from_numpy(numpy.ascontiguousarray(values))
        if ds.tensors[name].dtype != expected.dtype:
            # Only a conversion the result reports (one --dtype asked for), of values
            # that convert exactly.
            reported = [entry for entry in result.get("stored_as", [])
                        if entry["column"] == name]
            assert reported, (field, ds.tensors[name].dtype, expected.dtype)
            expected = expected.to(ds.tensors[name].dtype)
            values = expected.numpy()
        assert torch.equal(ds.tensors[name], expected), field
        written = numpy.load(exported / f"{name}.npy")
        assert written.dtype == values.dtype and numpy.array_equal(written, values), field
    assert set(names) == packed, f"columns not from the input: {set(names) - packed}"




def test_python_dict_of_columns(tmp_path):
    fields = table()
    result = gpucache.pack(fields, tmp_path / "ds")
    check_round_trip(result, tmp_path / "ds", fields, tmp_path)


def test_python_list_of_dicts(tmp_path):
    fields = table()
    rows = [{"label": int(fields["label"][i]), "score": float(fields["weight"][i]),
             "vec": torch.from_numpy(fields["vec"][i].copy()), "text": fields["text"][i]}
            for i in range(ROWS)]
    result = gpucache.pack(rows, tmp_path / "ds")
    # Python ints and floats are int64 and f64, as in a .pt of the same list.
    expected = {"label": fields["label"], "score": fields["weight"], "vec": fields["vec"],
                "text": fields["text"]}
    check_round_trip(result, tmp_path / "ds", expected, tmp_path)


def test_pt_dict_of_tensors_written_by_torch_2(tmp_path):
    path = ROOT.parent / "shared" / "data" / "torch2" / "ordered_dict_int64.pt"
    if not path.exists():
        pytest.skip("../shared/data/torch2 is not here (a user's clone)")
    result = gpucache.pack(path, tmp_path / "ds")
    expected = {"test": numpy.array([[1, 2, 3, 4], [5, 6, 7, 8]], dtype=numpy.int64)}
    check_round_trip(result, tmp_path / "ds", expected, tmp_path)


UNIFIED = ROOT / "examples" / "data" / "unified"


def tmp_path_input(path, fields):
    """One input whose every field is named as itself."""
    return [gpucache.Input(path, fields={name: f"[*].{name}" for name in fields})]


def test_pt_list_of_dicts_and_llm_cache_written_by_torch_2(tmp_path):
    if not (UNIFIED / "made_by.json").exists():
        pytest.skip("examples/data/unified is not generated")
    assert json.loads((UNIFIED / "made_by.json").read_text())["torch"].startswith("2.")
    rows = torch.load(UNIFIED / "dialogue.pt")
    fields = {"question": [r["question"] for r in rows], "answer": [r["answer"] for r in rows],
              "q_embedding": torch.stack([r["q_embedding"] for r in rows]).numpy(),
              "a_embedding": torch.stack([r["a_embedding"] for r in rows]).numpy()}
    # Each field under its own name (the dialogue layout would name the vectors
    # question_embedding and answer_embedding).
    result = gpucache.pack(tmp_path_input(UNIFIED / "dialogue.pt", fields), tmp_path / "ds")
    check_round_trip(result, tmp_path / "ds", fields, tmp_path)

    cache = torch.load(UNIFIED / "llm_cache.pt")
    result = gpucache.pack(UNIFIED / "llm_cache.pt", tmp_path / "cache")
    ds = gpucache.load(tmp_path / "cache", device="cpu")
    assert ds.texts("text") == list(cache) and result["left_out"] == []
    assert ds.tensors["embedding"].dtype == torch.bfloat16
    assert torch.equal(ds.tensors["embedding"], torch.stack(list(cache.values())))


def test_jsonl(tmp_path):
    fields = table()
    with open(tmp_path / "t.jsonl", "w") as out:
        for i in range(ROWS):
            out.write(json.dumps({"label": int(fields["label"][i]),
                                  "weight": float(fields["weight"][i]),
                                  "vec": fields["vec"][i].tolist(), "text": fields["text"][i]})
                      + "\n")
    result = gpucache.pack(tmp_path / "t.jsonl", tmp_path / "ds")
    # JSON numbers: integers int64, the others f64; an array of numbers with a fraction is an f32
    # vector (src/inputs/jsonl/FORMAT.md; these values are exact in f32).
    expected = {"label": fields["label"], "weight": fields["weight"], "vec": fields["vec"],
                "text": fields["text"]}
    check_round_trip(result, tmp_path / "ds", expected, tmp_path)


def test_npz(tmp_path):
    fields = numeric(table())
    numpy.savez(tmp_path / "t.npz", **fields)
    result = gpucache.pack(tmp_path / "t.npz", tmp_path / "ds")
    check_round_trip(result, tmp_path / "ds", fields, tmp_path)


def test_safetensors(tmp_path):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    fields = numeric(table())
    safetensors_numpy.save_file(fields, str(tmp_path / "t.safetensors"))
    result = gpucache.pack(tmp_path / "t.safetensors", tmp_path / "ds")
    check_round_trip(result, tmp_path / "ds", fields, tmp_path)


def arrow_table(pyarrow, fields):
    columns = {name: (pyarrow.array(list(values)) if values.ndim == 1 else
                      pyarrow.array(list(values), pyarrow.list_(pyarrow.from_numpy_dtype(
                          values.dtype), values.shape[1])))
               for name, values in numeric(fields).items()}
    columns["text"] = pyarrow.array(fields["text"])
    return pyarrow.table(columns)


def test_parquet(tmp_path):
    pyarrow = pytest.importorskip("pyarrow")
    parquet = pytest.importorskip("pyarrow.parquet")
    fields = table()
    parquet.write_table(arrow_table(pyarrow, fields), tmp_path / "t.parquet")
    result = gpucache.pack(tmp_path / "t.parquet", tmp_path / "ds")
    check_round_trip(result, tmp_path / "ds", fields, tmp_path)


def test_arrow_table_and_ipc_file(tmp_path):
    pyarrow = pytest.importorskip("pyarrow")
    fields = table()
    arrow = arrow_table(pyarrow, fields)
    result = gpucache.pack(arrow, tmp_path / "ds")
    check_round_trip(result, tmp_path / "ds", fields, tmp_path)
    with pyarrow.OSFile(str(tmp_path / "t.arrow"), "wb") as sink:
        with pyarrow.ipc.new_file(sink, arrow.schema) as writer:
            writer.write_table(arrow)
    result = gpucache.pack(tmp_path / "t.arrow", tmp_path / "ipc")
    check_round_trip(result, tmp_path / "ipc", fields, tmp_path / "ipc-export")


def test_pandas(tmp_path):
    pandas = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    fields = table()
    frame = pandas.DataFrame({"label": fields["label"], "score": fields["score"],
                              "weight": fields["weight"], "text": fields["text"]})
    result = gpucache.pack(frame, tmp_path / "ds")
    check_round_trip(result, tmp_path / "ds", {k: fields[k] for k in frame.columns}, tmp_path)


def test_hugging_face_dataset(tmp_path):
    datasets = pytest.importorskip("datasets")
    fields = table()
    dataset = datasets.Dataset.from_dict({name: (values if isinstance(values, list) else
                                                 values.tolist())
                                          for name, values in fields.items()},
                                         features=None)
    result = gpucache.pack(dataset, tmp_path / "ds")
    # from_dict infers int64, double and list<double>/list<float> from Python lists.
    expected = {name: (values if isinstance(values, list) else
                       numpy.asarray(dataset[name]).astype(
                           numpy.asarray(dataset[name]).dtype)) for name, values in fields.items()}
    check_round_trip(result, tmp_path / "ds", expected, tmp_path)


def test_hdf5(tmp_path):
    # Written by h5py (tests/data/hdf5/chunked.expected.json); the .npy files beside it hold the
    # same arrays.
    folder = ROOT / "tests" / "data" / "hdf5"
    result = gpucache.pack(folder / "chunked.h5", tmp_path / "ds")
    ds_names = [c["name"] for c in gpucache.load(tmp_path / "ds", device="cpu").columns]
    fields = {"vectors": numpy.load(folder / "vectors.npy"),
              "labels": numpy.load(folder / "labels.npy"),
              "big_endian": numpy.load(folder / "big_endian.npy").astype("<f8")}
    rename = {field: next((n for n in ds_names if n.endswith(field)), field) for field in fields}
    check_round_trip(result, tmp_path / "ds", fields, tmp_path, rename)
