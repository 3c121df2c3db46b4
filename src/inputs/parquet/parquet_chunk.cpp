// One column chunk: its pages in file order (an optional dictionary page first), each
// decompressed into a scratch buffer, its levels read run by run and its values decoded straight
// into the chunk's buffer. FORMAT.md describes the page layouts.
#include "parquet_chunk.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <new>
#include <utility>

#include "gpucache/common/checked_math.hpp"
#include "gpucache/common/dtype_formats.hpp"
#include "gpucache/common/mapped_file.hpp"
#include "gpucache/common/utf8.hpp"
#include "gpucache/error.hpp"
#include "parquet_codec.hpp"
#include "parquet_delta.hpp"
#include "parquet_rle.hpp"

namespace gpucache::detail::parquet {
namespace {

// A chunk may decode to at most this much more than its bytes in the file (dictionary and run
// lengths compress without limit), or to the floor whatever its bytes; beyond it the file is
// refused rather than trusted. The cap bounds every buffer a claim in the file sizes: the values,
// 8 bytes per value (levels, dictionary index, text offset or row length), a text column's
// strings, a decompressed page and a dictionary. Fuzzing builds (fuzz/flags.cmake) lower the
// floor to 64 MiB: libFuzzer reports an allocation of 1 GiB (-malloc_limit_mb) as a finding, and
// a buffer the cap allows is not one.
constexpr std::uint64_t kMaxExpansion = 1024;
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
constexpr std::uint64_t kMinDecodedCap = std::uint64_t{64} << 20;
#else
constexpr std::uint64_t kMinDecodedCap = std::uint64_t{1} << 30;
#endif

std::string encoding_name(Encoding encoding) {
  switch (encoding) {
    case Encoding::plain:
      return "PLAIN";
    case Encoding::plain_dictionary:
      return "PLAIN_DICTIONARY";
    case Encoding::rle:
      return "RLE";
    case Encoding::bit_packed:
      return "BIT_PACKED";
    case Encoding::delta_binary_packed:
      return "DELTA_BINARY_PACKED";
    case Encoding::delta_length_byte_array:
      return "DELTA_LENGTH_BYTE_ARRAY";
    case Encoding::delta_byte_array:
      return "DELTA_BYTE_ARRAY";
    case Encoding::rle_dictionary:
      return "RLE_DICTIONARY";
    case Encoding::byte_stream_split:
      return "BYTE_STREAM_SPLIT";
  }
  return "encoding " + std::to_string(static_cast<int>(encoding));
}

int bit_width_of(std::uint64_t max_value) {
  int width = 0;
  while (max_value >> width) ++width;
  return width;
}

// The bytes one value takes in a PLAIN page (booleans: 0, they are bits).
std::size_t physical_size(const SchemaElement& leaf) {
  switch (*leaf.type) {
    case PhysicalType::int32:
    case PhysicalType::float32:
      return 4;
    case PhysicalType::int64:
    case PhysicalType::float64:
      return 8;
    case PhysicalType::fixed_len_byte_array:
      return static_cast<std::size_t>(leaf.type_length);
    case PhysicalType::int96:
      return kInt96Size;
    default:
      return 0;
  }
}

// A DECIMAL's unscaled value, `bytes` of big-endian two's complement (1 to 32; none is 0),
// divided by 10^scale: the nearest f64 when the unscaled value fits 53 bits and the scale is at
// most 22 (both exact doubles, one correctly rounded division), else within an ulp or two (the
// value and the power of ten in long double first).
double decimal_to_f64(std::span<const std::byte> bytes, int scale) {
  if (bytes.empty()) return 0.0;
  const bool negative = (std::to_integer<unsigned>(bytes[0]) & 0x80u) != 0;
  // The magnitude, byte by byte: the two's complement's bits inverted plus one when negative.
  long double magnitude = 0.0L;
  std::uint64_t low = 0;  // the same while it fits 64 bits (exact)
  bool fits = true;
  bool carry = negative;  // + 1 of the negation, carried from the least significant byte
  std::array<unsigned, 32> digits{};
  for (std::size_t i = bytes.size(); i-- > 0;) {
    unsigned byte = std::to_integer<unsigned>(bytes[i]);
    if (negative) {
      byte = (~byte & 0xffu) + (carry ? 1u : 0u);
      carry = byte > 0xffu;
      byte &= 0xffu;
    }
    digits[i] = byte;
  }
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    magnitude = magnitude * 256.0L + static_cast<long double>(digits[i]);
    if (low >> 56) fits = false;
    low = low << 8 | digits[i];
  }
  double result = 0.0;
  static constexpr double kExactPowers[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                            1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                            1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  if (fits && low < (std::uint64_t{1} << 53) && scale <= 22) {
    result = static_cast<double>(low) / kExactPowers[scale];
  } else {
    long double power = 1.0L;
    for (int i = 0; i < scale; ++i) power *= 10.0L;
    result = static_cast<double>(magnitude / power);
  }
  return negative ? -result : result;
}

// Rows and list lengths from repetition levels, one entry at a time or a run at a time.
class RowBuilder {
 public:
  RowBuilder(int depth, bool keep_row_lengths)
      : depth_(depth),
        keep_row_lengths_(keep_row_lengths),
        open_(depth + 1, 0),
        uniform_(depth, DecodedChunk::kNoList) {}

