// One fuzz target per parser of untrusted input. The contract every parser must keep: given any
// bytes, it either succeeds or throws gpucache::Error. Any other exception, a crash, a sanitizer
// report, a hang or an allocation beyond libFuzzer's -malloc_limit_mb is a finding. Where a parse
// succeeds, the target also checks what callers rely on (offsets in bounds, re-encoding gives the
// same bytes) and traps when that does not hold.
//
// These functions are header-only so that fuzz/fuzz_main.cpp (libFuzzer, clang) and
// tests/test_fuzz_replay.cpp (every build, any compiler) run exactly the same code.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "gpucache/common/hash.hpp"
#include "gpucache/common/mapped_file.hpp"
#include "gpucache/common/utf8.hpp"
#include "gpucache/error.hpp"
#include "gpucache/input.hpp"
#include "gpucache/jsonl.hpp"
#include "gpucache/npy.hpp"
#include "gpucache/npz.hpp"
#include "gpucache/probe.hpp"
#include "gpucache/pt.hpp"
#include "gpucache/safetensors.hpp"
#include "gpucache/schema.hpp"
#include "gpucache/shard/manifest.hpp"
#include "gpucache/shard/shard_layout.hpp"
#include "gpucache/shard_io/shard_reader.hpp"
#include "gpucache/value.hpp"
#include "npy/npy_header.hpp"
#include "pt/pickle.hpp"
#include "zip/zip.hpp"
#if GPUCACHE_PARQUET_DECODERS
#include "parquet/parquet_codec.hpp"
#include "parquet/parquet_delta.hpp"
#endif

namespace gpucache::fuzz {

// A broken invariant: abort so that libFuzzer keeps the input and the replay test fails loudly.
#define GPUCACHE_FUZZ_REQUIRE(condition) \
  do {                                   \
    if (!(condition)) __builtin_trap();  \
  } while (false)

template <std::size_t N>
inline bool same_bytes(const std::array<std::byte, N>& encoded, std::span<const std::byte> input,
                       std::uint64_t offset) {
  return offset + N <= input.size() && std::memcmp(encoded.data(), input.data() + offset, N) == 0;
}

inline bool same_bytes(const std::vector<std::byte>& encoded, std::span<const std::byte> input,
                       std::uint64_t offset) {
  return offset + encoded.size() <= input.size() &&
         std::memcmp(encoded.data(), input.data() + offset, encoded.size()) == 0;
}

inline std::uint64_t load_u64(const std::byte* at) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = value << 8 | std::to_integer<std::uint64_t>(at[i]);
  return value;
}

inline void store_u64(std::byte* at, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) at[i] = static_cast<std::byte>(value >> (8 * i));
}

