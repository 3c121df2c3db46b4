#include <cstdio>

#include "commands.hpp"
#include "gpucache/merge.hpp"

namespace gpucache::cli {

Runner add_merge(CLI::App& app) {
  auto* command = app.add_subcommand(
      "merge", "Join datasets (the parts of a pack --part run) into one, hard-linking the shards");
  struct Arguments {
    MergeOptions options;
    bool json = false;
  };
  auto args = std::make_shared<Arguments>();
  command->add_option("parts", args->options.parts, "Part dataset directories")->required();
  command->add_option("-o,--output", args->options.output_dir, "The new dataset directory")
      ->required();
  command->add_flag("--copy", args->options.copy,
                    "Copy shards that cannot be hard-linked (parts on another file system)");
  command->add_flag("!--no-fsync", args->options.fsync,
                    "Do not wait for the disk to hold copied shards and the manifest (as pack's)");
  command->add_flag("--json", args->json, "Print the result as JSON");
  command->footer(
      R"(Parts packed with --part K/N are joined in the order K = 0..N-1 and must all be given;
other datasets are joined in the order given. Columns and options must agree (the first
difference is named). No shard byte is copied: shards are hard-linked under new numbers, and
the parts stay valid datasets. The output appears only when complete (built in a hidden
directory beside it and renamed).
Examples:
  gpucache merge parts/* -o data/emb
  gpucache merge /scratch/parts/* -o /data/emb --copy     # parts on another file system)");
  return [args] {
    const auto result = merge(args->options);
    std::puts((args->json ? result.to_json() : result.to_text()).c_str());
    return 0;
  };
}

}  // namespace gpucache::cli