  // An entry with repetition level `rep` whose lists reach down to `reach` (depth_ for a value;
  // k - 1 for an empty list at depth k, which is opened with no element). False when `rep`
  // names a list that is not open (a corrupt stream).
  bool entry(std::uint32_t rep, int reach, bool empty_at_reach_plus_one) {
    if (static_cast<int>(rep) > open_to_ || (rows_ == 0 && rep != 0)) return false;
    close_below(static_cast<int>(rep));
    if (rep == 0) {
      ++rows_;
    } else {
      ++open_[rep];
    }
    for (int j = static_cast<int>(rep) + 1; j <= reach; ++j) open_[j] = 1;
    open_to_ = reach;
    if (empty_at_reach_plus_one) {
      open_[reach + 1] = 0;
      open_to_ = reach + 1;
    }
    return true;
  }
  // A row that is null (the list field itself): a row of no lists, whose length (0) is kept
  // but which takes no part in the uniform lengths.
  void null_row() {
    close_below(0);
    ++rows_;
    open_to_ = 0;
    if (keep_row_lengths_) row_lengths_.push_back(0);
  }
  // `n` more values continuing the innermost list (repetition level == depth).
  void more_values(std::uint64_t n) { open_[depth_] += n; }

  void finish() { close_below(0); }

  std::uint64_t rows() const noexcept { return rows_; }
  int depth() const noexcept { return depth_; }
  std::vector<std::uint64_t>& row_lengths() noexcept { return row_lengths_; }
  std::vector<std::int64_t>& uniform() noexcept { return uniform_; }

 private:
  // Closes the open lists deeper than `rep`, recording their lengths.
  void close_below(int rep) {
    if (rows_ == 0) return;
    for (int j = open_to_; j > rep; --j) {
      const auto length = static_cast<std::int64_t>(open_[j]);
      auto& uniform = uniform_[j - 1];
      if (uniform == DecodedChunk::kNoList)
        uniform = length;
      else if (uniform != length)
        uniform = DecodedChunk::kVaried;
      if (j == 1 && keep_row_lengths_) row_lengths_.push_back(open_[1]);
    }
    open_to_ = std::min(open_to_, rep);
  }

  int depth_;
  bool keep_row_lengths_;
  std::vector<std::uint64_t> open_;  // elements so far in the open list at each depth
  int open_to_ = 0;                  // the deepest open list
  std::uint64_t rows_ = 0;
  std::vector<std::uint64_t> row_lengths_;
  std::vector<std::int64_t> uniform_;
};

struct Dictionary {
  std::uint64_t count = 0;
  std::vector<std::byte> values;            // fixed width: count values of the column's dtype
  std::vector<std::uint64_t> text_offsets;  // text: count + 1
};

class ChunkDecoder {
 public:
  ChunkDecoder(std::span<const std::byte> file, std::uint64_t data_end, const std::string& origin,
               const LeafColumn& column, const ColumnChunk& chunk, std::size_t group,
               std::int64_t group_rows, std::uint64_t first_row,
               std::shared_ptr<const void> mapping)
      : file_(file),
        data_end_(data_end),
        origin_(origin),
        column_(column),
        chunk_(chunk),
        metadata_(*chunk.metadata),
        group_rows_(group_rows),
        first_row_(first_row),
        where_("column " + column.shown_name + " row group " + std::to_string(group)),
        rows_(column.max_repetition, column.max_repetition == 1),
        mapping_(std::move(mapping)) {}

  DecodedChunk decode(std::uint64_t text_reserve) {
    if (metadata_.num_values == 0 && group_rows_ == 0) {
      // An empty row group: writers give its chunks offsets that need not point at pages.
      if (column_.text) out_.text_offsets.push_back(0);
      out_.uniform_lengths.assign(static_cast<std::size_t>(column_.max_repetition),
                                  DecodedChunk::kNoList);
      return std::move(out_);
    }
    text_reserve_ = text_reserve;
    check_chunk();
    map_pages_in();
    allocate();
    std::uint64_t position = start_;
    std::uint64_t entries = 0;
    const auto expected_entries = static_cast<std::uint64_t>(metadata_.num_values);
    while (entries < expected_entries) {
      if (position >= end_)
        fail("its pages hold " + std::to_string(entries) + " of its " +
             std::to_string(expected_entries) + " values");
      const PageHeader page =
          parse_page_header(file_.subspan(position, end_ - position), origin_, position);
      const std::uint64_t payload_at = position + page.header_bytes;
      if (page.compressed_size < 0 || page.uncompressed_size < 0 ||
          static_cast<std::uint64_t>(page.compressed_size) > end_ - payload_at)
        fail("a page at byte " + std::to_string(position) + " runs past its column chunk");
      const auto payload =
          file_.subspan(payload_at, static_cast<std::uint64_t>(page.compressed_size));
      position = payload_at + payload.size();
      if (page.type == PageType::index) continue;
      if (page.type != PageType::data && page.type != PageType::data_v2 &&
          page.type != PageType::dictionary)
        fail("a page of unknown type " + std::to_string(static_cast<int>(page.type)));
      if (!page.has_page_header)
        fail("a page at byte " + std::to_string(payload_at - page.header_bytes) +
             " lacks the header of its type");
      if (page.num_values < 0) fail("a page claims a negative number of values");
      if (page.type == PageType::dictionary) {
        if (dictionary_) fail("has a second dictionary page");
        if (entries != 0) fail("a dictionary page comes after data pages");
        read_dictionary(page, payload);
        continue;
      }
      const auto count = static_cast<std::uint64_t>(page.num_values);
      if (count > expected_entries - entries)
        fail("its pages hold more values than its metadata says (" +
             std::to_string(expected_entries) + ")");
      read_data_page(page, payload);
      if (!out_.left_out.empty()) {
        // A null inside a list: the field is left out (the reader says why), nothing more read.
        drop_values(out_);
        out_.text = {};
        return std::move(out_);
      }
      entries += count;
    }
    rows_.finish();
    if (read_in_file_) {
      // Values are read where they lie: the chunk's bytes stay mapped in while it holds them.
      out_.file_pages = FilePages(mapping_, file_.data() + start_, end_ - start_);
    } else {
      // The chunk's bytes of the file are copied out by now: their pages leave this process's
      // resident set (the page cache keeps them), so decoding a file does not hold the file too.
      out_.runs.clear();
      release_if_mapped_file(file_.data() + start_, end_ - start_);
    }
    const std::uint64_t rows = column_.max_repetition == 0 ? flat_rows_ : rows_.rows();
    if (rows != static_cast<std::uint64_t>(group_rows_))
      fail("holds " + std::to_string(rows) + " rows where its row group has " +
           std::to_string(group_rows_));
    if (column_.text) check_text();
    out_.rows = rows;
    out_.row_lengths = std::move(rows_.row_lengths());
    out_.uniform_lengths = std::move(rows_.uniform());
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(const std::string& cause) const { throw Error(origin_, where_, cause); }

  void check_chunk() {
    if (!chunk_.file_path.empty())
      fail("its data lives in another file (" + chunk_.file_path +
           "), which gpucache does not follow");
    if (metadata_.type != *column_.leaf.type) fail("its chunk's type differs from the schema's");
    if (metadata_.path != column_.path)
      fail("its chunk's path_in_schema does not name the schema's leaf");
    if (metadata_.num_values < 0 || metadata_.total_compressed_size < 0 ||
        metadata_.data_page_offset < 0)
      fail("its column metadata holds a negative size or offset");
    start_ = static_cast<std::uint64_t>(metadata_.data_page_offset);
    if (metadata_.dictionary_page_offset && *metadata_.dictionary_page_offset > 0 &&
        static_cast<std::uint64_t>(*metadata_.dictionary_page_offset) < start_)
      start_ = static_cast<std::uint64_t>(*metadata_.dictionary_page_offset);
    const auto end =
        checked_add(start_, static_cast<std::uint64_t>(metadata_.total_compressed_size));
    if (start_ < 4 || !end || *end > data_end_)
      fail("its pages (bytes " + std::to_string(start_) + " to " +
           (end ? std::to_string(*end) : std::string("2^64")) + ") lie outside the file's data");
    end_ = *end;
  }

  // Maps the chunk's bytes of the file (in the page cache already, or read now) in one call
  // instead of one page fault per 4 KiB while decoding. Only advice: a kernel without
  // MADV_POPULATE_READ (before 5.14) faults them in as they are read.
  void map_pages_in() const noexcept {
#ifdef MADV_POPULATE_READ
    const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto first = reinterpret_cast<std::uintptr_t>(file_.data() + start_) & ~(page - 1);
    const auto last = reinterpret_cast<std::uintptr_t>(file_.data() + end_);
    if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_POPULATE_READ);
#endif
  }

