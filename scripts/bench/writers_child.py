#!/usr/bin/env python3
"""Measures the dataset writers on the same rows (the "writers" section, issue #16): gpucache.pack
against Hugging Face datasets, MosaicML streaming's MDSWriter, litdata.optimize, torch.save and
safetensors save_file, each fed from memory and (the first four) from a Parquet file.

  writers_child.py --make PARQUET --rows N --dim D         # writes the input (untimed)
  writers_child.py --parquet PARQUET --scratch DIR --reps R  # measures; prints one JSON line

Every contender runs in this one process, interleaved (A B C ... A B C ...), so drift on a busy
machine hits all alike. Before each run the last output is removed and dirty pages are flushed
(os.sync, untimed). Each run is timed twice: "write" (the writer returns) and "write + fsync"
(then every file it wrote and its folders are fsynced, as gpucache.pack does itself before it
renames a shard into place). Memory runs start from the columns already in memory (numpy arrays, a
list of str); what a writer must build from them (a datasets.Dataset, per-row dicts) is timed.
Parquet runs start from the file path, page cache warm.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
import time
import traceback
from pathlib import Path

import numpy as np


def make(path: Path, rows: int, dim: int) -> None:
    """An embedding dataset: `embedding` fixed_size_list<float32>[dim] (unit-norm rows, all valid,
    so every writer keeps every row), `question` strings, `label` int64."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    rng = np.random.default_rng(16)
    emb = rng.standard_normal((rows, dim), dtype=np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    questions = [f"question {i}: what does row {i * 7919 % rows} of the corpus say about topic "
                 f"{i % 97}?" for i in range(rows)]
    labels = rng.integers(0, 1000, rows, dtype=np.int64)
    table = pa.table({
        "embedding": pa.FixedSizeListArray.from_arrays(pa.array(emb.reshape(-1)), dim),
        "question": pa.array(questions, pa.string()),
        "label": pa.array(labels)})
    # Uncompressed: the decode cost is then pyarrow's, the same for everyone who reads it.
    pq.write_table(table, path, compression="none", row_group_size=16384)


def load_memory(parquet: Path) -> dict:
    import pyarrow.parquet as pq
    table = pq.read_table(parquet)
    emb = table.column("embedding").combine_chunks()
    dim = emb.type.list_size
    return {"embedding": np.ascontiguousarray(emb.values.to_numpy().reshape(-1, dim)),
            "question": table.column("question").to_pylist(),
            "label": np.ascontiguousarray(table.column("label").to_numpy())}


def fsync_tree(path: Path) -> None:
    paths = [path] if path.is_file() else [path, *path.rglob("*")]
    for p in paths:
        flags = os.O_RDONLY | (os.O_DIRECTORY if p.is_dir() else 0)
        fd = os.open(p, flags)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(parent)
    finally:
        os.close(parent)


# ---- the contenders: fn(source, out) where source is the memory dict or the Parquet path ----

def gpucache_pack(source, out: Path, dtype: str = "f32"):
    import gpucache
    # Default checks (finite and norm 0.1..100 on the embedding), CPU validation pinned so a GPU
    # machine measures the same path.
    options = {"device": "cpu"}
    if dtype != "f32":
        options["dtype"] = dtype
    result = gpucache.pack(source if isinstance(source, dict) else str(source), out, **options)
    return result.get("rows_written", result.get("rows"))


def hf_datasets(source, out: Path, cache: Path):
    import datasets
    datasets.disable_progress_bars()
    if isinstance(source, dict):
        dataset = datasets.Dataset.from_dict(source)
    else:
        # load_dataset converts the Parquet file into Arrow files in its cache (a fresh, empty
        # cache folder each run, or the second run would only reuse the first's), then
        # save_to_disk writes the dataset folder.
        dataset = datasets.load_dataset("parquet", data_files=str(source), split="train",
                                        cache_dir=str(cache))
    dataset.save_to_disk(str(out))
    return len(dataset)


MDS_COLUMNS = {"embedding": "ndarray:float32", "question": "str", "label": "int64"}


def mds_writer(source, out: Path):
    from streaming import MDSWriter
    if isinstance(source, dict):
        emb, questions, labels = source["embedding"], source["question"], source["label"]
        with MDSWriter(out=str(out), columns=MDS_COLUMNS, compression=None,
                       size_limit=1 << 28) as writer:
            for i in range(len(questions)):
                writer.write({"embedding": emb[i], "question": questions[i],
                              "label": int(labels[i])})
        return len(questions)
    import pyarrow.parquet as pq
    rows = 0
    with MDSWriter(out=str(out), columns=MDS_COLUMNS, compression=None,
                   size_limit=1 << 28) as writer:
        for batch in pq.ParquetFile(source).iter_batches(batch_size=16384):
            emb = batch.column("embedding")
            emb = emb.values.to_numpy().reshape(len(batch), emb.type.list_size)
            questions = batch.column("question").to_pylist()
            labels = batch.column("label").to_numpy()
            for i in range(len(batch)):
                writer.write({"embedding": emb[i], "question": questions[i],
                              "label": int(labels[i])})
            rows += len(batch)
    return rows


# litdata's workers receive `inputs` items and call fn on each; fn yields the rows of one block.
# The memory columns are module globals so that the forked workers share them without pickling.
_LIT_MEMORY: dict = {}
LIT_BLOCK = 8192


def _lit_rows_memory(start: int):
    emb, questions, labels = (_LIT_MEMORY[k] for k in ("embedding", "question", "label"))
    for i in range(start, min(start + LIT_BLOCK, len(questions))):
        yield {"embedding": emb[i], "question": questions[i], "label": int(labels[i])}


def _lit_rows_parquet(item):
    import pyarrow.parquet as pq
    path, group = item
    batch = pq.ParquetFile(path).read_row_group(group)
    emb = batch.column("embedding").combine_chunks()
    emb = emb.values.to_numpy().reshape(len(batch), emb.type.list_size)
    questions = batch.column("question").to_pylist()
    labels = batch.column("label").to_numpy()
    for i in range(len(batch)):
        yield {"embedding": emb[i], "question": questions[i], "label": int(labels[i])}


def litdata_optimize(source, out: Path, workers: int):
    from litdata import optimize
    if isinstance(source, dict):
        _LIT_MEMORY.update(source)
        rows = len(source["question"])
        fn, inputs = _lit_rows_memory, list(range(0, rows, LIT_BLOCK))
    else:
        import pyarrow.parquet as pq
        meta = pq.ParquetFile(source).metadata
        rows = meta.num_rows
        fn, inputs = _lit_rows_parquet, [(str(source), g) for g in range(meta.num_row_groups)]
    optimize(fn=fn, inputs=inputs, output_dir=str(out), chunk_bytes="256MB",
             num_workers=workers, mode="overwrite", start_method="fork")
    _LIT_MEMORY.clear()
    return rows


def torch_save(source, out: Path):
    import torch
    torch.save({"embedding": torch.from_numpy(source["embedding"]),
                "question": source["question"], "label": torch.from_numpy(source["label"])},
               str(out))
    return len(source["question"])


def safetensors_save(source, out: Path):
    # safetensors stores tensors only: the text column cannot go in (it would need a separate
    # file); embedding and label are written.
    import torch
    from safetensors.torch import save_file
    save_file({"embedding": torch.from_numpy(source["embedding"]),
               "label": torch.from_numpy(source["label"])}, str(out))
    return len(source["question"])


def contenders(scratch: Path, workers: int) -> dict:
    hf_cache = scratch / "hf-cache"
    return {
        "gpucache_memory": (gpucache_pack, "memory", "gpucache"),
        "gpucache_f16_memory": (lambda s, o: gpucache_pack(s, o, "f16"), "memory", "gpucache"),
        "gpucache_parquet": (gpucache_pack, "parquet", "gpucache"),
        "hf_memory": (lambda s, o: hf_datasets(s, o, hf_cache), "memory", "datasets"),
        "hf_parquet": (lambda s, o: hf_datasets(s, o, hf_cache), "parquet", "datasets"),
        "mds_memory": (mds_writer, "memory", "streaming"),
        "mds_parquet": (mds_writer, "parquet", "streaming"),
        "litdata_memory": (lambda s, o: litdata_optimize(s, o, workers), "memory", "litdata"),
        "litdata_parquet": (lambda s, o: litdata_optimize(s, o, workers), "parquet", "litdata"),
        "torch_save_memory": (torch_save, "memory", "torch"),
        "safetensors_memory": (safetensors_save, "memory", "safetensors"),
    }, [hf_cache]


def measure(args) -> dict:
    scratch = Path(args.scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    runs, extra_dirs = contenders(scratch, args.workers)
    if args.only:
        runs = {k: v for k, v in runs.items() if k in args.only.split(",")}
    memory = load_memory(args.parquet)
    results = {name: {"write": [], "write_fsync": [], "rows": None} for name in runs}
    unavailable = {}
    for name, (_, _, module) in runs.items():
        try:
            __import__(module)
        except Exception as error:  # an import can fail with anything (e.g. an old torch)
            unavailable[name] = f"import {module} failed: {type(error).__name__}: {error}"
    failed = {}
    for rep in range(args.warmup + args.reps):
        for name, (fn, source_kind, _) in runs.items():
            if name in unavailable or name in failed:
                continue
            out = scratch / f"out-{name}"
            for path in (out, *extra_dirs):
                if path.is_dir():
                    shutil.rmtree(path)
                elif path.exists():
                    path.unlink()
            gc.collect()
            os.sync()
            source = memory if source_kind == "memory" else args.parquet
            try:
                start = time.perf_counter()
                rows = fn(source, out)
                written = time.perf_counter()
                fsync_tree(out)
                synced = time.perf_counter()
            except Exception as error:
                failed[name] = f"{type(error).__name__}: {error}"
                print(f"writers: {name} failed:\n{traceback.format_exc()}", file=sys.stderr)
                continue
            if rep >= args.warmup:
                results[name]["write"].append(written - start)
                results[name]["write_fsync"].append(synced - start)
            results[name]["rows"] = rows
            results[name]["out_bytes"] = sum(p.stat().st_size for p in out.rglob("*")
                                             if p.is_file()) if out.is_dir() else \
                out.stat().st_size
            print(f"writers: rep {rep} {name}: {written - start:.2f} s "
                  f"(+fsync {synced - written:.2f} s)", file=sys.stderr, flush=True)
    for path in scratch.glob("out-*"):
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    for path in extra_dirs:
        shutil.rmtree(path, ignore_errors=True)
    versions = {}
    for module in ("datasets", "streaming", "litdata", "torch", "safetensors", "pyarrow",
                   "gpucache"):
        try:
            versions[module] = __import__(module).__version__
        except Exception:
            versions[module] = "missing"
    return {"results": results, "unavailable": unavailable, "failed": failed,
            "input_bytes": {"embedding": memory["embedding"].nbytes,
                            "question": sum(len(q.encode()) for q in memory["question"]),
                            "label": memory["label"].nbytes},
            "parquet_bytes": Path(args.parquet).stat().st_size,
            "rows": len(memory["question"]), "dim": int(memory["embedding"].shape[1]),
            "versions": versions}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--make", type=Path)
    parser.add_argument("--rows", type=int)
    parser.add_argument("--dim", type=int)
    parser.add_argument("--parquet", type=Path)
    parser.add_argument("--scratch", type=Path)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=0)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    if args.make:
        make(args.make, args.rows, args.dim)
        print(json.dumps({"parquet": str(args.make)}))
        return 0
    print(json.dumps(measure(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
