"""CPU comparisons: the CLI tools against the Unix tools doing the same bytes, the loaders against
each other, and the users' whole training-start path against pack + load.

Every case function takes the Context and returns a list of Comparisons. A case that needs a
feature this build lacks raises NotAvailable (the driver records the reason); peers that can be
measured without gpucache still are, so their figures appear either way.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import benchlib
from benchlib import Comparison, Measure, NotAvailable, Stats, interleaved, remove, time_command, \
    warm_read
from context import Context, require

CP = ["cp", "--reflink=never"]  # a real copy of the bytes, never a reflink
CP_SYNC = 'cp --reflink=never "$1" "$2" && sync "$2"'  # coreutils sync FILE fsyncs that file


def _fresh(*paths):
    """Untimed set-up before each run: remove the last run's output and flush dirty pages, so
    no run pays for (or profits from) the previous one's writeback."""
    def before():
        for path in paths:
            remove(path)
        os.sync()
    return before


def _copy_runs(src: Path, dst: Path) -> dict:
    return {
        "cp": lambda: time_command(CP + [src, dst], before=_fresh(dst)),
        "cp+sync": lambda: time_command(["sh", "-c", CP_SYNC, "sh", src, dst], before=_fresh(dst)),
    }


def _copy_measures(stats: dict, src: Path, dst: str) -> dict:
    size = src.stat().st_size
    return {
        "cp": Measure("cp", stats["cp"], f"cp --reflink=never {src.name} {dst}", size),
        "cp+sync": Measure("cp + sync", stats["cp+sync"],
                           f"cp --reflink=never {src.name} {dst} && sync {dst}", size),
    }


def _text(argv) -> str:
    """A command for the report: program and file arguments by their base names."""
    return " ".join(Path(str(a)).name if "/" in str(a) else str(a) for a in argv)


# The Python-heavy paths (seconds per run, in a fresh process each) get no warm-up run: the
# page cache is warm already and the budget is better spent on repetitions.
SLOW_WARMUP = 0

PACK_FSYNC_NOTE = ("pack fsyncs every shard and the manifest before renaming them into place "
                   "(crash safety); plain cp does not, so it is also compared with cp followed "
                   "by sync of the copy.")


def pack_npy(ctx: Context) -> list:
    src = ctx.files["emb.npy"]
    size = src.stat().st_size
    out, copy = ctx.scratch / "pack-npy", ctx.scratch / "copy.npy"
    warm_read(src)
    runs = {
        "pack f16": lambda: time_command(ctx.pack(src, "-o", out, "--dtype", "f16", "-q"),
                                         before=_fresh(out)),
        "pack f32": lambda: time_command(ctx.pack(src, "-o", out, "-q"),
                                         before=_fresh(out)),
    } | _copy_runs(src, copy)
    stats = interleaved(runs, ctx.reps)
    remove(out), remove(copy)
    peers = _copy_measures(stats, src, "copy.npy")
    results = []
    for dtype in ("f16", "f32"):
        subject = Measure(f"gpucache pack .npy f32→{dtype}", stats[f"pack {dtype}"],
                          _text(ctx.pack(src, "-o", "OUT", *(["--dtype", "f16"] if dtype == "f16"
                                                             else []), "-q")), size)
        for peer in ("cp", "cp+sync"):
            results.append(Comparison(
                id=f"pack_npy_{dtype}_vs_{peer.replace('+', '_')}", group="cpu", section="tools",
                title=f"pack .npy f32→{dtype} ({benchlib.human_bytes(size)}) vs {peer}",
                subject=subject, peer=peers[peer], notes=PACK_FSYNC_NOTE))
    return results