  // Refuses a buffer of `count` items of `size` bytes, which a claim in the file sizes, beyond
  // the chunk's cap.
  void check_claim(std::uint64_t count, std::uint64_t size, const std::string& claim) const {
    const auto bytes = checked_mul(count, size);
    if (!bytes || *bytes > cap_) fail(claim + ", far more than its bytes can hold");
  }

  // The chunk's values buffer: every entry could be a value. While a page is decoded, each of its
  // entries takes up to 8 bytes more (two levels, or a dictionary index), and a text or one-level
  // list entry keeps an 8-byte offset or row length.
  void allocate() {
    cap_ = std::max(kMinDecodedCap,
                    kMaxExpansion * static_cast<std::uint64_t>(metadata_.total_compressed_size));
    const auto entries = static_cast<std::uint64_t>(metadata_.num_values);
    const std::string claim = "claims " + std::to_string(entries) + " values";
    check_claim(entries, 8, claim);
    if (column_.text) {
      out_.text_offsets.reserve(std::min<std::uint64_t>(entries, 1u << 20) + 1);
      // The strings' buffer taken once instead of grown by doubling (up to twice the chunk, and
      // a copy of it, on each thread decoding): decoded again (the reader's slot), by the size
      // they took the first time; else by the pages' decompressed size, which PLAIN strings
      // (with their 4-byte lengths) fill, and dictionary-encoded ones may outgrow (then the
      // buffer grows as before). Within the cap either way: a claim cannot take more.
      const std::uint64_t pages =
          static_cast<std::uint64_t>(std::max<std::int64_t>(0, metadata_.total_uncompressed_size));
      text_.reserve(std::min(text_reserve_ > 0 ? text_reserve_ : pages, cap_));
      out_.text_offsets.push_back(0);
      return;
    }
    check_claim(entries, dtype_size(column_.dtype), claim);
    // Taken when the first value is decoded (owned_values): a chunk whose values are all read
    // where they lie in the file takes none.
    value_capacity_ = entries * dtype_size(column_.dtype);
  }

  // Whether the page's PLAIN values can be read where they lie: the caller gave the file's
  // mapping, they lie in it (an UNCOMPRESSED page), need no conversion and every entry of the
  // page holds one (no null, no empty list), so that they are the column's values as they are.
  bool read_where_they_lie(Encoding encoding, std::span<const std::byte> bytes,
                           std::uint64_t present) const {
    if (!mapping_ || encoding != Encoding::plain || present != page_entries_) return false;
    if (column_.text || column_.time || column_.decimal_scale >= 0 ||
        *column_.leaf.type == PhysicalType::boolean ||
        physical_size(column_.leaf) != dtype_size(column_.dtype))
      return false;
    return bytes.data() >= file_.data() && bytes.data() + bytes.size() <= file_.data() + end_;
  }

  // Where the next owned value goes: the values buffer (taken now if it is not yet), a new run
  // when the last one lies in the file.
  std::byte* owned_values() {
    const std::size_t size = dtype_size(column_.dtype);
    if (out_.values.get() == nullptr) out_.values = ValueBuffer(value_capacity_);
    std::byte* at = out_.values.get() + owned_ * size;
    if (out_.runs.empty() || last_run_in_file_) out_.runs.push_back({out_.value_count * size, at});
    last_run_in_file_ = false;
    return at;
  }

