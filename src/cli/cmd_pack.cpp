#include <algorithm>
#include <cstdio>
#include <string>

#include "commands.hpp"
#include "gpucache/checks.hpp"
#include "gpucache/error.hpp"
#include "gpucache/input.hpp"
#include "gpucache/pack.hpp"
#include "gpucache/validate.hpp"

namespace gpucache::cli {
namespace {

// The checks --checks takes, with their documentation, from the table in gpucache/checks.hpp.
std::string checks_help() {
  std::size_t width = 0;
  for (const auto& info : kChecks) width = std::max(width, info.name.size());
  std::string text =
      "Checks, per column (--checks COLUMN=CHECK,... replaces a column's defaults; none for no\n"
      "checks). Defaults by role: embedding finite, nonzero, norm (+ dedup with --dedup, + "
      "pair_cos\n"
      "for the dialogue pair with --pair-cos-*); float tensor finite; anything else none.\n";
  for (const auto& info : kChecks)
    text += "  " + std::string(info.name) + std::string(width + 2 - info.name.size(), ' ') +
            std::string(info.doc) + "\n";
  return text;
}

// The drop reasons in check order, with their documentation, from the table in
// gpucache/drop_reason.hpp.
std::string drop_reasons_help() {
  std::size_t width = 0;
  for (const auto& reason : drop_reasons()) width = std::max(width, reason.name.size());
  std::string text =
      "A row is dropped with the first check it fails, in this order (rules named as in the\n"
      "manifest: norm_min is --norm-min, on_overflow is --on-overflow, and so on):\n";
  for (const DropReason reason : drop_reasons_in_check_order()) {
    const DropReasonInfo& info = drop_reason_info(reason);
    text += "  " + std::string(info.name) + std::string(width + 2 - info.name.size(), ' ') +
            std::string(info.doc) + "\n";
  }
  return text + "The counts per reason are printed and stored in the manifest.";
}

}  // namespace

Runner add_pack(CLI::App& app) {
  auto* command =
      app.add_subcommand("pack", "Validate, convert and pack raw embedding files into a dataset");
  struct Arguments {
    PackOptions options;
    std::vector<std::string> dtypes;
    std::string split, part, shard_size = "1G", max_output = "16T", compress, device = "auto",
                             on_overflow = "error";
    MappingArguments mapping;
    std::vector<std::string> checks;
    bool json = false, quiet = false;
  };
  auto args = std::make_shared<Arguments>();
  command->add_option("inputs", args->options.inputs,
                      "Input files, of the formats listed below (none when every column comes "
                      "from --field COLUMN=FILE)");
  add_mapping_options(*command, args->mapping);
  command->add_option("-o,--output", args->options.output_dir, "Output dataset directory");
  command->add_option("--dtype", args->dtypes,
                      "Storage type of float columns: f32, f16 or bf16, or COLUMN=TYPE for one "
                      "column (repeatable)");
  command->add_option("--split", args->split,
                      "NAME=FRACTION,...: write one dataset per split in OUT/NAME, e.g. "
                      "train=0.9,val=0.1 (rows assigned by --seed)");
  command->add_option("--part", args->part,
                      "K/N: pack partition K of N of the inputs (sorted; whole files when there "
                      "are at least N, else row ranges), e.g. --part $SLURM_ARRAY_TASK_ID/8; "
                      "join the parts with gpucache merge");
  command->add_option("--append", args->options.append_to,
                      "DATASET: add the inputs' rows to this dataset as new shards (same options "
                      "as the dataset's; -o not needed)");
  command->add_option("--shard-size", args->shard_size, "Largest shard in bytes (K, M, G suffixes)")
      ->capture_default_str();
  command->add_option("--shard-rows", args->options.shard_rows, "Most rows per shard");
  command
      ->add_option("--max-output", args->max_output,
                   "Refuse a run whose shards would exceed this many bytes (K, M, G, T "
                   "suffixes; none: no cap); every run is also refused when its output would not "
                   "fit in the free space of the output file system")
      ->capture_default_str();
  command
      ->add_option("--pad-to", args->options.pad_to, "Pad rows to a multiple of this many elements")
      ->capture_default_str();
  command->add_option("--compress", args->compress,
                      "Per-chunk compression: zstd or zstd:LEVEL (default off)");
  command->add_option("--threads", args->options.threads, "Worker threads (default: every core)");
  command->add_flag("--force", args->options.force,
                    "Replace a dataset already in the output directory");
  command->add_flag(
      "--resume", args->options.resume,
      "Finish an interrupted pack (same inputs and options), keeping its complete shards");
  command->add_flag(
      "!--no-fsync", args->options.fsync,
      "Do not wait for the disk to hold the output (faster; a power failure soon after the pack "
      "may leave a shard short, which verify finds)");
  auto& rules = args->options.validation;
  command->add_option("--device", args->device, "Validation backend: auto, cpu or cuda")
      ->capture_default_str();
  command
      ->add_option("--checks", args->checks,
                   "COLUMN=CHECK,CHECK,...: the checks of a column, replacing its defaults "
                   "(finite, nonzero, norm or norm:MIN:MAX, pair_cos, dedup; or none); repeatable")
      ->type_name("COLUMN=CHECKS");
  command->add_flag("--no-checks", args->options.no_checks,
                    "Check no column (--on-overflow still applies to f16/bf16 storage)");
  command
      ->add_option("--norm-min", rules.norm_min,
                   "Norm check: drop rows whose L2 norm is below this (0: no lower bound)")
      ->capture_default_str();
  command
      ->add_option("--norm-max", rules.norm_max,
                   "Norm check: drop rows whose L2 norm is above this (inf: no upper bound)")
      ->capture_default_str();
  command->add_flag("--dedup", rules.dedup,
                    "Drop exact duplicate rows (the first occurrence is kept)");
  command->add_option("--pair-cos-min", rules.pair_cos_min,
                      "Dialogue: drop pairs whose question/answer cosine is lower");
  command->add_option("--pair-cos-max", rules.pair_cos_max,
                      "Dialogue: drop pairs whose question/answer cosine is higher");
  command
      ->add_option("--on-overflow", args->on_overflow,
                   "Values too large for --dtype: drop the row, clamp, or error")
      ->capture_default_str();
  command->add_flag("--normalize", rules.normalize, "Scale every kept row to unit L2 norm");
  command->add_option("--max-rows", rules.max_rows_per_source,
                      "Keep at most N rows of each input (sampled with --seed)");
  command->add_option("--sample", rules.sample_fraction,
                      "Keep this fraction of each input's valid rows (0 to 1]");
  command->add_flag("--shuffle", rules.shuffle,
                    "Shuffle rows deterministically (with --seed) so training reads sequentially");
  command->add_option("--seed", rules.seed, "Seed for --sample, --max-rows and --shuffle")
      ->capture_default_str();
  command->add_option("--rejects", args->options.rejects_path,
                      "Write every dropped row to this JSON-lines file");
  command->add_flag("--json", args->json, "Print the result as JSON");
  command->add_flag("--strict", args->options.strict,
                    "Refuse fields of the inputs that gpucache cannot store, instead of leaving "
                    "them out (listed on stderr and in the manifest's left_out)");
  command->add_flag("-q,--quiet", args->quiet, "No progress line");
  command->footer(input_formats_help() + R"(

Examples:
  gpucache pack cache/dialogue_dataset/*.pt -o data/dialogue --dtype f16
  gpucache pack cache/llm_*.pt -o data/llm_cache
  gpucache pack vectors.pt -o data/emb --kind embeddings --field embedding=data.vectors
  gpucache pack embeddings.npy -o data/emb
  gpucache pack part-*.npy -o data/emb --dtype f16 --shard-size 512M
  gpucache pack emb.npy -o data/emb --compress zstd:3 --json
  gpucache pack part-*.npy -o data/emb --resume      # after an interrupted run
  gpucache pack emb.npy -o data/emb --dedup --norm-min 0.5 --rejects dropped.jsonl
  gpucache pack emb.npy -o data/emb --shuffle --seed 7 --sample 0.1 --device cpu
  gpucache pack images.pt -o data/images --dtype images=bf16 --split train=0.9,val=0.1
  gpucache pack shards/*.npy -o parts/$SLURM_ARRAY_TASK_ID --part $SLURM_ARRAY_TASK_ID/16
  gpucache pack new-*.npy --append data/emb            # new rows as new shards
  gpucache pack tokens.jsonl -o data/tokens --field tokens=[*].tokens --role tokens=sequence
  gpucache pack images.pt -o data/images --checks keypoints=none --checks weights=finite
  gpucache pack emb.npy -o data/emb --norm-min 0 --norm-max inf   # norm without bounds

)" + checks_help() +
                  "\n" + drop_reasons_help());
  return [command, args] {
    auto& options = args->options;
    for (const auto& text : args->dtypes) apply_dtype_option(options, text);
    if (!args->split.empty()) options.splits = parse_split_spec(args->split);
    if (!args->part.empty()) options.part = parse_part_spec(args->part);
    options.shard_size = parse_byte_size(args->shard_size, "--shard-size");
    options.max_output = parse_max_output(args->max_output);
    apply_mapping_options(args->mapping, options.kind, options.fields, options.roles);
    for (const auto& spec : args->checks) options.checks.push_back(parse_checks_spec(spec));
    options.validation.device = parse_device_option(args->device);
    options.validation.on_overflow = parse_overflow_option(args->on_overflow);
    options.zstd_level = parse_compression(args->compress);
    options.show_progress = show_progress(args->quiet || args->json);
    const auto result = pack(options);
    // Fields not packed are said even with --quiet: nothing of the input goes missing unsaid
    // (--json carries them in its left_out and not_selected lists instead).
    if (!args->json) std::fputs(result.notes_text().c_str(), stderr);
    std::puts((args->json ? result.to_json() : result.to_text()).c_str());
    return 0;
  };
}

}  // namespace gpucache::cli
