#include "gpucache/error.hpp"
#include "commands.hpp"

namespace gpucache::cli {

void add_mapping_options(CLI::App& command, MappingArguments& arguments) {
  command.add_option(
      "--kind", arguments.kind,
      "Input layout when it is not detected: dialogue, embeddings, llm-cache or tensors");
  command.add_option(
      "--field", arguments.fields,
      "COLUMN=PATH: take a column from a key path in the input, e.g. embedding=data.vectors "
      "or question_embedding=[*].q_emb (repeatable)");
  command.add_option("--role", arguments.roles,
                     "COLUMN=ROLE: what a column is for, embedding, tensor, sequence or text, when "
                     "the layout says otherwise (repeatable)");
}

void apply_mapping_options(const MappingArguments& arguments, std::optional<SourceKind>& kind,
                           std::vector<FieldSpec>& fields, std::vector<RoleSpec>& roles) {
  if (!arguments.kind.empty()) {
    kind = parse_source_kind(arguments.kind);
    if (!kind) throw UsageError("--kind must be dialogue, embeddings, llm-cache or tensors");
  }
  for (const auto& field : arguments.fields) fields.push_back(parse_field_spec(field));
  for (const auto& role : arguments.roles) roles.push_back(parse_role_spec(role));
}

}  // namespace gpucache::cli