  // The page's bytes, decompressed into scratch when the chunk is compressed.
  std::span<const std::byte> inflate(std::span<const std::byte> payload, std::uint64_t size,
                                     std::vector<std::byte>& scratch) {
    if (metadata_.codec == Codec::uncompressed) {
      if (payload.size() != size) fail("an uncompressed page's sizes disagree");
      return payload;
    }
    check_claim(size, 1, "a page claims " + std::to_string(size) + " bytes decompressed");
    scratch.resize(size);
    decompress(metadata_.codec, payload, scratch, origin_, where_);
    return scratch;
  }

  void read_dictionary(const PageHeader& page, std::span<const std::byte> payload) {
    if (page.encoding != Encoding::plain && page.encoding != Encoding::plain_dictionary)
      fail("its dictionary page is " + encoding_name(page.encoding) + " encoded");
    const auto bytes =
        inflate(payload, static_cast<std::uint64_t>(page.uncompressed_size), scratch_);
    auto& dictionary = dictionary_.emplace();
    dictionary.count = static_cast<std::uint64_t>(page.num_values);
    if (column_.text) {
      dictionary.text_offsets.push_back(0);
      std::vector<std::byte> text;
      read_plain_text(bytes, dictionary.count, text, dictionary.text_offsets);
      dictionary.values = std::move(text);
      return;
    }
    const std::size_t size = dtype_size(column_.dtype);
    if (dictionary.count > bytes.size() * 8 + 8) fail("its dictionary page claims too many values");
    check_claim(dictionary.count, size,
                "its dictionary page claims " + std::to_string(dictionary.count) + " values");
    dictionary.values.resize(dictionary.count * size);
    decode_plain_fixed(bytes, dictionary.count, dictionary.values.data());
  }

  // Levels of a v1 page: a 4-byte length, then the hybrid stream.
  std::span<const std::byte> take_v1_levels(std::span<const std::byte>& bytes, Encoding encoding,
                                            const char* what) {
    if (encoding != Encoding::rle)
      fail(std::string("its ") + what + " levels are " + encoding_name(encoding) +
           " encoded (only RLE is read)");
    if (bytes.size() < 4) fail(std::string("a page ends inside its ") + what + " levels");
    std::uint32_t length = 0;
    std::memcpy(&length, bytes.data(), 4);
    if (length > bytes.size() - 4) fail(std::string("a page's ") + what + " levels run past it");
    const auto levels = bytes.subspan(4, length);
    bytes = bytes.subspan(4 + length);
    return levels;
  }

  void read_data_page(const PageHeader& page, std::span<const std::byte> payload) {
    const auto count = static_cast<std::uint64_t>(page.num_values);
    std::span<const std::byte> repetition, definition, values;
    if (page.type == PageType::data) {
      auto bytes = inflate(payload, static_cast<std::uint64_t>(page.uncompressed_size), scratch_);
      if (column_.max_repetition > 0)
        repetition = take_v1_levels(bytes, page.repetition_level_encoding, "repetition");
      if (column_.max_definition > 0)
        definition = take_v1_levels(bytes, page.definition_level_encoding, "definition");
      values = bytes;
    } else {
      const std::int64_t levels =
          std::int64_t{page.repetition_levels_bytes} + page.definition_levels_bytes;
      if (page.repetition_levels_bytes < 0 || page.definition_levels_bytes < 0 ||
          levels > static_cast<std::int64_t>(payload.size()) || levels > page.uncompressed_size)
        fail("a v2 page's level lengths run past it");
      repetition = payload.subspan(0, page.repetition_levels_bytes);
      definition = payload.subspan(page.repetition_levels_bytes, page.definition_levels_bytes);
      const auto rest = payload.subspan(static_cast<std::size_t>(levels));
      const auto size = static_cast<std::uint64_t>(page.uncompressed_size - levels);
      if (size == 0) {
        // No values (a page of nulls only, or of no entries: parquet-testing's
        // datapage_v2_empty_datapage): whatever bytes follow are not decompressed, as pyarrow
        // does not; zstd, for one, refuses an empty input.
        values = {};
      } else if (page.values_compressed && metadata_.codec != Codec::uncompressed) {
        check_claim(size, 1, "a page claims " + std::to_string(size) + " bytes decompressed");
        scratch_.resize(size);
        decompress(metadata_.codec, rest, scratch_, origin_, where_);
        values = scratch_;
      } else {
        if (rest.size() != size) fail("a v2 page's sizes disagree");
        values = rest;
      }
    }
    const std::uint64_t present = read_levels(count, repetition, definition);
    page_entries_ = count;
    decode_values(page.encoding, values, present);
    if (page_nulls_) spread_nulls(count, present);
  }

  // Walks the page's levels into rows; returns how many of its entries hold a value.
  std::uint64_t read_levels(std::uint64_t count, std::span<const std::byte> repetition,
                            std::span<const std::byte> definition) {
    const bool all_defined = column_.max_definition == 0 || all_at_max(definition, count);
    page_nulls_ = false;
    if (column_.max_repetition == 0) {
      const std::uint64_t present = all_defined ? count : read_nulls(definition, count);
      flat_rows_ += count;
      return present;
    }
    if (all_defined) {
      read_repetition_runs(repetition, count);
      return count;
    }
    return read_levels_one_by_one(count, repetition, definition);
  }

  bool all_at_max(std::span<const std::byte> definition, std::uint64_t count) {
    RleRuns runs(definition, bit_width_of(column_.max_definition), origin_,
                 where_ + " definition levels");
    RleRuns::Run run;
    const auto max = static_cast<std::uint32_t>(column_.max_definition);
    std::uint64_t seen = 0;
    while (seen < count && runs.next(run)) {
      const std::uint64_t n = std::min(run.count, count - seen);
      if (run.repeated) {
        if (run.value != max) return false;
      } else {
        for (std::uint64_t i = 0; i < n; ++i)
          if (runs.literal(run, i) != max) return false;
      }
      seen += n;
    }
    if (seen < count)
      runs.fail("ends after " + std::to_string(seen) + " of its " + std::to_string(count) +
                " levels");
    return true;
  }