// Decodes one shard image and checks what callers rely on when it is accepted.
inline void check_shard_image(std::span<const std::byte> input) {
  shard::Layout layout;
  try {
    layout = shard::decode_layout(input, "fuzz.gcs");
  } catch (const Error&) {
    return;
  }
  const auto& h = layout.header;
  // A layout that decodes is canonical: encoding it again gives the very same bytes, so no byte
  // outside the data region escapes the checks. The exception is by design (SPEC.md, versions): a
  // later minor version may use reserved header bytes 140-247, which this reader then ignores, and
  // the header hash, which covers them, is then what it was, not what encoding gives.
  if (h.version_minor <= shard::kVersionMinor) {
    GPUCACHE_FUZZ_REQUIRE(same_bytes(shard::encode_header(h), input, 0));
  } else {
    std::array<std::byte, shard::kHeaderSize> expected = shard::encode_header(h);
    std::memcpy(expected.data() + 140, input.data() + 140, 248 - 140);
    std::memcpy(expected.data() + 248, input.data() + 248, 8);
    GPUCACHE_FUZZ_REQUIRE(same_bytes(expected, input, 0));
  }
  GPUCACHE_FUZZ_REQUIRE(same_bytes(shard::encode_column_tables(layout.columns), input, 256));
  GPUCACHE_FUZZ_REQUIRE(
      same_bytes(shard::encode_chunk_table(layout.chunks), input, h.chunk_table_offset));
  GPUCACHE_FUZZ_REQUIRE(same_bytes(shard::encode_footer({h.file_size, h.header_hash, 0}), input,
                                   input.size() - shard::kFooterSize));
  GPUCACHE_FUZZ_REQUIRE(layout.columns.size() == h.column_count);
  GPUCACHE_FUZZ_REQUIRE(layout.chunks.size() == h.chunk_count);
  // What the zero-copy readers rely on: every column region lies inside the logical data region
  // (and, uncompressed, inside the file), and so do every chunk's stored bytes.
  for (const auto& column : layout.columns) {
    GPUCACHE_FUZZ_REQUIRE(column.data_offset >= h.data_offset);
    GPUCACHE_FUZZ_REQUIRE(column.data_offset + column.data_size <= h.data_offset + h.data_size);
    GPUCACHE_FUZZ_REQUIRE(column.aux_offset + column.aux_size <= h.data_offset + h.data_size);
    if (!h.compressed()) {
      GPUCACHE_FUZZ_REQUIRE(column.data_offset + column.data_size <= input.size());
      GPUCACHE_FUZZ_REQUIRE(column.aux_offset + column.aux_size <= input.size());
    }
  }
  for (const auto& chunk : layout.chunks)
    GPUCACHE_FUZZ_REQUIRE(chunk.stored_offset + chunk.stored_size <= input.size());
  for (std::uint64_t k = 0; k < layout.chunks.size(); ++k) {
    try {
      (void)shard::chunk_hash(input, layout, k, "fuzz");
    } catch (const Error&) {
    }
  }
}

// The input with its column-table, chunk-table, header and footer hashes recomputed, so that
// mutations of the fields behind the hashes reach the structural checks. Empty when the input is
// shorter than a header and a footer.
inline std::vector<std::byte> rehashed_shard_image(std::span<const std::byte> input) {
  constexpr std::uint64_t kMinimum = shard::kHeaderSize + shard::kFooterSize;
  if (input.size() < kMinimum) return {};
  std::vector<std::byte> fixed(input.begin(), input.end());
  std::byte* bytes = fixed.data();
  const std::uint64_t size = fixed.size();
  const std::uint64_t column_count = load_u64(bytes + 44) & 0xffffffffu;
  // The tables columns_hash covers, as the header's flags say (row-shape and names tables too).
  const std::uint64_t flags = load_u64(bytes + 16);
  const std::uint64_t per_column = shard::kColumnEntrySize +
                                   (flags & shard::kFlagRowShapes ? shard::kRowShapeEntrySize : 0) +
                                   (flags & shard::kFlagNames ? shard::kNameEntrySize : 0);
  if (column_count <= (size - shard::kHeaderSize) / per_column)
    store_u64(bytes + 120, detail::xxh3_64(std::span(fixed).subspan(shard::kHeaderSize,
                                                                    column_count * per_column)));
  const std::uint64_t chunk_table = load_u64(bytes + 96), chunk_count = load_u64(bytes + 88);
  if (chunk_table <= size && chunk_count <= (size - chunk_table) / shard::kChunkEntrySize)
    store_u64(bytes + 128, detail::xxh3_64(std::span(fixed).subspan(
                               chunk_table, chunk_count * shard::kChunkEntrySize)));
  store_u64(bytes + 248, detail::xxh3_64(std::span(fixed).first(248)));
  std::byte* footer = bytes + size - shard::kFooterSize;
  store_u64(footer + 16, load_u64(bytes + 248));
  store_u64(footer + 24, detail::xxh3_64({footer, 24}));
  return fixed;
}

