// Each subcommand registers its CLI11 options and returns the function that runs it. The runner
// calls the library and returns the process exit code; errors propagate as gpucache::Error.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpucache/pack_options.hpp"
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

// The text of each option of the pack option table (gpucache/pack_options.hpp) that was
// registered, as given on the command line (pack_table_options.cpp).
struct PackTableArguments {
  std::vector<std::vector<std::string>> values;  // repeatable options
  std::vector<std::string> single;               // options of one value
  std::unique_ptr<bool[]> flags;                 // flags
  std::vector<CLI::Option*> registered;          // nullptr: not registered on this command
};
void add_pack_table_options(CLI::App& command, PackTableArguments& arguments,
                            bool (*wanted)(const PackOptionInfo&));
// Parses every option that was given into `options`, through the table's parsers.
void apply_pack_table_options(const PackTableArguments& arguments, PackOptions& options);

// --kind, --field and --role, shared by pack and probe: the pack table's entries.
struct MappingArguments {
  PackTableArguments table;
};
void add_mapping_options(CLI::App& command, MappingArguments& arguments);
void apply_mapping_options(const MappingArguments& arguments, std::optional<SourceKind>& kind,
                           std::vector<FieldSpec>& fields, std::vector<RoleSpec>& roles);

// Progress is drawn when stderr is a terminal, unless --quiet.
bool show_progress(bool quiet);

}  // namespace gpucache::cli