  // A page of a column without lists that holds nulls: which of its `count` rows have a value
  // (defined_, for spread_nulls) and which are null (out_.null_rows); returns the values' count.
  std::uint64_t read_nulls(std::span<const std::byte> definition, std::uint64_t count) {
    defined_.resize(count);
    RleRuns runs(definition, bit_width_of(column_.max_definition), origin_,
                 where_ + " definition levels");
    decode_rle(runs, count, defined_.data());
    std::uint64_t present = 0;
    const auto max = static_cast<std::uint32_t>(column_.max_definition);
    for (std::uint64_t i = 0; i < count; ++i) {
      if (defined_[i] > max)
        fail("a definition level (" + std::to_string(defined_[i]) + ") is above the maximum");
      if (defined_[i] == max) {
        ++present;
      } else {
        out_.null_rows.push_back(flat_rows_ + i);
      }
    }
    page_nulls_ = true;
    return present;
  }

  // After a page of `count` rows of which `present` had values, decoded one after another: each
  // row in its place, a null row holding a placeholder (zeros, or an empty string). Moves run
  // from the last row back, so that no value is overwritten before it has moved.
  void spread_nulls(std::uint64_t count, std::uint64_t present) {
    const auto max = static_cast<std::uint32_t>(column_.max_definition);
    const std::uint64_t base = out_.value_count - present;
    std::uint64_t j = present;  // values in rows [0, i]
    if (column_.text) {
      auto& offsets = out_.text_offsets;  // base + present + 1 entries so far
      offsets.resize(base + count + 1);
      for (std::uint64_t i = count; i-- > 0;) {
        offsets[base + 1 + i] = offsets[base + j];
        if (defined_[i] == max) --j;
      }
    } else {
      const std::size_t size = dtype_size(column_.dtype);
      // The page's values were decoded into the values buffer (a page with nulls is never read
      // where it lies): its rows go there, from where its first value went.
      owned_ -= present;
      out_.value_count = base;
      std::byte* values = count == 0 ? nullptr : owned_values();
      owned_ += count;
      for (std::uint64_t i = count; i-- > 0;) {
        if (defined_[i] == max) {
          --j;
          if (j != i) std::memmove(values + i * size, values + j * size, size);
        } else {
          std::memset(values + i * size, 0, size);
        }
      }
    }
    out_.value_count = base + count;
  }

  void read_repetition_runs(std::span<const std::byte> repetition, std::uint64_t count) {
    RleRuns runs(repetition, bit_width_of(column_.max_repetition), origin_,
                 where_ + " repetition levels");
    RleRuns::Run run;
    const int depth = column_.max_repetition;
    std::uint64_t seen = 0;
    while (seen < count && runs.next(run)) {
      const std::uint64_t n = std::min(run.count, count - seen);
      if (run.repeated) {
        value_entry(run.value);
        if (static_cast<int>(run.value) == depth)
          rows_.more_values(n - 1);
        else
          for (std::uint64_t i = 1; i < n; ++i) value_entry(run.value);
      } else {
        for (std::uint64_t i = 0; i < n; ++i) value_entry(runs.literal(run, i));
      }
      seen += n;
    }
    if (seen < count)
      runs.fail("ends after " + std::to_string(seen) + " of its " + std::to_string(count) +
                " levels");
  }

  void value_entry(std::uint32_t rep) {
    if (rep > static_cast<std::uint32_t>(column_.max_repetition) ||
        !rows_.entry(rep, column_.max_repetition, false))
      fail("its repetition levels are inconsistent (level " + std::to_string(rep) + " after row " +
           std::to_string(rows_.rows()) + ")");
  }

  std::uint64_t read_levels_one_by_one(std::uint64_t count, std::span<const std::byte> repetition,
                                       std::span<const std::byte> definition) {
    std::vector<std::uint32_t> reps(count), defs(count);
    RleRuns rep_runs(repetition, bit_width_of(column_.max_repetition), origin_,
                     where_ + " repetition levels");
    RleRuns def_runs(definition, bit_width_of(column_.max_definition), origin_,
                     where_ + " definition levels");
    decode_rle(rep_runs, count, reps.data());
    decode_rle(def_runs, count, defs.data());
    std::uint64_t present = 0;
    for (std::uint64_t i = 0; i < count; ++i) {
      if (defs[i] > static_cast<std::uint32_t>(column_.max_definition))
        fail("a definition level (" + std::to_string(defs[i]) + ") is above the maximum");
      if (defs[i] == static_cast<std::uint32_t>(column_.max_definition)) {
        value_entry(reps[i]);
        ++present;
        continue;
      }
      const auto& below = column_.below_max[defs[i]];
      if (below.null && below.list_depth == 0 && reps[i] == 0) {
        rows_.null_row();
        out_.null_rows.push_back(rows_.rows() - 1);
        continue;
      }
      if (below.null) {
        out_.left_out = "nulls inside lists";
        return 0;
      }
      if (reps[i] > static_cast<std::uint32_t>(column_.max_repetition) ||
          static_cast<int>(reps[i]) >= below.empty_depth ||
          !rows_.entry(reps[i], below.empty_depth - 1, true))
        fail("its repetition levels are inconsistent (level " + std::to_string(reps[i]) +
             " after row " + std::to_string(rows_.rows()) + ")");
    }
    return present;
  }