// shard: decode_layout (header, column and chunk tables, footer, gaps) and the check of
// every chunk (hash, zstd decompression). The input is decoded as it is, and again after its
// hashes are recomputed (rehashed_shard_image).
inline void shard_layout(std::span<const std::byte> input) {
  check_shard_image(input);
  const std::vector<std::byte> fixed = rehashed_shard_image(input);
  if (!fixed.empty()) check_shard_image(fixed);
}

// shard: manifest.json. A manifest that parses must survive a round trip through
// manifest_to_text with its hash intact.
inline void manifest(std::span<const std::byte> input) {
  const std::string text(reinterpret_cast<const char*>(input.data()), input.size());
  shard::Manifest parsed;
  try {
    bool hash_ok = false;
    parsed = shard::parse_manifest(text, "manifest.json", hash_ok);
  } catch (const Error&) {
    return;
  }
  std::string written;
  try {
    written = shard::manifest_to_text(parsed);
  } catch (const Error&) {
    return;  // a value that cannot be written back is refused cleanly
  }
  bool hash_ok = false;
  const auto again = shard::parse_manifest(written, "manifest.json", hash_ok);
  GPUCACHE_FUZZ_REQUIRE(hash_ok);
  GPUCACHE_FUZZ_REQUIRE(shard::manifest_to_text(again) == written);
}

// Readers that take a path get the input through an in-memory file (memfd), rewritten in place
// for every input; the returned path opens it.
inline std::string input_file(std::span<const std::byte> input) {
  static const int fd = ::memfd_create("gpucache-fuzz-input", MFD_CLOEXEC);
  GPUCACHE_FUZZ_REQUIRE(fd >= 0);
  GPUCACHE_FUZZ_REQUIRE(::ftruncate(fd, 0) == 0);
  std::size_t done = 0;
  while (done < input.size()) {
    const auto written =
        ::pwrite(fd, input.data() + done, input.size() - done, static_cast<off_t>(done));
    GPUCACHE_FUZZ_REQUIRE(written > 0);
    done += static_cast<std::size_t>(written);
  }
  return "/proc/self/fd/" + std::to_string(fd);
}

// Reads every element of a tensor in row-major order, as pack does (small tensors only, so a
// claimed shape cannot make the target itself slow): it must stay inside the storage.
inline void read_tensor(const Tensor& tensor) {
  const std::uint64_t itemsize = dtype_size(tensor.dtype);
  GPUCACHE_FUZZ_REQUIRE(itemsize > 0);
  const std::uint64_t count = tensor.numel();
  if (count == 0 || count > (std::uint64_t{1} << 16)) return;
  GPUCACHE_FUZZ_REQUIRE(tensor.storage != nullptr);
  std::vector<std::byte> out(count * itemsize);
  tensor.copy_row_major(0, out);
  if (count > 1) tensor.copy_row_major(count - 1, std::span(out).first(itemsize));
}

// Walks a value tree (at most `budget` nodes: shared subtrees can make it exponentially large)
// and reads every tensor in it.
inline void walk(const Value& value, std::uint64_t& budget) {
  if (budget == 0) return;
  --budget;
  if (const auto* tensor = value.as_tensor()) read_tensor(*tensor);
  if (const auto* list = value.as_list())
    for (const auto& item : list->items) walk(item, budget);
  if (const auto* dict = value.as_dict())
    for (const auto& [key, item] : dict->items) walk(item, budget);
}

