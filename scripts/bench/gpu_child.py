#!/usr/bin/env python3
"""GPU measurements, in their own process so that CUDA start-up never touches the CPU figures.
Prints one JSON object: {"gpu": false, "reason": ...} on a machine without a usable GPU, else
{"gpu": true, "device": ..., "results": {name: {"samples": [...]} or {"reason": ...}}}.

Every GPU time is wall-clock from the call to torch.cuda.synchronize() after the data is on the
device; the pinned host-to-device and device-to-device copies are timed with CUDA events.
"""
from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpucache_adapter  # noqa: E402

warnings.filterwarnings("ignore")


def no_gpu_reason():
    try:
        import torch
    except ImportError as error:
        return f"torch is not importable ({error})"
    if not torch.cuda.is_available():
        if torch.version.cuda is None:
            return "no GPU (torch.cuda.is_available() is False; this torch build has no CUDA)"
        return "no GPU (torch.cuda.is_available() is False)"
    return None


def event_seconds(fn, reps, warmup=1):
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) / 1e3)
    return out


def wall_seconds(fn, reps, warmup=1):
    import torch
    out = []
    for rep in range(warmup + reps):
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.synchronize()
        start = time.perf_counter()
        keep = fn()
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        del keep
        if rep >= warmup:
            out.append(seconds)
    return out


def attempt(results, name, fn):
    try:
        results[name] = {"samples": fn()}
    except gpucache_adapter.FeatureMissing as error:
        results[name] = {"reason": f"not available in this build: {error}"}
    except Exception as error:  # a failing case must not hide the others
        results[name] = {"reason": f"failed: {type(error).__name__}: {error}"}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pt", required=True)
    parser.add_argument("--safetensors", required=True)
    parser.add_argument("--dataset")
    parser.add_argument("--bytes", type=int, required=True)
    parser.add_argument("--validate-bench")
    parser.add_argument("--rows", type=int, required=True, help="rows for the validation run")
    parser.add_argument("--embed-rows", type=int, required=True)
    parser.add_argument("--dim", type=int, required=True)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--batches", type=int, default=200)
    args = parser.parse_args()

    reason = no_gpu_reason()
    if reason:
        print(json.dumps({"gpu": False, "reason": reason}))
        return 0
    import torch
    device = torch.device("cuda")
    props = torch.cuda.get_device_properties(device)
    results, info = {}, {}
    size = args.bytes

    def h2d():
        src = torch.empty(size, dtype=torch.uint8).pin_memory()
        dst = torch.empty(size, dtype=torch.uint8, device=device)
        return event_seconds(lambda: dst.copy_(src, non_blocking=True), args.reps)

    def d2d():
        src = torch.empty(size, dtype=torch.uint8, device=device)
        dst = torch.empty_like(src)
        return event_seconds(lambda: dst.copy_(src), args.reps)

    attempt(results, "h2d_pinned", h2d)
    attempt(results, "d2d", d2d)
    for verify in (False, True):
        def load(verify=verify):
            if not args.dataset:
                raise gpucache_adapter.FeatureMissing("no packed dataset")
            gpucache_adapter.require("load")
            return wall_seconds(lambda: gpucache_adapter.tensors(
                gpucache_adapter.load(args.dataset, "cuda", verify)), args.reps)
        attempt(results, f"gpucache_load_verify{int(verify)}", load)
    attempt(results, "torch_load_cuda",
            lambda: wall_seconds(lambda: torch.load(args.pt, map_location="cuda"), args.reps))

    def safetensors_cuda():
        from safetensors.torch import load_file
        return wall_seconds(lambda: load_file(args.safetensors, device="cuda"), args.reps)
    attempt(results, "safetensors_cuda", safetensors_cuda)

    def validation():
        if not args.validate_bench:
            raise gpucache_adapter.FeatureMissing("gpucache_bench_validate is not built")
        run = subprocess.run([args.validate_bench, "--rows", str(args.rows), "--dim",
                              str(args.dim), "--device", "cuda", "--threads", "0", "--reps",
                              str(args.reps)], capture_output=True, text=True)
        if run.returncode != 0:
            message = (run.stderr.strip().splitlines() or ["exit code %d" % run.returncode])[-1]
            if "CUDA" in message or "cuda" in message:
                raise gpucache_adapter.FeatureMissing(message)
            raise RuntimeError(message)
        data = json.loads(run.stdout.strip().splitlines()[-1])
        info["validation_bytes"] = data["bytes"]
        info["validation_description"] = data["description"]
        return data["check"]
    attempt(results, "validation_cuda", validation)

    def d2d_validation_bytes():
        n = info.get("validation_bytes", args.rows * args.dim * 4)
        src = torch.empty(n, dtype=torch.uint8, device=device)
        dst = torch.empty_like(src)
        return event_seconds(lambda: dst.copy_(src), args.reps)
    attempt(results, "d2d_validation_bytes", d2d_validation_bytes)

    def batches(kind):
        n = min(args.batches, max(1, args.embed_rows // args.batch_size))
        if kind == "dataloader":
            from torch.utils.data import DataLoader, TensorDataset
            data = torch.load(args.pt, map_location="cpu")  # the same values as the dataset
            loader = DataLoader(TensorDataset(data), batch_size=args.batch_size, shuffle=True,
                                pin_memory=True, drop_last=True)

            def epoch():
                for i, (batch,) in enumerate(loader):
                    batch.to(device, non_blocking=True)
                    if i + 1 == n:
                        break
        else:
            if not args.dataset:
                raise gpucache_adapter.FeatureMissing("no packed dataset")
            loaded = gpucache_adapter.load(args.dataset, "cuda", False)
            iterator_source = gpucache_adapter.gpu_batches(loaded, args.batch_size)

            def epoch():
                for i, batch in enumerate(iterator_source):
                    if i + 1 == n:
                        break
        info[f"batches_{kind}_count"] = n
        return wall_seconds(epoch, args.reps)
    attempt(results, "batches_dataloader", lambda: batches("dataloader"))
    attempt(results, "batches_gpucache", lambda: batches("gpucache"))

    def stream_cuda():
        # The same number of batches as the DataLoader, read from the shards (page cache warm)
        # and copied to the GPU on the stream's own CUDA stream, prefetched.
        if not args.dataset:
            raise gpucache_adapter.FeatureMissing("no packed dataset")
        stream = gpucache_adapter.require("stream")
        n = min(args.batches, max(1, args.embed_rows // args.batch_size))

        def epoch():
            batches = stream(args.dataset, device="cuda", batch_size=args.batch_size, seed=0,
                             rank=0, world_size=1)
            for i, _ in enumerate(batches):
                if i + 1 == n:
                    break
        info["batches_stream_count"] = n
        return wall_seconds(epoch, args.reps)
    attempt(results, "batches_stream_cuda", stream_cuda)

    print(json.dumps({"gpu": True, "device": f"{props.name}, {props.total_memory / 2**30:.0f} GiB",
                      "torch_cuda": torch.version.cuda, "results": results,
                      "info": info}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
