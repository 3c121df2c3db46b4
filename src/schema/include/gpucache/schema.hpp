// Schema mapping: turns the object tree any reader produced into the dataset columns `pack`
// writes. Four kinds of source are recognised on their own (see map_source); anything else, or
// anything ambiguous, is mapped with --kind and --field, and the error says which flags to use.
// Every column gets a role (gpucache/column.hpp ColumnRole), which --role overrides.
//
// Field paths (--field COLUMN=PATH) walk the tree from the root:
//   key, a.b        dict keys          ["odd.key"]   a quoted key (any characters, \" and \\)
//   [0]             list element       [*]           every element of a list, or every value of
//   @keys           the keys of a dict                a dict: one row each (at most one [*])
//   . or empty      the root itself
// e.g. `t`, `data.vectors`, `[*].q_emb`, `a.b[*].c`, `cache.@keys`.
// A path that ends on a list reads one row per element; on an [N, ...] tensor, one row per
// tensor row (of any shape); on a 1-D [N] tensor, one value per row. Lists of integers, and 1-D
// integer tensors (one per row), make sequence columns (token ids).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpucache/dtype.hpp"
#include "gpucache/input_column.hpp"
#include "gpucache/readers.hpp"
#include "gpucache/value.hpp"

namespace gpucache {

enum class SourceKind { dialogue, embeddings, llm_cache, tensors };

// "dialogue", "embeddings", "llm-cache", "tensors".
std::string_view source_kind_name(SourceKind kind) noexcept;
// Accepts the names above ("llm_cache" too).
std::optional<SourceKind> parse_source_kind(std::string_view name) noexcept;

struct FieldSpec {
  std::string column;
  std::string path;
  // Set when the column comes from a file of its own (--field images=images.npy, or
  // --field emb=ann.h5:/train with a path inside it): the column is joined to the others row by
  // row. Empty for a path in every input. (Initialised so that FieldSpec{column, path} says so
  // without -Wmissing-field-initializers.)
  std::string file = {};
  bool operator==(const FieldSpec&) const = default;
};

// Parses "COLUMN=PATH", or "COLUMN=FILE" and "COLUMN=FILE:PATH" when FILE names an existing file,
// as given to --field. Throws UsageError for a missing '=', a column name that is not
// [a-z_][a-z0-9_]* (dotted parts allowed: "meta.lang"), or a path that does not parse.
FieldSpec parse_field_spec(std::string_view text);

// --role COLUMN=ROLE: what a column is for (embedding, tensor, sequence, text).
struct RoleSpec {
  std::string column;
  ColumnRole role = ColumnRole::tensor;
  bool operator==(const RoleSpec&) const = default;
};
RoleSpec parse_role_spec(std::string_view text);

// One input's own mapping in a mixed project (pack --input-map, gpucache.Input in Python): what
// --kind, --field and --role say for every input, said for this one alone.
struct InputMapping {
  std::optional<SourceKind> kind;
  std::vector<FieldSpec> fields;
  std::vector<RoleSpec> roles;
  // Text columns this input lacks, asked for by name with the text every one of its rows gets
  // (a plain embedding matrix beside inputs with text: {"text", ""}): (column, text).
  std::vector<std::pair<std::string, std::string>> fill_texts;
  bool operator==(const InputMapping&) const = default;
};

// A text column of `rows` rows, each holding `text` (InputMapping::fill_texts), named `column`,
// its path "fill:" + column and origin `origin`.
InputColumn constant_text_column(const std::string& column, const std::string& text,
                                 std::uint64_t rows, const std::string& origin);

struct SourceMapping {
  SourceKind kind = SourceKind::embeddings;
  std::string origin;
  // Standard columns of the kind first, then extra --field ones. Each keeps the input's tree (and
  // so its file mapping) alive.
  std::vector<InputColumn> columns;
  std::uint64_t rows = 0;
  // The equivalent --field flags for this mapping: pack records them, probe prints them.
  std::vector<FieldSpec> fields;
  // One or two sentences: what was found and why it maps this way.
  std::string explanation;
  // Fields of the input that no column is made of because gpucache cannot store them, each with
  // why (the reader's, and the tree's fields whose values make no column). Pack reports them and
  // refuses them with --strict.
  std::vector<LeftOutField> left_out;
  // Fields that could be columns but that --field did not name (it keeps exactly the columns it
  // names, and the standard columns of the kind): pack notes them.
  std::vector<std::string> not_selected;
  // Fields stored under another name than their own because theirs is not a legal column name
  // (a key with capitals or other characters, one over 255 bytes, two keys that make one name):
  // pack reports each (stderr, --json `renamed`, the manifest). A name --field gives, or a
  // layout's standard name (docs/cli.md "Roles: embedding or tensor"), is no rename.
  struct Renamed {
    std::string field;   // the field's path in the input
    std::string column;  // the column's name
    bool operator==(const Renamed&) const = default;
  };
  std::vector<Renamed> renamed;