// Schema mapping and probe on a tree a reader produced: detection, then up to 64 rows of every
// column read back, then both probe renderings. Refusals (gpucache::Error) are fine.
inline void map_and_probe(const Value& root, const std::vector<FieldSpec>& fields = {}) {
  try {
    const SourceMapping mapping = map_source(root, "fuzz", std::nullopt, fields);
    for (const auto& column : mapping.columns) {
      const std::uint64_t rows = std::min<std::uint64_t>(column.rows, 64);
      if (column.kind == ColumnKind::text) {
        for (std::uint64_t r = 0; r < rows; ++r) (void)read_text(column, r);
        continue;
      }
      if (column.kind == ColumnKind::sequence) {
        // Rows of any length, dim() 0: each read into a buffer of the length it claims.
        GPUCACHE_FUZZ_REQUIRE(column.row_length && column.read_sequence);
        for (std::uint64_t r = 0; r < rows; ++r) {
          const std::uint64_t length = column.row_length(r);
          if (length > (std::uint64_t{1} << 20)) continue;
          std::vector<std::byte> values(length * dtype_size(column.dtype));
          column.read_sequence(r, values);
        }
        continue;
      }
      GPUCACHE_FUZZ_REQUIRE(column.dim() > 0);
      if (column.dim() > (std::uint64_t{1} << 16)) continue;
      std::vector<std::byte> out(rows * column.dim() * 4);
      read_rows_as(column, 0, rows, DType::f32, out);
    }
  } catch (const Error&) {
  }
  ProbeOptions options;
  options.fields = fields;
  (void)probe_text(root, "fuzz", options);
  (void)probe_json(root, "fuzz", options);
}

// npy: parse_npy, then every element read through the tensor's shape and strides; a string
// array's text holds no more bytes than its data.
inline void npy(std::span<const std::byte> input) {
  Value value;
  try {
    value = parse_npy(input, nullptr, "fuzz.npy");
  } catch (const Error&) {
    return;
  }
  if (const Tensor* tensor = value.as_tensor()) {
    GPUCACHE_FUZZ_REQUIRE(tensor->numel() * dtype_size(tensor->dtype) <= input.size());
    read_tensor(*tensor);
    return;
  }
  std::uint64_t budget = 4096;
  walk(value, budget);
}

// pt: the restricted pickle machine, on a bare pickle (protocols 0-5).
inline void pickle(std::span<const std::byte> input) {
  detail::PickleResult result;
  try {
    detail::PickleOptions options;
    options.file = "fuzz.pt";
    options.name = "data.pkl";
    result = detail::unpickle(input, options);
  } catch (const Error&) {
    return;
  }
  GPUCACHE_FUZZ_REQUIRE(result.end <= input.size());
  // The container reader fills storages before anything reads them. Here they are empty, so the
  // bounds check must refuse every view that is not empty, and what it lets through must read.
  for (const auto& tensor : result.storage_tensors) {
    try {
      tensor->check_bounds("fuzz.pt");
    } catch (const Error&) {
      continue;
    }
    read_tensor(*tensor);
  }
}

// zip: the central directory and every member (stored views, inflated copies), and the
// first member found alone, which must be what the full parse lists first whenever it succeeds.
inline void zip(std::span<const std::byte> input) {
  try {
    const auto file = detail::MappedFile::open(input_file(input));
    const auto first = detail::ZipArchive::first_member(*file);
    if (first) GPUCACHE_FUZZ_REQUIRE(first->data_offset + first->compressed_size <= input.size());
    const detail::ZipArchive archive(file);
    GPUCACHE_FUZZ_REQUIRE(first.has_value() == !archive.members().empty());
    if (first) {
      const auto& listed = archive.members().front();
      GPUCACHE_FUZZ_REQUIRE(listed.name == first->name &&
                            listed.local_header_offset == first->local_header_offset &&
                            listed.data_offset == first->data_offset &&
                            listed.compressed_size == first->compressed_size &&
                            listed.method == first->method && listed.flags == first->flags);
    }
    for (const auto& member : archive.members()) {
      try {
        const Storage bytes = archive.read(member);
        GPUCACHE_FUZZ_REQUIRE(bytes.bytes.size() == member.uncompressed_size);
        if (member.method == 0)
          GPUCACHE_FUZZ_REQUIRE(member.data_offset + bytes.bytes.size() <= input.size());
      } catch (const Error&) {
      }
    }
  } catch (const Error&) {
  }
}

// npz: a zip of .npy members.
inline void npz(std::span<const std::byte> input) {
  Value value;
  try {
    value = read_npz(input_file(input));
  } catch (const Error&) {
    return;
  }
  std::uint64_t budget = 4096;
  walk(value, budget);
  map_and_probe(value);
}

