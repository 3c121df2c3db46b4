// HDF5 datasets as input columns (FORMAT.md beside this file). Opening reads only metadata; each
// column keeps its dataset open and reads the rows asked for as one hyperslab, through libhdf5's
// own chunk cache and filters, so memory stays bounded by what the caller asks for at a time.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "gpucache/common/checked_math.hpp"
#include "gpucache/common/mapped_file.hpp"
#include "gpucache/error.hpp"
#include "gpucache/hdf5.hpp"
#include "hdf5_library.hpp"

namespace gpucache {
namespace detail {
namespace {

// Strings are read this many rows at a time, so that the library's buffers stay small.
constexpr hsize_t kTextBlockRows = 4096;

// An open dataset shared by the functions of its column; the file stays open while any lives.
struct Hdf5Dataset {
  std::shared_ptr<const Hdf5Handle> file;
  Hdf5Handle dataset;
  Hdf5Handle memory_type;  // the little-endian type rows are read as
  std::vector<hsize_t> dims;
  std::string origin, path;
  // Why the rows cannot be read, when opening could tell (a filter this libhdf5 lacks).
  std::string unreadable;
  // Uncompressed, contiguous, already little-endian: the rows where they lie in the file.
  std::shared_ptr<const MappedFile> mapped;
  std::uint64_t data_offset = 0;
  std::uint64_t row_bytes = 0;
  // Text and sequence columns: every row, read whole on first use (load_once). Text: the bytes
  // and where each row starts; sequences: the values (little-endian) and each row's first index.
  std::once_flag load_once;
  std::string text;
  std::vector<std::uint64_t> text_offsets;
  std::vector<std::byte> sequence_values;
  std::vector<std::uint64_t> sequence_offsets;
};

std::string location_of(const Hdf5Dataset& dataset) {
  return "dataset " + dataset.path;
}

// The dtype gpucache stores for an HDF5 numeric type, with the memory type that reads it so
// (little-endian, converted by libhdf5 when the file's order or float layout differs).
struct TypeMapping {
  DType dtype;
  Hdf5Handle memory_type;
};

std::optional<TypeMapping> map_numeric_type(hid_t type) {
  const H5T_class_t type_class = H5Tget_class(type);
  const std::size_t size = H5Tget_size(type);
  auto copy = [](hid_t predefined) { return Hdf5Handle(H5Tcopy(predefined)); };
  if (type_class == H5T_INTEGER) {
    const bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
    switch (size) {
      case 1:
        return TypeMapping{is_signed ? DType::i8 : DType::u8,
                           copy(is_signed ? H5T_STD_I8LE : H5T_STD_U8LE)};
      case 2:
        return TypeMapping{is_signed ? DType::i16 : DType::u16,
                           copy(is_signed ? H5T_STD_I16LE : H5T_STD_U16LE)};
      case 4:
        return TypeMapping{is_signed ? DType::i32 : DType::u32,
                           copy(is_signed ? H5T_STD_I32LE : H5T_STD_U32LE)};
      case 8:
        return TypeMapping{is_signed ? DType::i64 : DType::u64,
                           copy(is_signed ? H5T_STD_I64LE : H5T_STD_U64LE)};
      default:
        return std::nullopt;
    }
  }
  if (type_class == H5T_FLOAT) {
    if (size == 4) return TypeMapping{DType::f32, copy(H5T_IEEE_F32LE)};
    if (size == 8) return TypeMapping{DType::f64, copy(H5T_IEEE_F64LE)};
    if (size != 2) return std::nullopt;
    // 16-bit floats have no predefined HDF5 type: IEEE half precision (numpy float16, as h5py
    // writes it) has 5 exponent and 10 mantissa bits, bfloat16 8 and 7. Either is read as its
    // little-endian self.
    std::size_t sign = 0, exponent_at = 0, exponent_bits = 0, mantissa_at = 0, mantissa_bits = 0;
    if (H5Tget_fields(type, &sign, &exponent_at, &exponent_bits, &mantissa_at, &mantissa_bits) < 0)
      return std::nullopt;
    const bool half = exponent_bits == 5 && mantissa_bits == 10;
    if (!half && !(exponent_bits == 8 && mantissa_bits == 7)) return std::nullopt;
    Hdf5Handle sixteen = copy(H5T_IEEE_F32LE);
    if (H5Tset_fields(sixteen.get(), 15, half ? 10 : 7, half ? 5 : 8, 0, half ? 10 : 7) < 0 ||
        H5Tset_size(sixteen.get(), 2) < 0 || H5Tset_ebias(sixteen.get(), half ? 15 : 127) < 0)
      return std::nullopt;
    return TypeMapping{half ? DType::f16 : DType::bf16, std::move(sixteen)};
  }
  if (type_class == H5T_ENUM && size == 1 && H5Tget_nmembers(type) == 2) {
    // numpy bool as h5py writes it: an 8-bit enum FALSE = 0, TRUE = 1.
    signed char values[2] = {-1, -1};
    char* names[2] = {H5Tget_member_name(type, 0), H5Tget_member_name(type, 1)};
    const bool read = H5Tget_member_value(type, 0, &values[0]) >= 0 &&
                      H5Tget_member_value(type, 1, &values[1]) >= 0;
    const bool boolean = read && names[0] && names[1] && std::strcmp(names[0], "FALSE") == 0 &&
                         std::strcmp(names[1], "TRUE") == 0 && values[0] == 0 && values[1] == 1;
    H5free_memory(names[0]);
    H5free_memory(names[1]);
    if (boolean) return TypeMapping{DType::boolean, Hdf5Handle(H5Tcopy(type))};
  }
  return std::nullopt;
}

// Why libhdf5 cannot read the dataset's rows, or empty: a filter it lacks (h5py's lzf, blosc
// without its plugin), or storage in other files, which a hostile file could point anywhere.
std::string unreadable_reason(hid_t dataset) {
  Hdf5Handle plist(H5Dget_create_plist(dataset));
  if (plist.get() < 0) return "its creation properties cannot be read: " + take_hdf5_error();
  if (H5Pget_external_count(plist.get()) > 0)
    return "stores its rows in external files, which gpucache does not follow";
  if (H5Pget_layout(plist.get()) == H5D_VIRTUAL)
    return "is a virtual dataset over other files, which gpucache does not follow";
  const int filters = H5Pget_nfilters(plist.get());
  for (int i = 0; i < filters; ++i) {
    unsigned flags = 0, config = 0;
    std::size_t values = 0;
    char name[128] = {};
    const H5Z_filter_t filter = H5Pget_filter2(plist.get(), static_cast<unsigned>(i), &flags,
                                               &values, nullptr, sizeof name, name, &config);
    if (filter < 0) return "its filter pipeline cannot be read: " + take_hdf5_error();
    if (H5Zfilter_avail(filter) <= 0) {
      take_hdf5_error();
      return "is compressed with HDF5 filter " + std::to_string(filter) +
             (name[0] ? " (" + std::string(name) + ")" : std::string()) +
             ", which this libhdf5 cannot decode (install the filter's HDF5 plugin, or rewrite "
             "the file with gzip)";
    }
  }
  return {};
}

// Contiguous, unfiltered, already in the type rows are read as, with no user block: the file's
// bytes at the dataset's offset are the rows.
void map_in_place(Hdf5Dataset& dataset, hid_t file_type, const std::string& file_path) {
  Hdf5Handle plist(H5Dget_create_plist(dataset.dataset.get()));
  Hdf5Handle file_plist(H5Fget_create_plist(dataset.file->get()));
  hsize_t user_block = 1;
  if (plist.get() < 0 || file_plist.get() < 0 || H5Pget_layout(plist.get()) != H5D_CONTIGUOUS ||
      H5Pget_nfilters(plist.get()) != 0 || H5Tequal(file_type, dataset.memory_type.get()) <= 0 ||
      H5Pget_userblock(file_plist.get(), &user_block) < 0 || user_block != 0) {
    take_hdf5_error();
    return;
  }
  const haddr_t offset = H5Dget_offset(dataset.dataset.get());
  take_hdf5_error();  // an unallocated dataset leaves a message behind
  if (offset == HADDR_UNDEF) return;
  auto file = MappedFile::open(file_path);
  const auto bytes = checked_mul(dataset.dims.empty() ? 0 : dataset.dims[0], dataset.row_bytes);
  if (!bytes || !range_within(offset, *bytes, file->size())) return;
  dataset.mapped = std::move(file);
  dataset.data_offset = offset;
}

// Pack reads rows in order, a block at a time, and libhdf5 decompresses whole chunks: its chunk
// cache (1 MiB by default) must hold the chunks of one band of rows, or each block would
// decompress its chunks again. Reopens the dataset with a cache of two bands, at most 256 MiB.
void cache_a_row_of_chunks(Hdf5Dataset& dataset, hid_t file) {
  constexpr std::uint64_t kDefaultCache = 1 << 20, kMaxCache = 256 << 20;
  Hdf5Handle plist(H5Dget_create_plist(dataset.dataset.get()));
  if (plist.get() < 0 || H5Pget_layout(plist.get()) != H5D_CHUNKED) {
    take_hdf5_error();
    return;
  }
  std::vector<hsize_t> chunk(dataset.dims.size());
  if (H5Pget_chunk(plist.get(), static_cast<int>(chunk.size()), chunk.data()) !=
      static_cast<int>(chunk.size())) {
    take_hdf5_error();
    return;
  }
  // A band: chunk[0] rows of every chunk across the other dimensions.
  const auto band = checked_mul(chunk[0], dataset.row_bytes);
  if (!band || *band <= kDefaultCache / 2) return;
  const std::uint64_t cache = *band > kMaxCache / 2 ? kMaxCache : *band * 2;
  Hdf5Handle access(H5Pcreate(H5P_DATASET_ACCESS));
  if (access.get() < 0 || H5Pset_chunk_cache(access.get(), H5D_CHUNK_CACHE_NSLOTS_DEFAULT, cache,
                                             H5D_CHUNK_CACHE_W0_DEFAULT) < 0) {
    take_hdf5_error();
    return;
  }
  // libhdf5 shares one cache among the handles of an open dataset, made by the first open: close
  // it before opening it again with the larger cache.
  plist = Hdf5Handle();
  dataset.dataset = Hdf5Handle();
  dataset.dataset = Hdf5Handle(hdf5_check(H5Dopen2(file, dataset.path.c_str(), access.get()),
                                          dataset.origin, location_of(dataset), "cannot open it"));
}

void read_hyperslab(const Hdf5Dataset& dataset, std::uint64_t first, std::uint64_t count,
                    hid_t memory_type, void* out) {
  const std::string where = location_of(dataset) + " rows " + std::to_string(first) + ".." +
                            std::to_string(first + count);
  if (!dataset.unreadable.empty())
    throw Error(dataset.origin, location_of(dataset), dataset.unreadable);
  std::vector<hsize_t> start(dataset.dims.size(), 0), extent = dataset.dims;
  start[0] = first;
  extent[0] = count;
  Hdf5Handle file_space(hdf5_check(H5Dget_space(dataset.dataset.get()), dataset.origin, where,
                                   "cannot read the dataspace"));
  hdf5_check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr,
                                 extent.data(), nullptr),
             dataset.origin, where, "cannot select the rows");
  Hdf5Handle memory_space(
      hdf5_check(H5Screate_simple(static_cast<int>(extent.size()), extent.data(), nullptr),
                 dataset.origin, where, "cannot describe the rows"));
  hdf5_check(H5Dread(dataset.dataset.get(), memory_type, memory_space.get(), file_space.get(),
                     H5P_DEFAULT, out),
             dataset.origin, where, "cannot read the rows");
}

void wire_tensor(InputColumn& column, const std::shared_ptr<Hdf5Dataset>& dataset) {
  column.read_rows = [dataset](std::uint64_t first, std::uint64_t count, std::span<std::byte> out) {
    if (count == 0) return;
    const Hdf5Guard guard;
    if (dataset->mapped) {
      std::memcpy(out.data(),
                  dataset->mapped->data() + dataset->data_offset + first * dataset->row_bytes,
                  count * dataset->row_bytes);
      return;
    }
    read_hyperslab(*dataset, first, count, dataset->memory_type.get(), out.data());
  };
  if (!dataset->mapped) return;
  column.direct_rows = [dataset](std::uint64_t first, std::uint64_t count) -> const std::byte* {
    const auto end = checked_add(first, count);
    if (!end || *end > dataset->dims[0]) return nullptr;
    return dataset->mapped->data() + dataset->data_offset + first * dataset->row_bytes;
  };
  column.release_rows = [dataset](std::uint64_t first, std::uint64_t count) {
    dataset->mapped->release(dataset->data_offset + first * dataset->row_bytes,
                             count * dataset->row_bytes);
  };
}

// Every row's text, read kTextBlockRows rows at a time. Variable-length strings come back as
// pointers libhdf5 allocated (freed block by block); fixed-length ones end at their first NUL.
void load_text(Hdf5Dataset& dataset, hid_t file_type) {
  const Hdf5Guard guard;
  const std::uint64_t rows = dataset.dims[0];
  const bool variable = H5Tis_variable_str(file_type) > 0;
  const std::size_t fixed_size = variable ? 0 : H5Tget_size(file_type);
  Hdf5Handle memory_type(H5Tcopy(H5T_C_S1));
  hdf5_check(H5Tset_size(memory_type.get(), variable ? H5T_VARIABLE : fixed_size), dataset.origin,
             location_of(dataset), "cannot describe its strings");
  H5Tset_cset(memory_type.get(), H5Tget_cset(file_type));
  if (!variable) H5Tset_strpad(memory_type.get(), H5T_STR_NULLPAD);
  if (!variable && !checked_mul(fixed_size, kTextBlockRows))
    throw Error(dataset.origin, location_of(dataset), "has strings of an impossible size");
  // Built aside and kept only when every row was read, so that a failed read can be retried.
  std::string text;
  std::vector<std::uint64_t> offsets{0};
  std::vector<char*> pointers;
  std::vector<char> fixed;
  for (std::uint64_t first = 0; first < rows; first += kTextBlockRows) {
    const hsize_t count = std::min<hsize_t>(kTextBlockRows, rows - first);
    if (variable) {
      pointers.assign(count, nullptr);
      read_hyperslab(dataset, first, count, memory_type.get(), pointers.data());
      for (const char* row : pointers) {
        if (row) text += row;
        offsets.push_back(text.size());
      }
      Hdf5Handle space(H5Screate_simple(1, &count, nullptr));
#if H5_VERSION_GE(1, 12, 0)
      H5Treclaim(memory_type.get(), space.get(), H5P_DEFAULT, pointers.data());
#else
      H5Dvlen_reclaim(memory_type.get(), space.get(), H5P_DEFAULT, pointers.data());
#endif
    } else {
      fixed.assign(count * fixed_size, '\0');
      read_hyperslab(dataset, first, count, memory_type.get(), fixed.data());
      for (hsize_t row = 0; row < count; ++row) {
        const char* begin = fixed.data() + row * fixed_size;
        text.append(begin, strnlen(begin, fixed_size));
        offsets.push_back(text.size());
      }
    }
  }
  dataset.text = std::move(text);
  dataset.text_offsets = std::move(offsets);
}

void wire_text(InputColumn& column, const std::shared_ptr<Hdf5Dataset>& dataset,
               std::shared_ptr<Hdf5Handle> file_type) {
  column.text_row = [dataset, file_type](std::uint64_t row) -> std::string_view {
    std::call_once(dataset->load_once, [&] { load_text(*dataset, file_type->get()); });
    const auto begin = dataset->text_offsets[row];
    return std::string_view(dataset->text).substr(begin, dataset->text_offsets[row + 1] - begin);
  };
}

// Every row of a variable-length numeric dataset (h5py's vlen_dtype: token ids), read
// kTextBlockRows rows at a time as hvl_t {length, pointer} pairs libhdf5 allocates and frees.
void load_sequences(Hdf5Dataset& dataset, std::size_t itemsize) {
  const Hdf5Guard guard;
  const std::uint64_t rows = dataset.dims[0];
  Hdf5Handle memory_type(hdf5_check(H5Tvlen_create(dataset.memory_type.get()), dataset.origin,
                                    location_of(dataset), "cannot describe its rows"));
  std::vector<std::byte> values;
  std::vector<std::uint64_t> offsets{0};
  std::vector<hvl_t> block;
  for (std::uint64_t first = 0; first < rows; first += kTextBlockRows) {
    const hsize_t count = std::min<hsize_t>(kTextBlockRows, rows - first);
    block.assign(count, hvl_t{0, nullptr});
    read_hyperslab(dataset, first, count, memory_type.get(), block.data());
    for (const hvl_t& row : block) {
      const auto* begin = static_cast<const std::byte*>(row.p);
      if (row.len) values.insert(values.end(), begin, begin + row.len * itemsize);
      offsets.push_back(offsets.back() + row.len);
    }
    Hdf5Handle space(H5Screate_simple(1, &count, nullptr));
#if H5_VERSION_GE(1, 12, 0)
    H5Treclaim(memory_type.get(), space.get(), H5P_DEFAULT, block.data());
#else
    H5Dvlen_reclaim(memory_type.get(), space.get(), H5P_DEFAULT, block.data());
#endif
  }
  dataset.sequence_values = std::move(values);
  dataset.sequence_offsets = std::move(offsets);
}

void wire_sequence(InputColumn& column, const std::shared_ptr<Hdf5Dataset>& dataset) {
  const std::size_t itemsize = dtype_size(column.dtype);
  auto load = [dataset, itemsize] {
    std::call_once(dataset->load_once, [&] { load_sequences(*dataset, itemsize); });
  };
  column.row_length = [dataset, load](std::uint64_t row) -> std::uint64_t {
    load();
    return dataset->sequence_offsets[row + 1] - dataset->sequence_offsets[row];
  };
  column.read_sequence = [dataset, load, itemsize](std::uint64_t row, std::span<std::byte> out) {
    load();
    if (out.empty()) return;  // an empty row: memcpy may not be given the null pointer it has
    std::memcpy(out.data(),
                dataset->sequence_values.data() + dataset->sequence_offsets[row] * itemsize,
                out.size());
  };
}

struct Walk {
  std::shared_ptr<const Hdf5Handle> file;
  std::string origin;
  InputData data;
  std::vector<LeftOutField> skipped;  // {"/x", "compound"}, for the error when nothing is usable
};

std::string type_class_name(H5T_class_t type_class) {
  switch (type_class) {
    case H5T_COMPOUND:
      return "compound";
    case H5T_OPAQUE:
      return "opaque";
    case H5T_REFERENCE:
      return "reference";
    case H5T_VLEN:
      return "variable-length";
    case H5T_ARRAY:
      return "array";
    case H5T_BITFIELD:
      return "bitfield";
    case H5T_TIME:
      return "time";
    case H5T_ENUM:
      return "enum";
    default:
      return "unsupported type";
  }
}

void add_dataset(Walk& walk, const std::string& path) {
  auto dataset = std::make_shared<Hdf5Dataset>();
  dataset->file = walk.file;
  dataset->origin = walk.origin;
  dataset->path = path;
  const std::string where = location_of(*dataset);
  dataset->dataset = Hdf5Handle(hdf5_check(H5Dopen2(walk.file->get(), path.c_str(), H5P_DEFAULT),
                                           walk.origin, where, "cannot open it"));
  auto file_type = std::make_shared<Hdf5Handle>(
      hdf5_check(H5Dget_type(dataset->dataset.get()), walk.origin, where, "cannot read its type"));
  Hdf5Handle space(hdf5_check(H5Dget_space(dataset->dataset.get()), walk.origin, where,
                              "cannot read its dataspace"));
  const int rank = hdf5_check(H5Sget_simple_extent_ndims(space.get()), walk.origin, where,
                              "cannot read its rank");
  if (rank == 0) {
    walk.skipped.push_back({path, "a scalar"});
    return;
  }
  if (static_cast<std::size_t>(rank) > kMaxRowDims + 1) {
    walk.skipped.push_back({path, "rank " + std::to_string(rank)});
    return;
  }
  dataset->dims.resize(rank);
  hdf5_check(H5Sget_simple_extent_dims(space.get(), dataset->dims.data(), nullptr), walk.origin,
             where, "cannot read its shape");

  InputColumn column;
  column.name = column_name_from_path(path);
  column.path = path;
  column.origin = walk.origin;
  column.rows = dataset->dims[0];
  const H5T_class_t type_class = H5Tget_class(file_type->get());
  if (type_class == H5T_STRING) {
    if (rank != 1) {
      walk.skipped.push_back({path, "strings of rank " + std::to_string(rank)});
      return;
    }
    column.kind = ColumnKind::text;
    column.role = ColumnRole::text;
    column.dtype = DType::u8;
    dataset->unreadable = unreadable_reason(dataset->dataset.get());
    wire_text(column, dataset, std::move(file_type));
    walk.data.columns.push_back(std::move(column));
    return;
  }
  if (type_class == H5T_VLEN) {
    Hdf5Handle base(H5Tget_super(file_type->get()));
    auto element = base.get() < 0 ? std::nullopt : map_numeric_type(base.get());
    if (!element || rank != 1) {
      take_hdf5_error();
      walk.skipped.push_back({path, rank != 1
                                        ? "variable-length rows of rank " + std::to_string(rank)
                                        : std::string("variable-length, not numbers")});
      return;
    }
    column.kind = ColumnKind::sequence;
    column.role = ColumnRole::sequence;
    column.dtype = element->dtype;
    column.padded_dim = 0;
    dataset->memory_type = std::move(element->memory_type);
    dataset->unreadable = unreadable_reason(dataset->dataset.get());
    wire_sequence(column, dataset);
    walk.data.columns.push_back(std::move(column));
    return;
  }
  auto mapping = map_numeric_type(file_type->get());
  if (!mapping) {
    take_hdf5_error();
    walk.skipped.push_back({path, type_class_name(type_class)});
    return;
  }
  column.dtype = mapping->dtype;
  dataset->memory_type = std::move(mapping->memory_type);
  std::uint64_t elements = 1;
  for (int d = 1; d < rank; ++d) {
    column.row_shape.push_back(dataset->dims[d]);
    const auto product = checked_mul(elements, dataset->dims[d]);
    if (!product) throw Error(walk.origin, where, "has rows of more than 2^64 elements");
    elements = *product;
  }
  column.padded_dim = column.row_shape.empty() ? 1 : column.row_shape.back();
  const auto row_bytes = checked_mul(elements, dtype_size(column.dtype));
  const auto total = row_bytes ? checked_mul(*row_bytes, column.rows) : std::nullopt;
  if (!total) throw Error(walk.origin, where, "holds more than 2^64 bytes");
  dataset->row_bytes = *row_bytes;
  dataset->unreadable = unreadable_reason(dataset->dataset.get());
  if (dataset->unreadable.empty()) map_in_place(*dataset, file_type->get(), walk.origin);
  if (dataset->unreadable.empty()) cache_a_row_of_chunks(*dataset, walk.file->get());
  wire_tensor(column, dataset);
  walk.data.columns.push_back(std::move(column));
}

// Collects the paths of datasets only: nothing may throw through libhdf5's C frames.
#if H5_VERSION_GE(1, 12, 0)
using ObjectInfo = H5O_info2_t;
#else
using ObjectInfo = H5O_info_t;
#endif

herr_t collect_dataset(hid_t, const char* name, const ObjectInfo* info, void* paths) noexcept {
  if (info->type != H5O_TYPE_DATASET) return 0;
  try {
    static_cast<std::vector<std::string>*>(paths)->push_back(std::string("/") + name);
  } catch (...) {
    return -1;
  }
  return 0;
}

const InputColumn* find_column(const InputData& data, std::string_view path) {
  for (const auto& column : data.columns)
    if (column.path == path) return &column;
  return nullptr;
}

// ann-benchmarks (erikbern/ann-benchmarks): /train and /test float [N, D] and [Q, D], /neighbors
// [Q, k] ids, /distances [Q, k]. The base vectors are the dataset; the queries and ground truth
// are rows of another length, there for --field.
void recognise_ann_benchmarks(InputData& data) {
  const InputColumn* train = find_column(data, "/train");
  const InputColumn* test = find_column(data, "/test");
  const InputColumn* neighbors = find_column(data, "/neighbors");
  auto is_vectors = [](const InputColumn* column) {
    return column && column->kind == ColumnKind::tensor && dtype_is_float(column->dtype) &&
           column->row_shape.size() == 1;
  };
  if (!is_vectors(train) || !is_vectors(test) || !neighbors || train->row_shape != test->row_shape)
    return;
  data.default_fields = {{"embedding", "/train"}};
  std::string others;
  for (const char* path : {"/test", "/neighbors", "/distances"})
    if (find_column(data, path)) others += std::string(others.empty() ? "" : ", ") + path;
  data.layout_explanation =
      "An ann-benchmarks file: /train is the embedding; " + others +
      " hold the queries and their ground truth, chosen with --field (e.g. --field "
      "embedding=/test --field neighbors=/neighbors --field distances=/distances).";
}

// Opens the file and describes every dataset: metadata only, no rows.
InputData describe_file(const std::string& path) {
  const Hdf5Guard guard;
  Walk walk;
  walk.origin = path;
  walk.file = std::make_shared<const Hdf5Handle>(
      hdf5_check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), path, "", "cannot open it"));
  Hdf5Handle root(
      hdf5_check(H5Gopen2(walk.file->get(), "/", H5P_DEFAULT), path, "group /", "cannot open it"));
  std::vector<std::string> datasets;
  // 1.10 names the visit with a fields argument H5Ovisit2; 1.12 made that H5Ovisit3.
