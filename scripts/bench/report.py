"""Writes a run's results as markdown (ratios first), a PNG bar chart, and docs/benchmarks.md.
Works from the results.json dictionary alone, so a report can be rebuilt from a saved run:
    python scripts/bench/report.py bench-out/results.json [--publish]
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from benchlib import human_bytes, human_seconds

STATUS_TEXT = {"not_available": "not available in this build", "not_measured": "not measured",
               "failed": "failed", "not_evaluated": "not evaluated"}


def _spread(stats: dict | None) -> str:
    if not stats:
        return "-"
    text = f"{human_seconds(stats['median'])} [{human_seconds(stats['min'])}–" \
           f"{human_seconds(stats['max'])}]"
    if stats.get("gb_per_s"):
        text += f" · {stats['gb_per_s']:.2f} GB/s"
    return text


def status_text(status: str, reason: str) -> str:
    """'not available in this build: <reason>', without repeating a prefix the reason has."""
    prefix = STATUS_TEXT.get(status, status.replace("_", " "))
    reason = (reason or "").strip()
    for known in (prefix, status.replace("_", " ")):
        if reason.startswith(known):
            reason = reason[len(known):].lstrip(": ")
    return f"{prefix}: {reason}" if reason else prefix


def _ratio(c: dict) -> str:
    if c["status"] != "measured":
        return status_text(c["status"], c["reason"])
    return f"**{c['ratio']:.2f}×**" if c["ratio"] is not None else "-"


def _escape(text: str) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def _comparison_table(comparisons: list) -> list:
    lines = ["| Comparison | Ratio | gpucache: median [min–max] | peer: median [min–max] | n |",
             "|---|---|---|---|---|"]
    for c in comparisons:
        subject, peer = c.get("subject") or {}, c.get("peer") or {}
        n = (subject.get("stats") or peer.get("stats") or {}).get("n", "-")
        lines.append(f"| {_escape(c['title'])} | {_escape(_ratio(c))} | "
                     f"{_escape(subject.get('label', '-'))}: {_spread(subject.get('stats'))} | "
                     f"{_escape(peer.get('label', '-'))}: {_spread(peer.get('stats'))} | {n} |")
    return lines


def _targets_table(targets: list, group: str) -> list:
    lines = ["| Target | Measured | Needed | Status |", "|---|---|---|---|"]
    for t in targets:
        if t["group"] != group:
            continue
        status = t["status"]
        if status in ("met", "not met"):
            shown = f"**{status}**"
        else:
            shown = status_text(status.replace(" ", "_"), t.get("reason", ""))
        lines.append(f"| {_escape(t['target'])} | {t['value_display']} | {t['target_display']} | "
                     f"{_escape(shown)} |")
    return lines


LOADER_ORDER = ["torch", "safetensors", "numpy_mmap", "gpucache_verify0", "gpucache_verify1"]


def _loads_table(loads: dict) -> list:
    lines = ["| Data | Loader | Bytes | First usable tensor | Load + one full pass | "
             "gpucache verify=False is … faster (first / full) | verify=True (first / full) |",
             "|---|---|---|---|---|---|---|"]
    for kind, loaders in loads.items():
        g = {v: loaders.get(f"gpucache_verify{v}", {}) for v in (0, 1)}
        for name in LOADER_ORDER:
            entry = loaders.get(name)
            if entry is None:
                continue
            if "reason" in entry:
                lines.append(f"| {kind} | {_escape(entry['label'])} | - | "
                             f"{_escape(entry['reason'])} | - | - | - |")
                continue
            cells = []
            for v in (0, 1):
                if name.startswith("gpucache") or "first" not in g[v]:
                    cells.append("-")
                    continue
                cells.append(" / ".join(
                    f"{entry[m]['median'] / g[v][m]['median']:.2f}×" for m in ("first", "full")))
            lines.append(f"| {kind} | {_escape(entry['label'])} | {human_bytes(entry['bytes'])} | "
                         f"{_spread(entry['first'])} | {_spread(entry['full'])} | {cells[0]} | "
                         f"{cells[1]} |")
    return lines


def _machine(machine: dict) -> list:
    keys = [("cpu", "CPU"), ("cores", "Cores"), ("memory", "RAM"), ("disk", "Disk (bench-out)"),
            ("kernel", "Kernel"), ("os", "OS"), ("gpu", "GPU"), ("gpucache", "gpucache"),
            ("git_commit", "Commit"), ("build_type", "Build type"), ("compiler", "Compiler"),
            ("python", "Python"), ("torch", "torch"), ("numpy", "numpy"),
            ("safetensors", "safetensors"), ("matplotlib", "matplotlib"), ("xxhsum", "xxhsum"),
            ("coreutils", "coreutils"), ("load_average_start", "Load average at start"),
            ("load_average_end", "Load average at end")]
    lines = ["| | |", "|---|---|"]
    for key, label in keys:
        if key in machine:
            lines.append(f"| {label} | {_escape(str(machine[key]))} |")
    return lines


def results_section(results: dict, chart_name: str, heading: str = "##") -> list:
    meta, comps = results["meta"], results["comparisons"]
    h = heading
    lines = []
    if meta.get("smoke"):
        lines += ["> **Smoke run, not the published figures.** " + meta["smoke"], ""]
    lines += [f"Run {meta['finished']}, {meta['elapsed_s'] / 60:.1f} min, with "
              f"`{meta['command']}`. Sizes: {meta['sizes_text']}. Every figure is the median of "
              f"{meta['reps']} repetitions ({meta['slow_reps']} for the Python-heavy paths) with "
              "min and max; page cache warm (every input is read once before its case, the cache "
              "is never dropped).", "",
              "gpucache datasets: " + "; ".join(f"{kind} {source}" for kind, source in
                                                meta.get("shard_sources", {}).items()) + ".", "",
              "Ratio = peer median time / gpucache median time on the same bytes, measured in "
              "the same run: above 1 means gpucache is faster (for bandwidth peers, the fraction "
              "of the peer's bandwidth reached).", ""]
    lines += [f"{h} Targets", ""]
    if meta.get("smoke"):
        lines += ["Smoke run: the verdicts below come from tiny data and one repetition and say "
                  "nothing about the targets.", ""]
    lines += [f"{h}# CPU", ""] + _targets_table(results["targets"], "cpu")
    lines += ["", f"{h}# GPU", ""] + _targets_table(results["targets"], "gpu") + [""]
    lines += [f"![benchmark ratios]({chart_name})", ""]
    cpu = [c for c in comps if c["group"] == "cpu" and c["section"] != "load"]
    headline_loads = [c for c in comps if c["group"] == "cpu" and c["section"] == "load" and (
        c["id"].startswith("load_pass") or c["id"].startswith("load_embeddings_first"))]
    lines += [f"{h} CPU figures", "", f"{h}# Tools, pipeline and validation", ""]
    lines += _comparison_table(cpu) + [""]
    lines += [f"{h}# Loading to the CPU", "",
              "First usable tensor: from the call until the loader has returned and the first "
              "embedding tensor is taken from its result. Full pass: until a torch sum over every "
              "embedding value it returned is done as well (per row for the per-row .pt "
              "layouts). One fresh process per loader; imports are not timed, nor is one warm-up "
              "repetition (none for torch.load of the per-row dialogue and LLM-cache files, "
              "which take seconds).", ""]
    lines += _comparison_table(headline_loads) + [""]
    if results.get("loads"):
        lines += _loads_table(results["loads"]) + [""]
    gpu = [c for c in comps if c["group"] == "gpu"]
    lines += [f"{h} GPU figures", ""]
    gpu_info = results.get("gpu") or {}
    if gpu_info.get("gpu"):
        lines += [f"Device: {gpu_info.get('device')}, torch CUDA {gpu_info.get('torch_cuda')}.", ""]
    else:
        lines += [f"Not measured: {gpu_info.get('reason', 'no GPU')}. The cases are implemented "
                  "(scripts/bench/gpu_child.py) and run on any machine where torch sees a GPU; "
                  "on a GPU machine lent for minutes, `scripts/gpu-check.sh` builds, tests and "
                  "runs them in one command (see \"The GPU check\" below).", ""]
    lines += _comparison_table(gpu) + [""]
    notes = {}
    for c in comps:
        if c.get("notes") and c["notes"] not in notes:
            notes[c["notes"]] = c["title"]
        extra = c.get("extra") or {}
        kept = {k: extra[k] for k in ("python_rows_kept", "baseline_rows_kept", "gpucache_rows")
                if k in extra}
        if kept:
            text = "; ".join(f"{k.replace('_', ' ')}: {json.dumps(v)}" for k, v in kept.items())
            counts = [sorted(v.values()) if isinstance(v, dict) else [v] for v in kept.values()]
            verdict = ("" if len(counts) < 2 else " — they agree" if all(
                x == counts[0] for x in counts) else " — **they differ**: the two sides did not "
                "drop the same rows, so they did not do the same work")
            notes.setdefault(f"Rows kept by each side (same norm bounds and NaN checks on both): "
                             f"{text}{verdict}", c["title"])
    if notes or results.get("errors"):
        lines += [f"{h} Notes", ""] + [f"- *{_escape(title)}*: {_escape(note)}"
                                       for note, title in notes.items()]
        lines += [f"- Case error: {_escape(e)}" for e in results.get("errors", [])]
        lines += [""]
    missing = [(name, f["detail"]) for name, f in results.get("features", {}).items()
               if not f["ok"]]
    if missing:
        lines += [f"{h} Not available in this build", ""]
        lines += [f"- {name}: {_escape(detail)}" for name, detail in missing] + [""]
    lines += [f"{h} Machine", ""] + _machine(results.get("machine", {})) + [""]
    if meta.get("case_seconds"):
        lines += [f"Time per case: data and shards {meta.get('setup_seconds', 0):.0f} s, " +
                  ", ".join(f"{name} {seconds:.0f} s"
                            for name, seconds in meta["case_seconds"].items()) + ".", ""]
    return lines


def write_markdown(results: dict, path: Path, chart_name: str) -> None:
    lines = ["# gpucache benchmark results", ""] + results_section(results, chart_name)
    path.write_text("\n".join(lines) + "\n")


def write_chart(results: dict, path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return False
    targets = {t["comparison"]: t for t in results["targets"]}
    wanted = [c for c in results["comparisons"] if c["status"] == "measured" and c["ratio"] and (
        c["section"] != "load" or c["id"].startswith("load_pass")
        or c["id"].startswith("load_embeddings_first"))]
    groups = [("CPU", [c for c in wanted if c["group"] == "cpu"]),
              ("GPU", [c for c in wanted if c["group"] == "gpu"])]
    heights = [max(1.2, 0.32 * len(items) + 0.8) for _, items in groups]
    fig, axes = plt.subplots(2, 1, figsize=(11, sum(heights) + 1.2),
                             gridspec_kw={"height_ratios": heights})
    gpu_reason = (results.get("gpu") or {}).get("reason", "no GPU")
    for ax, (name, items) in zip(axes, groups):
        if not items:
            ax.axis("off")
            short = gpu_reason.split(" (")[0]
            ax.text(0.5, 0.5, f"{name}: not measured ({short})" if name == "GPU" else
                    f"{name}: nothing measured", ha="center", va="center", fontsize=11)
            continue
        labels = [c["title"] if len(c["title"]) < 80 else c["title"][:77] + "…" for c in items]
        ratios = [c["ratio"] for c in items]
        colors = []
        for c in items:
            t = targets.get(c["id"])
            colors.append("#2a9d8f" if t and t["status"] == "met" else
                          "#e76f51" if t and t["status"] == "not met" else "#8d99ae")
        y = range(len(items))
        ax.barh(list(y), ratios, color=colors)
        ax.set_xscale("log")
        ax.axvline(1.0, color="black", linewidth=0.8)
        for i, c in enumerate(items):
            t = targets.get(c["id"])
            ax.text(ratios[i], i, f" {ratios[i]:.2f}×", va="center", fontsize=8)
            if t and t["metric"] == "speedup":
                ax.plot([t["threshold"]] * 2, [i - 0.4, i + 0.4], color="black", linewidth=2)
            elif t and t["metric"] == "time_ratio":
                ax.plot([1 / t["threshold"]] * 2, [i - 0.4, i + 0.4], color="black", linewidth=2)
        marks = [t["threshold"] if t["metric"] == "speedup" else 1 / t["threshold"]
                 for t in (targets.get(c["id"]) for c in items)
                 if t and t["metric"] in ("speedup", "time_ratio")]
        low, high = min(ratios + marks + [1.0]), max(ratios + marks + [1.0])
        ax.set_xlim(low / 1.6, high * 2.2)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}×"))
        ax.set_yticks(list(y))
        ax.set_yticklabels(labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("× as fast as the peer (peer time / gpucache time), log scale; "
                      "black tick = target", fontsize=8)
        ax.set_title(f"{name}", fontsize=10, loc="left")
    title = "gpucache benchmarks: green = target met, red = not met, grey = no target"
    if results["meta"].get("smoke"):
        title += "\nSMOKE RUN — not the published figures"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


DOC_HEAD = """# Benchmarks

