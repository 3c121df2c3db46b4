#!/usr/bin/env python3
"""Regenerates the bundled sample data in examples/data with real torch and numpy.

Run with Debian's interpreter, which has python3-torch and python3-numpy:
    /usr/bin/python3 scripts/make_examples.py
- dialogue.pt: 400 question/answer pairs as users save them (a list of dicts, torch.save), with
  dim-384 embeddings; a few rows are planted broken (NaN, a zero vector, a tiny norm, a duplicate)
  so the demo shows validation at work.
- embeddings-part-{0,1}.npy: a prepared [N, 384] f32 embedding matrix split in two files.
"""
import pathlib

import numpy as np
import torch

out = pathlib.Path(__file__).resolve().parent.parent / "examples" / "data"
out.mkdir(parents=True, exist_ok=True)
generator = torch.Generator().manual_seed(2026)
topics = ["GPUs", "attention", "tokenizers", "embeddings", "optimizers", "batch norm", "dropout", "CUDA streams"]

rows = []
for i in range(400):
    topic = topics[i % len(topics)]
    question = torch.randn(384, generator=generator)
    answer = question + 0.5 * torch.randn(384, generator=generator)
    rows.append({
        "question": f"Question {i}: how do {topic} work?",
        "answer": f"Answer {i}: {topic} explained in a few sentences.",
        "question_embedding": question / question.norm(),
        "answer_embedding": answer / answer.norm(),
    })
rows[17]["question_embedding"][5] = float("nan")
rows[42]["answer_embedding"] = torch.zeros(384)
rows[99]["question_embedding"] = rows[99]["question_embedding"] * 1e-3
rows[250]["question_embedding"] = rows[12]["question_embedding"].clone()
rows[250]["answer_embedding"] = rows[12]["answer_embedding"].clone()
torch.save(rows, out / "dialogue.pt")

rng = np.random.default_rng(2026)
for part, count in (("part-0", 600), ("part-1", 424)):
    x = rng.standard_normal((count, 384)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    np.save(out / f"embeddings-{part}.npy", x)
print(f"wrote {out}")
