#!/usr/bin/env python3
"""gpucache benchmark driver: generates the data, runs every comparison, writes the report.
Run through scripts/bench.sh, which builds the CLI and prepares the venv first.

Every option also reads an environment variable (GPUCACHE_BENCH_<OPTION>, e.g.
GPUCACHE_BENCH_SIZE=256M, GPUCACHE_BENCH_REPS=3, GPUCACHE_BENCH_QUICK=1).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import benchlib  # noqa: E402
import cases_cpu  # noqa: E402
import cases_gpu  # noqa: E402
import datagen  # noqa: E402
import report  # noqa: E402
import sysinfo  # noqa: E402
import targets  # noqa: E402
from benchlib import CommandFailed, Comparison, NotAvailable, NotMeasured, human_bytes, log  # noqa
from context import Context, probe_features, python_version_info  # noqa: E402

SECTIONS = ["tools", "validation", "loads", "scale", "pipeline", "gpu", "writers", "remote"]
# Sections that make their own data: alone, they skip the shared data generation and packing.
SELF_CONTAINED = {"writers", "remote"}
# Sections run only when --only names them: "remote" needs moto, boto3, MosaicML streaming and
# litdata in the bench venv (docs/benchmarks.md "Remote streaming" says how to install them).
OPT_IN = {"remote"}

# (default, --quick) per size option.
DEFAULTS = {
    "size": ("1G", "16M"),
    "small_size": ("10M", "1M"),
    "embed_dim": (1024, 256),
    "dialogue_rows": (100_000, 2_000),
    "dialogue_dim": (384, 64),
    "llm_rows": (40_000, 1_000),
    "llm_dim": (1024, 128),
    "reps": (5, 1),
    "slow_reps": (3, 1),
    "writer_rows": (98_304, 4_096),
    "writer_dim": (768, 768),
    "remote_rows": (200_000, 8_192),
    "remote_dim": (768, 768),
}


def parse_args(argv):
    env = os.environ.get
    parser = argparse.ArgumentParser(
        prog="scripts/bench.sh", description=__doc__.split("\n")[0],
        epilog="Sizes take K, M, G suffixes. Defaults finish in under 10 minutes on 2 cores; "
               "--quick is a smoke test (tiny sizes, 1 repetition).")
    parser.add_argument("--quick", action="store_true",
                        default=env("GPUCACHE_BENCH_QUICK", "") not in ("", "0"))
    parser.add_argument("--size", help="embeddings matrix for pack/verify/inspect/load "
                        "(default 1G; quick 16M)", default=env("GPUCACHE_BENCH_SIZE"))
    parser.add_argument("--small-size", help="small dataset for the inspect comparison "
                        "(default 10M)", default=env("GPUCACHE_BENCH_SMALL_SIZE"))
    parser.add_argument("--embed-dim", type=int, default=env("GPUCACHE_BENCH_EMBED_DIM"))
    parser.add_argument("--dialogue-rows", type=int, default=env("GPUCACHE_BENCH_DIALOGUE_ROWS"),
                        help="rows of the list-of-dicts dialogue .pt (default 100000)")
    parser.add_argument("--dialogue-dim", type=int, default=env("GPUCACHE_BENCH_DIALOGUE_DIM"))
    parser.add_argument("--llm-rows", type=int, default=env("GPUCACHE_BENCH_LLM_ROWS"),
                        help="entries of the dict text->tensor LLM cache .pt (default 40000)")
    parser.add_argument("--llm-dim", type=int, default=env("GPUCACHE_BENCH_LLM_DIM"))
    parser.add_argument("--reps", type=int, default=env("GPUCACHE_BENCH_REPS"),
                        help="repetitions per figure (default 5; quick 1)")
    parser.add_argument("--slow-reps", type=int, default=env("GPUCACHE_BENCH_SLOW_REPS"),
                        help="repetitions of the Python-heavy paths (default 3; quick 1)")
    parser.add_argument("--writer-rows", type=int, default=env("GPUCACHE_BENCH_WRITER_ROWS"),
                        help="rows of the writers section's embedding dataset (default 98304: "
                             "288 MiB of f32 at dim 768; quick 4096)")
    parser.add_argument("--writer-dim", type=int, default=env("GPUCACHE_BENCH_WRITER_DIM"))
    parser.add_argument("--remote-rows", type=int, default=env("GPUCACHE_BENCH_REMOTE_ROWS"),
                        help="rows of the remote section's dataset (default 200000: 586 MiB of "
                             "f32 at dim 768; quick 8192)")
    parser.add_argument("--remote-dim", type=int, default=env("GPUCACHE_BENCH_REMOTE_DIM"))
    parser.add_argument("--only", default=env("GPUCACHE_BENCH_ONLY", ""),
                        help=f"comma-separated sections to run: {','.join(SECTIONS)}")
    parser.add_argument("--out", type=Path, default=env("GPUCACHE_BENCH_OUT"))
    parser.add_argument("--publish", action="store_true",
                        default=env("GPUCACHE_BENCH_PUBLISH", "") not in ("", "0"),
                        help="also rewrite docs/benchmarks.md and docs/benchmarks.png")
    parser.add_argument("--smoke-note", default=env("GPUCACHE_BENCH_SMOKE_NOTE"),
                        help="mark the report as a smoke run with this text")
    parser.add_argument("--root", type=Path, default=HERE.parents[1])
    parser.add_argument("--build-dir", type=Path, default=env("GPUCACHE_BUILD_DIR"))
    parser.add_argument("--gpucache", type=Path, help="the CLI (default BUILD/src/cli/gpucache)")
    args = parser.parse_args(argv)
    for name, (default, quick) in DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else default)
    args.build_dir = args.build_dir or args.root / "build"
    args.gpucache = args.gpucache or args.build_dir / "src" / "cli" / "gpucache"
    args.out = (args.out or args.root / "bench-out").resolve()
    args.sections = [s for s in args.only.split(",") if s] or [
        s for s in SECTIONS if s not in OPT_IN]
    unknown = set(args.sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown section(s) {', '.join(sorted(unknown))}")
    return args


def reproduce_command(argv) -> str:
    """The scripts/bench.sh line that reproduces the figures: the given options without the
    ones that only say where things are or what to do with the report."""
    drop_with_value = {"--root", "--build-dir", "--gpucache", "--out", "--smoke-note"}
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in drop_with_value:
            skip = "=" not in arg
            continue
        if name == "--publish":
            continue
        kept.append(arg)
    env = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items())
                   if k.startswith("GPUCACHE_BENCH_") and k not in (
                       "GPUCACHE_BENCH_PUBLISH", "GPUCACHE_BENCH_SMOKE_NOTE",
                       "GPUCACHE_BENCH_OUT", "GPUCACHE_BENCH_VENV", "GPUCACHE_BENCH_PYTHON"))
    return " ".join(x for x in (env, "scripts/bench.sh", *kept) if x)


class Runner:
    """Runs cases, turning a missing feature or a failure into records instead of a crash."""

    def __init__(self):
        self.comparisons: list[Comparison] = []
        self.errors: list[str] = []
        self.seconds: dict[str, float] = {}

    def run(self, name: str, fn, placeholders=()):
        log(f"case: {name}")
        start = time.perf_counter()
        try:
            result = fn()
            self.seconds[name] = time.perf_counter() - start
        except (NotAvailable, NotMeasured, CommandFailed, Exception) as error:
            status = {NotAvailable: "not_available", NotMeasured: "not_measured"}.get(
                type(error), "failed")
            if status == "failed":
                self.errors.append(f"{name}: {type(error).__name__}: {error}")
                log(f"case {name} failed:\n{traceback.format_exc()}")
            else:
                log(f"case {name}: {status.replace('_', ' ')}: {error}")
            self.seconds[name] = time.perf_counter() - start
            reason = str(error) if status != "failed" else f"{type(error).__name__}: {error}"
            for cid, group, section, title in placeholders:
                self.comparisons.append(Comparison(id=cid, group=group, section=section,
                                                   title=title, status=status, reason=reason))
            return None
        log(f"case {name}: {time.perf_counter() - start:.1f} s")
        if isinstance(result, list):
            self.comparisons.extend(result)
        return result


def prepare_shards(ctx: Context) -> None:
    """Packs the datasets the load/verify/inspect cases read (untimed)."""
    base = ctx.out / "shards"
    base.mkdir(parents=True, exist_ok=True)

    def pack(kind, candidates):
        tried = []
        for feature, name in candidates:
            if not ctx.features.get(feature, {}).get("ok"):
                tried.append(f"{feature}: {ctx.features.get(feature, {}).get('detail', '?')}")
                continue
            out = base / kind
            benchlib.remove(out)
            try:
                benchlib.run_command(ctx.pack(ctx.files[name], "-o", out, "-q"))
            except CommandFailed as error:
                tried.append(f"{feature}: {error}")
                continue
            ctx.shards[kind] = out
            ctx.shard_sources[kind] = f"packed from {name}"
            return
        ctx.shard_sources[kind] = "no input this build packs (" + "; ".join(tried) + ")"

    pack("embeddings", [("pack .npy", "emb.npy")])
    pack("small", [("pack .npy", "small.npy")])
    pack("dialogue", [("pack .pt dialogue", "dialogue.pt"),
                      ("pack .safetensors dialogue", "dialogue.safetensors")])
    pack("llm-cache", [("pack .pt llm-cache", "llm_cache.pt"),
                       ("pack .safetensors embeddings", "llm_cache.safetensors"),
                       ("pack .npy", "llm_cache.npy")])
    for kind, source in ctx.shard_sources.items():
        log(f"shards: {kind}: {source}")


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    started = time.time()
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.gpucache.exists():
        log(f"{args.gpucache} does not exist; build first (scripts/bench.sh does)")
        return 2
    ctx = Context(root=args.root, out=args.out, gpucache=args.gpucache.resolve(),
                  build_dir=args.build_dir.resolve(), python=sys.executable, reps=args.reps,
                  slow_reps=args.slow_reps, quick=args.quick, writer_rows=args.writer_rows,
                  writer_dim=args.writer_dim, remote_rows=args.remote_rows,
                  remote_dim=args.remote_dim)
    params = datagen.DataParams(
        embed_bytes=benchlib.parse_size(args.size), embed_dim=args.embed_dim,
        small_bytes=benchlib.parse_size(args.small_size), dialogue_rows=args.dialogue_rows,
        dialogue_dim=args.dialogue_dim, llm_rows=args.llm_rows, llm_dim=args.llm_dim)
    ctx.params = params
    machine = sysinfo.collect(args.root, args.out, ctx.gpucache, ctx.build_dir,
                              python_version_info(ctx.python))
    if machine.get("build_type") not in ("Release", "RelWithDebInfo"):
        log(f"warning: the build is {machine.get('build_type')}, not Release")
    sizes_text = (f"embeddings {human_bytes(params.embed_rows * params.embed_dim * 4)} "
                  f"([{params.embed_rows}, {params.embed_dim}] f32), small dataset "
                  f"{human_bytes(params.small_rows * params.embed_dim * 4)}, dialogue "
                  f"{params.dialogue_rows} rows × 2 × {params.dialogue_dim}, LLM cache "
                  f"{params.llm_rows} × {params.llm_dim}; one row in "
                  f"{datagen.BAD_EVERY} invalid (norm < 0.1, > 100, or NaN)")
    if set(args.sections) <= SELF_CONTAINED:
        sizes_text = "; ".join(
            text for section, text in (
                ("writers", f"writers: {args.writer_rows:,} rows × ({args.writer_dim} f32 "
                            "embedding + question text + i64 label)"),
                ("remote", f"remote: {args.remote_rows:,} rows × ({args.remote_dim} f32 "
                           "embedding + i64 label)")) if section in args.sections)
    log(f"sizes: {sizes_text}")

    shared_data = not set(args.sections) <= SELF_CONTAINED
    if shared_data:
        data = ctx.child("datagen.py", [ctx.data, json.dumps(datagen.asdict(params))])
        ctx.files = {name: Path(path) for name, path in data.items()}
    log("probing what this build can do")
    ctx.features = probe_features(ctx)
    for name, feature in ctx.features.items():
        log(f"  {'yes' if feature['ok'] else 'no '} {name}: {feature['detail']}")
    if shared_data:
        prepare_shards(ctx)

    setup_seconds = time.time() - started
    log(f"data and shards ready in {setup_seconds:.0f} s")
    runner = Runner()
    load_table = {}
    sections = args.sections
    kinds = datagen.kind_files(ctx.files) if shared_data else {}

    def ph(cid, title, section="tools", group="cpu"):
        return (cid, group, section, title)

    if "tools" in sections:
        runner.run("pack .npy vs cp", lambda: cases_cpu.pack_npy(ctx), [
            ph("pack_npy_f16_vs_cp", "pack .npy f32→f16 vs cp")])
        runner.run("pack u8 images .npy vs cp", lambda: cases_cpu.pack_images(ctx), [
            ph("pack_images_vs_cp", "pack .npy u8 images vs cp"),
            ph("pack_images_nofsync_vs_cp", "pack --no-fsync .npy u8 images vs cp"),
            ph("load_images_cpu_vs_numpy_mmap", "images: gpucache.load(cpu) vs numpy mmap",
               "load")])
        runner.run("pack .pt single tensor vs cp", lambda: cases_cpu.pack_pt_single(ctx), [
            ph("pack_pt_single_vs_cp", "pack .pt one [N, D] tensor vs cp"),
            ph("pack_pt_single_vs_cp_sync", "pack .pt one [N, D] tensor vs cp + sync")])
        runner.run("verify vs xxhsum", lambda: cases_cpu.verify(ctx), [
            ph("verify_t1_vs_xxhsum", "verify --threads 1 vs xxhsum -H3"),
            ph("verify_t2_vs_xxhsum", "verify --threads 2 vs xxhsum -H3")])
        runner.run("inspect big vs small", lambda: cases_cpu.inspect(ctx), [
            ph("inspect_big_vs_small", "inspect big vs small dataset")])
        runner.run("pack dialogue .pt vs Python", lambda: cases_cpu.pack_dialogue(ctx), [
            ph("pack_dialogue_vs_python", "pack dialogue list-of-dicts .pt vs Python path")])
    if "validation" in sections:
        runner.run("CPU validation", lambda: cases_cpu.validation_cpu(ctx), [
            ph("validation_cpu_t1", "CPU validation, 1 thread", "validation")])
    if "loads" in sections:
        def loads():
            comparisons, table = cases_cpu.loads(ctx, kinds)
            load_table.update(table)
            return comparisons
        runner.run("loaders", loads, [
            ph(f"load_embeddings_first_verify{v}_vs_torch", f"first tensor, verify={bool(v)}, "
               "vs torch.load", "load") for v in (0, 1)])
        runner.run("load + pass vs cat", lambda: cases_cpu.load_pass_vs_cat(ctx, load_table), [
            ph(f"load_pass_verify{v}_vs_cat", f"load (verify={bool(v)}) + full pass vs cat",
               "load") for v in (0, 1)])
    if "loads" in sections:
        runner.run("stream vs DataLoader", lambda: cases_cpu.stream_cpu(ctx), [
            ph("stream_full_vs_dataloader", "gpucache.stream vs DataLoader", "load"),
            ph("stream_block_vs_sequential_read", "stream block mode vs cat", "load")])
    if "scale" in sections:
        runner.run("open a slice of many shards", lambda: cases_cpu.open_slice(ctx), [
            ph(f"open_slice_{n}_vs_10", f"open one row of {n} shards", "load")
            for n in (10000, 100000)])
    if "pipeline" in sections:
        runner.run("users' loader vs pack + load", lambda: cases_cpu.unified(ctx), [
            ph("unified_first_run", "training start, first run", "pipeline"),
            ph("unified_later_start", "training start, later runs", "pipeline")])
    gpu_raw = {"gpu": False, "reason": "GPU section not run (--only)"}
    if "gpu" in sections:
        def gpu():
            dataset_bytes = benchlib.tree_bytes(ctx.shards["embeddings"]) \
                if "embeddings" in ctx.shards else params.embed_rows * params.embed_dim * 4
            comparisons, raw = cases_gpu.gpu(ctx, dataset_bytes, ctx.reps)
            gpu_raw.clear()
            gpu_raw.update(raw)
            return comparisons
        runner.run("GPU", gpu, [(spec[0], "gpu", "gpu", spec[1]) for spec in cases_gpu.SPECS])
        unified_gpu = [("unified_first_run_cuda", "gpu", "gpu", "training start, first run: pack + "
                        "gpucache.load(cuda) vs users' loader .to('cuda')"),
                       ("unified_later_start_cuda", "gpu", "gpu", "training start, every later "
                        "run: gpucache.load(cuda) vs users' loader .to('cuda')")]
        if gpu_raw.get("gpu"):
            runner.run("users' loader vs pack + load, on the GPU",
                       lambda: cases_cpu.unified(ctx, "cuda"), unified_gpu)
        else:
            runner.comparisons += [Comparison(id=cid, group=group, section=section, title=title,
                                              status="not_measured", reason=gpu_raw["reason"])
                                   for cid, group, section, title in unified_gpu]

    if "writers" in sections:
        runner.run("writers: pack from memory and Parquet vs HF datasets, MDSWriter, litdata",
                   lambda: cases_cpu.writers(ctx), [
                       ph(f"writers_{source}_f32_vs_fastest", f"writers from {source}: "
                          "gpucache.pack vs the fastest of HF datasets, MDSWriter, litdata",
                          "writers") for source in ("memory", "parquet")])

    if "remote" in sections:
        runner.run("remote: gpucache.stream vs streaming, litdata from S3",
                   lambda: cases_cpu.remote_stream(ctx), [
                       ph(f"remote_stream_vs_{peer}", f"epoch from S3: gpucache.stream vs "
                          f"{peer}", "remote") for peer in ("streaming", "litdata")])

    machine["load_average_end"] = sysinfo.load_average()
    by_id = {c.id: c for c in runner.comparisons}
    evaluated = targets.evaluate(by_id)
    smoke = args.smoke_note or (
        "`--quick`: tiny sizes and 1 repetition, a check that every case runs; the figures mean "
        "nothing." if args.quick else "")
    command = reproduce_command(sys.argv[1:] if argv is None else argv)
    results = {
        "meta": {"started": time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(started)),
                 "finished": time.strftime("%Y-%m-%d %H:%M %Z"),
                 "elapsed_s": time.time() - started, "command": command.strip(),
                 "quick": args.quick, "smoke": smoke, "reps": args.reps,
                 "slow_reps": args.slow_reps, "sections": sections,
                 "sizes": datagen.asdict(params), "sizes_text": sizes_text,
                 "page_cache": "warm: every input is read once before its case; never dropped",
                 "shard_sources": ctx.shard_sources, "case_seconds": runner.seconds,
                 "setup_seconds": setup_seconds},
        "machine": machine,
        "features": ctx.features,
        "targets": evaluated,
        "comparisons": [c.to_json() for c in runner.comparisons],
        "loads": load_table,
        "gpu": gpu_raw,
        "errors": runner.errors,
    }
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    report.write_markdown(results, args.out / "results.md", "chart.png")
    if not report.write_chart(results, args.out / "chart.png"):
        log("matplotlib is missing: no chart")
    if args.publish:
        report.publish(results, args.out / "chart.png", args.root / "docs")
        log(f"published to {args.root / 'docs' / 'benchmarks.md'}")
    benchlib.remove(args.out / "scratch")

    log("targets:")
    for t in evaluated:
        log(f"  {t['status']:>13}  {t['value_display']:>10} (needs {t['target_display']})  "
            f"{t['target']}")
    elapsed = time.time() - started
    log(f"done in {elapsed / 60:.1f} min: {args.out / 'results.md'}, results.json, chart.png")
    if elapsed > 600:
        log("warning: over the 10-minute budget; lower --reps/--slow-reps or the sizes, or "
            "check that the machine was quiet (load average above)")
    if runner.errors:
        log(f"{len(runner.errors)} case(s) failed; see results.md")
    return 1 if runner.errors else 0


if __name__ == "__main__":
    sys.exit(main())
