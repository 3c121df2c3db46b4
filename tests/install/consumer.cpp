// A C++ program built against the installed package (find_package(gpucache), gpucache::runtime, or
// pkg-config): loads a packed dataset to the host and checks every value against the .npy it was
// packed from. Usage: consumer_cpp DATASET_DIR SOURCE.npy
#include <gpucache/batch_order.hpp>
#include <gpucache/batch_stream.hpp>
#include <gpucache/runtime.hpp>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "consumer_cpp: FAILED: %s\n", what.c_str());
    ++failures;
  }
}

// A little-endian f32, C-order [rows, cols] .npy: all the test packs, so all this reads.
struct Matrix {
  std::uint64_t rows = 0, cols = 0;
  std::vector<float> values;
};

Matrix read_npy(const std::string& path) {
  std::ifstream stream(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(stream)), {});
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    throw std::runtime_error(path + ": not a .npy file");
  const bool wide = bytes[6] >= 2;  // version 2 and 3 have a 4-byte header length
  std::size_t header_length = static_cast<unsigned char>(bytes[8]) |
                              static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8;
  if (wide)
    header_length |= static_cast<std::size_t>(static_cast<unsigned char>(bytes[10])) << 16 |
                     static_cast<std::size_t>(static_cast<unsigned char>(bytes[11])) << 24;
  const std::size_t data_offset = (wide ? 12 : 10) + header_length;
  const std::string header = bytes.substr(0, data_offset);
  const auto shape = header.find("'shape': (");
  if (header.find("'descr': '<f4'") == std::string::npos ||
      header.find("'fortran_order': False") == std::string::npos || shape == std::string::npos)
    throw std::runtime_error(path + ": not a C-order little-endian f32 array");
  Matrix matrix;
  if (std::sscanf(header.c_str() + shape, "'shape': (%" SCNu64 ", %" SCNu64 ")", &matrix.rows,
                  &matrix.cols) != 2)
    throw std::runtime_error(path + ": not a 2-D array");
  matrix.values.resize(matrix.rows * matrix.cols);
  if (bytes.size() - data_offset != matrix.values.size() * sizeof(float))
    throw std::runtime_error(path + ": data size does not match the shape");
  std::memcpy(matrix.values.data(), bytes.data() + data_offset, bytes.size() - data_offset);
  return matrix;
}

// Compares every row of the host column with the source, piece by piece (one piece per shard).
void check_embedding(const gpucache::runtime::HostData& host, const Matrix& source,
                     std::uint64_t source_first_row) {
  const auto& column = host.column("embedding");
  std::uint64_t rows_seen = 0, mismatches = 0;
  for (const auto& piece : host.pieces("embedding")) {
    expect(piece.first_row == rows_seen, "pieces are in row order");
    for (std::uint64_t r = 0; r < piece.rows; ++r) {
      const void* row = piece.data + r * column.row_pitch_bytes();
      const float* expected = &source.values[(source_first_row + rows_seen + r) * source.cols];
      if (std::memcmp(row, expected, source.cols * sizeof(float)) != 0) ++mismatches;
    }
    rows_seen += piece.rows;
  }
  expect(rows_seen == host.rows(), "the pieces cover every row");
  expect(mismatches == 0, std::to_string(mismatches) + " rows differ from the source .npy");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: consumer_cpp DATASET_DIR SOURCE.npy\n");
    return 2;
  }
  namespace rt = gpucache::runtime;
  try {
    const Matrix source = read_npy(argv[2]);
    const auto dataset = rt::Dataset::open(argv[1]);
    if (dataset.total_rows() != source.rows) {
      std::fprintf(stderr, "consumer_cpp: FAILED: %llu rows, the source has %llu\n",
                   static_cast<unsigned long long>(dataset.total_rows()),
                   static_cast<unsigned long long>(source.rows));
      return 1;
    }
    expect(dataset.shards().size() > 1, "the dataset has several shards");

    const auto host = dataset.to_host();
    expect(host.rows() == source.rows, "to_host().rows() equals the source's rows");
    const auto& embedding = host.column("embedding");
    expect(gpucache::dtype_name(embedding.dtype) == "f32" &&
               gpucache::dtype_size(embedding.dtype) == 4,
           "the embedding column is f32");
    if (embedding.dim() != source.cols) {
      std::fprintf(stderr,
                   "consumer_cpp: FAILED: the embedding column is not the source's width\n");
      return 1;
    }
    check_embedding(host, source, 0);

    // The provenance column: each row's row number in its source file.
    const auto& source_row = host.column("@source_row");
    std::uint64_t wrong_rows = 0;
    for (const auto& piece : host.pieces("@source_row"))
      for (std::uint64_t r = 0; r < piece.rows; ++r) {
        std::int64_t value;
        std::memcpy(&value, piece.data + r * source_row.row_pitch_bytes(), sizeof value);
        wrong_rows += value != static_cast<std::int64_t>(piece.first_row + r);
      }
    expect(wrong_rows == 0, "@source_row counts the source's rows");

    // The second of two ranks gets the second half, across a shard boundary.
    const auto rank = dataset.for_rank(1, 2);
    const auto rank_host = rank.select_columns({"embedding"}).to_host();
    expect(rank_host.rows() == source.rows / 2, "rank 1 of 2 gets half the rows");
    check_embedding(rank_host, source, source.rows / 2);

    // The batch stream hands out BatchOrder's rows with the source's values.
    rt::StreamOptions stream_options;
    stream_options.order.batch_size = 64;
    stream_options.order.seed = 1;
    rt::BatchStream stream(dataset.select_columns({"embedding"}), stream_options);
    rt::OrderOptions order = stream_options.order;
    order.rows = dataset.rows();
    const rt::BatchOrder expected_order(order);
    std::uint64_t batches = 0, stream_mismatches = 0;
    while (const auto batch = stream.next()) {
      stream_mismatches += batch->row_indices() != expected_order.batch(batches);
      const auto& column = batch->column("embedding");
      for (std::uint64_t r = 0; r < batch->rows(); ++r)
        stream_mismatches += std::memcmp(column.data + r * column.column.row_pitch_bytes(),
                                         &source.values[batch->row_indices()[r] * source.cols],
                                         source.cols * sizeof(float)) != 0;
      ++batches;
    }
    expect(batches == expected_order.batches() && stream_mismatches == 0,
           "the stream's batches hold BatchOrder's rows");

    try {
      rt::Dataset::open(std::string(argv[1]) + "/missing");
      expect(false, "opening a missing dataset throws");
    } catch (const gpucache::Error& error) {
      expect(error.file().find("missing") != std::string::npos,
             std::string("gpucache::Error names the missing path: ") + error.what());
    }
    if (failures == 0)
      std::printf("consumer_cpp: %llu rows x %llu f32 in %zu shards match %s\n",
                  static_cast<unsigned long long>(host.rows()),
                  static_cast<unsigned long long>(embedding.dim()), dataset.shards().size(),
                  argv[2]);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "consumer_cpp: FAILED: %s\n", error.what());
    return 1;
  }
  return failures == 0 ? 0 : 1;
}