// pt: whole torch.save files, zip and legacy layouts. Read on two threads (data.pkl's
// pickle beside the zip directory) and on one: both must accept, or refuse with the same message.
inline void pt(std::span<const std::byte> input) {
  const std::string path = input_file(input);
  std::string one_thread_error;
  try {
    (void)read_pt(path, ReadOptions{1});
  } catch (const Error& error) {
    one_thread_error = error.what();
  }
  Value value;
  try {
    value = read_pt(path, ReadOptions{2});
  } catch (const Error& error) {
    GPUCACHE_FUZZ_REQUIRE(one_thread_error == error.what());
    return;
  }
  GPUCACHE_FUZZ_REQUIRE(one_thread_error.empty());
  std::uint64_t budget = 4096;
  walk(value, budget);
  map_and_probe(value);
}

// safetensors: header JSON, offsets, dtypes and shapes.
inline void safetensors(std::span<const std::byte> input) {
  Value value;
  try {
    value = read_safetensors(input_file(input));
  } catch (const Error&) {
    return;
  }
  std::uint64_t budget = 4096;
  walk(value, budget);
  map_and_probe(value);
}

// jsonl: one JSON object per line, numeric arrays as tensors.
inline void jsonl(std::span<const std::byte> input) {
  Value value;
  try {
    value = read_jsonl(input_file(input));
  } catch (const Error&) {
    return;
  }
  std::uint64_t budget = 4096;
  walk(value, budget);
  map_and_probe(value);
}

// Reads back every row of the columns an array reader handed over (at most `kRows` rows of each,
// and its last: a few bytes can claim a billion rows), as pack does: tensor rows through
// read_rows_as in blocks (and as f32 where the dtype widens), where they lie (direct_rows,
// row_pointers) the same bytes, text rows valid UTF-8, sequence rows the length they claim.
inline void read_columns(const InputData& data) {
  constexpr std::uint64_t kRows = std::uint64_t{1} << 16, kBlockBytes = std::uint64_t{1} << 20;
  for (const InputColumn& column : data.columns) {
    GPUCACHE_FUZZ_REQUIRE(column.rows == data.columns.front().rows);
    const std::uint64_t rows = std::min(column.rows, kRows);
    auto each_row = [&](auto&& read) {
      for (std::uint64_t r = 0; r < rows; ++r) read(r);
      if (rows < column.rows) read(column.rows - 1);
    };
    if (column.kind == ColumnKind::text) {
      each_row([&](std::uint64_t r) {
        GPUCACHE_FUZZ_REQUIRE(detail::valid_utf8(read_text(column, r)));
      });
      continue;
    }
    if (column.kind == ColumnKind::sequence) {
      GPUCACHE_FUZZ_REQUIRE(column.row_length && column.read_sequence);
      std::vector<std::byte> values;
      each_row([&](std::uint64_t r) {
        const std::uint64_t length = column.row_length(r);
        if (length > (std::uint64_t{1} << 20)) return;
        values.resize(length * dtype_size(column.dtype));
        column.read_sequence(r, values);
      });
      continue;
    }
    const std::uint64_t row_bytes = column.row_elements() * dtype_size(column.dtype);
    GPUCACHE_FUZZ_REQUIRE(column.kind == ColumnKind::tensor && row_bytes > 0);
    if (row_bytes > kBlockBytes) continue;
    const std::uint64_t block = kBlockBytes / row_bytes;
    std::vector<std::byte> out;
    std::vector<const std::byte*> pointers;
    auto read_block = [&](std::uint64_t first, std::uint64_t count) {
      out.resize(count * row_bytes);
      read_rows_as(column, first, count, column.dtype, out);
      if (column.direct_rows)
        if (const std::byte* direct = column.direct_rows(first, count))
          GPUCACHE_FUZZ_REQUIRE(std::memcmp(direct, out.data(), out.size()) == 0);
      pointers.resize(count);
      if (column.row_pointers && column.row_pointers(first, count, pointers.data()))
        for (std::uint64_t r = 0; r < count; ++r) {
          const std::byte* row = out.data() + r * row_bytes;
          GPUCACHE_FUZZ_REQUIRE(std::memcmp(pointers[r], row, row_bytes) == 0);
        }
    };
    for (std::uint64_t first = 0; first < rows; first += block)
      read_block(first, std::min(block, rows - first));
    if (rows < column.rows) read_block(column.rows - 1, 1);
    if (column.dtype == DType::f16 || column.dtype == DType::bf16 || column.dtype == DType::f64) {
      const std::uint64_t count = std::min(block, column.rows);
      std::vector<std::byte> widened(count * column.row_elements() * 4);
      read_rows_as(column, 0, count, DType::f32, widened);
    }
  }
}

