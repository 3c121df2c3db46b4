// Each subcommand registers its CLI11 options and returns the function that runs it. The runner
// calls the library and returns the process exit code; errors propagate as gpucache::Error.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gpucache/schema.hpp"

namespace gpucache::cli {

using Runner = std::function<int()>;

Runner add_pack(CLI::App& app);
Runner add_verify(CLI::App& app);
Runner add_inspect(CLI::App& app);
Runner add_export(CLI::App& app);
Runner add_probe(CLI::App& app);
Runner add_merge(CLI::App& app);
Runner add_push(CLI::App& app);

// --kind, --field and --role, shared by pack and probe.
struct MappingArguments {
  std::string kind;
  std::vector<std::string> fields;
  std::vector<std::string> roles;
};
void add_mapping_options(CLI::App& command, MappingArguments& arguments);
void apply_mapping_options(const MappingArguments& arguments, std::optional<SourceKind>& kind,
                           std::vector<FieldSpec>& fields, std::vector<RoleSpec>& roles);

// Progress is drawn when stderr is a terminal, unless --quiet.
bool show_progress(bool quiet);

}  // namespace gpucache::cli
