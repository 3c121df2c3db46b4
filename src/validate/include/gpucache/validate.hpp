// Validation, filtering and conversion of rows (docs/validation.md).
//
// Pack runs two passes over its inputs, a batch of rows at a time:
//   1. Validator::check_batch() for every batch, then Validator::finish(): per-row verdicts over
//      every checked column (each with its own checks, kChecks in gpucache/checks.hpp),
//      duplicates, sampling and the final output order of the kept rows;
//   2. RowConverter::convert() on the kept rows: dtype conversion, normalisation, padding.
// Both run on the CPU reference or on CUDA (ValidationOptions::device) with bit-identical
// results. Memory held between batches is a few bytes per row, never a copy of the data.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpucache/common/spill_array.hpp"

#include "gpucache/checks.hpp"
#include "gpucache/device.hpp"
#include "gpucache/drop_reason.hpp"
#include "gpucache/dtype.hpp"

namespace gpucache {

namespace detail {
struct ValidatorState;
}

enum class OverflowPolicy { drop, clamp, error };
std::string_view overflow_policy_name(OverflowPolicy policy) noexcept;
std::optional<OverflowPolicy> parse_overflow_policy(std::string_view name) noexcept;

// The one rule for which dtypes a float column may be stored as. f32, f16 and bf16 are what rows
// are converted to (rounded, padded, normalised: pack's --dtype, ConversionOptions); f64 is
// stored only from f64 inputs, never converted to (padded and normalised in f64 at most:
// RowConverter::convert_f64), and checked on its f64 values. Every place that accepts a float
// storage type asks these.
bool float_storage_dtype(DType dtype) noexcept;     // f32, f16, bf16, f64
bool float_conversion_dtype(DType dtype) noexcept;  // f32, f16, bf16
// "f32, f16 or bf16", for messages.
inline constexpr std::string_view kFloatConversionDTypes = "f32, f16 or bf16";

// The rules and how to run them. manifest.json records the rules (every field but output_dtype,
// device and threads) through validation_options_to_json() in gpucache/validation_json.hpp.
struct ValidationOptions {
  // The dataset-wide norm bounds (--norm-min, --norm-max): inclusive, 0 <= norm_min <= norm_max,
  // 0 < norm_max; norm_min 0 is no lower bound and norm_max infinity no upper bound. They apply to
  // every column with the norm check whose ColumnChecks does not say otherwise.
  double norm_min = 0.1;
  double norm_max = 100.0;
  // --dedup: embedding columns get the dedup check by default.
  bool dedup = false;
  // Inclusive bounds on the cosine of the two columns with the pair_cos check (a dialogue's
  // question and answer embeddings), of equal values per row.
  std::optional<double> pair_cos_min, pair_cos_max;
  // f32, f16 or bf16: the storage type of the legacy constructor's columns and of
  // conversion_options().
  DType output_dtype = DType::f32;
  OverflowPolicy on_overflow = OverflowPolicy::error;
  bool normalize = false;
  // Per source: keep at most max_rows_per_source rows and/or round(sample_fraction * kept).
  std::optional<std::uint64_t> max_rows_per_source;
  std::optional<double> sample_fraction;  // in (0, 1]
  bool shuffle = false;
  std::uint64_t seed = 0;
  Device device = Device::automatic;
  unsigned threads = 0;  // CPU threads; 0 = all hardware threads
  // The checks of each column, in the Validator's column order. Unset: the rules of datasets packed
  // before checks were per column, legacy_column_checks() (every column an embedding).
  std::optional<std::vector<ColumnChecks>> columns;