// parquet: Parquet files through the registry, as read_input reads a file that starts with PAR1:
// footer, schema, page headers, levels, values and codecs. Read on one thread and on two (chunks
// are decoded in parallel): both accept with the same columns, or both refuse. Then every
// column's rows are read back (read_columns), and schema mapping and probe run on the columns.
// A build without libsnappy has no Parquet reader: the target then does nothing.
inline void parquet(std::span<const std::byte> input) {
  static const InputFormat* const format = find_input_format("parquet");
  if (format == nullptr || !format->built()) return;
  const std::string_view head(reinterpret_cast<const char*>(input.data()),
                              std::min<std::size_t>(input.size(), 4096));
  if (!format->sniff(head, input.size())) return;  // read_input would pick another reader
  const std::string path = input_file(input);
  struct Shape {
    std::string name;
    ColumnKind kind;
    DType dtype;
    std::uint64_t rows;
    std::vector<std::uint64_t> row_shape;
    bool operator==(const Shape&) const = default;
  };
  auto shapes = [](const InputData& data) {
    std::vector<Shape> result;
    for (const auto& c : data.columns)
      result.push_back({c.name, c.kind, c.dtype, c.rows, c.row_shape});
    return result;
  };
  std::vector<Shape> one_thread;
  bool one_thread_refused = false;
  try {
    const InputData data = read_input(path, ReadOptions{1});
    GPUCACHE_FUZZ_REQUIRE(data.columnar());
    one_thread = shapes(data);
  } catch (const Error&) {
    one_thread_refused = true;
  }
  InputData data;
  try {
    data = read_input(path, ReadOptions{2});
  } catch (const Error&) {
    GPUCACHE_FUZZ_REQUIRE(one_thread_refused);
    return;
  }
  GPUCACHE_FUZZ_REQUIRE(!one_thread_refused && shapes(data) == one_thread);
  read_columns(data);
  try {
    const SourceMapping mapping = map_input(data, "fuzz");
    GPUCACHE_FUZZ_REQUIRE(!mapping.columns.empty());
  } catch (const Error&) {
  }
  (void)probe_text(data, "fuzz");
  (void)probe_json(data, "fuzz");
}

// The Parquet decoders one at a time, each on bytes as a page hands them over. The first two bytes
// of the input are the value count (or, for page decompression, the size the page header gives,
// in units of 16 bytes), the rest the page's bytes. In a build without the Parquet reader
// (GPUCACHE_PARQUET_DECODERS unset) these targets do nothing.
inline std::uint64_t leading_count(std::span<const std::byte>& input, std::uint64_t unit = 1) {
  if (input.size() < 2) return 0;
  const std::uint64_t count =
      (std::to_integer<std::uint64_t>(input[0]) | std::to_integer<std::uint64_t>(input[1]) << 8) *
      unit;
  input = input.subspan(2);
  return count;
}