How fast gpucache is against what users do today, measured by one command:

```sh
scripts/bench.sh                 # default sizes (1 GiB tool data), < 10 min on 2 cores
scripts/bench.sh --quick         # smoke test: tiny sizes, 1 repetition
scripts/bench.sh --publish       # also rewrite "Latest results" here (dated sections stay) and docs/benchmarks.png
scripts/bench.sh --help          # sizes, repetitions, sections (also settable by environment)
```

It builds the CLI if needed, makes a venv (`.venv-bench`, from `/usr/bin/python3` with the
system torch and numpy, plus safetensors and matplotlib from PyPI and this package when it has a
`pyproject.toml`; for the writers section also Hugging Face `datasets`, `pyarrow`, MosaicML
`mosaicml-streaming` and `litdata` from PyPI, pinned so that they run on Debian's torch 1.13 and
numpy 1.24, see "Writers" below), generates the same synthetic data as `.pt`, `.safetensors`, `.npy` and gpucache
shards, and writes `bench-out/results.{json,md}` and `bench-out/chart.png`.

What is compared (every peer on the same bytes, in the same run):

| Area | gpucache | Peer |
|---|---|---|
| Training start | `gpucache pack` + `gpucache.load` | the users' loader, [`scripts/bench/baseline_unified_loader.py`](../scripts/bench/baseline_unified_loader.py): `torch.load` of dialogue, embeddings and LLM-cache `.pt` files, per-row `.item()` norm and NaN checks, stack, `.to(device)` |
| Loading | `gpucache.load(device="cpu", verify=False/True)` | `torch.load`, safetensors `load_file`, `numpy.load(mmap_mode="r")`: first usable tensor and one full pass |
| pack | `.npy` f32→f16 and f32, `.pt` single 1 GiB tensor, dialogue list-of-dicts `.pt` | `cp` and `cp` + `sync` (pack fsyncs its output); the Python load-validate-save path |
| verify | `--threads 1`, `--threads 2` (and `--deep`) | `xxhsum -H3` |
| inspect | 1 GiB dataset | 10 MiB dataset |
| Validation | CPU check pass, 1 thread and all | memcpy |
| Writers (`--only writers`) | `gpucache.pack` of an embedding dataset from memory (f32 and f16) and from a Parquet file | Hugging Face `datasets` (`Dataset.from_dict` / `load_dataset("parquet")` + `save_to_disk`), MosaicML streaming `MDSWriter`, `litdata.optimize`, `torch.save`, safetensors `save_file`, all fsynced |
| Remote streaming (`--only remote`) | `gpucache.stream("s3://...")` over a shuffled epoch, from a local moto S3 server, fresh cache each run | MosaicML streaming `StreamingDataset` and litdata `StreamingDataset` over the same rows from the same server: rows/s, requests, bytes |
| GPU | `gpucache.load(device="cuda")`, validation on CUDA, `GPUBatches`, pack + load to the GPU | pinned H2D copy, `torch.load(map_location="cuda")`, safetensors `load_file(device="cuda")`, D2D copy, torch `DataLoader`, the users' loader with `.to("cuda")` |

