"""The targets set in the issues, each tied to the comparison that measures it. Every target is
always listed, with one of: met, not met, not measured (e.g. no GPU), not available (the feature
is not in this build), failed (the measurement broke; the reason says how).

metric:
  speedup     the comparison's ratio (peer median / gpucache median): "× as fast as the peer"
  time_ratio  gpucache median / peer median: "× the peer's time"
  seconds     the gpucache median alone
  gb_per_s    gpucache bytes / median, in GB/s (1e9 bytes)
"""
from __future__ import annotations

import operator

GIB = 1 << 30
# Targets stated for a data size: (comparison id) -> bytes the gpucache side must have processed
# for the target to be judged (5% slack for rows validation drops); smaller runs show the
# figure as "not evaluated".
MIN_BYTES = {"inspect_big_vs_small": 0.95 * GIB, "pack_pt_single_vs_cp": 0.95 * GIB,
             "pack_images_vs_cp": 0.95 * GIB, "pack_images_nofsync_vs_cp": 0.95 * GIB}

TARGETS = [
    ("verify --threads 1 ≥ 1.0× xxhsum -H3", "cpu", "verify_t1_vs_xxhsum", "speedup", ">=", 1.0),
    ("verify --threads 2 ≥ 1.7× xxhsum -H3", "cpu", "verify_t2_vs_xxhsum", "speedup", ">=", 1.7),
    ("pack .npy f32→f16 ≥ 0.5× cp", "cpu", "pack_npy_f16_vs_cp", "speedup", ">=", 0.5),
    ("inspect < 20 ms on 1 GiB", "cpu", "inspect_big_vs_small", "seconds", "<", 0.020),
    ("pack of 1 GiB .pt single tensor ≥ 0.5× cp", "cpu", "pack_pt_single_vs_cp", "speedup", ">=",
     0.5),
    ("pack of a 1 GiB u8 image .npy (no conversion) ≥ 0.8× cp (like for like: pack --no-fsync, "
     "as cp, leaves the writeback to the kernel; the default pack's ratios to cp and cp + sync "
     "are in the table)", "cpu", "pack_images_nofsync_vs_cp", "speedup", ">=", 0.8),
    ("gpucache.load(cpu) of the images is zero-copy: as fast as numpy's mmap (≥ 0.5×)", "cpu",
     "load_images_cpu_vs_numpy_mmap", "speedup", ">=", 0.5),
    ("dialogue list-of-dicts .pt pack ≥ 10× faster than the Python path", "cpu",
     "pack_dialogue_vs_python", "speedup", ">=", 10.0),
    ("CPU validation ≥ 2 GB/s of f32 per core", "cpu", "validation_cpu_t1", "gb_per_s", ">=", 2.0),
    ("gpucache.load(cpu, verify=False) first tensor ≥ 50× faster than torch.load", "cpu",
     "load_embeddings_first_verify0_vs_torch", "speedup", ">=", 50.0),
    ("gpucache.load(cpu, verify=True) first tensor ≥ 2× faster than torch.load", "cpu",
     "load_embeddings_first_verify1_vs_torch", "speedup", ">=", 2.0),
    ("load (verify=False) + one full pass ≤ 1.2× reading the same bytes with cat", "cpu",
     "load_pass_verify0_vs_cat", "time_ratio", "<=", 1.2),
    ("load (verify=True) + one full pass ≤ 1.2× reading the same bytes with cat", "cpu",
     "load_pass_verify1_vs_cat", "time_ratio", "<=", 1.2),
    ("gpucache.stream (full shuffle, CPU) ≥ 5× the rows/s of torch DataLoader(TensorDataset)",
     "cpu", "stream_full_vs_dataloader", "speedup", ">=", 5.0),
    ("gpucache.stream faster than GPUBatches on the CPU", "cpu", "stream_full_vs_gpubatches_cpu",
     "speedup", ">", 1.0),
    ("stream block mode ≥ 0.8× the sequential read rate of its files", "cpu",
     "stream_block_vs_sequential_read", "speedup", ">=", 0.8),
    ("open one row of a 10,000-shard dataset < 0.1 s", "cpu", "open_slice_10000_vs_10", "seconds",
     "<", 0.1),
    ("open one row of a 100,000-shard dataset < 1 s", "cpu", "open_slice_100000_vs_10", "seconds",
     "<", 1.0),
    ("gpucache.pack from memory (f32, validated, fsynced) ≥ 3× the fastest of HF datasets, "
     "MDSWriter, litdata", "cpu", "writers_memory_f32_vs_fastest", "speedup", ">=", 3.0),
    ("gpucache.pack from Parquet (f32, validated, fsynced) ≥ 3× the fastest of HF datasets, "
     "MDSWriter, litdata", "cpu", "writers_parquet_f32_vs_fastest", "speedup", ">=", 3.0),
    ("GPU: load (verify=False) ≥ 85% of pinned H2D bandwidth", "gpu", "gpu_load_verify0_vs_h2d",
     "speedup", ">=", 0.85),
    ("GPU: load (verify=True) ≥ 85% of pinned H2D bandwidth", "gpu", "gpu_load_verify1_vs_h2d",
     "speedup", ">=", 0.85),
    ("GPU: load ≥ 3× faster than safetensors load_file(cuda)", "gpu",
     "gpu_load_verify0_vs_safetensors", "speedup", ">=", 3.0),
    ("GPU: load ≥ 3× faster than torch.load(cuda)", "gpu", "gpu_load_verify0_vs_torch", "speedup",
     ">=", 3.0),
    ("GPU: validation kernels ≥ 70% of D2D copy bandwidth", "gpu", "gpu_validation_vs_d2d",
     "speedup", ">=", 0.70),
]