  bool operator==(const ValidationOptions&) const = default;
};

// The per-column rules of a dataset whose manifest records none (packed before checks were per
// column, or with every column at these rules): each of `columns` (its validated columns, all
// embeddings) gets finite, nonzero and norm within [norm_min, norm_max], dedup with `dedup`, and,
// when pair bounds are set and there are exactly two columns, pair_cos; normalized is
// options.normalize.
std::vector<ColumnChecks> legacy_column_checks(const ValidationOptions& options,
                                               const std::vector<std::string>& columns);
// options.columns when set, else legacy_column_checks(options, legacy_columns).
std::vector<ColumnChecks> resolve_column_checks(const ValidationOptions& options,
                                                const std::vector<std::string>& legacy_columns);

// Indexed by DropReason; the `kept` entry counts kept rows.
using ReasonCounts = std::array<std::uint64_t, kDropReasonCount>;

// The table rows of the reasons that drop a row (all but kept), in storage-code order: the order
// of the "dropped" keys in --json and manifest.json.
constexpr std::span<const DropReasonInfo> drop_reasons() noexcept {
  return std::span<const DropReasonInfo>(kDropReasons).subspan(1);
}

struct SourceReport {
  std::uint32_t source = 0;
  std::uint64_t rows = 0;         // rows checked
  ReasonCounts reasons{};         // kept (after sampling) and dropped per reason
  std::uint64_t sampled_out = 0;  // valid rows left out by max_rows_per_source/sample_fraction
};

// A row that holds a null (no value) in a packed column: dropped with the reason `null` before
// any check runs on it (its values are placeholders). `column` is the caller's number for the
// column (pack's column index, not a Validator column); RejectedRow::column carries it back.
struct NullRow {
  std::uint64_t row = 0;  // global row index
  std::uint32_t column = 0;
  bool operator==(const NullRow&) const = default;
};

struct RejectedRow {
  std::uint64_t row = 0;  // global row index
  std::uint32_t source = 0;
  std::uint64_t source_row = 0;  // index among the rows of `source`, in global row order
  DropReason reason = DropReason::kept;
  // The Validator column that failed (the first pair column for pair_cos); for `null`, the
  // column of the NullRow.
  std::uint32_t column = 0;
  double norm = 0.0;  // canonical fp64 norm of that column (NaN or inf for nan_inf; 0 for null)
  double pair_cosine = 0.0;  // the cosine for pair_cos rejects, else 0
};

// Norms of the kept rows of one column with the norm check (rows whose norm is not finite, which
// only a column without the finite check keeps, are left out). The histogram has kNormBins bins
// between log-spaced edges from norm_min to norm_max: bin i holds edges[i] <= norm < edges[i+1],
// and norm_max itself falls in the last bin. An open bound (norm_min 0, norm_max infinity) is
// replaced by the smallest positive (largest) norm of the kept rows.
inline constexpr std::size_t kNormBins = 32;
struct NormStats {
  std::uint32_t column = 0;  // the Validator column
  std::uint64_t count = 0;
  double min = 0.0, max = 0.0, mean = 0.0;  // 0 when count is 0
  std::vector<double> bin_edges;            // kNormBins + 1 values
  std::vector<std::uint64_t> bin_counts;    // kNormBins values
};

// Row indices, 8 bytes each, on the heap or in an unlinked file (common/spill_array.hpp).
using RowList = detail::SpillArray<std::uint64_t>;

struct ValidationResult {
  // Global row indices of the kept rows, in output order (shuffled when options.shuffle). In a
  // file once large when the Validator spills (release() what has been read to stay bounded).
  RowList rows;
  std::uint64_t rows_checked = 0;
  ReasonCounts reasons{};  // over all sources
  std::uint64_t sampled_out = 0;
  std::uint64_t rows_clamped = 0;     // kept rows that on_overflow=clamp will saturate
  std::vector<SourceReport> sources;  // ascending source id
  std::vector<RejectedRow> rejects;   // ascending row
  std::vector<NormStats> norms;       // one per column with the norm check, in column order
  Device device = Device::cpu;        // the backend that ran
  // Bytes of rows the CUDA backend copied from host to device for the checks: 0 on the CPU and
  // for rows it read from ColumnBatch::device_rows.
  std::uint64_t uploaded_bytes = 0;
};

// Writes the f32 values of column `column` of global row `row` (out.size() == that column's
// values per row), widened as the Validator widens them. finish() calls it for rows whose hashes
// collide, to compare them byte for byte (and to report a duplicate's norm).
using RowFetcher = std::function<void(std::uint64_t row, std::size_t column, std::span<float> out)>;

// What the rows of one Validator column look like.
struct ColumnLayout {
  ColumnLayout() = default;
  explicit ColumnLayout(std::uint64_t values_, DType output_dtype_ = DType::f32)
      : values(values_), output_dtype(output_dtype_) {}

