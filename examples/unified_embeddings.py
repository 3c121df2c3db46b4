#!/usr/bin/env python3
"""A mixed project packed into one training set: the UnifiedEmbeddingDataset case.

Its users keep three kinds of .pt file, all written with torch.save (examples/data/unified/,
written by torch 2.x: scripts/fixtures/unified_fixtures.py):
  dialogue.pt     question/answer pairs: a list of {question, answer, q_embedding, a_embedding}
  embeddings.pt   prepared embeddings with their texts: {"embeddings": [N, D], "texts": [...]}
  matrix.pt       prepared embeddings as a bare [N, D] tensor, without text
  llm_cache.pt    an LLM cache: {text: [D] tensor}
and used to load each one, validate row by row and concatenate them at every training start.
Here each input gets its own mapping to the dataset's columns `embedding` + `text` (the dialogue
file twice: its questions, then its answers; the bare matrix gets an empty text in every row),
they are packed once into one verified dataset, and
a small model trains on it; `@source` says which input each row came from. The same project is
packed from the CLI with the map file beside the data:

    gpucache pack --input-map examples/data/unified/project.json -o data/unified --dtype f16
    python examples/unified_embeddings.py [--out data/unified]

The task is made up: tell from an embedding which of the five inputs it came from (questions,
answers, prepared passages, the bare matrix, the LLM cache), with @source as the label. Runs on the CPU when there is no
GPU, from any directory (the CLI is reached as `python -m gpucache`).
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

import torch

import gpucache

DATA = pathlib.Path(__file__).resolve().parent / "data" / "unified"


def project_inputs() -> list:
    """The project as gpucache.Input entries: the same mappings as project.json."""
    dialogue, embeddings, matrix, cache = (
        DATA / name for name in ("dialogue.pt", "embeddings.pt", "matrix.pt", "llm_cache.pt"))
    return [
        gpucache.Input(dialogue, fields={"embedding": "[*].q_embedding", "text": "[*].question"}),
        gpucache.Input(dialogue, fields={"embedding": "[*].a_embedding", "text": "[*].answer"}),
        gpucache.Input(embeddings, fields={"embedding": "embeddings", "text": "texts"}),
        # A bare [N, D] tensor: the tensor itself is the embedding; its rows get an empty text.
        gpucache.Input(matrix, fields={"embedding": "."}, fill={"text": ""}),
        gpucache.Input(cache),  # {text: tensor}: an LLM cache, detected as text + embedding
    ]


def pack(out: pathlib.Path) -> dict:
    result = gpucache.pack(project_inputs(), out, dtype="f16", force=True)
    # Nothing is lost unsaid: no field is left out, and each dialogue entry's other side (the one
    # its mapping does not name) is listed as not selected there, packed by the other entry.
    assert result["left_out"] == [], result["left_out"]
    not_selected = {(entry["input"], entry["field"]) for entry in result["not_selected"]}
    print(f"packed {result['rows']} rows from {len(project_inputs())} inputs; "
          f"not selected per input: {sorted(field for _, field in not_selected)}")
    return result


def pack_with_cli(out: pathlib.Path) -> dict:
    """The same project from the CLI's --input-map."""
    completed = subprocess.run(
        [sys.executable, "-m", "gpucache", "pack", "--input-map", str(DATA / "project.json"),
         "-o", str(out), "--dtype", "f16", "--json", "--quiet"],
        check=True, capture_output=True, text=True)
    return json.loads(completed.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="dataset folder to write (default: a temporary one)")
    parser.add_argument("--epochs", type=int, default=20)
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"

    with tempfile.TemporaryDirectory() as scratch:
        out = pathlib.Path(args.out or pathlib.Path(scratch) / "unified")
        result = pack(out)
        from_cli = pack_with_cli(pathlib.Path(scratch) / "from_cli")
        assert from_cli["rows"] == result["rows"], (from_cli["rows"], result["rows"])

        ds = gpucache.load(out, device=device, columns=["embedding", "@source"])
        x_all, source = ds.tensors["embedding"], ds.tensors["@source"].long()
        counts = torch.bincount(source, minlength=5).tolist()
        print(f"loaded {ds}; rows per input: {counts}")
        assert all(counts), counts

        model = torch.nn.Sequential(torch.nn.Linear(x_all.shape[1], 64), torch.nn.ReLU(),
                                    torch.nn.Linear(64, 5)).to(ds.device)
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
        batches = gpucache.GPUBatches(ds, batch_size=64, seed=0)
        for epoch in range(args.epochs):
            batches.set_epoch(epoch)
            total = torch.zeros((), device=ds.device)
            for batch in batches:
                loss = torch.nn.functional.cross_entropy(model(batch["embedding"].float()),
                                                         batch["@source"].long())
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                total += loss.detach()
            if epoch % 5 == 4 or epoch == args.epochs - 1:
                print(f"epoch {epoch}: mean loss {total.item() / len(batches):.4f}")


if __name__ == "__main__":
    main()
