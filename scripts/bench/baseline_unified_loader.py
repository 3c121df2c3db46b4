#!/usr/bin/env python3
"""The users' current training-start path, reproduced as they describe it (docs/users.md):

  1. torch.load(map_location="cpu") of each .pt file, one after the other: dialogue
     (list of dicts), prepared embeddings ([N, D] tensor, or a dict holding one) and LLM caches
     (dict text -> tensor);
  2. validate row by row in Python: `norm = torch.norm(emb).item(); if norm < 0.1 or norm > 100.0:
     drop`, plus a NaN check — one .item() host sync per check and row;
  3. stack the kept rows and copy them to the device with .to(device) (no pinned memory).

This is the peer that `gpucache pack` + `gpucache.load` is measured against; it is deliberately
not optimised. `python_pack_dialogue` is the Python equivalent of packing a list-of-dicts dialogue
file: load, validate per row, torch.save the result.

Run on its own:
  python baseline_unified_loader.py --dialogue d.pt --embeddings e.pt --llm-cache l.pt \
      --device cpu --reps 3
prints one JSON line with the seconds of every repetition and the rows kept.
"""
from __future__ import annotations

import argparse
import gc
import json
import sys
import time

import torch

NORM_MIN = 0.1
NORM_MAX = 100.0


def is_valid(embedding: torch.Tensor) -> bool:
    if torch.isnan(embedding).any().item():
        return False
    norm = torch.norm(embedding).item()
    if norm < NORM_MIN or norm > NORM_MAX:
        return False
    return True


def load_dialogue(path):
    data = torch.load(path, map_location="cpu")
    questions, answers, q_embeddings, a_embeddings = [], [], [], []
    for item in data:
        q, a = item["question_embedding"], item["answer_embedding"]
        if not is_valid(q) or not is_valid(a):
            continue
        questions.append(item["question"])
        answers.append(item["answer"])
        q_embeddings.append(q)
        a_embeddings.append(a)
    return {"question": questions, "answer": answers,
            "question_embedding": torch.stack(q_embeddings),
            "answer_embedding": torch.stack(a_embeddings)}


def load_embeddings(path):
    data = torch.load(path, map_location="cpu")
    if isinstance(data, dict):  # {"embeddings": tensor, "metadata": ...}
        data = next(v for v in data.values() if isinstance(v, torch.Tensor) and v.dim() == 2)
    kept = [row for row in data if is_valid(row)]
    return {"embedding": torch.stack(kept)}


def load_llm_cache(path):
    data = torch.load(path, map_location="cpu")
    texts, embeddings = [], []
    for text, embedding in data.items():
        if not is_valid(embedding):
            continue
        texts.append(text)
        embeddings.append(embedding)
    return {"text": texts, "embedding": torch.stack(embeddings)}


def to_device(columns: dict, device: str) -> dict:
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in columns.items()}


def load_unified(dialogue=(), embeddings=(), llm_cache=(), device="cpu") -> dict:
    """Every file of every kind, loaded, validated, stacked and moved to `device`."""
    out = {}
    for path in dialogue:
        out[str(path)] = to_device(load_dialogue(path), device)
    for path in embeddings:
        out[str(path)] = to_device(load_embeddings(path), device)
    for path in llm_cache:
        out[str(path)] = to_device(load_llm_cache(path), device)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return out


def python_pack_dialogue(source, destination):
    """Python path of packing a dialogue file: load, validate per row, save the result."""
    columns = load_dialogue(source)
    torch.save(columns, destination)
    return len(columns["question"])


def rows_kept(result: dict) -> dict:
    return {path: int(next(v for v in cols.values() if isinstance(v, torch.Tensor)).shape[0])
            for path, cols in result.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dialogue", action="append", default=[])
    parser.add_argument("--embeddings", action="append", default=[])
    parser.add_argument("--llm-cache", action="append", default=[])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=0)
    parser.add_argument("--pack-dialogue-to", help="time python_pack_dialogue instead")
    args = parser.parse_args(argv)
    samples, kept = [], None
    for rep in range(args.warmup + args.reps):
        gc.collect()
        start = time.perf_counter()
        if args.pack_dialogue_to:
            kept = {args.dialogue[0]: python_pack_dialogue(args.dialogue[0], args.pack_dialogue_to)}
            seconds = time.perf_counter() - start
        else:
            result = load_unified(args.dialogue, args.embeddings, args.llm_cache, args.device)
            seconds = time.perf_counter() - start
            kept = rows_kept(result)
            del result
        if rep >= args.warmup:
            samples.append(seconds)
    print(json.dumps({"samples": samples, "rows_kept": kept, "torch": torch.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