  const InputColumn* find(std::string_view column) const noexcept;
};

// Maps one input's tree to columns.
//   dialogue    question_embedding, answer_embedding [N, D]; question, answer text (optional)
//               from a list of dicts, or a dict of parallel lists/tensors (questions, answers,
//               question_embeddings, answer_embeddings; common aliases accepted).
//   embeddings  embedding [N, D] (+ text when present) from an [N, D] tensor, or a dict holding
//               exactly one 2-D float tensor (under any key, nested dicts searched), with an
//               optional text list.
//   llm-cache   text + embedding from a dict text -> [D] tensor, a list of {text, embedding}
//               dicts, or {texts, embeddings} with one vector per text.
//   tensors     a dict of arrays sharing their first dimension ({images [N, 3, H, W], labels
//               [N], keypoints [N, 21, 3]}): one column per key, named after it.
// In a dict of arrays, the other arrays with the dataset's row count are extra columns too.
// Roles: the embedding columns of the first three kinds are `embedding` (float vectors, padded
// and validated), text columns `text`; every other column `tensor` or `sequence` by its rows.
// `kind` forces the kind; `fields` name columns explicitly (standard columns the fields leave
// out are still detected when detection succeeds; any other column name adds an extra column);
// `roles` override roles.
// Touches no tensor data. Throws gpucache::Error naming `origin`: for an ambiguous or unknown
// layout (with what was found and the exact --kind/--field flags to use), for columns whose row
// counts differ (listing each), and for rows whose vectors differ in size or dtype (naming the
// row).
SourceMapping map_source(const Value& root, const std::string& origin,
                         std::optional<SourceKind> kind = std::nullopt,
                         const std::vector<FieldSpec>& fields = {},
                         const std::vector<RoleSpec>& roles = {});

// map_source for whatever a reader hands over (readers.hpp InputData): a tree as above, or
// columns the reader (or a caller, for arrays in memory) already made, which --field selects and
// renames by their paths, and which are detected as an embedding dataset when one of them is a
// float vector column, else as a tensors dataset.
SourceMapping map_input(const InputData& data, const std::string& origin,
                        std::optional<SourceKind> kind = std::nullopt,
                        const std::vector<FieldSpec>& fields = {},
                        const std::vector<RoleSpec>& roles = {});

// Adds to mapping.renamed each column stored under another name than the field's own in the
// input (`tree`: the keys of its path, else the reader's path), unless `fields` or the layout's
// standard columns give that name. map_source and map_input call it.
void note_renamed_columns(SourceMapping& mapping, const std::vector<FieldSpec>& fields, bool tree);

// The one role rule for the CLI and Python alike (docs/cli.md, "Roles: embedding or tensor"): the
// role a column gets without --role / roles=, given the layout's kind and the standard column it
// is or fills (under its own name: a lone block of float vectors `features` fills `embedding`).
// The standard embedding columns (dialogue's question_embedding and answer_embedding, the
// embedding of embeddings and llm-cache layouts) are `embedding`: a float vector a row, padded,
// checked finite, non-zero and within the norm bounds. Every other column has no layout role: its
// rows decide (tensor, finite check only for floats; sequence; text), and nullopt says so.
std::optional<ColumnRole> layout_role(SourceKind kind, std::string_view standard_column);

// One column from a file of its own (a FieldSpec with `file`): the array at field.path, or when
// the path is empty the one array the file holds. `roles` may set its role. Throws
// gpucache::Error naming the file when the path does not lead to a column or the file holds
// several arrays and no path picks one.
InputColumn map_file_column(const InputData& data, const FieldSpec& field,
                            const std::vector<RoleSpec>& roles = {});

// Several inputs packed into one dataset must agree on column names, kinds and roles, row shapes
// and integer dtypes (float columns may differ in float dtype); their layouts (SourceKind) may
// differ, as in a mixed project whose inputs are each mapped to the same columns. Throws
// gpucache::Error naming the input that lacks a column (or has one the first lacks) and what to
// pass, or listing every input's column when they disagree on it.
void check_compatible(const std::vector<SourceMapping>& mappings);

// Python's gpucache.pack of a dict: true when the dict is an LLM cache as the .pt reader sees the
// same dict in a file (map_source's layout rule finds `text -> vector` entries: every value one
// float vector, [D] or [1, D], keyed by its text) and every value is a tensor or array (a dict of
// Python lists of numbers stays a dict of columns). Then it packs as that .pt file would: text +
// embedding, one row per key. Otherwise the dict's values are columns. `root` may be a tree of
// metadata only (Storage::not_read): no tensor data is touched.
bool memory_dict_is_llm_cache(const Value& root);

// "--field 'question_embedding=[*].q_emb'": shell-quoted where needed.
std::string format_field_flag(const FieldSpec& field);
// "--kind dialogue --field ... --field ...".
std::string format_flags(SourceKind kind, const std::vector<FieldSpec>& fields);

}  // namespace gpucache
