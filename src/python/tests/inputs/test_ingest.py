"""The ingest contract (issue 27) on real files, through the CLI binary and gpucache.pack: every
field comes back under its own name and type, and the packer's provenance never takes a user's
name nor appears in batches unless asked for."""
import subprocess

import numpy
import pytest
import torch

import gpucache
from conftest import _tool, pack

USER = ["embedding", "source", "source_row"]


def user_columns():
    rows = numpy.arange(6)
    return {"source": rows * 10, "source_row": (rows - 3).astype(numpy.int32),
            "embedding": (numpy.arange(24, dtype=numpy.float32).reshape(6, 4) / 8 + 1)}


def check_user_names_dataset(path):
    assert gpucache.verify(path)["ok"]
    ds = gpucache.load(path, device="cpu")
    assert [c["name"] for c in ds.columns] == USER  # no provenance unless asked for
    assert set(ds[0]) == set(USER)
    expected = user_columns()
    for name in USER:
        tensor = ds.tensors[name]
        assert torch.equal(tensor, torch.from_numpy(expected[name])), name
        tensor.sum()  # torch computes with every column it is given
    with_rows = gpucache.load(path, device="cpu", columns=["source", "@source", "@source_row"])
    assert with_rows.tensors["@source"].dtype == torch.int32
    assert with_rows.tensors["@source_row"].dtype == torch.int64
    assert with_rows.tensors["@source_row"].tolist() == list(range(6))
    assert (with_rows.tensors["@source_row"] + with_rows.tensors["@source"]).sum() == 15
    batch = next(iter(gpucache.GPUBatches(ds, batch_size=3, shuffle=False)))
    assert sorted(batch) == USER
    streamed = next(iter(gpucache.stream(path, device="cpu", batch_size=3, shuffle=False)))
    assert sorted(streamed) == USER


def test_pt_file_with_provenance_names_through_the_cli(tmp_path):
    torch.save({name: torch.from_numpy(values) for name, values in user_columns().items()},
               tmp_path / "user.pt")
    check_user_names_dataset(pack([tmp_path / "user.pt"], tmp_path / "ds"))


def test_memory_columns_with_provenance_names(tmp_path):
    gpucache.pack(user_columns(), tmp_path / "ds")
    check_user_names_dataset(tmp_path / "ds")


def test_parquet_text_column_named_source(tmp_path):
    pyarrow = pytest.importorskip("pyarrow")
    parquet = pytest.importorskip("pyarrow.parquet")
    table = pyarrow.table({"source": ["wiki", "books", "wiki"], "label": [1, 2, 3]})
    parquet.write_table(table, tmp_path / "t.parquet")
    out = pack([tmp_path / "t.parquet"], tmp_path / "ds")
    verified = subprocess.run([str(_tool("src/cli/gpucache")), "verify", str(out)],
                              capture_output=True, text=True)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    ds = gpucache.load(out, device="cpu")
    assert [c["name"] for c in ds.columns] == ["source", "label"]
    assert ds.texts("source") == ["wiki", "books", "wiki"]
    assert ds[1] == {"source": "books", "label": torch.tensor(2)}


def test_a_user_column_cannot_take_a_provenance_name(tmp_path):
    with pytest.raises(gpucache.Error, match="@source"):
        gpucache.pack({"@source": numpy.arange(4)}, tmp_path / "ds")


def dialogue_rows():
    rows = []
    for i in range(4):
        question = torch.tensor([(i * 8 + j + 1) / 64 for j in range(8)])
        rows.append({"question": f"question {i}?", "answer": f"answer {i}.",
                     "question_embedding": question, "answer_embedding": -question,
                     "label": i % 2, "id": 1000 + i, "conversation_id": i // 2, "turn": i % 2,
                     "meta": {"lang": "en" if i < 2 else "fr", "score": i / 4},
                     "tags": ["x", "y"][: i % 2 + 1]})
    return rows


DIALOGUE_COLUMNS = ["question_embedding", "answer_embedding", "question", "answer", "label", "id",
                    "conversation_id", "turn", "meta.lang", "meta.score"]


