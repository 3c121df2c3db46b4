// The input formats gpucache reads: one table, one entry per format (input.hpp says what each
// field means). Detection, read_input, the CLI's format lists and the "cannot tell its format"
// error all read it; adding a format adds an entry here and touches no other shared file.
//
// A format that needs a library some machines lack sits behind a CMake option
// (gpucache_optional_input_format in src/inputs/CMakeLists.txt), which defines
// GPUCACHE_INPUT_<NAME> to 1 or 0. Its entry stays in the table either way, with its sniff (no
// library needed), so that a file of that format is recognised and refused with one clear line
// when the reader was left out. HDF5 below is the pattern.
#include <array>

#include "gpucache/input.hpp"
#include "gpucache/jsonl.hpp"
#include "gpucache/npy.hpp"
#include "gpucache/npz.hpp"
#include "gpucache/pt.hpp"
#include "gpucache/safetensors.hpp"

#if !defined(GPUCACHE_INPUT_HDF5)
#error "src/inputs/CMakeLists.txt must call gpucache_optional_input_format(hdf5 ...)"
#elif GPUCACHE_INPUT_HDF5
#include "gpucache/hdf5.hpp"
#endif

#if !defined(GPUCACHE_INPUT_PARQUET)
#error "src/inputs/CMakeLists.txt must call gpucache_optional_input_format(parquet ...)"
#elif GPUCACHE_INPUT_PARQUET
#include "gpucache/parquet.hpp"
#endif

namespace gpucache {
namespace {

std::uint64_t load_u64_le(std::string_view bytes) noexcept {
  std::uint64_t value = 0;
  for (std::size_t i = 8; i-- > 0;) value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  return value;
}

std::uint16_t load_u16_le(std::string_view bytes) noexcept {
  return static_cast<std::uint16_t>(static_cast<unsigned char>(bytes[0]) |
                                    (static_cast<unsigned char>(bytes[1]) << 8));
}

// A zip archive's first local header: PK\3\4, the name length at byte 26, the name at byte 30.
bool is_zip(std::string_view head) noexcept {
  return head.size() >= 30 && head.substr(0, 4) == std::string_view("PK\x03\x04", 4);
}

bool sniff_npy(std::string_view head, std::uint64_t) noexcept {
  return head.substr(0, 6) == "\x93NUMPY";
}

// np.savez writes the arrays as members "<name>.npy"; torch.save's first member is data.pkl.
bool sniff_npz(std::string_view head, std::uint64_t) noexcept {
  if (!is_zip(head)) return false;
  const std::string_view name = head.substr(30, load_u16_le(head.substr(26, 2)));
  return name.size() >= 4 && name.substr(name.size() - 4) == ".npy";
}

// Any other zip (npz comes first in the table), or a legacy file's opening pickle (PROTO).
bool sniff_pt(std::string_view head, std::uint64_t) noexcept {
  return is_zip(head) || (!head.empty() && static_cast<unsigned char>(head[0]) == 0x80);
}

// An 8-byte header length that fits in the file, followed by the JSON header's '{'.
bool sniff_safetensors(std::string_view head, std::uint64_t file_size) noexcept {
  return head.size() >= 9 && file_size >= 8 && head[8] == '{' && load_u64_le(head) <= file_size - 8;
}

// The HDF5 signature, at the start or after a user block of 512, 1024 or 2048 bytes (the first
// 4 KiB is all a sniff sees).
bool sniff_hdf5(std::string_view head, std::uint64_t) noexcept {
  constexpr std::string_view signature("\x89HDF\r\n\x1a\n", 8);
  for (std::size_t offset : {0, 512, 1024, 2048})
    if (head.size() >= offset + 8 && head.substr(offset, 8) == signature) return true;
  return false;
}

#if GPUCACHE_INPUT_HDF5
constexpr ReadFn kReadHdf5 = &read_hdf5;
#else
constexpr ReadFn kReadHdf5 = nullptr;
#endif

// Parquet files start (and end) with "PAR1"; "PARE" marks an encrypted footer, which the reader
// recognises to refuse by name.
bool sniff_parquet(std::string_view head, std::uint64_t file_size) noexcept {
  return file_size >= 12 && (head.substr(0, 4) == "PAR1" || head.substr(0, 4) == "PARE");
}

#if GPUCACHE_INPUT_PARQUET
constexpr ReadFn kReadParquet = &read_parquet;
#else
constexpr ReadFn kReadParquet = nullptr;
#endif

bool sniff_jsonl(std::string_view head, std::uint64_t) noexcept {
  const auto first = head.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && head[first] == '{';
}

// Magic bytes are tried in this order, a narrower test before a broader one (npz before pt,
// safetensors before jsonl); help and messages list the formats in it too.
constexpr std::array kInputFormats{
    InputFormat{.name = "npy",
                .title = "a NumPy array (np.save)",
                .extensions = "npy",
                .sniff = sniff_npy,
                .read = read_tree<read_npy>},
    InputFormat{.name = "npz",
                .title = "NumPy arrays in a zip (np.savez, np.savez_compressed)",
                .extensions = "npz",
                .sniff = sniff_npz,
                .read = read_tree<read_npz>},
    InputFormat{.name = "pt",
                .title = "torch.save files, zip and legacy layouts",
                .extensions = "pt pth bin",
                .sniff = sniff_pt,
                .read = read_tree<read_pt>},
    InputFormat{.name = "safetensors",
                .title = "safetensors files (Hugging Face)",
                .extensions = "safetensors",
                .sniff = sniff_safetensors,
                .read = read_tree<read_safetensors>},
    InputFormat{.name = "hdf5",
                .title = "HDF5 datasets (h5py, ann-benchmarks)",
                .extensions = "h5 hdf5 hdf",
                .sniff = sniff_hdf5,
                .read = kReadHdf5,
                .build_hint = "-DGPUCACHE_HDF5=ON and libhdf5-dev"},
    InputFormat{.name = "parquet",
                .title = "Parquet files (pyarrow, Hugging Face datasets, Spark, DuckDB)",
                .extensions = "parquet pq",
                .sniff = sniff_parquet,
                .read = kReadParquet,
                .build_hint = "-DGPUCACHE_PARQUET=ON and libsnappy-dev"},
    InputFormat{.name = "jsonl",
                .title = "JSON lines, one object per line",
                .extensions = "jsonl ndjson json",
                .sniff = sniff_jsonl,
                .read = read_tree<read_jsonl>},
};

}  // namespace

std::span<const InputFormat> input_formats() noexcept {
  return kInputFormats;
}

}  // namespace gpucache
