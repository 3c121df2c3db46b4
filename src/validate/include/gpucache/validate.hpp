// Validation, filtering and conversion of embedding rows (docs/validation.md).
//
// Pack runs two passes over its inputs, each a batch at a time of f32 row-major rows:
//   1. Validator::check_batch() for every batch, then Validator::finish(): per-row verdicts,
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

// The rules and how to run them. manifest.json records the rules (every field but output_dtype,
// device and threads) through validation_options_to_json() in gpucache/validation_json.hpp.
struct ValidationOptions {
  // Inclusive bounds on each embedding's L2 norm; 0 < norm_min <= norm_max < infinity.
  double norm_min = 0.1;
  double norm_max = 100.0;
  bool dedup = false;
  // Inclusive bounds on the cosine of column 0 and column 1 (dialogue pairs of equal dim).
  std::optional<double> pair_cos_min, pair_cos_max;
  DType output_dtype = DType::f32;  // f32, f16 or bf16
  OverflowPolicy on_overflow = OverflowPolicy::error;
  bool normalize = false;
  // Per source: keep at most max_rows_per_source rows and/or round(sample_fraction * kept).
  std::optional<std::uint64_t> max_rows_per_source;
  std::optional<double> sample_fraction;  // in (0, 1]
  bool shuffle = false;
  std::uint64_t seed = 0;
  Device device = Device::automatic;
  unsigned threads = 0;  // CPU threads; 0 = all hardware threads

  bool operator==(const ValidationOptions&) const = default;
};

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

struct RejectedRow {
  std::uint64_t row = 0;  // global row index
  std::uint32_t source = 0;
  std::uint64_t source_row = 0;  // index among the rows of `source`, in global row order
  DropReason reason = DropReason::kept;
  std::uint8_t column = 0;   // first embedding column that failed (0 for pair_cos)
  double norm = 0.0;         // canonical fp64 norm of that column (NaN or inf for nan_inf)
  double pair_cosine = 0.0;  // the cosine for pair_cos rejects, else 0
};

// Norms of the kept rows of one column. The histogram has kNormBins bins between log-spaced
// edges from norm_min to norm_max: bin i holds edges[i] <= norm < edges[i+1], and norm_max
// itself falls in the last bin.
inline constexpr std::size_t kNormBins = 32;
struct NormStats {
  std::uint64_t count = 0;
  double min = 0.0, max = 0.0, mean = 0.0;  // 0 when count is 0
  std::vector<double> bin_edges;            // kNormBins + 1 values
  std::vector<std::uint64_t> bin_counts;    // kNormBins values
};

struct ValidationResult {
  // Global row indices of the kept rows, in output order (shuffled when options.shuffle).
  std::vector<std::uint64_t> rows;
  std::uint64_t rows_checked = 0;
  ReasonCounts reasons{};  // over all sources
  std::uint64_t sampled_out = 0;
  std::uint64_t rows_clamped = 0;     // kept rows that on_overflow=clamp will saturate
  std::vector<SourceReport> sources;  // ascending source id
  std::vector<RejectedRow> rejects;   // ascending row
  std::vector<NormStats> norms;       // one per embedding column
  Device device = Device::cpu;        // the backend that ran
};

// Writes the f32 values of column `column` of global row `row` (out.size() == that column's
// dim). finish() calls it only for rows whose hashes collide, to compare them byte for byte.
using RowFetcher = std::function<void(std::uint64_t row, std::size_t column, std::span<float> out)>;

// Pass 1. Not thread-safe; one Validator per pack.
class Validator {
 public:
  // column_dims: one entry per embedding column (1, or 2 for question/answer pairs). Throws
  // gpucache::Error for invalid options or when device is cuda and CUDA is not usable.
  Validator(ValidationOptions options, std::vector<std::uint64_t> column_dims);
  ~Validator();
  Validator(Validator&&) noexcept;
  Validator& operator=(Validator&&) noexcept;

  // Checks rows [first_row, first_row + rows) of source `source`: columns[c] points at
  // rows * column_dims[c] floats. Batches may come in any order but must not overlap, and by
  // finish() they must cover [0, total rows). With on_overflow=error the first row that would
  // overflow throws here (or in finish() for dialogue columns with dedup, where a later
  // duplicate verdict can still win).
  void check_batch(const float* const* columns, std::uint64_t first_row, std::uint64_t rows,
                   std::uint32_t source);
  // The same for rows lying apart (a tensor each): row_pointers[c][i] points at the
  // column_dims[c] floats of row first_row + i of column c. The CPU checks them where they lie;
  // CUDA gathers them into one transfer first.
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
  DType output_dtype = DType::f32;  // f32, f16 or bf16
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
