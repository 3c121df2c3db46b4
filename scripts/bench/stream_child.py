#!/usr/bin/env python3
"""Rows per second of shuffled batches on the CPU, in a fresh process, for issue #15's contenders:
gpucache.stream (full shuffle and block mode), gpucache.GPUBatches over the resident dataset (CPU),
and torch's DataLoader over a TensorDataset of the same rows with shuffle (0 and 2 workers).
Each contender yields --batches batches of --batch-size rows after two warm-up batches, and
touches each batch (a sum over its first column) as training would. Prints one JSON line:
{"contender": {"rows_per_s": [...], "rows": N}} per repetition.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpucache_adapter  # noqa: E402


def timed(batches, count: int, batch_size: int) -> float:
    """Rows per second over `count` batches after two warm-up batches."""
    iterator = iter(batches)
    for _ in range(2):
        next(iterator)
    start = time.perf_counter()
    for _ in range(count):
        batch = next(iterator)
        first = next(iter(batch.values())) if isinstance(batch, dict) else batch[0]
        float(first[0, 0])  # touch the batch as a training step would, cheaply
    return count * batch_size / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--npy", required=True)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--batches", type=int, default=48)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    import numpy as np
    import torch
    try:
        gpucache = gpucache_adapter.require("stream") and gpucache_adapter.module()
    except gpucache_adapter.FeatureMissing as error:
        print(json.dumps({"not_available": str(error)}))
        return 0
    rows = np.load(args.npy, mmap_mode="r")
    tensor = torch.from_numpy(np.ascontiguousarray(rows))  # resident, as users hold it
    dataset = gpucache.load(args.dataset, device="cpu", verify=False)
    b = args.batch_size
    contenders = {
        "stream_full": lambda: gpucache.stream(args.dataset, device="cpu", batch_size=b,
                                               seed=0, rank=0, world_size=1),
        "stream_block": lambda: gpucache.stream(args.dataset, device="cpu", batch_size=b,
                                                seed=0, rank=0, world_size=1,
                                                block_rows=16 * b, window_blocks=4),
        "gpubatches_cpu": lambda: gpucache.GPUBatches(dataset, batch_size=b, shuffle=True,
                                                      seed=0, rank=0, world_size=1),
    }
    for workers in (0, 2):
        contenders[f"dataloader_{workers}_workers"] = (
            lambda workers=workers: torch.utils.data.DataLoader(
                torch.utils.data.TensorDataset(tensor), batch_size=b, shuffle=True,
                num_workers=workers, persistent_workers=False))
    out = {name: {"rows_per_s": [], "rows": args.batches * b} for name in contenders}
    for _ in range(args.reps):
        for name, make in contenders.items():
            out[name]["rows_per_s"].append(timed(make(), args.batches, b))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
