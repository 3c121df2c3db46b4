// `gpucache pack`: reads raw inputs, maps them to columns, converts and pads them, and writes a
// dataset directory of hash-checked shards plus manifest.json (src/shard/SPEC.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpucache/dtype.hpp"
#include "gpucache/memory_input.hpp"
#include "gpucache/progress.hpp"
#include "gpucache/schema.hpp"
#include "gpucache/validate.hpp"

namespace gpucache {

// --split NAME=FRACTION,...: one dataset per split (docs/cli.md, "Splits").
struct SplitSpec {
  std::string name;
  double fraction = 0;
  bool operator==(const SplitSpec&) const = default;
};
// Parses "train=0.9,val=0.1". Throws UsageError for a malformed list.
std::vector<SplitSpec> parse_split_spec(std::string_view text);

// --part K/N: pack partition K of N of the inputs (docs/scale.md, "Partitioning").
struct PartSpec {
  std::uint32_t index = 0;
  std::uint32_t count = 1;
  bool operator==(const PartSpec&) const = default;
};
// Parses "K/N" with 0 <= K < N. Throws UsageError otherwise.
PartSpec parse_part_spec(std::string_view text);

// The default --max-output: 16 TiB. No single pack run of real data comes near it (larger datasets
// are packed as --part runs and merged), while a repeated (stride-0) view of 2^34 or more 1 KiB
// rows, an easy accident, exceeds it and is refused at once.
inline constexpr std::uint64_t kDefaultMaxOutput = 16ull << 40;

// --on-null: what pack does with a row that holds a null (no value) in a packed column
// (InputColumn::null_rows): drop it with the reason `null`, or refuse the pack naming the first.
enum class NullPolicy { drop, error };

// The most columns one pack takes (the Validator names a row's failing column in 16 bits). An
// input that maps to more (a JSON object of 200,000 keys, one column each) is refused at once.
inline constexpr std::size_t kMaxPackColumns = 65535;

// Every member a CLI flag or Python keyword sets is an entry of the pack option table
// (gpucache/pack_options.hpp), whose default text must mean these initialisers
// (tests/test_pack_options.cpp checks it).
struct PackOptions {
  std::vector<std::string> inputs;  // .pt/.pth, .safetensors, .npy, .npz, .jsonl, mixed freely
  // Instead of input files: columns in the caller's memory (gpucache.pack from Python), packed as
  // one input with the same checks and conversion, read where they lie. The manifest's inputs
  // list each as "memory:NAME" with the XXH3 of its bytes. --field selects and renames them by
  // name, --role and --dtype apply as to a file's columns.
  std::vector<MemoryColumn> memory_columns;
  // How inputs map to columns (docs/cli.md): detected from the layout unless given.
  std::optional<SourceKind> kind;
  std::vector<FieldSpec> fields;
  std::string output_dir;
  // Storage type of float columns: f32, f16 or bf16. Unset keeps float columns as they are, except
  // that embeddings store f64 as f32. column_dtypes sets it per column (--dtype COLUMN=DTYPE).
  std::optional<DType> dtype;
  std::vector<std::pair<std::string, DType>> column_dtypes;
  // --role COLUMN=ROLE: what a column is for, when the layout says otherwise (schema.hpp).
  std::vector<RoleSpec> roles;
  // --strict: a field of an input that gpucache cannot store (SourceMapping::left_out) is an
  // error instead of a field left out and reported.
  bool strict = false;
  std::uint64_t shard_size = 1ull << 30;  // bytes per shard, at most (one row always fits)
  std::optional<std::uint64_t> shard_rows;
  std::uint64_t pad_to = 16;  // row pitch: a multiple of this many elements (and of 16 bytes)
  int zstd_level = 0;         // 0: uncompressed (mmap zero-copy); 1-22: per-chunk zstd
  bool force = false;         // replace a dataset already in output_dir
  // Finish an interrupted pack (killed, power loss): keeps the shards it completed, which must
  // verify, and writes the rest. Inputs and options must be the same; the result is identical.
  bool resume = false;
  // --no-fsync: write shards, manifest and rejects without waiting for the disk. The dataset is
  // the same, and every process sees it whole or not at all, but a power failure soon after the
  // pack may leave a shard empty or short (verify finds it; --resume re-verifies and rewrites it).
  bool fsync = true;
  unsigned threads = 0;  // 0: every core
  bool show_progress = false;
  // Also told (done, total) input bytes as the pack goes, where show_progress draws its line.
  ProgressCallback progress_callback;
  // Row checks, sampling and shuffling (docs/validation.md); validation.device picks the backend.
  // Its output_dtype and threads are taken from the fields above, and its per-column checks
  // (validation.columns) are worked out by pack from the column roles, `checks` and `no_checks`.
  ValidationOptions validation;
  // --checks COLUMN=...: each replaces the default checks of the column it names (by role: an
  // embedding has finite, nonzero, norm, and dedup with validation.dedup; a float tensor finite;
  // any other column none). Unknown columns and checks a column cannot have are usage errors.
  std::vector<ChecksSpec> checks;
  // --no-checks: no column has any check; conversion overflow still obeys on_overflow.
  bool no_checks = false;
  // --on-null: rows with a null in a packed column are dropped (reason `null`, before every
  // check, even with --no-checks) or refused. Columns not packed do not matter. Not recorded in
  // the manifest: a pack either drops them, which the "dropped" counts record, or writes nothing.
  NullPolicy on_null = NullPolicy::drop;
  std::string rejects_path;  // when set, one JSON line per dropped row
  // With splits: output_dir/<name> holds each split's dataset; every kept row goes to one split,
  // chosen from its input row and validation.seed.
  std::vector<SplitSpec> splits;
  // --split-by COLUMN: instead of fractions, one dataset per distinct value of this packed text
  // or integer column, in output_dir/<value as a directory name> (docs/cli.md, "Splits").
  std::string split_by;
  // Pack only this partition of the inputs; each part is a complete dataset that `merge` joins.
  std::optional<PartSpec> part;
  // Add the rows as new shards of the dataset in this directory (docs/scale.md, "Append"):
  // output_dir is then ignored, and the options must equal the dataset's.
  std::string append_to;
  // --max-output: the most bytes of shards one run may write (UINT64_MAX: no cap). Checked with
  // the free space of the output file system before validation (every input row counted as kept)
  // and again before the first shard is written (docs/cli.md, "Resource bounds").
  std::uint64_t max_output = kDefaultMaxOutput;
};

struct PackedShard {
  std::string file;
  std::uint64_t rows = 0;
  std::uint64_t bytes = 0;
};

struct PackedSplit {
  std::string name;  // its directory under the output directory
  std::string output_dir;
  double fraction = 0;  // --split
  // --split-by: the column's value (text, or an integer in decimal), which `name` spells as a
  // directory name.
  std::string value;
  std::uint64_t rows = 0;
  std::uint64_t bytes = 0;
  std::vector<PackedShard> shards;
};

// A field of an input no column was made of, and why (SourceMapping::left_out, per input).
struct LeftOutInputField {
  std::string input;
  std::string field;
  std::string reason;
};

// A column stored in another dtype than an input holds it: by --dtype, or (not asked) an f64
// embedding, which is converted and so stored as f32.
struct StoredConversion {
  std::string column;
  DType from = DType::f32;
  DType to = DType::f32;
  bool asked = false;  // by --dtype
};

struct PackResult {
  std::string output_dir;
  std::vector<StoredConversion> conversions;
  // Fields of the inputs that gpucache cannot store, left out (--strict refuses them instead);
  // also in the manifest's `left_out`.
  std::vector<LeftOutInputField> left_out;
  // Fields that could be columns but that --field did not name: (input, field).
  std::vector<std::pair<std::string, std::string>> not_selected;
  // Dates and times, stored as i64: each such column and what its integers mean (the manifest's
  // "time"). In to_json() as "times": [{"column", "kind", "unit", "tz"}].
  std::vector<std::pair<std::string, ColumnTime>> times;
  std::uint64_t input_rows = 0;
  std::uint64_t rows = 0;
  std::uint64_t bytes = 0;
  std::uint64_t resumed_shards = 0;  // shards kept from an interrupted run (--resume)
  std::vector<PackedShard> shards;   // without splits
  std::vector<PackedSplit> splits;   // with splits (rows and bytes above add them up)
  // --split-by: the column, and whether its values are integers (else text).
  std::string split_by;
  bool split_by_integer = false;
  ReasonCounts dropped{};  // indexed by DropReason; [kept] unused
  std::uint64_t sampled_out = 0;
  std::uint64_t overflowed_values = 0;       // clamped to the largest finite value
  std::uint64_t flushed_to_zero_values = 0;  // nonzero values too small for the storage type
  // The validation backend that ran ("cpu", "cuda:0 (NVIDIA H100)"; empty when no column was
  // validated) and why it was chosen.
  std::string device;
  std::string device_reason;
  // Bytes of rows the CUDA validation backend uploaded from the host (ValidationResult's
  // uploaded_bytes): 0 on the CPU and for rows it checked in a CUDA tensor's own memory
  // (MemoryColumn::device_values). Not in to_json(): a measure for tests and benchmarks.
  std::uint64_t validation_uploaded_bytes = 0;

  std::string to_json() const;
  std::string to_text() const;
  // The fields not packed, one line each (left out, then a note on those --field did not name),
  // for the CLI's stderr; empty when every field became a column.
  std::string notes_text() const;
};

PackResult pack(const PackOptions& options);

// The text forms of pack's options, shared by the CLI and the Python API. Each throws UsageError
// naming the option.
// "4096", "512M", "1G", "1GiB" → bytes.
std::uint64_t parse_byte_size(std::string_view text, std::string_view option);
// --max-output: a size as parse_byte_size, or "none" (no cap) → UINT64_MAX.
std::uint64_t parse_max_output(std::string_view text);
// --compress: "none" or "" → 0 (uncompressed), "zstd" → 3, "zstd:LEVEL" → LEVEL (1-22).
int parse_compression(std::string_view text);
// --dtype: "f16" sets options.dtype, "images=bf16" adds a column's type.
void apply_dtype_option(PackOptions& options, std::string_view text);
// --device: auto, cpu or cuda.
Device parse_device_option(std::string_view text);
// --on-overflow: drop, clamp or error.
OverflowPolicy parse_overflow_option(std::string_view text);
// --on-null: drop or error.
NullPolicy parse_null_option(std::string_view text);

}  // namespace gpucache