  std::uint64_t values = 0;  // values per row: a tensor row's flattened values, an embedding's D
  // The storage type: f16 and bf16 decide overflow (unless the column is normalized), f32 does not.
  DType output_dtype = DType::f32;
};

// One batch of one column: `rows` rows of `values` values of `dtype` (f32, f16, bf16 or f64;
// widened to f32 for the checks), row after row.
struct ColumnBatch {
  const void* rows = nullptr;
  DType dtype = DType::f32;
  // Optional: the same rows, laid out the same, in CUDA device memory on device `device_ordinal`
  // (a CUDA tensor's). The CUDA backend, when it runs on that device, checks them there instead of
  // uploading `rows`; the CPU backend, another device, or rows not aligned to their dtype ignore
  // it. The verdicts are the same either way.
  const void* device_rows = nullptr;
  int device_ordinal = -1;
};
// The same for rows lying apart (a tensor each): rows[i] points at row i.
struct ColumnRowPointers {
  const void* const* rows = nullptr;
  DType dtype = DType::f32;
};

// Pass 1. Not thread-safe; one Validator per pack.
class Validator {
 public:
  // columns[c]: the rows of column c, whose checks are options.columns->at(c) (or, when
  // options.columns is unset, legacy_column_checks()). A column may have no checks (it is then
  // only checked for overflow), and there may be no columns (rows are then only counted, sampled
  // and ordered). Throws gpucache::Error for invalid options or when device is cuda and CUDA is not
  // usable.
  // (A span, so that a braced list such as {384} stays the legacy constructor's dims.)
  Validator(ValidationOptions options, std::span<const ColumnLayout> columns);
  // Embedding columns of f32 rows stored as options.output_dtype, with legacy_column_checks():
  // column_dims has one entry per column (1, or 2 for question/answer pairs).
  Validator(ValidationOptions options, std::vector<std::uint64_t> column_dims);
  ~Validator();
  Validator(Validator&&) noexcept;
  Validator& operator=(Validator&&) noexcept;

  // Keeps the per-row bookkeeping (4 bytes a row for the verdict, 8 for each norm, hash or cosine
  // kept, 8 per kept row of the result) in unlinked files in `directory` once an array outgrows
  // heap_limit_bytes, so that memory stays bounded whatever the row count; the files cost that
  // much disk until finish() returns (the result's rows until it is dropped). Call before the
  // first batch. Without it everything stays on the heap.
  void spill_to(std::string directory, std::uint64_t heap_limit_bytes = std::uint64_t(64) << 20);

  // The rows that hold a null in some column, ascending by row and one per row (its first null
  // column): each is dropped with the reason `null` when a batch covers it, whatever its values.
  // Call before the first batch. Throws gpucache::Error for rows out of order or repeated, or a
  // column above RowStatus's 65535.
  void drop_null_rows(std::vector<NullRow> rows);

