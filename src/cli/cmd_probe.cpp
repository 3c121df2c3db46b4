#include <cstdio>

#include "commands.hpp"
#include "gpucache/input.hpp"
#include "gpucache/probe.hpp"

namespace gpucache::cli {

Runner add_probe(CLI::App& app) {
  auto* command = app.add_subcommand(
      "probe", "Show what is inside a raw input file, and how pack would map it");
  struct Arguments {
    std::vector<std::string> files;
    MappingArguments mapping;
    bool json = false;
  };
  auto args = std::make_shared<Arguments>();
  command->add_option("files", args->files, "Input files, of the formats listed below")->required();
  add_mapping_options(*command, args->mapping);
  command->add_flag("--json", args->json, "Print as JSON (one object per file, in a list)");
  command->footer(
      R"(Prints the object tree (keys, types, dtypes, shapes, string counts), the layout detected and the
columns pack would make, without loading tensor data and without running any pickle code.

)" + input_formats_help() +
      R"(

Examples:
  gpucache probe cache/dialogue_dataset/train.pt
  gpucache probe emb.pt --field embedding=data.vectors
  gpucache probe cache/llm_*.pt --json)");
  return [args] {
    ProbeOptions options;
    apply_mapping_options(args->mapping, options.kind, options.fields, options.roles);
    std::string out = args->json ? "[" : "";
    for (std::size_t i = 0; i < args->files.size(); ++i) {
      const auto& file = args->files[i];
      // Probe reads what describes the data, never the data: compressed tensors stay compressed.
      const InputData data = read_input(file, ReadOptions{.tensor_data = false});
      if (args->json)
        out += (i ? ",\n" : "\n") + probe_json(data, file, options);
      else
        out += (i ? "\n" : "") + probe_text(data, file, options);
    }
    if (args->json) out += "\n]\n";
    std::fputs(out.c_str(), stdout);
    return 0;
  };
}

}  // namespace gpucache::cli