  void decode_values(Encoding encoding, std::span<const std::byte> bytes, std::uint64_t present) {
    // A page of nothing but nulls (or of no entries: parquet-testing's datapage_v2 empty data
    // page) needs no values, whatever its encoding; pyarrow reads such pages without their bytes.
    if (present == 0) return;
    if (column_.text) {
      decode_text(encoding, bytes, present);
      return;
    }
    const std::size_t size = dtype_size(column_.dtype);
    if (read_where_they_lie(encoding, bytes, present)) {
      if (present > bytes.size() / size) fail("a page holds fewer values than it claims");
      out_.runs.push_back({out_.value_count * size, bytes.data()});
      last_run_in_file_ = true;
      read_in_file_ = true;
      out_.value_count += present;
      return;
    }
    std::byte* out = owned_values();
    switch (encoding) {
      case Encoding::plain:
        decode_plain_fixed(bytes, present, out);
        break;
      case Encoding::plain_dictionary:
      case Encoding::rle_dictionary:
        gather_fixed(bytes, present, out, size);
        break;
      case Encoding::rle:
        if (*column_.leaf.type != PhysicalType::boolean) unsupported(encoding);
        decode_rle_booleans(bytes, present, out);
        break;
      case Encoding::byte_stream_split:
        decode_byte_stream_split(bytes, present, out);
        break;
      case Encoding::delta_binary_packed:
        decode_delta_integers(bytes, present, out);
        break;
      case Encoding::delta_byte_array:
        decode_delta_fixed(bytes, present, out);
        break;
      default:
        unsupported(encoding);
    }
    out_.value_count += present;
    owned_ += present;
  }

  // DELTA_BINARY_PACKED INT32 or INT64 values, converted as PLAIN ones are.
  void decode_delta_integers(std::span<const std::byte> bytes, std::uint64_t count,
                             std::byte* out) {
    const auto type = *column_.leaf.type;
    if (type != PhysicalType::int32 && type != PhysicalType::int64)
      unsupported(Encoding::delta_binary_packed);
    std::vector<std::uint64_t> values;
    try {
      decode_delta_binary_packed(bytes, count, values);
    } catch (const DeltaError& error) {
      fail(error.what());
    }
    if (type == PhysicalType::int64) {
      convert_fixed(reinterpret_cast<const std::byte*>(values.data()), count, out);
      return;
    }
    std::vector<std::uint32_t> narrow(values.begin(), values.end());  // the low 32 bits
    convert_fixed(reinterpret_cast<const std::byte*>(narrow.data()), count, out);
  }

  // DELTA_BYTE_ARRAY FIXED_LEN_BYTE_ARRAY values (float16): every string must be type_length
  // bytes.
  void decode_delta_fixed(std::span<const std::byte> bytes, std::uint64_t count, std::byte* out) {
    if (*column_.leaf.type != PhysicalType::fixed_len_byte_array)
      unsupported(Encoding::delta_byte_array);
    std::vector<std::byte> text;
    std::vector<std::uint64_t> offsets{0};
    try {
      decode_delta_byte_array(bytes, count, text, offsets, cap_);
    } catch (const DeltaError& error) {
      fail(error.what());
    }
    const auto width = static_cast<std::uint64_t>(column_.leaf.type_length);
    for (std::uint64_t i = 0; i < count; ++i)
      if (offsets[i + 1] - offsets[i] != width)
        fail("a DELTA_BYTE_ARRAY value of " + std::to_string(offsets[i + 1] - offsets[i]) +
             " bytes in a column of " + std::to_string(width) + "-byte values");
    convert_fixed(text.data(), count, out);
  }

  [[noreturn]] void unsupported(Encoding encoding) const {
    fail("its values are " + encoding_name(encoding) +
         " encoded, which gpucache does not decode for this type (it reads PLAIN, dictionary, RLE "
         "booleans, BYTE_STREAM_SPLIT, DELTA_BINARY_PACKED integers and DELTA_LENGTH_BYTE_ARRAY / "
         "DELTA_BYTE_ARRAY strings); rewrite the file with pyarrow's default encodings or pack "
         "pyarrow.parquet.read_table(PATH) from Python");
  }

  // `count` PLAIN values of the leaf's physical type, converted to the column's dtype.
  void decode_plain_fixed(std::span<const std::byte> bytes, std::uint64_t count, std::byte* out) {
    if (*column_.leaf.type == PhysicalType::boolean) {
      if (count > bytes.size() * 8) fail("a page holds fewer booleans than it claims");
      for (std::uint64_t i = 0; i < count; ++i)
        out[i] = static_cast<std::byte>((static_cast<unsigned>(bytes[i / 8]) >> (i % 8)) & 1);
      return;
    }
    const std::size_t in_size = physical_size(column_.leaf);
    if (in_size == 0 || count > bytes.size() / in_size)
      fail("a page holds fewer values than it claims");
    convert_fixed(bytes.data(), count, out);
  }

  // Physical values (in_size bytes each, little-endian) to the dtype: a copy, or an int32
  // narrowed to the annotated width.
  void convert_fixed(const std::byte* in, std::uint64_t count, std::byte* out) {
    if (count == 0) return;  // an empty dictionary has no buffer at all
    if (column_.time) {      // dates and times: widened or converted to i64 (parquet_time.cpp)
      convert_time_values(column_.time_conversion, in, count, out);
      return;
    }
    if (column_.decimal_scale >= 0) {
      convert_decimals(in, physical_size(column_.leaf), count, out);
      return;
    }
    const std::size_t out_size = dtype_size(column_.dtype);
    if (physical_size(column_.leaf) == out_size) {
      std::memcpy(out, in, count * out_size);
      return;
    }
    // INT32 values narrowed to their INT(8|16) annotation by the dtype table's integer writer.
    const DTypeInfo* info = dtype_info(column_.dtype);
    if (info == nullptr || info->from_i64 == nullptr || info->size != out_size)
      fail("its values cannot be converted to " + std::string(dtype_name(column_.dtype)));
    for (std::uint64_t i = 0; i < count; ++i) {
      std::int32_t value;
      std::memcpy(&value, in + i * 4, 4);
      if (!info->from_i64(value, out + i * out_size))
        fail("value " + std::to_string(value) + " is out of range for its " +
             std::string(dtype_name(column_.dtype)) + " annotation");
    }
  }

