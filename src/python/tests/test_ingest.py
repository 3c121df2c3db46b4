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
