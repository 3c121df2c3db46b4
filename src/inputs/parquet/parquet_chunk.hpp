// Decoding one column chunk (one leaf column of one row group) into gpucache's values: pages are
// decompressed, their levels turned into rows (nulls noted, list lengths kept) and their
// values, PLAIN, dictionary or BYTE_STREAM_SPLIT encoded, converted to the column's dtype.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gpucache/dtype.hpp"
#include "parquet_metadata.hpp"
#include "parquet_time.hpp"

namespace gpucache::detail::parquet {

// A top-level field with one leaf, as the reader maps it (parquet_reader.cpp).
struct LeafColumn {
  std::string name;               // the top-level field's name
  std::string shown_name;         // the same, escaped and quoted for messages: 'embedding'
  std::vector<std::string> path;  // the names from the field down to the leaf (path_in_schema)
  SchemaElement leaf;
  std::size_t leaf_index = 0;  // the chunk's index within a row group
  int max_definition = 0;
  int max_repetition = 0;  // nested list depth
  // For each definition level below the maximum: whether an entry of that level is a null
  // (refused) or an empty list, and at which list depth.
  struct BelowMax {
    bool null = true;
    int empty_depth = 0;
    // The lists open above the node that stops it: 0 for a null row (the field itself is null),
    // which is read as a null row; deeper, a null inside a list, which is refused.
    int list_depth = 0;
  };
  std::vector<BelowMax> below_max;
  bool text = false;        // BYTE_ARRAY strings; else fixed-width values of dtype
  DType dtype = DType::u8;  // the values' gpucache dtype (u8 for text)
  // Dates and times: what the i64 values mean, and how the physical values become them.
  std::optional<ColumnTime> time;
  TimeConversion time_conversion = TimeConversion::none;
  // BYTE_ARRAY values without a string annotation: their bytes are not checked as UTF-8, and
  // the column is a sequence of u8 (a row's bytes), as Arrow reads them as `binary`.
  bool binary = false;
  // 0 and up: DECIMAL values with this scale, converted to f64 (dtype f64) as they are decoded;
  // a BYTE_ARRAY decimal is decoded as strings (text, binary) and converted once decoded.
  int decimal_scale = -1;
  // What the reader changes on the way, for probe, pack's report and the manifest:
  // "decimal(10,2) stored as f64". Empty when the values are stored as the file holds them.
  std::string conversion;
  // Whether the column's rows are byte strings (text, or binary as a u8 sequence); a BYTE_ARRAY
  // decimal is decoded as strings but makes an f64 tensor.
  bool strings() const { return text && decimal_scale < 0; }
};

// Memory for a chunk's decoded values: from 2 MiB up, anonymous pages that the kernel may back with
// transparent huge pages (madvise), so that filling hundreds of MiB takes hundreds of page faults,
// each zeroing 2 MiB, instead of tens of thousands of 4 KiB ones (which made the page faults most
// of a decode: 0.23 s of system time for 288 MiB of embeddings on the 2-core VM); below that, the
// heap, so that a small chunk costs its size and not a huge page.
class ValueBuffer {
 public:
  ValueBuffer() = default;
  explicit ValueBuffer(std::size_t bytes);  // throws std::bad_alloc when there is no memory
  ValueBuffer(ValueBuffer&& other) noexcept { *this = std::move(other); }
  ValueBuffer& operator=(ValueBuffer&& other) noexcept;
  ~ValueBuffer();
  std::byte* get() const noexcept { return data_; }

 private:
  void release() noexcept;
  void map_huge(std::size_t bytes);

  std::byte* data_ = nullptr;
  std::size_t mapped_ = 0;
};

// A chunk's bytes of a mapped file that some of its values are read from where they lie: they
// stay mapped in (the values are read there) until this goes, and then leave the process's
// resident set (the page cache keeps them). Holds the file mapped meanwhile.
class FilePages {
 public:
  FilePages() = default;
  FilePages(std::shared_ptr<const void> file, const std::byte* begin, std::size_t size)
      : file_(std::move(file)), begin_(begin), size_(size) {}
  FilePages(FilePages&& other) noexcept { *this = std::move(other); }
  FilePages& operator=(FilePages&& other) noexcept;
  ~FilePages() { release(); }

