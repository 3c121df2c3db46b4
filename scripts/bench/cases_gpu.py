"""GPU comparisons (issue item 5). Runs gpu_child.py and turns its output into Comparisons; on a
machine without a GPU every comparison is recorded as "not measured: no GPU"."""
from __future__ import annotations

from benchlib import Comparison, Measure, Stats
from context import Context

SPECS = [
    # id, title, subject key, subject label, peer key, peer label, notes
    ("gpu_load_verify0_vs_h2d", "gpucache.load(cuda, verify=False) vs pinned H2D copy",
     "gpucache_load_verify0", "gpucache.load(device='cuda', verify=False)",
     "h2d_pinned", "pinned host→device copy (torch, CUDA events)",
     "Ratio = fraction of the peak pinned host-to-device bandwidth reached."),
    ("gpu_load_verify1_vs_h2d", "gpucache.load(cuda, verify=True) vs pinned H2D copy",
     "gpucache_load_verify1", "gpucache.load(device='cuda', verify=True)",
     "h2d_pinned", "pinned host→device copy (torch, CUDA events)",
     "Ratio = fraction of the peak pinned host-to-device bandwidth reached."),
    ("gpu_load_verify0_vs_safetensors", "gpucache.load(cuda, verify=False) vs safetensors "
     "load_file(device='cuda')", "gpucache_load_verify0",
     "gpucache.load(device='cuda', verify=False)", "safetensors_cuda",
     "safetensors load_file(device='cuda')", ""),
    ("gpu_load_verify1_vs_safetensors", "gpucache.load(cuda, verify=True) vs safetensors "
     "load_file(device='cuda')", "gpucache_load_verify1",
     "gpucache.load(device='cuda', verify=True)", "safetensors_cuda",
     "safetensors load_file(device='cuda')", ""),
    ("gpu_load_verify0_vs_torch", "gpucache.load(cuda, verify=False) vs torch.load("
     "map_location='cuda')", "gpucache_load_verify0", "gpucache.load(device='cuda', verify=False)",
     "torch_load_cuda", "torch.load(map_location='cuda')", ""),
    ("gpu_load_verify1_vs_torch", "gpucache.load(cuda, verify=True) vs torch.load("
     "map_location='cuda')", "gpucache_load_verify1", "gpucache.load(device='cuda', verify=True)",
     "torch_load_cuda", "torch.load(map_location='cuda')", ""),
    ("gpu_validation_vs_d2d", "validation on the GPU vs device-to-device copy of the same bytes",
     "validation_cuda", "Validator check pass, device=cuda", "d2d_validation_bytes",
     "device→device copy (torch, CUDA events)",
     "Measured through the public Validator API with rows in host memory, so it includes the "
     "host→device staging: a lower bound of the kernels' own bandwidth."),
    ("gpu_batches_vs_dataloader", "GPUBatches vs torch DataLoader (same tensors, batch 1024)",
     "batches_gpucache", "gpucache.GPUBatches(shuffle=True)", "batches_dataloader",
     "DataLoader(TensorDataset, shuffle=True, pin_memory=True, num_workers=0) + "
     ".to('cuda', non_blocking=True)",
     "Same number of batches each; ratio = batches per second relative to the DataLoader."),
    ("gpu_stream_vs_dataloader", "gpucache.stream(cuda) vs torch DataLoader (same rows, batch 1024)",
     "batches_stream_cuda", "gpucache.stream(device='cuda') from the shards",
     "batches_dataloader",
     "DataLoader(TensorDataset, shuffle=True, pin_memory=True, num_workers=0) + "
     ".to('cuda', non_blocking=True)",
     "Same number of batches each; the stream reads the shards (page cache warm) and copies on "
     "its own CUDA stream; the DataLoader holds the tensor in memory."),
]


def gpu(ctx: Context, dataset_bytes: int, reps: int) -> tuple[list, dict]:
    validate_bench = None
    try:
        validate_bench = ctx.native("gpucache_bench_validate")
    except Exception:
        pass
    dim = ctx.params.embed_dim
    args = ["--pt", ctx.files["emb.pt"], "--safetensors", ctx.files["emb.safetensors"],
            "--bytes", dataset_bytes, "--rows",
            max(1024, min(ctx.params.embed_rows, (1 << 30) // (4 * dim))),
            "--embed-rows", ctx.params.embed_rows, "--dim", dim, "--reps", reps]
    if "embeddings" in ctx.shards:
        args += ["--dataset", ctx.shards["embeddings"]]
    if validate_bench:
        args += ["--validate-bench", validate_bench]
    data = ctx.child("gpu_child.py", args)
    comparisons = []
    if not data.get("gpu"):
        for spec in SPECS:
            comparisons.append(Comparison(id=spec[0], group="gpu", section="gpu", title=spec[1],
                                          status="not_measured",
                                          reason=data.get("reason", "no GPU")))
        return comparisons, data
    results = data["results"]
    info = data.get("info", {})
    for cid, title, skey, slabel, pkey, plabel, notes in SPECS:
        size = info.get("validation_bytes") if cid == "gpu_validation_vs_d2d" else dataset_bytes
        comparison = Comparison(id=cid, group="gpu", section="gpu", title=title, notes=notes)
        subject, peer = results.get(skey, {}), results.get(pkey, {})
        if "samples" in peer:
            comparison.peer = Measure(plabel, Stats(peer["samples"]), None, size)
        if "samples" in subject:
            comparison.subject = Measure(slabel, Stats(subject["samples"]), None, size)
        missing = [r["reason"] for r in (subject, peer) if "reason" in r]
        if missing:
            comparison.reason = "; ".join(missing)
            comparison.status = ("not_available" if all("not available" in m for m in missing)
                                 else "failed")
        comparisons.append(comparison)
    return comparisons, data