#if H5_VERSION_GE(1, 12, 0)
  const herr_t visited =
      H5Ovisit3(root.get(), H5_INDEX_NAME, H5_ITER_INC, collect_dataset, &datasets, H5O_INFO_BASIC);
#else
  const herr_t visited =
      H5Ovisit2(root.get(), H5_INDEX_NAME, H5_ITER_INC, collect_dataset, &datasets, H5O_INFO_BASIC);
#endif
  hdf5_check(visited, path, "group /", "cannot list its datasets");
  for (const auto& dataset : datasets) add_dataset(walk, dataset);
  if (walk.data.columns.empty()) {
    std::string skipped;
    for (const auto& entry : walk.skipped)
      skipped += (skipped.empty() ? "" : ", ") + left_out_entry(entry);
    throw Error(path, "",
                "holds no numeric or string dataset gpucache can read" +
                    (skipped.empty() ? std::string() : " (found " + skipped + ")"));
  }
  // "/a/b" and "/a_b" both make "a_b": the later one becomes "a_b_2".
  make_column_names_unique(walk.data.columns);
  recognise_ann_benchmarks(walk.data);
  walk.data.left_out = std::move(walk.skipped);
  return std::move(walk.data);
}

// How long the child may read a file's metadata. A real file takes milliseconds (seconds for one
// of a million datasets); a child still running after this is stuck, whether in a loop of
// libhdf5's on crafted metadata or on a lock the fork copied while another thread held it (a
// fuzzing process once waited on its child past libFuzzer's 10 s), and the pack must not wait for
// it for ever. GPUCACHE_HDF5_CHECK_SECONDS changes it (a whole number of seconds, at least 1).
constexpr std::uint64_t kMetadataCheckSeconds = 120;
std::uint64_t metadata_check_seconds() {
  static constexpr const char* kVariable = "GPUCACHE_HDF5_CHECK_SECONDS";
  const char* text = std::getenv(kVariable);
  if (text == nullptr || *text == '\0') return kMetadataCheckSeconds;
  std::uint64_t seconds = 0;
  const char* end = text + std::strlen(text);
  const auto [stop, failure] = std::from_chars(text, end, seconds);
  if (failure != std::errc() || stop != end || seconds == 0 || seconds > 86400)
    throw Error(
        kVariable, "",
        std::string("must be a whole number of seconds from 1 to 86400, not '") + text + "'");
  return seconds;
}