def check_dialogue_dataset(path):
    ds = gpucache.load(path, device="cpu")
    assert [c["name"] for c in ds.columns] == DIALOGUE_COLUMNS
    rows = dialogue_rows()
    assert ds.tensors["id"].tolist() == [row["id"] for row in rows]
    assert ds.tensors["conversation_id"].tolist() == [row["conversation_id"] for row in rows]
    assert ds.texts("meta.lang") == [row["meta"]["lang"] for row in rows]
    assert ds.tensors["meta.score"].tolist() == [row["meta"]["score"] for row in rows]
    assert torch.equal(ds.tensors["question_embedding"],
                       torch.stack([row["question_embedding"] for row in rows]))
    return ds


def test_every_field_of_a_pt_list_of_dicts_through_the_cli(tmp_path):
    torch.save(dialogue_rows(), tmp_path / "dialogue.pt")
    result = subprocess.run([str(_tool("src/cli/gpucache")), "pack", str(tmp_path / "dialogue.pt"),
                             "-o", str(tmp_path / "ds"), "--quiet"], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
    assert f"left out: {tmp_path / 'dialogue.pt'}: [*].tags (" in result.stderr
    check_dialogue_dataset(tmp_path / "ds")


def test_every_field_of_a_pt_list_of_dicts_through_python(tmp_path):
    torch.save(dialogue_rows(), tmp_path / "dialogue.pt")
    result = gpucache.pack(tmp_path / "dialogue.pt", tmp_path / "ds")
    assert [(e["field"], e["input"]) for e in result["left_out"]] == [
        ("[*].tags", str(tmp_path / "dialogue.pt"))]
    assert result["left_out"][0]["reason"]
    check_dialogue_dataset(tmp_path / "ds")
    with pytest.raises(gpucache.Error, match=r"field '\[\*\]\.tags': cannot be stored"):
        gpucache.pack(tmp_path / "dialogue.pt", tmp_path / "strict", strict=True)


def test_fields_keep_only_the_named_columns_and_say_which_were_not(tmp_path):
    table = {"features": numpy.ones((5, 3), numpy.float32), "label": numpy.arange(5),
             "id": numpy.arange(5) + 100}
    result = gpucache.pack(table, tmp_path / "ds", fields={"features": "features"})
    assert [c["name"] for c in gpucache.load(tmp_path / "ds", device="cpu").columns] == [
        "features"]
    assert sorted(e["field"] for e in result["not_selected"]) == ["id", "label"]


def test_a_lone_float_vector_keeps_its_name_and_takes_a_role(tmp_path):
    features = numpy.ones((6, 4), numpy.float32)
    features[2] = 0  # an all-zero row: the embedding role drops it, the tensor role keeps it
    as_embedding = gpucache.pack({"features": features, "label": numpy.arange(6)},
                                 tmp_path / "emb")
    ds = gpucache.load(tmp_path / "emb", device="cpu")
    assert [c["name"] for c in ds.columns] == ["features", "label"]
    assert as_embedding["rows"] == 5
    as_tensor = gpucache.pack({"features": features, "label": numpy.arange(6)},
                              tmp_path / "tensor", roles={"features": "tensor"})
    assert as_tensor["rows"] == 6
    assert torch.equal(gpucache.load(tmp_path / "tensor", device="cpu").tensors["features"],
                       torch.from_numpy(features))


def feature_rows(count=6):
    """A .pt list of dicts whose one float vector field is `features`; row 2's is all zero."""
    rows = []
    for i in range(count):
        features = torch.full((4,), (i + 1) / 8)
        if i == 2:
            features = torch.zeros(4)
        rows.append({"features": features, "label": i})
    return rows


def cli(*arguments):
    return subprocess.run([str(_tool("src/cli/gpucache")), *map(str, arguments)],
                          capture_output=True, text=True)


def test_a_lone_float_field_of_a_pt_file_keeps_its_name_in_the_cli_and_python(tmp_path):
    torch.save(feature_rows(), tmp_path / "rows.pt")
    # The CLI and Python map the file by one rule: `features` is the embedding (the all-zero row
    # is dropped by its norm checks), under its own name.
    result = cli("pack", tmp_path / "rows.pt", "-o", tmp_path / "cli", "--quiet")
    assert result.returncode == 0, result.stderr
    from_python = gpucache.pack(tmp_path / "rows.pt", tmp_path / "py")
    for out in (tmp_path / "cli", tmp_path / "py"):
        ds = gpucache.load(out, device="cpu")
        assert [c["name"] for c in ds.columns] == ["features", "label"]
        assert [c["role"] for c in gpucache.inspect(out)["columns"]][:1] == ["embedding"]
        assert ds.tensors["label"].tolist() == [0, 1, 3, 4, 5]
    assert from_python["rows"] == 5
    # --role / roles= on its own name: a tensor, finite check only, so the zero row stays.
    result = cli("pack", tmp_path / "rows.pt", "-o", tmp_path / "cli_t", "--quiet", "--role",
                 "features=tensor")
    assert result.returncode == 0, result.stderr
    gpucache.pack(tmp_path / "rows.pt", tmp_path / "py_t", roles={"features": "tensor"})
    for out in (tmp_path / "cli_t", tmp_path / "py_t"):
        ds = gpucache.load(out, device="cpu")
        assert ds.tensors["label"].tolist() == list(range(6))
        assert gpucache.inspect(out)["columns"][0]["role"] == "tensor"


def test_field_naming_a_detected_vector_stores_it_once(tmp_path):
    torch.save(feature_rows(), tmp_path / "rows.pt")
    result = cli("pack", tmp_path / "rows.pt", "-o", tmp_path / "ds", "--quiet", "--json",
                 "--field", "features=[*].features")
    assert result.returncode == 0, result.stderr
    ds = gpucache.load(tmp_path / "ds", device="cpu")
    # One column: before issue #27 the values came twice, as `features` and as `embedding`.
    assert [c["name"] for c in ds.columns] == ["features"]
    assert torch.equal(ds.tensors["features"][0], torch.full((4,), 1 / 8))


def test_roles_apply_to_every_memory_input(tmp_path):
    features = numpy.ones((4, 3), numpy.float32)
    features[1] = 0
    gpucache.pack({"features": features}, tmp_path / "dict", roles={"features": "tensor"})
    assert len(gpucache.load(tmp_path / "dict", device="cpu")) == 4
    pyarrow = pytest.importorskip("pyarrow")
    table = pyarrow.table({"features": pyarrow.array(features.tolist(),
                                                     pyarrow.list_(pyarrow.float32(), 3)),
                           "label": numpy.arange(4)})
    gpucache.pack(table, tmp_path / "table", roles={"features": "tensor"})
    assert len(gpucache.load(tmp_path / "table", device="cpu")) == 4
    gpucache.pack(table, tmp_path / "table_emb")
    assert len(gpucache.load(tmp_path / "table_emb", device="cpu")) == 3


LONG = "caf\u00e9_" * 40  # 240 bytes of UTF-8


def test_names_up_to_255_bytes_round_trip(tmp_path):
    longest = "n" * 255
    columns = {LONG: numpy.arange(5), longest: numpy.arange(5) * 2, "label": numpy.arange(5)}
    result = gpucache.pack(columns, tmp_path / "ds")
    assert result["rows"] == 5
    assert gpucache.verify(tmp_path / "ds")["ok"]
    ds = gpucache.load(tmp_path / "ds", device="cpu")
    assert [c["name"] for c in ds.columns] == [LONG, longest, "label"]
    assert ds.tensors[longest].tolist() == [0, 2, 4, 6, 8]
    assert [c["name"] for c in gpucache.inspect(tmp_path / "ds")["columns"]][:3] == [
        LONG, longest, "label"]
    shard = (tmp_path / "ds" / "shard-00000.gcs").read_bytes()
    assert int.from_bytes(shard[10:12], "little") == 3  # format 1.3: the names table
    # safetensors keeps every name; npy refuses the one too long for a file name, naming it.
    exported = cli("export", tmp_path / "ds", tmp_path / "x.safetensors", "--to", "safetensors")
    assert exported.returncode == 0, exported.stderr
    refused = cli("export", tmp_path / "ds", tmp_path / "npy")
    assert refused.returncode == 2
    assert "export it with --to safetensors" in refused.stderr
    # Merge keeps them.
    gpucache.pack(columns, tmp_path / "ds2")
    merged = cli("merge", tmp_path / "ds", tmp_path / "ds2", "-o", tmp_path / "merged")
    assert merged.returncode == 0, merged.stderr
    assert gpucache.load(tmp_path / "merged", device="cpu").tensors[LONG].tolist() == [
        0, 1, 2, 3, 4] * 2


def test_a_name_over_255_bytes_is_refused_naming_it(tmp_path):
    with pytest.raises(gpucache.Error, match="1 to 255 bytes"):
        gpucache.pack({"x" * 256: numpy.arange(3)}, tmp_path / "ds")


def test_names_of_63_bytes_or_fewer_keep_format_1_1(tmp_path):
    gpucache.pack({"s" * 63: numpy.arange(3)}, tmp_path / "ds")
    shard = (tmp_path / "ds" / "shard-00000.gcs").read_bytes()
    assert int.from_bytes(shard[10:12], "little") == 1


def test_a_long_parquet_field_name_is_kept_whole(tmp_path):
    pyarrow = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    name = "a_field_name_" * 8  # 104 bytes: cut to 63 before issue #27
    pq.write_table(pyarrow.table({name: numpy.arange(4), "label": numpy.arange(4)}),
                   tmp_path / "t.parquet")
    result = cli("pack", tmp_path / "t.parquet", "-o", tmp_path / "ds", "--quiet")
    assert result.returncode == 0, result.stderr
    assert [c["name"] for c in gpucache.load(tmp_path / "ds", device="cpu").columns] == [
        name, "label"]


def test_a_rename_to_a_legal_name_is_reported_everywhere(tmp_path):
    # `Label` is the user's name and kept; only `@x` (the packer's provenance prefix) and `a/b`
    # (export writes a file per column) are no legal names, changed minimally and reported.
    torch.save([{"features": torch.full((4,), 0.5), "Label": i, "@x": i, "a/b": i * 2}
                for i in range(3)], tmp_path / "rows.pt")
    result = cli("pack", tmp_path / "rows.pt", "-o", tmp_path / "ds", "--quiet")
    assert result.returncode == 0, result.stderr
    assert "renamed: " + str(tmp_path / "rows.pt") + ': [*]["@x"] is the column \'_@x\'' in (
        result.stderr)
    assert "Label" not in result.stderr
    as_json = gpucache.pack(tmp_path / "rows.pt", tmp_path / "py")
    expected = [{"input": str(tmp_path / "rows.pt"), "field": '[*]["@x"]', "column": "_@x"},
                {"input": str(tmp_path / "rows.pt"), "field": "[*].a/b", "column": "a_b"}]
    assert as_json["renamed"] == expected
    import json
    manifest = json.loads((tmp_path / "py" / "manifest.json").read_text())
    assert manifest["renamed"] == expected
    ds = gpucache.load(tmp_path / "py", device="cpu")
    assert [c["name"] for c in ds.columns] == ["features", "Label", "_@x", "a_b"]
    assert ds.tensors["a_b"].tolist() == [0, 2, 4]


def test_parquet_and_pandas_names_are_kept_through_pack_load_export(tmp_path):
    pyarrow = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pyarrow.table({"Label": numpy.arange(4, dtype=numpy.int64),
                           "user id": numpy.arange(4, dtype=numpy.int32) * 3,
                           "Gr\u00f6\u00dfe": numpy.arange(4, dtype=numpy.float32) / 2})
    pq.write_table(table, tmp_path / "t.parquet")
    names = ["Label", "user id", "Gr\u00f6\u00dfe"]
    packed = cli("pack", tmp_path / "t.parquet", "-o", tmp_path / "ds", "--json")
    assert packed.returncode == 0, packed.stderr
    import json
    assert json.loads(packed.stdout)["renamed"] == []
    assert "renamed" not in packed.stderr
    ds = gpucache.load(tmp_path / "ds", device="cpu")
    assert [c["name"] for c in ds.columns] == names
    assert ds.tensors["Label"].tolist() == [0, 1, 2, 3]
    assert ds.tensors["user id"].tolist() == [0, 3, 6, 9]
    exported = cli("export", tmp_path / "ds", tmp_path / "npy")
    assert exported.returncode == 0, exported.stderr
    assert numpy.load(tmp_path / "npy" / "user id.npy").tolist() == [0, 3, 6, 9]
    assert numpy.load(tmp_path / "npy" / "Gr\u00f6\u00dfe.npy").tolist() == [0, 0.5, 1, 1.5]
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame({"Label": numpy.arange(4), "user id": numpy.arange(4) * 3})
    gpucache.pack(frame, tmp_path / "frame")
    from_frame = gpucache.load(tmp_path / "frame", device="cpu")
    assert [c["name"] for c in from_frame.columns] == ["Label", "user id"]
    assert from_frame.tensors["user id"].tolist() == [0, 3, 6, 9]


def test_a_name_holding_equals_cannot_be_given_as_name_value_text(tmp_path):
    with pytest.raises(gpucache.Error, match="holds '='"):
        gpucache.pack({"a=b": numpy.arange(3)}, tmp_path / "ds", fields={"a=b": "a=b"})


def dataset_columns(path):
    """(name, kind, dtype, role, row shape) of every column, as inspect reports them."""
    return [(c["name"], c.get("kind"), c.get("dtype"), c.get("role"), c.get("shape"))
            for c in gpucache.inspect(path)["columns"]]


def test_a_list_of_dicts_in_memory_packs_as_the_same_list_in_a_pt(tmp_path):
    torch.save(dialogue_rows(), tmp_path / "dialogue.pt")
    from_file = gpucache.pack(tmp_path / "dialogue.pt", tmp_path / "file")
    from_memory = gpucache.pack(dialogue_rows(), tmp_path / "memory")
    assert dataset_columns(tmp_path / "memory") == dataset_columns(tmp_path / "file")
    assert [(e["field"], e["reason"]) for e in from_memory["left_out"]] == [
        (e["field"], e["reason"]) for e in from_file["left_out"]]
    assert [e["input"] for e in from_memory["left_out"]] == ["memory"]
    check_dialogue_dataset(tmp_path / "memory")
    file_ds, memory_ds = (gpucache.load(tmp_path / name, device="cpu") for name in
                          ("file", "memory"))
    for name in file_ds.tensors:
        assert torch.equal(file_ds.tensors[name], memory_ds.tensors[name]), name
    assert memory_ds.texts("question") == file_ds.texts("question")
    inputs = gpucache.inspect(tmp_path / "memory")["provenance"]["inputs"]
    assert [i["path"] for i in inputs] == ["memory"] and inputs[0]["bytes"] > 0
    # Another tree, another provenance hash.
    rows = dialogue_rows()
    rows[3]["id"] = 7
    gpucache.pack(rows, tmp_path / "other")
    other = gpucache.inspect(tmp_path / "other")["provenance"]["inputs"]
    assert other[0]["xxh3"] != inputs[0]["xxh3"]


def llm_cache():
    # Keys are whole prompts: longer than any column name may be, with spaces and punctuation.
    return {f"Prompt {i}: " + "explain why the GPU idles while the loader works " * 2 + "?":
            torch.arange(8, dtype=torch.float32) / 8 + i + 1 for i in range(5)}


def test_an_llm_cache_dict_in_memory_packs_as_in_a_pt(tmp_path):
    cache = llm_cache()
    torch.save(cache, tmp_path / "cache.pt")
    gpucache.pack(tmp_path / "cache.pt", tmp_path / "file")
    result = gpucache.pack(cache, tmp_path / "memory")
    assert result["rows"] == 5
    assert dataset_columns(tmp_path / "memory") == dataset_columns(tmp_path / "file")
    ds = gpucache.load(tmp_path / "memory", device="cpu")
    assert [c["name"] for c in ds.columns] == ["text", "embedding"]
    assert ds.texts("text") == list(cache)
    assert torch.equal(ds.tensors["embedding"], torch.stack(list(cache.values())))


def test_a_dict_of_columns_stays_a_dict_of_columns(tmp_path):
    xs = numpy.arange(6, dtype=numpy.float32) + 1
    # Every value a 1-D float vector of one length: the .pt rule reads an LLM cache (2 rows of 6
    # values); kind="tensors" keeps the columns (6 rows of one value each).
    assert gpucache.pack({"x": xs, "y": xs * 2}, tmp_path / "cache")["rows"] == 2
    as_columns = gpucache.pack({"x": xs, "y": xs * 2}, tmp_path / "columns", kind="tensors")
    assert as_columns["rows"] == 6
    ds = gpucache.load(tmp_path / "columns", device="cpu")
    assert torch.equal(ds.tensors["y"], torch.from_numpy(xs * 2))
    # Anything else is a dict of columns whatever kind says: a matrix, lists of numbers, text.
    ds_path = tmp_path / "matrix"
    gpucache.pack({"embedding": numpy.ones((3, 4), numpy.float32), "label": [0, 1, 2]}, ds_path)
    assert [c["name"] for c in gpucache.load(ds_path, device="cpu").columns] == [
        "embedding", "label"]


def test_a_list_that_is_not_rows_is_refused_naming_what_is_taken(tmp_path):
    with pytest.raises(gpucache.Error, match="a list of dicts"):
        gpucache.pack([1, 2, 3], tmp_path / "ds")
    with pytest.raises(gpucache.Error, match=r"memory\[1\]\.x.*holds a object"):
        gpucache.pack([{"x": 1.0}, {"x": object()}], tmp_path / "ds")


def test_a_mixed_project_through_python_and_the_cli_packs_the_same_dataset(tmp_path):
    torch.save(dialogue_rows(), tmp_path / "dialogue.pt")
    torch.save({"embeddings": torch.ones(3, 8) / 2, "texts": ["a", "b", "c"]},
               tmp_path / "vectors.pt")
    torch.save(llm_cache() | {"short": torch.ones(8)}, tmp_path / "cache.pt")
    inputs = [
        gpucache.Input(tmp_path / "dialogue.pt",
                       fields={"embedding": "[*].question_embedding", "text": "[*].question"}),
        gpucache.Input(tmp_path / "dialogue.pt",
                       fields=["embedding=[*].answer_embedding", "text=[*].answer"]),
        gpucache.Input(tmp_path / "vectors.pt", fields={"embedding": "embeddings",
                                                        "text": "texts"}),
        tmp_path / "cache.pt",  # a plain path: detected on its own
    ]
    result = gpucache.pack(inputs, tmp_path / "py")
    assert result["rows"] == 4 + 4 + 3 + 6
    # A list of str per row cannot be stored: left out, with why, for each entry of the file.
    assert [(e["field"], bool(e["reason"])) for e in result["left_out"]] == [("[*].tags", True)] * 2
    not_selected = {(e["input"], e["field"]) for e in result["not_selected"]}
    # The file listed twice is told apart by its place among the inputs.
    assert (f"{tmp_path / 'dialogue.pt'} (input 0)", "[*].label") in not_selected
    assert (f"{tmp_path / 'dialogue.pt'} (input 1)", "[*].question") in not_selected
    ds = gpucache.load(tmp_path / "py", device="cpu", columns=["embedding", "text", "@source"])
    assert ds.tensors["@source"].tolist() == [0] * 4 + [1] * 4 + [2] * 3 + [3] * 6
    rows = dialogue_rows()
    assert ds.texts("text")[:8] == ([r["question"] for r in rows] + [r["answer"] for r in rows])
    assert torch.equal(ds.tensors["embedding"][4:8],
                       torch.stack([r["answer_embedding"] for r in rows]))

    import json
    (tmp_path / "project.json").write_text(json.dumps({"inputs": [
        {"path": "dialogue.pt", "fields": {"embedding": "[*].question_embedding",
                                           "text": "[*].question"}},
        {"path": "dialogue.pt", "fields": {"embedding": "[*].answer_embedding",
                                           "text": "[*].answer"}},
        {"path": "vectors.pt", "fields": {"embedding": "embeddings", "text": "texts"}},
        {"path": "cache.pt"}]}))
    cli = subprocess.run([str(_tool("src/cli/gpucache")), "pack", "--input-map",
                          str(tmp_path / "project.json"), "-o", str(tmp_path / "cli"), "--quiet"],
                         capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr
    from_cli = gpucache.load(tmp_path / "cli", device="cpu")
    assert torch.equal(from_cli.tensors["embedding"], ds.tensors["embedding"])
    assert from_cli.texts("text") == ds.texts("text")


def test_a_mixed_project_whose_columns_do_not_line_up_names_the_input_and_the_column(tmp_path):
    torch.save(torch.ones(3, 8), tmp_path / "matrix.pt")
    torch.save(llm_cache(), tmp_path / "cache.pt")
    with pytest.raises(gpucache.Error) as error:
        gpucache.pack([gpucache.Input(tmp_path / "cache.pt"),
                       gpucache.Input(tmp_path / "matrix.pt")], tmp_path / "ds")
    message = str(error.value)
    assert "matrix.pt (embeddings) has no column 'text', which " in message
    assert "fields={'text': PATH}" in message
    assert "fill={'text': ''}" in message
    # fill= gives the matrix the text it lacks, the same in every row.
    result = gpucache.pack([gpucache.Input(tmp_path / "cache.pt"),
                            gpucache.Input(tmp_path / "matrix.pt", fill={"text": "-"})],
                           tmp_path / "filled")
    assert result["rows"] == 5 + 3
    filled = gpucache.load(tmp_path / "filled", device="cpu")
    assert filled.texts("text") == list(llm_cache()) + ["-"] * 3
    with pytest.raises(gpucache.Error, match=r"gpucache\.Input\(PATH, kind=\.\.\."):
        gpucache.pack([gpucache.Input(tmp_path / "cache.pt")], tmp_path / "ds2",
                      fields={"embedding": "."})




@pytest.mark.parametrize("given", ["memory", "npy"])
def test_an_f64_embedding_loads_as_float64_unless_dtype_asks(tmp_path, given):
    """Item 4 of issue 27: an f64 embedding (padded, norm-checked) is stored as f64, values
    bit-identical; dtype="f32" converts it and reports the conversion as not exact."""
    import json
    values = numpy.arange(40, dtype=numpy.float64).reshape(8, 5) / 7 + 1 / 3  # not f32 values
    numpy.save(tmp_path / "emb.npy", values)
    source = {"embedding": values} if given == "memory" else tmp_path / "emb.npy"
    result = gpucache.pack(source, tmp_path / "ds")
    assert result["rows"] == 8 and result["stored_as"] == []
    column = json.loads((tmp_path / "ds" / "manifest.json").read_text())["columns"][0]
    assert (column["name"], column["dtype"], column["padded_dim"]) == ("embedding", "f64", 16)
    expected = torch.from_numpy(values)
    ds = gpucache.load(tmp_path / "ds", device="cpu")
    assert ds.tensors["embedding"].dtype == torch.float64
    assert torch.equal(ds.tensors["embedding"], expected)
    assert torch.equal(ds[3]["embedding"], expected[3])
    batches = list(gpucache.GPUBatches(ds, batch_size=3, seed=1))
    assert all(b["embedding"].dtype == torch.float64 for b in batches)
    shuffled = torch.cat([b["embedding"] for b in batches])  # every row once, in some order
    assert torch.equal(shuffled[shuffled[:, 0].argsort()], expected)
    streamed = list(gpucache.stream(tmp_path / "ds", device="cpu", batch_size=4, shuffle=False))
    assert torch.equal(torch.cat([b["embedding"] for b in streamed]), expected)
    assert gpucache.verify(tmp_path / "ds", deep=True)["ok"]
    gpucache.export(tmp_path / "ds", "npy", tmp_path / "out")
    exported = numpy.load(tmp_path / "out" / "embedding.npy")
    assert exported.dtype == numpy.float64 and numpy.array_equal(exported, values)

    converted = gpucache.pack(source, tmp_path / "f32", dtype="f32")
    assert converted["stored_as"] == [{"column": "embedding", "from": "f64", "to": "f32",
                                       "asked": True, "exact": False}]
    f32 = gpucache.load(tmp_path / "f32", device="cpu").tensors["embedding"]
    assert f32.dtype == torch.float32 and torch.equal(f32, expected.float())


def test_a_mixed_project_resumed_or_appended_with_another_mapping(tmp_path):
    """Each gpucache.Input's mapping is recorded: resume refuses another one, naming it; append
    compares what is stored, so another mapping to the same columns joins."""
    import json
    torch.save(dialogue_rows(), tmp_path / "dialogue.pt")

    def project(side, roles=None):
        return [gpucache.Input(tmp_path / "dialogue.pt", roles=roles,
                               fields={"embedding": f"[*].{s}_embedding", "text": f"[*].{s}"})
                for s in ("question", side)]

    ds = tmp_path / "ds"
    assert gpucache.pack(project("answer"), ds)["rows"] == 8
    options = json.loads((ds / "manifest.json").read_text())["options"]
    assert options["input_map"][1]["fields"] == {"embedding": "[*].answer_embedding",
                                                 "text": "[*].answer"}
    # Interrupted (the recorded plan's options, no manifest yet), then resumed with questions.
    (ds / "manifest.json").unlink()
    (ds / "pack-state.json").write_text(json.dumps({"options": options}))
    with pytest.raises(gpucache.Error,
                       match=r"option input_map is .*answer_embedding.* in the interrupted pack "
                             r"but .*question_embedding.* in this run"):
        gpucache.pack(project("question"), ds, resume=True)

    gpucache.pack(project("answer"), ds, force=True)
    assert gpucache.pack(project("question"), append=ds)["rows"] == 8
    assert len(gpucache.load(ds, device="cpu")) == 16
    with pytest.raises(gpucache.Error, match="embedding"):
        gpucache.pack(project("answer", roles={"embedding": "tensor"}), append=ds)
    assert gpucache.verify(ds)["ok"]