def pack_images(ctx: Context) -> list:
    """A u8 image .npy packed as it is (a tensor column stored densely, no conversion) against cp,
    then loaded on the CPU: zero-copy means the tensor is a view of the shard's mapping, so the
    load takes what mapping takes, whatever the size (compared with numpy's mmap of the .npy)."""
    src = ctx.files["images.npy"]
    size = src.stat().st_size
    out, copy = ctx.scratch / "pack-images", ctx.scratch / "copy-images.npy"
    warm_read(src)
    runs = {"pack": lambda: time_command(ctx.pack(src, "-o", out, "-q"), before=_fresh(out)),
            "pack --no-fsync": lambda: time_command(ctx.pack(src, "-o", out, "-q", "--no-fsync"),
                                                    before=_fresh(out))} | _copy_runs(src, copy)
    stats = interleaved(runs, ctx.reps)
    remove(copy)
    peers = _copy_measures(stats, src, "copy-images.npy")
    subject = Measure("gpucache pack .npy u8 [N, 3, 224, 224]", stats["pack"],
                      _text(ctx.pack(src, "-o", "OUT", "-q")), size)
    results = [Comparison(id=f"pack_images_vs_{peer.replace('+', '_')}", group="cpu",
                          section="tools",
                          title=f"pack .npy u8 images ({benchlib.human_bytes(size)}) vs {peer}",
                          subject=subject, peer=peers[peer], notes=PACK_FSYNC_NOTE)
               for peer in ("cp", "cp+sync")]
    # Like for like: neither waits for the disk.
    unsynced = Measure("gpucache pack --no-fsync .npy u8 [N, 3, 224, 224]",
                       stats["pack --no-fsync"],
                       _text(ctx.pack(src, "-o", "OUT", "-q", "--no-fsync")), size)
    results.append(Comparison(
        id="pack_images_nofsync_vs_cp", group="cpu", section="tools",
        title=f"pack --no-fsync .npy u8 images ({benchlib.human_bytes(size)}) vs cp",
        subject=unsynced, peer=peers["cp"],
        notes="--no-fsync leaves the writeback to the kernel, as cp does (docs/cli.md)."))

    # One more pack leaves a dataset in place for the load measurement.
    remove(out)
    benchlib.run_command(ctx.pack(src, "-o", out, "-q"))
    warm_read(out)
    mine = ctx.child("zero_copy_child.py", ["--dataset", out, "--reps", ctx.reps])
    theirs = ctx.child("load_child.py", ["--loader", "numpy_mmap", "--reps", ctx.reps,
                                         "--warmup", 1, "--paths", src])
    remove(out)
    comparison = Comparison(id="load_images_cpu_vs_numpy_mmap", group="cpu", section="load",
                            title=f"images ({benchlib.human_bytes(size)}): "
                                  "gpucache.load(cpu, verify=False) vs np.load(mmap_mode='r')")
    if "not_available" in mine:
        comparison.status, comparison.reason = "not_available", mine["not_available"]
        return results + [comparison]
    comparison.extra = {"zero_copy": mine["zero_copy"], "rss_growth": mine["rss_growth"]}
    comparison.notes = (f"zero-copy: {'yes' if mine['zero_copy'] else 'NO'} (the tensor lies "
                        "inside the shard file's mapping); resident memory grew by "
                        f"{benchlib.human_bytes(mine['rss_growth'])} for "
                        f"{benchlib.human_bytes(mine['bytes'])} of images")
    if not mine["zero_copy"]:
        comparison.status, comparison.reason = "failed", "the loaded tensor is a copy"
        return results + [comparison]
    comparison.subject = Measure("gpucache.load(device='cpu', verify=False)",
                                 Stats(mine["first"]), None, mine["bytes"])
    comparison.peer = Measure("np.load(mmap_mode='r')", Stats(theirs["first"]), None, size)
    return results + [comparison]


def pack_pt_single(ctx: Context) -> list:
    require(ctx, "pack .pt embeddings")
    src = ctx.files["emb.pt"]
    size = src.stat().st_size
    out, copy = ctx.scratch / "pack-pt", ctx.scratch / "copy.pt"
    warm_read(src)
    runs = {"pack": lambda: time_command(ctx.pack(src, "-o", out, "-q"),
                                         before=_fresh(out))} | _copy_runs(src, copy)
    stats = interleaved(runs, ctx.reps)
    remove(out), remove(copy)
    peers = _copy_measures(stats, src, "copy.pt")
    subject = Measure("gpucache pack .pt [N, D] tensor", stats["pack"],
                      _text(ctx.pack(src, "-o", "OUT", "-q")), size)
    return [Comparison(id=f"pack_pt_single_vs_{peer.replace('+', '_')}", group="cpu",
                       section="tools",
                       title=f"pack .pt one [N, D] tensor ({benchlib.human_bytes(size)}) vs {peer}",
                       subject=subject, peer=peers[peer], notes=PACK_FSYNC_NOTE)
            for peer in ("cp", "cp+sync")]


def verify(ctx: Context) -> list:
    dataset = ctx.dataset("embeddings")
    shards = sorted(str(p) for p in dataset.glob("*.gcs"))
    size = benchlib.tree_bytes(dataset)
    warm_read(dataset)
    runs = {
        "xxhsum": lambda: time_command(["xxhsum", "-H3"] + shards),
        "t1": lambda: time_command(ctx.cli("verify", dataset, "--threads", "1", "-q")),
        "t2": lambda: time_command(ctx.cli("verify", dataset, "--threads", "2", "-q")),
    }
    deep = ctx.features.get("verify --deep", {}).get("ok")
    if deep:
        runs["deep"] = lambda: time_command(ctx.cli("verify", dataset, "--deep", "-q"))
    stats = interleaved(runs, ctx.reps)
    peer = Measure("xxhsum -H3", stats["xxhsum"], "xxhsum -H3 shard-*.gcs", size)
    note = ("xxhsum is single-threaded and hashes whole files; verify checks the structure, "
            "every 4 MiB chunk hash and the manifest.")
    results = [Comparison(
        id=f"verify_t{n}_vs_xxhsum", group="cpu", section="tools",
        title=f"verify --threads {n} ({benchlib.human_bytes(size)}) vs xxhsum -H3",
        subject=Measure(f"gpucache verify --threads {n}", stats[f"t{n}"],
                        f"gpucache verify DATASET --threads {n} -q", size),
        peer=peer, notes=note) for n in (1, 2)]
    if deep:
        results.append(Comparison(
            id="verify_deep_vs_xxhsum", group="cpu", section="tools",
            title=f"verify --deep, all threads ({benchlib.human_bytes(size)}) vs xxhsum -H3",
            subject=Measure("gpucache verify --deep", stats["deep"],
                            "gpucache verify DATASET --deep -q", size), peer=peer,
            notes="--deep also re-checks every stored row against the manifest's validation "
                  "rules."))
    return results


