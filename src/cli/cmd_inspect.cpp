#include <cstdio>

#include "commands.hpp"
#include "gpucache/inspect.hpp"

namespace gpucache::cli {

Runner add_inspect(CLI::App& app) {
  auto* command = app.add_subcommand(
      "inspect", "Show a dataset's rows, columns, sizes and provenance instantly");
  struct Arguments {
    std::string path;
    bool json = false;
  };
  auto args = std::make_shared<Arguments>();
  command->add_option("path", args->path, "Dataset directory or shard file")->required();
  command->add_flag("--json", args->json, "Print as JSON");
  command->footer(R"(Reads only the manifest and shard headers, never the data.
Examples:
  gpucache inspect data/emb
  gpucache inspect data/emb/shard-00000.gcs --json)");
  return [args] {
    const auto report = inspect(args->path);
    std::fputs((args->json ? report.json + "\n" : report.text).c_str(), stdout);
    return 0;
  };
}

}  // namespace gpucache::cli
