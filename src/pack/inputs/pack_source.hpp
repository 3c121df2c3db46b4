// One opened input of `gpucache pack`, seen as columns of rows: what pack needs from any reader,
// whatever the file format and layout.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gpucache/input_column.hpp"
#include "gpucache/pack.hpp"
#include "gpucache/schema.hpp"

namespace gpucache::detail {

struct Source {
  std::string path;
  std::uint64_t rows = 0;
  std::vector<InputColumn> columns;  // keep the parsed input (and its memory map) alive
  std::shared_ptr<const SourceMapping> mapping;
  // What the provenance columns record for this source's rows: its position among every input
  // of the run, and the input row of its row 0. Both differ from its place only in a --part
  // pack, which packs a share of the inputs (pack_part.hpp).
  std::uint32_t input_index = 0;
  std::uint64_t row_offset = 0;
};

struct SourceOptions {
  std::optional<SourceKind> kind;  // --kind; detected when unset
  std::vector<FieldSpec> fields;   // --field COLUMN=PATH
  std::vector<RoleSpec> roles;     // --role COLUMN=ROLE
  unsigned threads = 0;            // --threads: what the reader may use (ReadOptions)
};

// Reads any supported input (the inputs module's registry) and maps it to columns (schema.hpp).
Source open_source(const std::string& path, const SourceOptions& options);
// Every input of a pack as sources of rows: one per input file, or, when columns come from files
// of their own (--field COLUMN=FILE), one source joining them row by row to the input.
std::vector<Source> open_sources(const PackOptions& options);
// The files a pack reads, for the manifest's inputs: each input, then each column's own file.
std::vector<std::string> input_files(const PackOptions& options);

// What of the inputs no column holds: fields gpucache cannot store (left out, with why) and
// fields --field did not name, per input. With `strict` a left-out field is an error naming the
// input, the field and why.
struct FieldsNotPacked {
  std::vector<LeftOutInputField> left_out;
  std::vector<std::pair<std::string, std::string>> not_selected;  // (input, field)
  std::vector<RenamedInputField> renamed;  // stored under a legal name, not their own
};
FieldsNotPacked fields_not_packed(const std::vector<Source>& sources, bool strict);
// Every packed column whose reader converted its values (InputColumn::conversion), per input.
std::vector<InputConversion> input_conversions(const std::vector<Source>& sources);
// [{"input", "column", "field", "conversion"}, ...]: the manifest's and --json's
// `input_conversions`.
nlohmann::ordered_json input_conversions_json(const std::vector<InputConversion>& conversions);
// [{"input", "field", "reason"}, ...]: the manifest's `left_out` and pack's --json `left_out`.
nlohmann::ordered_json left_out_json(const std::vector<LeftOutInputField>& left_out);
// [{"input", "field", "column"}, ...]: the manifest's `renamed` and pack's --json `renamed`.
nlohmann::ordered_json renamed_json(const std::vector<RenamedInputField>& renamed);

}  // namespace gpucache::detail
