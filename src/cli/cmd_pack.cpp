#include <algorithm>
#include <cstdio>
#include <string>

#include "commands.hpp"
#include "gpucache/checks.hpp"
#include "gpucache/error.hpp"
#include "gpucache/input.hpp"
#include "gpucache/pack.hpp"
#include "gpucache/pack_options.hpp"
#include "gpucache/validate.hpp"

namespace gpucache::cli {
namespace {

// The checks --checks takes, with their documentation, from the table in gpucache/checks.hpp.
std::string checks_help() {
  std::size_t width = 0;
  for (const auto& info : kChecks) width = std::max(width, info.name.size());
  // The defaults by role, from default_checks (checks.cpp), for a float column.
  std::string defaults;
  for (const auto role :
       {ColumnRole::embedding, ColumnRole::tensor, ColumnRole::sequence, ColumnRole::text}) {
    defaults += (defaults.empty() ? "" : "; ") + std::string(column_role_name(role)) + " " +
                describe_checks(default_checks(role, DType::f32, false));
    if (default_checks(role, DType::f32, true) != default_checks(role, DType::f32, false))
      defaults += " (+ dedup with --dedup)";
  }
  std::string text =
      "Checks, per column (--checks COLUMN=CHECK,... replaces a column's defaults; none for no\n"
      "checks). Defaults by role, for float columns (others: none): " +
      defaults + ";\nthe dialogue pair also pair_cos with --pair-cos-*.\n";
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
    PackTableArguments table;
    bool json = false, quiet = false;
  };
  auto args = std::make_shared<Arguments>();
  command->add_option("inputs", args->options.inputs,
                      "Input files, of the formats listed below (none when every column comes "
                      "from --field COLUMN=FILE)");
  command->add_option("-o,--output", args->options.output_dir, "Output dataset directory");
  add_pack_table_options(*command, args->table, [](const PackOptionInfo&) { return true; });
  command->add_flag("--json", args->json, "Print the result as JSON");
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
    apply_pack_table_options(args->table, options);
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