// Text a byte-array decoder appended: count offsets after the first, ascending, within the text
// and the cap.
inline void check_strings(const std::vector<std::byte>& text,
                          const std::vector<std::uint64_t>& offsets, std::uint64_t count,
                          std::uint64_t cap) {
  GPUCACHE_FUZZ_REQUIRE(offsets.size() == count + 1);
  GPUCACHE_FUZZ_REQUIRE(offsets.back() == text.size() && text.size() <= cap);
  for (std::size_t i = 1; i < offsets.size(); ++i)
    GPUCACHE_FUZZ_REQUIRE(offsets[i - 1] <= offsets[i]);
}

// A cap well below the input-size bound of libFuzzer's -malloc_limit_mb, as a chunk's is.
constexpr std::uint64_t kFuzzStringCap = std::uint64_t{1} << 24;

// DELTA_BINARY_PACKED: the stream must hold exactly the count asked for, take no more bytes
// than it has, and give that many values.
inline void parquet_delta_binary_packed(std::span<const std::byte> input) {
#if GPUCACHE_PARQUET_DECODERS
  const std::uint64_t count = leading_count(input);
  std::vector<std::uint64_t> values;
  try {
    const std::size_t used = detail::parquet::decode_delta_binary_packed(input, count, values);
    GPUCACHE_FUZZ_REQUIRE(used <= input.size());
    GPUCACHE_FUZZ_REQUIRE(values.size() == count);
    GPUCACHE_FUZZ_REQUIRE(detail::parquet::delta_binary_packed_count(input) == count);
  } catch (const detail::parquet::DeltaError&) {
  }
#else
  (void)input;
#endif
}

// DELTA_LENGTH_BYTE_ARRAY: count strings, offsets ascending within the text and the cap.
inline void parquet_delta_length_byte_array(std::span<const std::byte> input) {
#if GPUCACHE_PARQUET_DECODERS
  const std::uint64_t count = leading_count(input);
  std::vector<std::byte> text;
  std::vector<std::uint64_t> offsets{0};
  try {
    detail::parquet::decode_delta_length_byte_array(input, count, text, offsets, kFuzzStringCap);
    check_strings(text, offsets, count, kFuzzStringCap);
  } catch (const detail::parquet::DeltaError&) {
  }
#else
  (void)input;
#endif
}

// DELTA_BYTE_ARRAY: as above; prefixes repeat bytes of the string before, so a few input bytes
// may claim much text, which the cap must stop.
inline void parquet_delta_byte_array(std::span<const std::byte> input) {
#if GPUCACHE_PARQUET_DECODERS
  const std::uint64_t count = leading_count(input);
  std::vector<std::byte> text;
  std::vector<std::uint64_t> offsets{0};
  try {
    detail::parquet::decode_delta_byte_array(input, count, text, offsets, kFuzzStringCap);
    check_strings(text, offsets, count, kFuzzStringCap);
  } catch (const detail::parquet::DeltaError&) {
  }
#else
  (void)input;
#endif
}

// Page decompression by one codec into exactly the size the header gives; a build without the
// codec's library refuses with gpucache::Error, which is fine here.
inline void parquet_page_codec(std::span<const std::byte> input, int codec) {
#if GPUCACHE_PARQUET_DECODERS
  const std::uint64_t size = leading_count(input, 16);
  std::vector<std::byte> out(size);
  try {
    detail::parquet::decompress(static_cast<detail::parquet::Codec>(codec), input, out, "fuzz",
                                "page");
  } catch (const Error&) {
  }
#else
  (void)input;
  (void)codec;
#endif
}

// BROTLI pages (libbrotlidec).
inline void parquet_brotli(std::span<const std::byte> input) {
  parquet_page_codec(input, 4);
}

// LZ4 (codec 5) pages: Hadoop's framing of blocks, else one plain LZ4 block.
inline void parquet_lz4_hadoop(std::span<const std::byte> input) {
  parquet_page_codec(input, 5);
}