  // DECIMAL values of `width` bytes each (INT32 and INT64: little-endian; FIXED_LEN_BYTE_ARRAY:
  // big-endian) to f64.
  void convert_decimals(const std::byte* in, std::size_t width, std::uint64_t count,
                        std::byte* out) const {
    const bool little_endian =
        *column_.leaf.type == PhysicalType::int32 || *column_.leaf.type == PhysicalType::int64;
    std::array<std::byte, 32> big{};
    for (std::uint64_t i = 0; i < count; ++i) {
      const std::byte* value = in + i * width;
      if (little_endian) {
        std::reverse_copy(value, value + width, big.begin());
        value = big.data();
      }
      const double converted = decimal_to_f64({value, width}, column_.decimal_scale);
      std::memcpy(out + i * 8, &converted, 8);
    }
  }

  // A BYTE_ARRAY decimal column's strings (big-endian two's complement, as many bytes as each
  // value needs; a null's placeholder is empty and makes 0) to f64 values.
  void convert_decimal_strings() {
    out_.values = ValueBuffer(out_.value_count * 8);
    for (std::uint64_t i = 0; i < out_.value_count; ++i) {
      const std::uint64_t begin = out_.text_offsets[i], end = out_.text_offsets[i + 1];
      if (end - begin > 32)
        fail("row " + std::to_string(first_row_ + i) + " holds a decimal of " +
             std::to_string(end - begin) + " bytes (at most 32 are read)");
      const double converted =
          decimal_to_f64({text_.data() + begin, end - begin}, column_.decimal_scale);
      std::memcpy(out_.values.get() + i * 8, &converted, 8);
    }
    free_vector(text_);
    free_vector(out_.text_offsets);
  }

  void decode_rle_booleans(std::span<const std::byte> bytes, std::uint64_t count, std::byte* out) {
    if (bytes.size() < 4) fail("an RLE boolean page lacks its length");
    std::uint32_t length = 0;
    std::memcpy(&length, bytes.data(), 4);
    if (length > bytes.size() - 4) fail("an RLE boolean page's length runs past it");
    RleRuns runs(bytes.subspan(4, length), 1, origin_, where_ + " booleans");
    std::vector<std::uint32_t> values(count);
    decode_rle(runs, count, values.data());
    for (std::uint64_t i = 0; i < count; ++i) out[i] = static_cast<std::byte>(values[i] & 1);
  }

  void decode_byte_stream_split(std::span<const std::byte> bytes, std::uint64_t count,
                                std::byte* out) {
    const std::size_t in_size = physical_size(column_.leaf);
    if (in_size == 0) unsupported(Encoding::byte_stream_split);
    if (count > bytes.size() / in_size) fail("a page holds fewer values than it claims");
    std::vector<std::byte> joined(count * in_size);
    for (std::size_t b = 0; b < in_size; ++b)
      for (std::uint64_t i = 0; i < count; ++i) joined[i * in_size + b] = bytes[b * count + i];
    convert_fixed(joined.data(), count, out);
  }

  // Dictionary indices: a bit width byte, then the hybrid stream.
  void read_indices(std::span<const std::byte> bytes, std::uint64_t count) {
    if (!dictionary_) fail("a dictionary-encoded page has no dictionary page before it");
    if (count == 0) {
      indices_.clear();
      return;
    }
    if (bytes.empty()) fail("a dictionary-encoded page lacks its bit width");
    RleRuns runs(bytes.subspan(1), static_cast<int>(bytes[0]), origin_,
                 where_ + " dictionary indices");
    indices_.resize(count);
    decode_rle(runs, count, indices_.data());
    for (std::uint64_t i = 0; i < count; ++i)
      if (indices_[i] >= dictionary_->count)
        fail("a dictionary index (" + std::to_string(indices_[i]) + ") is past its " +
             std::to_string(dictionary_->count) + " entries");
  }

  void gather_fixed(std::span<const std::byte> bytes, std::uint64_t count, std::byte* out,
                    std::size_t size) {
    read_indices(bytes, count);
    const std::byte* values = dictionary_->values.data();
    auto gather = [&]<std::size_t N>() {
      for (std::uint64_t i = 0; i < count; ++i)
        std::memcpy(out + i * N, values + indices_[i] * N, N);
    };
    switch (size) {
      case 1:
        gather.template operator()<1>();
        break;
      case 2:
        gather.template operator()<2>();
        break;
      case 4:
        gather.template operator()<4>();
        break;
      case 8:
        gather.template operator()<8>();
        break;
      default:
        for (std::uint64_t i = 0; i < count; ++i)
          std::memcpy(out + i * size, values + indices_[i] * size, size);
    }
  }

  void read_plain_text(std::span<const std::byte> bytes, std::uint64_t count,
                       std::vector<std::byte>& text, std::vector<std::uint64_t>& offsets) {
    std::uint64_t position = 0;
    for (std::uint64_t i = 0; i < count; ++i) {
      if (bytes.size() - position < 4) fail("a page ends inside its strings");
      std::uint32_t length = 0;
      std::memcpy(&length, bytes.data() + position, 4);
      position += 4;
      if (length > bytes.size() - position) fail("a string runs past its page");
      text.insert(text.end(), bytes.begin() + position, bytes.begin() + position + length);
      position += length;
      offsets.push_back(text.size());
    }
  }

  void decode_text(Encoding encoding, std::span<const std::byte> bytes, std::uint64_t present) {
    if (encoding == Encoding::plain) {
      read_plain_text(bytes, present, text_, out_.text_offsets);
    } else if (encoding == Encoding::plain_dictionary || encoding == Encoding::rle_dictionary) {
      read_indices(bytes, present);
      const auto& offsets = dictionary_->text_offsets;
      for (std::uint64_t i = 0; i < present; ++i) {
        const std::byte* values = dictionary_->values.data();
        // Checked before each string: a few index bytes can repeat a long one without limit.
        if (offsets[indices_[i] + 1] - offsets[indices_[i]] > cap_ - text_.size())
          fail("its strings decode to far more than its bytes");
        text_.insert(text_.end(), values + offsets[indices_[i]], values + offsets[indices_[i] + 1]);
        out_.text_offsets.push_back(text_.size());
      }
    } else if (encoding == Encoding::delta_length_byte_array ||
               encoding == Encoding::delta_byte_array) {
      try {
        if (encoding == Encoding::delta_length_byte_array)
          decode_delta_length_byte_array(bytes, present, text_, out_.text_offsets, cap_);
        else
          decode_delta_byte_array(bytes, present, text_, out_.text_offsets, cap_);
      } catch (const DeltaError& error) {
        fail(error.what());
      }
    } else {
      unsupported(encoding);
    }
    if (text_.size() > cap_) fail("its strings decode to far more than its bytes");
    out_.value_count += present;
  }