// Waits for the child for at most `seconds`; a child still running then is killed (and reaped)
// and the file refused.
int wait_for_child(pid_t child, std::uint64_t seconds, const std::string& path) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::seconds(seconds);
  auto pause = std::chrono::microseconds(200);
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child) return status;
    if (done < 0 && errno != EINTR) return -1;
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(50'000));
  }
  ::kill(child, SIGKILL);
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  throw Error(path, "",
              "libhdf5 did not finish reading the file's metadata in " + std::to_string(seconds) +
                  " s and was stopped: the file is corrupt, or its metadata is larger than "
                  "GPUCACHE_HDF5_CHECK_SECONDS allows");
}

// libhdf5 1.10 trusts the metadata it decodes: a corrupt or crafted object header can crash it
// (a stray memcpy in H5O_msg_read) where it should fail. So the metadata is first read in a
// child process; if that dies, the file is refused with one line and this process never touches
// it. The caller holds an Hdf5Guard, so no other thread is inside libhdf5 as the child is forked,
// and the child only calls libhdf5 and exits.
void check_metadata_in_child(const std::string& path) {
  // The child's exit codes: 0 read, kRefused a gpucache::Error (which the parent then raises
  // itself, with the same words); anything else, or a signal, is a crash.
  constexpr int kRefused = 3;
  const std::uint64_t seconds = metadata_check_seconds();
  // For the test of the limit only: the child stops before reading, as a stuck one would.
  const bool stall_for_test = std::getenv("GPUCACHE_HDF5_CHECK_TEST_STALL") != nullptr;
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) return;  // no child to spare: read it here, as a build without this check would
  if (child == 0) {
    Hdf5Guard::forked_child();
    // A crash is to end the child as a signal the parent sees, not in a sanitizer's report.
    for (int signal : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(signal, SIG_DFL);
    while (stall_for_test) ::pause();
    int code = 0;
    try {
      describe_file(path);
    } catch (const Error&) {
      code = kRefused;
    } catch (...) {
      code = 1;
    }
    ::_exit(code);
  }
  const int status = wait_for_child(child, seconds, path);
  if (status < 0) return;
  if (WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == kRefused)) return;
  throw Error(
      path, "",
      (WIFSIGNALED(status) ? "libhdf5 crashed (signal " + std::to_string(WTERMSIG(status))
                           : "libhdf5 failed (exit " + std::to_string(WEXITSTATUS(status))) +
          ") reading the file's metadata: the file is corrupt");
}

}  // namespace
}  // namespace detail

InputData read_hdf5(const std::string& path, const ReadOptions&) {
  using namespace detail;
  // Existence and permissions first, with the same message as every other reader.
  MappedFile::open(path);
  {
    const Hdf5Guard guard;
    if (H5Fis_hdf5(path.c_str()) <= 0) {
      take_hdf5_error();
      throw Error(path, "", "not an HDF5 file (no HDF5 signature)");
    }
    check_metadata_in_child(path);
  }
  return describe_file(path);
}

}  // namespace gpucache