def inspect(ctx: Context) -> list:
    big, small = ctx.dataset("embeddings"), ctx.dataset("small")
    warm_read(big / "manifest.json", small)
    runs = {"big": lambda: time_command(ctx.cli("inspect", big)),
            "small": lambda: time_command(ctx.cli("inspect", small))}
    stats = interleaved(runs, max(ctx.reps, 10), warmup=2)
    return [Comparison(
        id="inspect_big_vs_small", group="cpu", section="tools",
        title=f"inspect {benchlib.human_bytes(benchlib.tree_bytes(big))} dataset vs "
              f"{benchlib.human_bytes(benchlib.tree_bytes(small))} dataset",
        subject=Measure("gpucache inspect (big)", stats["big"], "gpucache inspect BIG",
                        benchlib.tree_bytes(big), rate=False),
        peer=Measure("gpucache inspect (small)", stats["small"], "gpucache inspect SMALL",
                     benchlib.tree_bytes(small), rate=False),
        notes="Wall time of the whole process (start-up included). A ratio near 1 means the "
              "time does not grow with the data.")]


def pack_dialogue(ctx: Context) -> list:
    src = ctx.files["dialogue.pt"]
    warm_read(src)
    python_out = ctx.scratch / "python-dialogue.pt"
    result = ctx.child("baseline_unified_loader.py",
                       ["--dialogue", src, "--pack-dialogue-to", python_out,
                        "--reps", ctx.slow_reps, "--warmup", SLOW_WARMUP])
    remove(python_out)
    peer = Measure("Python: torch.load + per-row .item() checks + torch.save",
                   Stats(result["samples"]),
                   "baseline_unified_loader.py --dialogue dialogue.pt --pack-dialogue-to OUT",
                   src.stat().st_size)
    comparison = Comparison(
        id="pack_dialogue_vs_python", group="cpu", section="tools",
        title=f"pack dialogue list-of-dicts .pt ({ctx.params.dialogue_rows} rows) vs Python path",
        peer=peer, notes="The Python figure excludes interpreter start and `import torch`; the "
                         "pack figure is the whole CLI process. The pack, under a second, is "
                         "repeated as often as the other sub-second commands, after one warm-up "
                         "run; the Python path, seconds per run, gets the Python-heavy paths' "
                         "repetitions and no warm-up.",
        extra={"python_rows_kept": {Path(k).name: v for k, v in result["rows_kept"].items()}})
    try:
        require(ctx, "pack .pt dialogue")
    except NotAvailable as error:
        comparison.status, comparison.reason = "not_available", str(error)
        return [comparison]
    out = ctx.scratch / "pack-dialogue"
    # The pack takes under a second: it gets the repetitions and the warm-up run of the other
    # sub-second commands, not the Python path's.
    stats = interleaved({"pack": lambda: time_command(ctx.pack(src, "-o", out, "-q"),
                                                      before=_fresh(out))},
                        ctx.reps)["pack"]
    comparison.extra["gpucache_rows"] = _manifest_rows(out)
    remove(out)
    comparison.subject = Measure("gpucache pack dialogue.pt", stats,
                                 _text(ctx.pack(src, "-o", "OUT", "-q")), src.stat().st_size)
    return [comparison]


