#!/usr/bin/env python3
"""Loads a gpucache dataset on the CPU in a fresh process and reports whether its tensors are views
of the shard files' mappings (zero-copy), with the time to the first tensor and the resident
memory the load added. Prints one JSON line.

Zero-copy is shown, not assumed: each tensor's first and last byte must lie inside a file-backed
mapping of a shard file (/proc/self/maps), and resident memory may grow by far less than the
data's size until the values are read.
"""
from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpucache_adapter  # noqa: E402


def resident_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def file_mappings() -> list:
    """(start, end, path) of every file-backed mapping of this process."""
    out = []
    for line in Path("/proc/self/maps").read_text().splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and parts[5].startswith("/"):
            start, end = (int(x, 16) for x in parts[0].split("-"))
            out.append((start, end, parts[5]))
    return out


def inside_shard(address: int, mappings: list, dataset: Path) -> bool:
    root = str(dataset.resolve())
    return any(start <= address < end and path.startswith(root) and path.endswith(".gcs")
               for start, end, path in mappings)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", required=True, type=Path)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    import torch  # noqa: F401  imported before timing

    try:
        gpucache_adapter.require("load")
        times, growth, zero_copy, size = [], [], True, 0
        for _ in range(args.reps + 1):  # the first is a warm-up
            gc.collect()
            before = resident_bytes()
            start = time.perf_counter()
            tensors = gpucache_adapter.tensors(gpucache_adapter.load(args.dataset, "cpu", False))
            elapsed = time.perf_counter() - start
            grown = resident_bytes() - before
            mappings = file_mappings()
            size = sum(t.numel() * t.element_size() for t in tensors)
            for t in tensors:
                last = t.data_ptr() + t.numel() * t.element_size() - 1
                zero_copy &= inside_shard(t.data_ptr(), mappings, args.dataset)
                zero_copy &= inside_shard(last, mappings, args.dataset)
            times.append(elapsed)
            growth.append(grown)
            del tensors
    except gpucache_adapter.FeatureMissing as error:
        print(json.dumps({"not_available": str(error)}))
        return 0
    print(json.dumps({"first": times[1:], "rss_growth": max(growth[1:]), "bytes": size,
                      "zero_copy": bool(zero_copy)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
