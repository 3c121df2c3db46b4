// The options of the pack option table (gpucache/pack_options.hpp) on the CLI: pack registers
// all of them, probe the mapping ones (--kind, --field, --role).
#include "commands.hpp"
#include "gpucache/pack_options.hpp"

namespace gpucache::cli {

// Registers every option of the pack option table (gpucache/pack_options.hpp) on `command`,
// storing each value as its text form; `apply_pack_table_options` then parses the ones given.
void add_pack_table_options(CLI::App& command, PackTableArguments& arguments,
                            bool (*wanted)(const PackOptionInfo&)) {
  const auto table = pack_option_table();
  arguments.values.resize(table.size());
  arguments.single.resize(table.size());
  arguments.flags = std::make_unique<bool[]>(table.size());
  arguments.registered.resize(table.size());
  for (std::size_t i = 0; i < table.size(); ++i) {
    const PackOptionInfo& info = table[i];
    if (!wanted(info)) continue;
    const std::string flag(info.flag), help(info.help);
    CLI::Option* option = nullptr;
    if (info.type == PackOptionType::flag) {
      option = command.add_flag(flag, arguments.flags[i], help);
    } else if (info.type == PackOptionType::texts) {
      option = command.add_option(flag, arguments.values[i], help);
    } else {
      option = command.add_option(flag, arguments.single[i], help);
    }
    if (!info.value_name.empty()) option->type_name(std::string(info.value_name));
    if (!info.default_text.empty()) option->default_str(std::string(info.default_text));
    arguments.registered[i] = option;
  }
}

void apply_pack_table_options(const PackTableArguments& arguments, PackOptions& options) {
  const auto table = pack_option_table();
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (arguments.registered[i] == nullptr || arguments.registered[i]->count() == 0) continue;
    const PackOptionInfo& info = table[i];
    if (info.type == PackOptionType::flag) {
      if (arguments.flags[i]) info.apply(options, "true", info.flag);
      continue;
    }
    if (info.type == PackOptionType::texts)
      for (const auto& text : arguments.values[i]) info.apply(options, text, info.flag);
    else
      info.apply(options, arguments.single[i], info.flag);
  }
}

namespace {
bool is_mapping_option(const PackOptionInfo& info) {
  return info.flag == "--kind" || info.flag == "--field" || info.flag == "--role";
}
}  // namespace

void add_mapping_options(CLI::App& command, MappingArguments& arguments) {
  add_pack_table_options(command, arguments.table, is_mapping_option);
}

void apply_mapping_options(const MappingArguments& arguments, std::optional<SourceKind>& kind,
                           std::vector<FieldSpec>& fields, std::vector<RoleSpec>& roles) {
  PackOptions options;
  apply_pack_table_options(arguments.table, options);
  kind = options.kind;
  fields = std::move(options.fields);
  roles = std::move(options.roles);
}

}  // namespace gpucache::cli
