#!/usr/bin/env python3
"""Writes one tiny valid input per format and layout into the given folder and prints
{"<format> <layout>": path} as JSON, so the driver can ask the CLI which ones it packs."""
import json
import sys
from pathlib import Path

import numpy as np
import torch

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
g = torch.Generator().manual_seed(7)
q = torch.randn(8, 16, generator=g) / 4
a = torch.randn(8, 16, generator=g) / 4
paths = {}


def put(name, path):
    paths[name] = str(path)


np.save(out / "emb.npy", q.numpy())
put(".npy", out / "emb.npy")
torch.save(q, out / "emb.pt")
put(".pt embeddings", out / "emb.pt")
torch.save([{"question": f"q{i}", "answer": f"a{i}", "question_embedding": q[i].clone(),
             "answer_embedding": a[i].clone()} for i in range(8)], out / "dialogue.pt")
put(".pt dialogue", out / "dialogue.pt")
torch.save({f"text {i}": q[i].clone() for i in range(8)}, out / "llm.pt")
put(".pt llm-cache", out / "llm.pt")
try:
    from safetensors.torch import save_file
    save_file({"embedding": q}, str(out / "emb.safetensors"))
    put(".safetensors embeddings", out / "emb.safetensors")
    save_file({"question_embedding": q, "answer_embedding": a}, str(out / "dialogue.safetensors"))
    put(".safetensors dialogue", out / "dialogue.safetensors")
except ImportError:
    pass
with open(out / "llm.jsonl", "w") as handle:
    for i in range(8):
        handle.write(json.dumps({"text": f"text {i}", "embedding": q[i].tolist()}) + "\n")
put(".jsonl llm-cache", out / "llm.jsonl")
print(json.dumps(paths))