def validation_cpu(ctx: Context) -> list:
    binary = ctx.native("gpucache_bench_validate")
    dim = ctx.params.embed_dim
    rows = max(1024, min(ctx.params.embed_rows, (256 << 20) // (4 * dim)))
    results = []
    for threads in sorted({1, os.cpu_count() or 1}):
        run = benchlib.run_command([binary, "--rows", rows, "--dim", dim, "--device", "cpu",
                                    "--threads", threads, "--reps", ctx.reps], capture=True)
        data = json.loads(run.stdout.strip().splitlines()[-1])
        size = data["bytes"]
        results.append(Comparison(
            id=f"validation_cpu_t{threads}", group="cpu", section="validation",
            title=f"CPU validation, {threads} thread{'s' if threads > 1 else ''} "
                  f"({benchlib.human_bytes(size)} f32 in memory) vs memcpy, 1 thread",
            subject=Measure(f"Validator check pass, {threads} thread(s)", Stats(data["check"]),
                            f"gpucache_bench_validate --rows {rows} --dim {dim} --threads "
                            f"{threads}", size),
            peer=Measure("memcpy, 1 thread", Stats(data["memcpy_1_thread"]),
                         "std::memcpy of the same bytes", size),
            notes="Norm (0.1..100), NaN/Inf and zero checks of every row; check_and_finish "
                  "(ordering of kept rows) is in the JSON.",
            extra={"check_and_finish": Stats(data["check_and_finish"]).to_json(size),
                   "rows_kept": data["rows_kept"], "description": data["description"]}))
    return results


def open_slice(ctx: Context) -> list:
    """A rank's slice of a dataset of many shards: open it and map one row (Dataset::open,
    select_rows(0, 1), to_host: the work under gpucache.load(path, rows=(0, 1), device="cpu")),
    for 10,000 and 100,000 one-row shards against 10. The datasets are kept under the bench's
    output folder (or GPUCACHE_BENCH_DIR, as scripts/bench/open_slice.sh uses) for reruns (about
    0.9 GB for 100,000 shards)."""
    binary = ctx.native("gpucache_bench_open_slice")
    work = Path(os.environ.get("GPUCACHE_BENCH_DIR") or ctx.out / "open-slice")
    work.mkdir(parents=True, exist_ok=True)
    seconds = {}
    for shards in (10, 10_000, 100_000):
        run = benchlib.run_command([binary, work / f"shards-{shards}", shards, ctx.reps],
                                   capture=True)
        data = json.loads(run.stdout.strip().splitlines()[-1])
        seconds[shards] = (data["open_one_row_s"], data["manifest_bytes"])
    peer = Measure("10 shards", Stats([seconds[10][0]]), "gpucache_bench_open_slice DIR 10")
    return [Comparison(id=f"open_slice_{shards}_vs_10", group="cpu", section="load",
                       title=f"open one row of {shards:,} shards vs of 10 shards",
                       subject=Measure(f"{shards:,} shards", Stats([seconds[shards][0]]),
                                       f"gpucache_bench_open_slice DIR {shards}"),
                       peer=peer,
                       notes=f"median of {ctx.reps} runs after one warm-up, warm page cache; "
                             f"manifest {benchlib.human_bytes(seconds[shards][1])}; the shard "
                             "holding the row is mapped and its header checked against the "
                             "manifest before its row is used")
            for shards in (10_000, 100_000)]


def stream_cpu(ctx: Context) -> list:
    """Shuffled batches on the CPU: gpucache.stream against torch's DataLoader over a
    TensorDataset (the best of 0 and 2 workers) and GPUBatches over the resident dataset, in rows
    per second; and block mode's read rate against reading the shard files sequentially (cat)."""
    dataset = ctx.dataset("embeddings")
    size = benchlib.tree_bytes(dataset)
    data = ctx.child("stream_child.py", ["--dataset", dataset, "--npy", ctx.files["emb.npy"],
                                         "--reps", max(1, min(ctx.reps, 3))])
    if "not_available" in data:
        raise NotAvailable(data["not_available"])
    # Rows per second -> seconds per row, so that Stats' median and the ratio read as times.
    def per_row(name):
        return Stats([1.0 / r for r in data[name]["rows_per_s"]])
    loaders = [f"dataloader_{w}_workers" for w in (0, 2)]
    best = max(loaders, key=lambda name: max(data[name]["rows_per_s"]))
    row_bytes = size / ctx.params.embed_rows
    stream = Measure("gpucache.stream(device='cpu', shuffle=True)", per_row("stream_full"),
                     "gpucache.stream(path, device='cpu', batch_size=1024)", None, rate=False)
    results = [
        Comparison(id="stream_full_vs_dataloader", group="cpu", section="load",
                   title="shuffled batches on the CPU: gpucache.stream vs torch DataLoader "
                         "(TensorDataset, shuffle, best of 0 and 2 workers)",
                   subject=stream,
                   peer=Measure(f"DataLoader(TensorDataset, shuffle=True, "
                                f"num_workers={best.split('_')[1]})", per_row(best), None, None,
                                rate=False),
                   notes="times are seconds per row (ratio = rows per second against the peer's); "
                         "the DataLoader holds the whole tensor in memory, the stream reads the "
                         "shards and hashes every chunk once per epoch",
                   extra={name: data[name] for name in data}),
        Comparison(id="stream_full_vs_gpubatches_cpu", group="cpu", section="load",
                   title="shuffled batches on the CPU: gpucache.stream vs GPUBatches over the "
                         "loaded dataset", subject=stream,
                   peer=Measure("GPUBatches(gpucache.load(device='cpu'))",
                                per_row("gpubatches_cpu"), None, None, rate=False)),
    ]
    # Block mode against reading the same bytes in order: seconds per byte on both sides.
    shard_files = sorted(str(p) for p in Path(dataset).glob("shard-*.gcs"))
    warm_read(dataset)
    cat = interleaved({"cat": lambda: time_command(["sh", "-c", 'cat "$@" > /dev/null', "sh",
                                                    *shard_files])}, ctx.reps)["cat"]
    block = Stats([row_bytes and 1.0 / (r * row_bytes) * size
                   for r in data["stream_block"]["rows_per_s"]])
    results.append(Comparison(
        id="stream_block_vs_sequential_read", group="cpu", section="load",
        title="gpucache.stream block mode vs cat of the shard files (read rate, warm cache)",
        subject=Measure("gpucache.stream(block_rows=16384, window_blocks=4)", block,
                        "block mode, time scaled to the dataset's bytes", size),
        peer=Measure("cat shard-*.gcs > /dev/null", cat, "cat shard-*.gcs > /dev/null", size),
        notes="block mode shuffles blocks of 16 batches and rows within windows of 4 blocks; "
              "its time per row is scaled to the whole dataset's bytes"))
    return results


# --- loaders -------------------------------------------------------------------------------

LOADERS = {
    "torch": ("torch.load(map_location='cpu')", "pt"),
    "safetensors": ("safetensors load_file(device='cpu')", "safetensors"),
    "numpy_mmap": ("numpy.load(mmap_mode='r')", "npy"),
}


def loads(ctx: Context, kind_files: dict) -> tuple[list, dict]:
    """Every loader on every kind: first usable tensor and one full pass. Returns the comparisons
    and a table {kind: {loader: {"first": Stats json, "full": ..., or "reason"}}}."""
    comparisons, table = [], {}
    for kind, formats in kind_files.items():
        all_paths = [p for paths in formats.values() for p in paths]
        shard_dir = ctx.shards.get(kind)
        warm_read(*all_paths, *([shard_dir] if shard_dir else []))
        measured = {}
        for loader, (label, fmt) in LOADERS.items():
            slow = loader == "torch" and kind != "embeddings"
            reps = ctx.slow_reps if slow else ctx.reps
            warmup = SLOW_WARMUP if slow else 1
            data = ctx.child("load_child.py", ["--loader", loader, "--reps", reps, "--warmup",
                                               warmup, "--paths"] + formats[fmt])
            measured[loader] = _load_entry(label, data, formats[fmt])
        for verify_flag in (0, 1):
            name = f"gpucache_verify{verify_flag}"
            label = f"gpucache.load(device='cpu', verify={bool(verify_flag)})"
            if shard_dir is None:
                measured[name] = {"label": label,
                                  "reason": f"no gpucache dataset for {kind}: "
                                            + ctx.shard_sources.get(kind, "not packed")}
                continue
            if not ctx.features.get("gpucache.load", {}).get("ok"):
                measured[name] = {"label": label, "reason": "gpucache.load: " +
                                  ctx.features.get("gpucache.load", {}).get("detail", "")}
                continue
            data = ctx.child("load_child.py", ["--loader", "gpucache", "--verify", verify_flag,
                                               "--reps", ctx.reps, "--warmup", 1,
                                               "--paths", shard_dir])
            measured[name] = _load_entry(label, data, [shard_dir])
        table[kind] = {k: {kk: (vv.to_json(v.get("bytes") if kk == "full" else None)
                               if isinstance(vv, Stats) else vv)
                           for kk, vv in v.items()} for k, v in measured.items()}
        for verify_flag in (0, 1):
            subject_entry = measured[f"gpucache_verify{verify_flag}"]
            for peer_name in LOADERS:
                peer_entry = measured[peer_name]
                for metric in ("first", "full"):
                    comparisons.append(_load_comparison(kind, metric, verify_flag, subject_entry,
                                                        peer_name, peer_entry))
    return comparisons, table


def _load_entry(label: str, data: dict, paths) -> dict:
    if "not_available" in data:
        return {"label": label, "reason": data["not_available"]}
    size = sum(benchlib.tree_bytes(p) for p in paths)
    return {"label": label, "bytes": size, "first": Stats(data["first"]),
            "full": Stats(data["full"])}


def _load_comparison(kind, metric, verify_flag, subject_entry, peer_name, peer_entry):
    what = "first usable tensor" if metric == "first" else "load + one full pass"
    comparison = Comparison(
        id=f"load_{kind.replace('-', '_')}_{metric}_verify{verify_flag}_vs_{peer_name}",
        group="cpu", section="load",
        title=f"{kind}: {what}, gpucache.load(cpu, verify={bool(verify_flag)}) vs "
              f"{LOADERS[peer_name][0]}")
    if "reason" in peer_entry:
        comparison.status, comparison.reason = "failed", peer_entry["reason"]
        return comparison
    rate = metric == "full"  # bytes per second to the first tensor means nothing
    comparison.peer = Measure(peer_entry["label"], peer_entry[metric], None, peer_entry["bytes"],
                              rate=rate)
    if "reason" in subject_entry:
        comparison.status, comparison.reason = "not_available", subject_entry["reason"]
        return comparison
    comparison.subject = Measure(subject_entry["label"], subject_entry[metric], None,
                                 subject_entry["bytes"], rate=rate)
    return comparison


def load_pass_vs_cat(ctx: Context, load_table: dict) -> list:
    """gpucache.load + one full pass against `cat` reading the same shard bytes."""
    dataset = ctx.dataset("embeddings")
    files = sorted(str(p) for p in dataset.iterdir() if p.is_file())
    size = benchlib.tree_bytes(dataset)
    warm_read(dataset)
    stats = interleaved({"cat": lambda: time_command(["cat"] + files)}, ctx.reps)["cat"]
    peer = Measure("cat > /dev/null", stats, "cat DATASET/* > /dev/null", size)
    results = []
    for verify_flag in (0, 1):
        entry = load_table["embeddings"][f"gpucache_verify{verify_flag}"]
        comparison = Comparison(
            id=f"load_pass_verify{verify_flag}_vs_cat", group="cpu", section="load",
            title=f"embeddings: gpucache.load(cpu, verify={bool(verify_flag)}) + one full pass "
                  f"vs cat of the same bytes", peer=peer,
            notes="cat is a separate process; its time includes its start-up.")
        if "reason" in entry:
            comparison.status, comparison.reason = "not_available", entry["reason"]
        else:
            comparison.subject = Measure(entry["label"] + " + full pass",
                                         Stats(entry["full"]["samples"]), None, size)
        results.append(comparison)
    return results


# --- the whole training start ------------------------------------------------------------

def unified(ctx: Context, device: str = "cpu") -> list:
    """The users' loader (baseline_unified_loader.py) against pack + gpucache.load of the same
    three .pt files, and against gpucache.load alone (every later start), both ending with the
    data on `device` ("cpu", or "cuda" for the GPU section)."""
    group, suffix = ("cpu", "") if device == "cpu" else ("gpu", "_cuda")
    section = "pipeline" if device == "cpu" else "gpu"
    inputs = {"dialogue": ctx.files["dialogue.pt"], "embeddings": ctx.files["emb.pt"],
              "llm-cache": ctx.files["llm_cache.pt"]}
    warm_read(*inputs.values())
    result = ctx.child("baseline_unified_loader.py",
                       ["--dialogue", inputs["dialogue"], "--embeddings", inputs["embeddings"],
                        "--llm-cache", inputs["llm-cache"], "--device", device,
                        "--reps", ctx.slow_reps, "--warmup", SLOW_WARMUP])
    size = sum(p.stat().st_size for p in inputs.values())
    peer = Measure(f"users' loader: torch.load + per-row .item() checks + stack + "
                   f".to('{device}')", Stats(result["samples"]),
                   f"baseline_unified_loader.py --device {device} --dialogue dialogue.pt "
                   "--embeddings emb.pt --llm-cache llm_cache.pt", size)
    extra = {"baseline_rows_kept": {Path(k).name: v for k, v in result["rows_kept"].items()}}
    first = Comparison(id=f"unified_first_run{suffix}", group=group, section=section,
                       title=f"training start, first run: pack + gpucache.load({device}) vs "
                             "users' loader (3 .pt files)", peer=peer, extra=extra,
                       notes="pack of the three files plus a load of the three datasets "
                             "(verify=True), summed per repetition.")
    later = Comparison(id=f"unified_later_start{suffix}", group=group, section=section,
                       title=f"training start, every later run: gpucache.load({device}) vs "
                             "users' loader", peer=peer, extra=extra,
                       notes="The datasets are already packed; gpucache.load(verify=True).")
    try:
        require(ctx, "pack .pt dialogue", "pack .pt embeddings", "pack .pt llm-cache",
                "gpucache.load")
    except NotAvailable as error:
        for c in (first, later):
            c.status, c.reason = "not_available", str(error)
        return [first, later]
    outs = {kind: ctx.scratch / f"unified-{kind}" for kind in inputs}
    pack_device = "cpu" if device == "cpu" else "auto"  # on a GPU machine, validate there

    def pack_all():
        total = 0.0
        for kind, src in inputs.items():
            total += time_command(ctx.pack(src, "-o", outs[kind], "-q", device=pack_device),
                                  before=_fresh(outs[kind]))
        return total

    pack_stats = interleaved({"pack": pack_all}, ctx.slow_reps,
                             warmup=SLOW_WARMUP)["pack"]
    extra["gpucache_rows"] = {kind: _manifest_rows(out) for kind, out in outs.items()}
    data = ctx.child("load_child.py", ["--loader", "gpucache", "--verify", 1, "--device", device,
                                       "--reps", ctx.slow_reps, "--warmup",
                                       SLOW_WARMUP, "--paths"] + list(outs.values()))
    for out in outs.values():
        remove(out)
    if "not_available" in data:
        for c in (first, later):
            c.status, c.reason = "not_available", data["not_available"]
        return [first, later]
    load_samples = data["first"]
    first.subject = Measure("gpucache pack ×3 + gpucache.load ×3",
                            Stats([p + l for p, l in zip(pack_stats.samples, load_samples)]),
                            f"gpucache pack FILE -o OUT --device {pack_device} (×3); "
                            f"gpucache.load(OUT, device='{device}')", size)
    first.extra["pack_seconds"] = pack_stats.to_json()
    later.subject = Measure("gpucache.load ×3", Stats(load_samples),
                            f"gpucache.load(OUT, device='{device}', verify=True) ×3", size)
    return [first, later]


def _manifest_rows(dataset: Path):
    try:
        return json.loads((dataset / "manifest.json").read_text())["rows"]
    except (OSError, KeyError, json.JSONDecodeError):
        return None


# ---- writers (issue #16): gpucache.pack against the dataset writers users reach for ----

WRITER_PEERS = {"hf": "Hugging Face datasets", "mds": "MosaicML streaming MDSWriter",
                "litdata": "litdata.optimize"}
WRITER_CALLS = {
    "gpucache_memory": "gpucache.pack({embedding: f32 [N, D] array, question: list of str, "
                       "label: i64 array}, OUT, device='cpu')",
    "gpucache_f16_memory": "gpucache.pack(the same columns, OUT, dtype='f16', device='cpu')",
    "gpucache_parquet": "gpucache.pack('writers.parquet', OUT, device='cpu')",
    "hf_memory": "datasets.Dataset.from_dict(columns).save_to_disk(OUT)",
    "hf_parquet": "datasets.load_dataset('parquet', data_files=..., split='train', "
                  "cache_dir=EMPTY).save_to_disk(OUT)",
    "mds_memory": "MDSWriter(columns={embedding: 'ndarray:float32', question: 'str', "
                  "label: 'int64'}).write(row) per row",
    "mds_parquet": "pyarrow ParquetFile.iter_batches, then MDSWriter.write(row) per row",
    "litdata_memory": "litdata.optimize(fn=rows of a block, inputs=blocks, chunk_bytes='256MB', "
                      "num_workers=nproc, start_method='fork')",
    "litdata_parquet": "litdata.optimize(fn=rows of a Parquet row group, inputs=row groups, "
                       "chunk_bytes='256MB', num_workers=nproc, start_method='fork')",
    "torch_save_memory": "torch.save({embedding, question, label}, OUT)",
    "safetensors_memory": "safetensors.torch.save_file({embedding, label}, OUT) (no text column)",
}
WRITERS_NOTE = (
    "Every contender writes the same rows, interleaved in one process (A B C … A B C …, after one "
    "untimed warm-up round), to the "
    "same disk; before each run the previous output is removed and dirty pages are flushed "
    "(untimed). Times include fsync of every file written (gpucache.pack fsyncs itself; the others "
    "are fsynced right after they return, inside the timed region); the figures without that "
    "fsync are in results.json (extra.no_fsync). gpucache.pack runs its default validation "
    "(finite values and norm 0.1..100 of every embedding row, checked on the CPU) and hashes "
    "every 4 MiB chunk; the peers check nothing.")


def writers(ctx: Context) -> list:
    """gpucache.pack from memory and from Parquet against HF datasets, MDSWriter, litdata,
    torch.save and safetensors on the same rows (writers_child.py does the measuring)."""
    rows, dim = ctx.writer_rows, ctx.writer_dim
    parquet = ctx.data / f"writers-{rows}x{dim}.parquet"
    if not parquet.exists():
        ctx.data.mkdir(parents=True, exist_ok=True)
        ctx.child("writers_child.py", ["--make", parquet, "--rows", rows, "--dim", dim])
    warm_read(parquet)
    # One untimed warm-up round (not in --quick): the first call of each writer pays for lazy
    # imports and first-use set-up that a dataset build pays once, not per write.
    data = ctx.child("writers_child.py", ["--parquet", parquet, "--scratch",
                                          ctx.scratch / "writers", "--reps", ctx.slow_reps,
                                          "--warmup", 0 if ctx.quick else 1])
    size = sum(data["input_bytes"].values())
    versions = data["versions"]
    label_of = {
        "gpucache_memory": "gpucache.pack, memory → f32",
        "gpucache_f16_memory": "gpucache.pack, memory → f16",
        "gpucache_parquet": "gpucache.pack, Parquet → f32",
        "hf_memory": f"datasets {versions['datasets']} from_dict + save_to_disk",
        "hf_parquet": f"datasets {versions['datasets']} load_dataset(parquet) + save_to_disk",
        "mds_memory": f"streaming {versions['streaming']} MDSWriter",
        "mds_parquet": f"streaming {versions['streaming']} pyarrow + MDSWriter",
        "litdata_memory": f"litdata {versions['litdata']} optimize",
        "litdata_parquet": f"litdata {versions['litdata']} optimize (Parquet row groups)",
        "torch_save_memory": f"torch {versions['torch']} torch.save",
        "safetensors_memory": f"safetensors {versions['safetensors']} save_file",
    }

    def measure(name):
        result = data["results"][name]
        if name in data["unavailable"]:
            raise NotAvailable(data["unavailable"][name])
        if name in data["failed"]:
            raise benchlib.CommandFailed(["writers_child.py", name], 1, data["failed"][name])
        return Measure(label_of[name], Stats(result["write_fsync"]), WRITER_CALLS[name], size)

    def no_fsync(name):
        samples = data["results"][name]["write"]
        return Stats(samples).to_json(size) if samples else None

    what = (f"{rows:,} rows × ({dim} f32 + question text + i64 label), "
            f"{benchlib.human_bytes(size)}")
    results = []

    def compare(cid, title, subject_name, peer_name, notes=WRITERS_NOTE, extra=None):
        comparison = Comparison(id=cid, group="cpu", section="writers", title=title, notes=notes,
                                extra=extra or {})
        try:
            comparison.subject, comparison.peer = measure(subject_name), measure(peer_name)
            comparison.extra["no_fsync"] = {subject_name: no_fsync(subject_name),
                                            peer_name: no_fsync(peer_name)}
            comparison.extra["output_bytes"] = {
                n: data["results"][n].get("out_bytes") for n in (subject_name, peer_name)}
        except NotAvailable as error:
            comparison.status, comparison.reason = "not_available", str(error)
        except benchlib.CommandFailed as error:
            comparison.status, comparison.reason = "failed", str(error)
        results.append(comparison)

    for source, subjects in (("memory", ("gpucache_memory", "gpucache_f16_memory")),
                             ("parquet", ("gpucache_parquet",))):
        source_text = "from memory" if source == "memory" else "from Parquet"
        peers = [f"{p}_{source}" for p in WRITER_PEERS]
        usable = [p for p in peers if p not in data["unavailable"] and p not in data["failed"]
                  and data["results"][p]["write_fsync"]]
        fastest = min(usable, key=lambda p: Stats(data["results"][p]["write_fsync"]).median) \
            if usable else peers[0]
        for subject in subjects:
            dtype = "f16" if "f16" in subject else "f32"
            compare(f"writers_{source}_{dtype}_vs_fastest",
                    f"writers {source_text} ({what}): gpucache.pack → {dtype} vs the fastest of "
                    f"HF datasets, MDSWriter, litdata ({label_of[fastest]})", subject, fastest,
                    extra={"fastest_peer": fastest,
                           "peers_considered": {p: data["unavailable"].get(p) or
                                                data["failed"].get(p) or "measured"
                                                for p in peers}})
        for peer in peers + (["torch_save_memory", "safetensors_memory"]
                             if source == "memory" else []):
            compare(f"writers_{source}_vs_{peer.removesuffix('_' + source)}",
                    f"writers {source_text}: gpucache.pack → f32 vs {label_of[peer]}",
                    subjects[0], peer)
    return results


REMOTE_NOTE = ("From one moto S3 server on 127.0.0.1 (its own process), each run a fresh process "
               "with an empty cache folder, timed from creating the dataset to the last row of a "
               "shuffled epoch (imports excluded); runs interleaved. Requests and bytes are the "
               "server's counts for one epoch. The peers run in the main process (DataLoader "
               "num_workers=0); gpucache.stream uses its own reader threads.")


def remote_stream(ctx: Context) -> list:
    """gpucache.stream against MosaicML streaming and litdata from the same local S3 server
    (remote_child.py does the measuring: rows/s, requests and bytes per epoch)."""
    data = ctx.child("remote_child.py", ["--scratch", ctx.scratch / "remote", "--rows",
                                         ctx.remote_rows, "--dim", ctx.remote_dim, "--reps",
                                         ctx.slow_reps])
    versions = data["versions"]
    label_of = {"gpucache": "gpucache.stream(s3://...)",
                "streaming": f"streaming {versions['streaming']} StreamingDataset",
                "litdata": f"litdata {versions['litdata']} StreamingDataset"}

    def measure(name):
        if name in data["unavailable"]:
            raise NotAvailable(data["unavailable"][name])
        if name in data["failed"]:
            raise benchlib.CommandFailed(["remote_child.py", name], 1, data["failed"][name])
        runs = data["results"][name]
        return Measure(label_of[name], Stats([r["seconds"] for r in runs]),
                       f"remote_child.py --read {name}", data["written_bytes"].get(name))

    results = []
    for peer in ("streaming", "litdata"):
        comparison = Comparison(id=f"remote_stream_vs_{peer}", group="cpu", section="remote",
                                title=f"epoch from S3 ({data['rows']:,} rows × {data['dim']} f32 "
                                f"+ label): gpucache.stream vs {label_of[peer]}",
                                notes=REMOTE_NOTE)
        try:
            comparison.subject, comparison.peer = measure("gpucache"), measure(peer)
            comparison.extra = {n: {"requests": [r["requests"] for r in data["results"][n]],
                                    "bytes": [r["bytes"] for r in data["results"][n]],
                                    "lists": [r["lists"] for r in data["results"][n]]}
                                for n in ("gpucache", peer)}
        except NotAvailable as error:
            comparison.status, comparison.reason = "not_available", str(error)
        except benchlib.CommandFailed as error:
            comparison.status, comparison.reason = "failed", str(error)
        results.append(comparison)
    return results
