#include <cstdio>

#include "commands.hpp"
#include "gpucache/error.hpp"
#include "gpucache/export.hpp"

namespace gpucache::cli {

Runner add_export(CLI::App& app) {
  auto* command = app.add_subcommand(
      "export", "Write a dataset's columns back out as .npy files or one .safetensors file");
  struct Arguments {
    std::string path, to = "npy";
    ExportOptions options;
    bool json = false, quiet = false;
  };
  auto args = std::make_shared<Arguments>();
  command->add_option("path", args->path, "Dataset directory or shard file")->required();
  command
      ->add_option("output", args->options.output,
                   "npy: output directory; safetensors: output file, or a directory for "
                   "DATASET_NAME.safetensors")
      ->required();
  command->add_option("--to", args->to, "Output format")
      ->check(CLI::IsMember({"npy", "safetensors"}))
      ->capture_default_str();
  command->add_option("--column", args->options.columns, "Export only this column (repeatable)");
  command->add_option("--threads", args->options.threads,
                      "Threads checking chunk hashes (default: all cores)");
  command->add_flag("--json", args->json, "Print the result as JSON");
  // Export draws no progress line; -q is accepted like pack's and verify's, so scripts can pass it
  // to every command.
  command->add_flag("-q,--quiet", args->quiet, "No progress line (export draws none)");
  command->footer(
      R"(Every column keeps its logical shape [rows, *row_shape] (padding stripped). Chunk hashes are
checked while reading: corrupt data is an error, and no file is left behind.
  --to npy          OUTPUT is a directory: NAME.npy per tensor column (bf16 widened to f32: numpy
                    has no bf16), NAME.values.npy + NAME.offsets.npy (int64, rows + 1) per sequence
                    column, NAME.jsonl (one JSON string per line) per text column.
  --to safetensors  OUTPUT is a file (or a directory to write DATASET_NAME.safetensors into): tensor
                    NAME per tensor column (bf16 stays BF16), NAME.values + NAME.offsets (I64) per
                    sequence column, NAME.bytes (U8, UTF-8) + NAME.offsets (I64) per text column;
                    __metadata__ names the gpucache version, the manifest hash and the columns.
Examples:
  gpucache export data/emb --to npy out/
  gpucache export data/dialogue --to npy out/ --column question_embedding
  gpucache export data/images --to safetensors images.safetensors)");
  return [args] {
    args->options.format = *parse_export_format(args->to);
    const auto result = export_dataset(args->path, args->options);
    std::fputs((args->json ? result.to_json() + "\n" : result.to_text()).c_str(), stdout);
    return 0;
  };
}

}  // namespace gpucache::cli