  // Checks rows [first_row, first_row + rows) of source `source`: columns[c] holds them for column
  // c. Batches may come in any order but must not overlap, and by finish() they must cover
  // [0, total rows). With on_overflow=error the first row that would overflow throws here (or in
  // finish() when a duplicate verdict in another column can still win).
  void check_batch(std::span<const ColumnBatch> columns, std::uint64_t first_row,
                   std::uint64_t rows, std::uint32_t source);
  // The same with f32 rows: columns[c] points at rows * values floats.
  void check_batch(const float* const* columns, std::uint64_t first_row, std::uint64_t rows,
                   std::uint32_t source);
  // The same for rows lying apart (a tensor each). The CPU checks them where they lie; CUDA
  // gathers them into one transfer per column first.
  void check_rows(std::span<const ColumnRowPointers> columns, std::uint64_t first_row,
                  std::uint64_t rows, std::uint32_t source);
  // The same with f32 rows: row_pointers[c][i] points at row first_row + i of column c.
  void check_rows(const float* const* const* row_pointers, std::uint64_t first_row,
                  std::uint64_t rows, std::uint32_t source);

  // Resolves duplicates (fetch_row is required when dedup is on), overflow drops, sampling and
  // the output order. Call once; the Validator is spent afterwards.
  ValidationResult finish(const RowFetcher& fetch_row = {});

  Device device() const noexcept;
  // "device: cuda (cuda:0 NVIDIA H200, 139.8 GiB)" or "device: cpu (...)", for the log.
  const std::string& device_description() const noexcept;

 private:
  std::unique_ptr<detail::ValidatorState> state_;
};

struct ConversionOptions {
  DType output_dtype = DType::f32;  // f32, f16 or bf16 (convert); f64 (convert_f64)
  std::uint64_t padded_dim = 0;     // output row pitch in elements; 0 = dim
  bool normalize = false;
  OverflowPolicy on_overflow = OverflowPolicy::error;
  Device device = Device::automatic;
  unsigned threads = 0;
};
// The conversion that matches a validation run.
ConversionOptions conversion_options(const ValidationOptions& options, std::uint64_t padded_dim);

struct ConversionCounts {
  std::uint64_t overflowed = 0;       // finite values that rounded to infinity
  std::uint64_t flushed_to_zero = 0;  // nonzero values that rounded to zero (kept as zero)
};

// Pass 2, and the standalone f32 -> f16/bf16 conversion. Holds the CUDA staging buffers, so
// make one per pack and reuse it.
class RowConverter {
 public:
  explicit RowConverter(ConversionOptions options);
  ~RowConverter();
  RowConverter(RowConverter&&) noexcept;
  RowConverter& operator=(RowConverter&&) noexcept;

  // Converts `rows` rows of `dim` f32 values to rows of padded_dim (or dim) output elements,
  // zero-padded, into `out` (rows * row_bytes(dim) bytes). Rows are L2-normalised first when
  // asked (rows of zero or non-finite norm are left unscaled). A value that overflows
  // throws gpucache::Error naming row first_row + i unless on_overflow is clamp: with drop,
  // such rows should have been dropped by the Validator before reaching conversion.
  ConversionCounts convert(const float* in, std::uint64_t rows, std::uint64_t dim, std::byte* out,
                           std::uint64_t first_row = 0);
  // Rows of an f64 column stored as f64 (output_dtype f64): `rows` rows of `dim` f64 values
  // into `out` (rows * row_bytes(dim) bytes), as they are, or L2-normalised in f64 when asked (by
  // the norm the f64 checks computed: InputType::f64_kept), zero-padded. Nothing is rounded to a
  // narrower type, so it runs on the host whatever the device: the bits are the same either way.
  void convert_f64(const double* in, std::uint64_t rows, std::uint64_t dim, std::byte* out);
  std::size_t row_bytes(std::uint64_t dim) const;
  // True when converting rows of `dim` values only copies them: f32 out, no normalisation, no
  // padding. Callers may then store the input bytes as they are.
  bool copies_rows_unchanged(std::uint64_t dim) const noexcept;
  Device device() const noexcept;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// One-shot convenience around RowConverter.
ConversionCounts convert_rows(const float* in, std::uint64_t rows, std::uint64_t dim,
                              std::uint64_t padded_dim, DType output_dtype, bool normalize,
                              OverflowPolicy on_overflow, std::byte* out,
                              Device device = Device::automatic, unsigned threads = 0);

}  // namespace gpucache