 private:
  void release() noexcept;
  std::shared_ptr<const void> file_;
  const std::byte* begin_ = nullptr;
  std::size_t size_ = 0;
};

// Where a run of a chunk's fixed-width values lies: from byte `first_byte` of the chunk's values
// (counted as if they were one array) up to the next run's, at `at`.
struct ValueRun {
  std::uint64_t first_byte = 0;
  const std::byte* at = nullptr;
};

struct DecodedChunk {
  std::uint64_t rows = 0;
  std::uint64_t value_count = 0;
  // Fixed width: value_count values of the column's dtype, here when `runs` is empty. An
  // UNCOMPRESSED PLAIN page whose values need no conversion and hold no null is not copied: its
  // values are read where they lie in the mapped file (`file_pages` keeps them), and `runs` says
  // where each page's values lie, in order: in the file, or here for the pages that were decoded.
  ValueBuffer values;
  std::vector<ValueRun> runs;
  FilePages file_pages;
  // Tensor columns read in runs (stitch_rows): the rows that straddle two runs, copied here in
  // row order, and which rows they are (ascending), so that every row lies in one place.
  std::vector<std::byte> stitched;
  std::vector<std::uint64_t> stitched_rows;
  std::vector<std::byte> text;              // text: the rows' UTF-8 bytes
  std::vector<std::uint64_t> text_offsets;  // text: value_count + 1 offsets into text
  std::vector<std::uint64_t> row_lengths;   // one list level: each row's length
  // The chunk's rows (from 0) that are null, ascending. In a column without lists their values
  // are placeholders (zeros, or an empty string); a null list row has no values here (its
  // row_lengths entry is 0, and make_column puts a row of zeros in its place in a tensor).
  std::vector<std::uint64_t> null_rows;
  // Set when the chunk cannot make a column though it is sound ("nulls inside lists"): the
  // field is left out with this reason, and nothing else here is filled.
  std::string left_out;
  // Per list depth 1..max_repetition: the length every list there has, kVaried when they differ,
  // kNoList when there was none.
  std::vector<std::int64_t> uniform_lengths;
  static constexpr std::int64_t kNoList = -1, kVaried = -2;
};

// Frees a vector's storage: `v = {}` assigns an empty initializer list, which keeps it.
template <typename T>
void free_vector(std::vector<T>& v) {
  std::vector<T>().swap(v);
}

// Decodes the chunk at `chunk` of a row group of `group_rows` rows whose first row is the file's
// row `first_row`. `file` is the whole file; `data_end` where the footer starts. Throws
// gpucache::Error naming the file, the column, the row group and (for a null or bad text) the
// file's row. `text_reserve`: the bytes a text chunk's strings took when it was decoded before
// (0: unknown), reserved at once. `mapping`: what keeps `file` mapped (a MappedFile); given, the
// values of UNCOMPRESSED PLAIN pages that need no conversion are read where they lie (`runs`)
// and the chunk holds the mapping; null, every value is copied out.
DecodedChunk decode_chunk(std::span<const std::byte> file, std::uint64_t data_end,
                          const std::string& origin, const LeafColumn& column,
                          const ColumnChunk& chunk, std::size_t group, std::int64_t group_rows,
                          std::uint64_t first_row, std::uint64_t text_reserve = 0,
                          std::shared_ptr<const void> mapping = nullptr);

// A fixed-width chunk's values, wherever they lie (parquet_values.cpp). Offsets and lengths are
// in bytes of the values counted as one array.
// Where bytes [offset, offset + length) lie, when they lie together; else nullptr.
const std::byte* values_at(const DecodedChunk& chunk, std::uint64_t offset, std::uint64_t length);
// Copies bytes [offset, offset + length) into out.
void copy_values(const DecodedChunk& chunk, std::uint64_t offset, std::uint64_t length,
                 std::byte* out);
// Copies every value into `values` (value_bytes of them), so that they lie together.
void own_values(DecodedChunk& chunk, std::uint64_t value_bytes);
// Drops the values (a chunk not kept resident keeps its rows, nulls and lengths).
void drop_values(DecodedChunk& chunk);
// For a tensor column of rows of row_bytes: copies the rows that straddle two runs into
// `stitched`, so that row_at finds every row in one place.
void stitch_rows(DecodedChunk& chunk, std::uint64_t row_bytes);
// Where row `row` of a tensor column lies (after stitch_rows).
const std::byte* row_at(const DecodedChunk& chunk, std::uint64_t row, std::uint64_t row_bytes);

}  // namespace gpucache::detail::parquet