// Parquet schemas: the input is a footer (FileMetaData), put between PAR1 magics with its length,
// so that every mutation lands in the schema and row groups, and read as probe and as pack read
// it: structs flattened into dotted columns, maps, lists and left-out fields. Row groups whose
// chunks hold 0 rows are read without pages, so accepted footers make columns. Checks: every
// column has a distinct name and path, and the two reads agree on the columns.
inline void parquet_schema(std::span<const std::byte> input) {
  static const InputFormat* const format = find_input_format("parquet");
  if (format == nullptr || !format->built()) return;
  std::vector<std::byte> file;
  auto append = [&](std::string_view text) {
    for (char c : text) file.push_back(static_cast<std::byte>(c));
  };
  append("PAR1");
  file.insert(file.end(), input.begin(), input.end());
  const auto length = static_cast<std::uint32_t>(input.size());
  for (int i = 0; i < 4; ++i) file.push_back(static_cast<std::byte>(length >> (8 * i)));
  append("PAR1");
  const std::string path = input_file(file);
  auto names = [](const InputData& data) {
    std::vector<std::string> result;
    for (const auto& column : data.columns) result.push_back(column.name + "\n" + column.path);
    return result;
  };
  std::vector<std::string> described;
  bool described_ok = false;
  try {
    const InputData data = read_input(path, ReadOptions{1, false});
    described = names(data);
    described_ok = true;
    auto sorted = described;
    std::sort(sorted.begin(), sorted.end());
    GPUCACHE_FUZZ_REQUIRE(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
    (void)probe_text(data, "fuzz");
  } catch (const Error&) {
  }
  try {
    const InputData data = read_input(path, ReadOptions{1, true});
    // A full read may refuse what the description accepted (it reads the chunks), never the
    // reverse, and where both accept, list columns aside, they name the same columns.
    GPUCACHE_FUZZ_REQUIRE(described_ok);
    GPUCACHE_FUZZ_REQUIRE(data.columns.size() <= described.size());
    read_columns(data);
  } catch (const Error&) {
  }
}

// The schema's field paths (--field COLUMN=PATH): the input is the flag's text, resolved against
// a fixed tree that has every kind of node a path can walk.
inline void field_path(std::span<const std::byte> input) {
  const std::string_view text(reinterpret_cast<const char*>(input.data()), input.size());
  FieldSpec spec;
  try {
    spec = parse_field_spec(text);
  } catch (const Error&) {
    return;
  }
  static const Value tree = [] {
    auto matrix = [](std::int64_t rows, std::int64_t dim) {
      std::vector<std::byte> bytes(static_cast<std::size_t>(rows * dim * 4));
      for (std::size_t i = 0; i < bytes.size(); i += 4) bytes[i + 3] = std::byte{0x3f};  // 0.5
      return Value(
          std::make_shared<Tensor>(Tensor::from_buffer(DType::f32, {rows, dim}, std::move(bytes))));
    };
    auto dict = [](std::vector<std::pair<std::string, Value>> items) {
      auto result = std::make_shared<Dict>();
      result->items = std::move(items);
      return Value(std::move(result));
    };
    auto list = [](std::vector<Value> items, bool tuple = false) {
      auto result = std::make_shared<List>();
      result->items = std::move(items);
      result->is_tuple = tuple;
      return Value(std::move(result));
    };
    std::vector<Value> rows;
    for (int i = 0; i < 3; ++i)
      rows.push_back(dict({{"q_emb", matrix(1, 4)},
                           {"q", Value(std::string("question ") + std::to_string(i))},
                           {"n", Value(std::int64_t{i})}}));
    return dict({{"data", dict({{"vectors", matrix(3, 4)},
                                {"texts", list({Value(std::string("a")), Value(std::string("b")),
                                                Value(std::string("c"))})}})},
                 {"rows", list(std::move(rows))},
                 {"cache", dict({{"k1", matrix(1, 4)}, {"k.2", matrix(1, 4)}})},
                 {"pair", list({matrix(3, 4), Value(None{})}, true)},
                 {"scalar", Value(2.5)}});
  }();
  map_and_probe(tree, {spec});
}

}  // namespace gpucache::fuzz