OPS = {">=": operator.ge, "<=": operator.le, "<": operator.lt, ">": operator.gt}


def _value(comparison, metric):
    if metric == "speedup":
        return comparison.ratio
    if metric == "time_ratio":
        return 1.0 / comparison.ratio if comparison.ratio else None
    subject = comparison.subject
    if not subject or not subject.stats:
        return None
    if metric == "seconds":
        return subject.stats.median
    if metric == "gb_per_s":
        return subject.bytes / subject.stats.median / 1e9 if subject.bytes else None
    raise ValueError(metric)


def format_value(metric, value):
    if value is None:
        return "-"
    if metric == "seconds":
        return f"{value * 1e3:.1f} ms"
    if metric == "gb_per_s":
        return f"{value:.2f} GB/s"
    return f"{value:.2f}×"


def format_threshold(metric, op, threshold):
    return f"{op} {format_value(metric, threshold)}"


def evaluate(comparisons: dict) -> list:
    out = []
    for text, group, cid, metric, op, threshold in TARGETS:
        comparison = comparisons.get(cid)
        entry = {"target": text, "group": group, "comparison": cid, "metric": metric, "op": op,
                 "threshold": threshold, "value": None,
                 "target_display": format_threshold(metric, op, threshold)}
        if comparison is None:
            entry.update(status="not measured", reason="this run skipped the case")
        elif comparison.status == "measured":
            value = _value(comparison, metric)
            entry["value"] = value
            size = comparison.subject.bytes if comparison.subject else None
            if value is None:
                entry.update(status="failed", reason="no value")
            elif cid in MIN_BYTES and (size or 0) < MIN_BYTES[cid]:
                entry.update(status="not evaluated",
                             reason=f"this run used {size / GIB:.3f} GiB; the target is for 1 GiB "
                                    "(run the default size)")
            else:
                entry["status"] = "met" if OPS[op](value, threshold) else "not met"
                entry["reason"] = ""
        else:
            entry["status"] = {"not_available": "not available", "not_measured": "not measured",
                               "failed": "failed"}.get(comparison.status, comparison.status)
            entry["reason"] = comparison.reason
        entry["value_display"] = format_value(metric, entry["value"])
        out.append(entry)
    return out
