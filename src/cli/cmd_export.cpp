#include <cstdio>

#include "gpucache/error.hpp"
#include "gpucache/export.hpp"
#include "commands.hpp"

namespace gpucache::cli {

Runner add_export(CLI::App& app) {
  auto* command = app.add_subcommand(
      "export", "Write a dataset's columns back out as .npy (and text as JSON lines)");
  struct Arguments {
    std::string path, to = "npy";
    ExportOptions options;
    bool json = false;
  };
  auto args = std::make_shared<Arguments>();
  command->add_option("path", args->path, "Dataset directory or shard file")->required();
  command->add_option("output", args->options.output_dir, "Output directory")->required();
  command->add_option("--to", args->to, "Output format (npy)")->capture_default_str();
  command->add_option("--column", args->options.columns, "Export only this column (repeatable)");
  command->add_flag("--json", args->json, "Print the result as JSON");
  command->footer(
      R"(Numeric columns are written with their logical shape (padding stripped); bf16 is widened to
f32 since numpy has no bf16. Text columns become NAME.jsonl, one JSON string per line.
Examples:
  gpucache export data/emb --to npy out/
  gpucache export data/dialogue --to npy out/ --column question_embedding)");
  return [args] {
    if (args->to != "npy") throw UsageError("--to must be npy");
    const auto result = export_npy(args->path, args->options);
    std::fputs((args->json ? result.to_json() + "\n" : result.to_text()).c_str(), stdout);
    return 0;
  };
}

}  // namespace gpucache::cli