  void check_text() {
    if (column_.decimal_scale >= 0) {
      convert_decimal_strings();
      return;
    }
    if (column_.binary) {  // bytes as they are: no encoding to check
      out_.text = std::move(text_);
      return;
    }
    const auto* text = reinterpret_cast<const char*>(text_.data());
    for (std::uint64_t row = 0; row < out_.value_count; ++row) {
      const std::string_view value(text + out_.text_offsets[row],
                                   out_.text_offsets[row + 1] - out_.text_offsets[row]);
      if (!valid_utf8(value))
        fail("row " + std::to_string(first_row_ + row) + " is not valid UTF-8");
    }
    out_.text = std::move(text_);
  }

  std::span<const std::byte> file_;
  std::uint64_t data_end_;
  const std::string& origin_;
  const LeafColumn& column_;
  const ColumnChunk& chunk_;
  const ColumnMetadata& metadata_;
  std::int64_t group_rows_;
  std::uint64_t first_row_;  // the file's row of the group's first row, for messages
  std::string where_;
  std::uint64_t start_ = 0, end_ = 0;
  RowBuilder rows_;
  std::uint64_t flat_rows_ = 0;
  // The page's definition levels when it holds nulls (read_nulls), and whether it does.
  std::vector<std::uint32_t> defined_;
  bool page_nulls_ = false;
  std::optional<Dictionary> dictionary_;
  std::vector<std::byte> scratch_;
  std::vector<std::uint32_t> indices_;
  std::vector<std::byte> text_;
  std::uint64_t text_reserve_ = 0;  // decode_chunk's text_reserve
  std::uint64_t cap_ = 0;           // allocate(): the most bytes a buffer sized by a claim may take
  // Values read where they lie (DecodedChunk::runs): what keeps the file mapped (none: every value
  // is copied), the bytes out_.values may take, how many values went there, the entries of the
  // page being decoded, whether the last run lies in the file and whether any does.
  std::shared_ptr<const void> mapping_;
  std::uint64_t value_capacity_ = 0;
  std::uint64_t owned_ = 0;
  std::uint64_t page_entries_ = 0;
  bool last_run_in_file_ = false;
  bool read_in_file_ = false;
  DecodedChunk out_;
};

}  // namespace

namespace {
constexpr std::size_t kHugePage = std::size_t{2} << 20;
}

// Under AddressSanitizer (the fuzz targets, scripts/test-sanitize.sh) the values are on the heap,
// where ASan sees their exact bounds: in a mapping rounded up to 2 MiB, a write past them would go
// unnoticed. `mapped_` 0 marks them.
#if defined(__SANITIZE_ADDRESS__)
#define GPUCACHE_PARQUET_VALUES_ON_HEAP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GPUCACHE_PARQUET_VALUES_ON_HEAP 1
#endif
#endif

ValueBuffer::ValueBuffer(std::size_t bytes) {
  if (bytes == 0) return;
#ifndef GPUCACHE_PARQUET_VALUES_ON_HEAP
  // Below one huge page the heap: a 2 MiB-aligned mapping would cost a whole huge page (with
  // transparent huge pages on "always") for each small chunk, so a file of many small row groups
  // took 2 MiB per (column, row group) chunk whatever its data (4 GB for a 958 KB file of 1000 row
  // groups of 2 columns). From one huge page up the rounding costs less than the data.
  if (bytes >= kHugePage) {
    map_huge(bytes);
    return;
  }
#endif
  data_ = static_cast<std::byte*>(::operator new(bytes));
}

void ValueBuffer::map_huge(std::size_t bytes) {
  // A huge page must be 2 MiB aligned: map one more and trim both ends.
  const std::size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* mapping = ::mmap(nullptr, rounded + kHugePage, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping == MAP_FAILED) throw std::bad_alloc();
  auto* base = static_cast<std::byte*>(mapping);
  const auto address = reinterpret_cast<std::uintptr_t>(base);
  std::byte* aligned = base + ((kHugePage - address % kHugePage) % kHugePage);
  if (aligned > base) ::munmap(base, static_cast<std::size_t>(aligned - base));
  const std::byte* end = base + rounded + kHugePage;
  if (end > aligned + rounded)
    ::munmap(aligned + rounded, static_cast<std::size_t>(end - (aligned + rounded)));
  ::madvise(aligned, rounded, MADV_HUGEPAGE);
  data_ = aligned;
  mapped_ = rounded;
}

void ValueBuffer::release() noexcept {
  if (data_ && mapped_ == 0) ::operator delete(data_);
  if (data_ && mapped_ != 0) ::munmap(data_, mapped_);
}

ValueBuffer& ValueBuffer::operator=(ValueBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

ValueBuffer::~ValueBuffer() {
  release();
}

DecodedChunk decode_chunk(std::span<const std::byte> file, std::uint64_t data_end,
                          const std::string& origin, const LeafColumn& column,
                          const ColumnChunk& chunk, std::size_t group, std::int64_t group_rows,
                          std::uint64_t first_row, std::uint64_t text_reserve,
                          std::shared_ptr<const void> mapping) {
  return ChunkDecoder(file, data_end, origin, column, chunk, group, group_rows, first_row,
                      std::move(mapping))
      .decode(text_reserve);
}

}  // namespace gpucache::detail::parquet
