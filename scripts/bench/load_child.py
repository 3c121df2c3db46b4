#!/usr/bin/env python3
"""Measures one loader on one kind of data in a fresh process (so no loader inherits another's
memory or caches), and prints one JSON line.

Per repetition, from the call into the loader:
  first  seconds until the first usable embedding tensor is in hand (the loader returned and
         the first tensor was taken from its result);
  full   seconds until one full pass over every embedding value is done as well (a torch sum of
         every tensor the loader handed back; for per-row .pt layouts, of every row's tensor).
Imports are not timed, nor are the --warmup repetitions.
"""
from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpucache_adapter  # noqa: E402

warnings.filterwarnings("ignore")  # torch warns about read-only (mmap) numpy arrays


def load_torch(paths, device):
    import torch
    return [torch.load(p, map_location=device) for p in paths]


def load_safetensors(paths, device):
    from safetensors.torch import load_file
    return [load_file(str(p), device=device) for p in paths]


def load_numpy_mmap(paths, device):
    import numpy as np
    return [np.load(p, mmap_mode="r") for p in paths]


def first_tensor(obj):
    """The first embedding tensor of a loaded object, in the layout the loader returned."""
    import torch
    if isinstance(obj, list) and obj and isinstance(obj[0], dict):  # dialogue list of dicts
        return obj[0]["question_embedding"]
    if isinstance(obj, dict):
        value = next(iter(obj.values()))
        return value
    if isinstance(obj, torch.Tensor) or hasattr(obj, "shape"):
        return obj
    raise TypeError(f"no tensor in {type(obj).__name__}")


def full_pass(obj) -> float:
    import numpy as np
    import torch
    total = 0.0
    if isinstance(obj, list) and obj and isinstance(obj[0], dict):
        for row in obj:
            total += float(row["question_embedding"].sum()) + float(row["answer_embedding"].sum())
        return total
    values = obj.values() if isinstance(obj, dict) else [obj]
    for value in values:
        if isinstance(value, np.ndarray):
            value = torch.from_numpy(np.asarray(value))
        total += float(value.sum())
    return total


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--loader", required=True,
                        choices=["torch", "safetensors", "numpy_mmap", "gpucache"])
    parser.add_argument("--paths", nargs="+", required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--verify", type=int, default=1)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    args = parser.parse_args()

    import torch  # imported before timing for every loader alike
    if args.loader == "gpucache":
        gpucache_adapter.require("load")

    def synchronize():
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()

    def one():
        gc.collect()
        start = time.perf_counter()
        if args.loader == "gpucache":
            loaded = [gpucache_adapter.load(p, args.device, bool(args.verify)) for p in args.paths]
            objects = [gpucache_adapter.tensors(x) for x in loaded]
            first_tensor(objects[0][0])
            synchronize()
            t_first = time.perf_counter() - start
            for tensors in objects:
                for t in tensors:
                    full_pass(t)
        else:
            loader = {"torch": load_torch, "safetensors": load_safetensors,
                      "numpy_mmap": load_numpy_mmap}[args.loader]
            objects = loader(args.paths, args.device)
            first_tensor(objects[0])
            synchronize()
            t_first = time.perf_counter() - start
            for obj in objects:
                full_pass(obj)
        synchronize()
        t_full = time.perf_counter() - start
        del objects
        return t_first, t_full

    try:
        for _ in range(args.warmup):
            one()
        first, full = [], []
        for _ in range(args.reps):
            a, b = one()
            first.append(a)
            full.append(b)
    except gpucache_adapter.FeatureMissing as error:
        print(json.dumps({"not_available": str(error)}))
        return 0
    print(json.dumps({"first": first, "full": full}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