Figures that were not measured say so (no GPU, or the feature is not in the build that ran).

## Latest results

"""


def kept_sections(page: str) -> str:
    """The hand-written sections of a published page: everything from the first "## " heading
    after "## Latest results" (the dated runs and analyses), which --publish must not drop."""
    lines = page.splitlines(keepends=True)
    try:
        latest = next(i for i, line in enumerate(lines) if line.startswith("## Latest results"))
    except StopIteration:
        return ""
    for i in range(latest + 1, len(lines)):
        if lines[i].startswith("## "):
            return "".join(lines[i:])
    return ""


def publish(results: dict, chart: Path, docs: Path) -> None:
    docs.mkdir(parents=True, exist_ok=True)
    if chart.exists():
        shutil.copyfile(chart, docs / "benchmarks.png")
    page = docs / "benchmarks.md"
    kept = kept_sections(page.read_text()) if page.exists() else ""
    body = DOC_HEAD + "\n".join(results_section(results, "benchmarks.png", heading="###")) + "\n"
    page.write_text(body + ("\n" + kept if kept else ""))


def main(argv=None) -> int:
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--publish", action="store_true")
    parser.add_argument("--docs", type=Path, default=Path(__file__).resolve().parents[2] / "docs")
    args = parser.parse_args(argv)
    results = json.loads(args.results.read_text())
    out = args.results.parent
    write_markdown(results, out / "results.md", "chart.png")
    write_chart(results, out / "chart.png")
    if args.publish:
        publish(results, out / "chart.png", args.docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
