// Writes the seed corpora under fuzz/corpus/<target>/: small valid inputs that reach deep into
// each parser (the fuzzer mutates from there), plus copies of the test fixtures. Deterministic:
// running it again gives the same files. Usage: fuzz_make_corpus SOURCE_ROOT
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gpucache/common/mapped_file.hpp"
#include "gpucache/error.hpp"
#include "gpucache/shard/manifest.hpp"
#include "gpucache/shard_io/shard_writer.hpp"
#include "zip/zip.hpp"

using namespace gpucache;
using namespace gpucache::shard;
namespace fs = std::filesystem;

namespace {

// Copies every file of `from` with the extension `extension` into `to`.
void copy_fixtures(const fs::path& from, const std::string& extension, const fs::path& to) {
  fs::create_directories(to);
  for (const auto& entry : fs::directory_iterator(from))
    if (entry.path().extension() == extension)
      fs::copy_file(entry.path(), to / entry.path().filename(),
                    fs::copy_options::overwrite_existing);
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream stream(path, std::ios::binary | std::ios::trunc);
  stream << text;
}

// A shard of `rows` rows: a rank-2 column, a rank-1 column and optionally a text column, written
// with 4 KiB chunks so the chunk table has several entries.
void write_shard(const fs::path& path, DType dtype, std::uint64_t rows, std::uint64_t dim,
                 bool with_text, int zstd_level, const std::string& label = "label") {
  std::vector<Column> specs{
      {"embedding", ColumnKind::tensor, dtype, {dim}, padded_dim_for(dim, dtype, 16)},
      {label, ColumnKind::tensor, DType::i32, {}, 1}};
  std::vector<std::string> texts;
  std::uint64_t text_total = 0;
  if (with_text) {
    specs.push_back({"text", ColumnKind::text, DType::u8, {}, 1});
    for (std::uint64_t r = 0; r < rows; ++r) {
      texts.push_back(std::string(r % 4, static_cast<char>('a' + r)) + (r % 2 ? "\xc3\xa9" : ""));
      text_total += texts.back().size();
    }
  }
  std::vector<std::uint64_t> text_bytes(specs.size(), 0);
  text_bytes.back() = text_total;
  ShardBuilder builder(specs, rows, text_bytes);
  const auto& column = builder.columns()[0];
  auto data = builder.tensor_data(0);
  for (std::uint64_t r = 0; r < rows; ++r)
    for (std::uint64_t i = 0; i < dim * dtype_size(dtype); ++i)
      data[r * column.row_pitch_bytes() + i] = static_cast<std::byte>(r * 31 + i * 7 + 1);
  auto labels = builder.tensor_data(1);
  for (std::uint64_t r = 0; r < rows; ++r) labels[r * 4] = static_cast<std::byte>(r);
  if (with_text) {
    auto offsets = builder.text_offsets(2);
    auto bytes = builder.text_bytes(2);
    std::uint64_t cursor = 0;
    for (std::uint64_t r = 0; r < rows; ++r) {
      offsets[r] = cursor;
      std::copy(texts[r].begin(), texts[r].end(), bytes.begin() + cursor);
      cursor += texts[r].size();
    }
    offsets[rows] = cursor;
  }
  WriteOptions options;
  options.chunk_size = kAlignment;
  options.zstd_level = zstd_level;
  options.threads = 1;
  builder.write(path.string(), options);
}

Manifest sample_manifest(std::uint64_t shards, bool with_text) {
  Manifest manifest;
  manifest.tool_version = "0.1.0";
  manifest.columns.push_back({"embedding", ColumnKind::tensor, DType::f16, {5}, 16});
  if (with_text) manifest.columns.push_back({"text", ColumnKind::text, DType::u8, {}, 1});
  manifest.columns.push_back({"source", ColumnKind::tensor, DType::u16, {}, 1});
  for (std::uint64_t s = 0; s < shards; ++s) {
    manifest.shards.push_back(
        {shard_file_name(static_cast<std::uint32_t>(s)), 8, s * 8, 20584, 0x1f0e2d3c4b5a6978 + s});
    manifest.rows += 8;
  }
  manifest.inputs.push_back({"data/emb.npy", 1536128, 0x0123456789abcdef});
  manifest.options = {{"dtype", "f16"},  {"pad_to", 16},       {"shard_size", 1073741824},
                      {"shard_rows", 8}, {"compress", "none"}, {"chunk_size", 4194304}};
  if (with_text) manifest.sections["validation"] = {{"rows_checked", 16}, {"problems", {}}};
  return manifest;
}

// Hand-written .npy files for header variants the numpy fixtures do not cover.
std::string npy_bytes(int major, const std::string& header, const std::string& data) {
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  std::string padded = header;
  const std::size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + padded.size() + 1) % 64 != 0) padded += ' ';
  padded += '\n';
  const std::size_t length = padded.size();
  out += static_cast<char>(length & 0xff);
  out += static_cast<char>((length >> 8) & 0xff);
  if (major != 1) out += std::string(2, '\0');
  return out + padded + data;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s SOURCE_ROOT\n", argv[0]);
    return 2;
  }
  const fs::path root(argv[1]);
  const fs::path corpus = root / "fuzz" / "corpus";
  try {
    const fs::path shards = corpus / "shard_layout";
    fs::create_directories(shards);
    write_shard(shards / "f32_rows3.gcs", DType::f32, 3, 5, false, 0);
    write_shard(shards / "f16_text_rows4.gcs", DType::f16, 4, 3, true, 0);
    write_shard(shards / "u8_text_rows2_zstd.gcs", DType::u8, 2, 20, true, 3);
    write_shard(shards / "bf16_rows40_zstd.gcs", DType::bf16, 40, 16, false, 1);
    write_shard(shards / "i64_rows1.gcs", DType::i64, 1, 1, false, 0);
    // A name over 63 bytes (multi-byte UTF-8): a 1.3 shard with a names table (SPEC.md).
    std::string long_label;
    while (long_label.size() < 200) long_label += "\xc3\xa9tiquette_";
    write_shard(shards / "f32_text_long_name_rows3.gcs", DType::f32, 3, 4, true, 0, long_label);

    const fs::path manifests = corpus / "manifest";
    fs::create_directories(manifests);
    write_text(manifests / "two_shards.json", manifest_to_text(sample_manifest(2, false)));
    write_text(manifests / "text_validation.json", manifest_to_text(sample_manifest(1, true)));
    write_text(manifests / "empty.json", manifest_to_text(sample_manifest(0, false)));

    const fs::path npys = corpus / "npy";
    fs::create_directories(npys);
    for (const auto& entry : fs::directory_iterator(root / "tests" / "data" / "npy"))
      if (entry.path().extension() == ".npy")
        fs::copy_file(entry.path(), npys / entry.path().filename(),
                      fs::copy_options::overwrite_existing);
    const std::string twelve_bytes("\x01\x00\x02\x00\x03\x00\x04\x00\x05\x00\x06\x00", 12);
    write_text(
        npys / "v2_u2.npy",
        npy_bytes(2, "{'descr': '<u2', 'fortran_order': False, 'shape': (2, 3), }", twelve_bytes));
    write_text(
        npys / "v3_big_i2_fortran.npy",
        npy_bytes(3, "{'descr': '>i2', 'fortran_order': True, 'shape': (3, 2), }", twelve_bytes));
    write_text(npys / "scalar_u4.npy",
               npy_bytes(1, "{'descr': '=u4', 'fortran_order': False, 'shape': (), }",
                         twelve_bytes.substr(0, 4)));
    write_text(
        npys / "python2_long.npy",
        npy_bytes(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (12L,), }", twelve_bytes));
    write_text(npys / "key_order.npy",
               npy_bytes(1, "{\"shape\": (1, 1, 3), \"fortran_order\": False, \"descr\": \"<f4\"}",
                         twelve_bytes));

    const fs::path data = root / "tests" / "data";
    copy_fixtures(data / "npz", ".npz", corpus / "npz");
    copy_fixtures(data / "pt", ".pt", corpus / "pt");
    copy_fixtures(data / "npz", ".npz", corpus / "zip");
    copy_fixtures(data / "safetensors", ".safetensors", corpus / "safetensors");
    copy_fixtures(data / "safetensors" / "broken", ".safetensors", corpus / "safetensors");
    copy_fixtures(data / "jsonl", ".jsonl", corpus / "jsonl");
    copy_fixtures(data / "jsonl" / "broken", ".jsonl", corpus / "jsonl");
    copy_fixtures(data / "parquet", ".parquet", corpus / "parquet");
    // Dates and times (issues #27, #28): every TIMESTAMP unit, DATE, TIME, INT96 (PLAIN and
    // dictionary), and numpy's datetime64/timedelta64.
    copy_fixtures(data / "time", ".parquet", corpus / "parquet");
    // Values read where they lie in the file (UNCOMPRESSED PLAIN pages beside decoded ones), with
    // pages that end between rows (pyarrow 26) and inside them (pyarrow 12).
    for (const char* name : {"plain_pages.parquet", "plain_pages_pyarrow12.parquet"})
      fs::copy_file(data / "parquet_writers" / name, corpus / "parquet" / name,
                    fs::copy_options::overwrite_existing);
    copy_fixtures(data / "time", ".npy", corpus / "npy");
    copy_fixtures(data / "time", ".npz", corpus / "npz");
    // Round 2 of hostile inputs (issue #18): repeating torch views, an ambiguous .npz (the deflate
    // bombs stay out: each run would inflate 64 MiB), a many-tensor safetensors header, and the
    // near-misses the reference libraries refuse (docs/reliability.md).
    for (const char* name : {"expand_huge.pt", "strided_huge.pt", "expand_small.pt"})
      fs::copy_file(data / "hostile" / name, corpus / "pt" / name,
                    fs::copy_options::overwrite_existing);
    fs::copy_file(data / "hostile" / "two_blocks.npz", corpus / "npz" / "two_blocks.npz",
                  fs::copy_options::overwrite_existing);
    auto safetensors = [](const std::string& header, const std::string& data) {
      std::string out(8, '\0');
      for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
      return out + header + data;
    };
    std::string many = "{";
    for (int i = 0; i < 150; ++i)
      many += (i ? ",\"t" : "\"t") + std::to_string(i) +
              "\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[" + std::to_string(i) + "," +
              std::to_string(i + 1) + "]}";
    write_text(corpus / "safetensors" / "many_tensors.safetensors",
               safetensors(many + "}", std::string(150, '\x07')));
    // The linear-time generators of tests/test_hostile_inputs.cpp, at sizes that fit -max_len: a
    // JSON line of 1,000 keys, a pickle of 7,000 opcodes, a zip directory of 600 members.
    std::string keys = "{";
    for (int i = 0; i < 1000; ++i)
      keys += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
    write_text(corpus / "jsonl" / "many_keys.jsonl", keys + "}\n{\"k0\": 1}\n");
    fs::create_directories(corpus / "pickle");
    std::string opcodes = "\x80\x02](";
    for (int i = 0; i < 7000; ++i) opcodes += std::string("K") + static_cast<char>(i % 251);
    write_text(corpus / "pickle" / "many_opcodes.pkl", opcodes + "e.");
    {
      std::string zip, central;
      auto put16 = [](std::string& out, unsigned v) {
        out += static_cast<char>(v & 0xff);
        out += static_cast<char>((v >> 8) & 0xff);
      };
      auto put32 = [&](std::string& out, std::uint32_t v) {
        put16(out, v & 0xffff);
        put16(out, v >> 16);
      };
      constexpr unsigned kMembers = 600;
      for (unsigned i = 0; i < kMembers; ++i) {
        const std::string name = "m" + std::to_string(i) + ".npy";
        const auto offset = static_cast<std::uint32_t>(zip.size());
        put32(zip, 0x04034b50);
        for (unsigned field : {20u, 0u, 0u, 0u, 0u}) put16(zip, field);
        for (int k = 0; k < 3; ++k) put32(zip, 0);
        put16(zip, static_cast<unsigned>(name.size()));
        put16(zip, 0);
        zip += name;
        put32(central, 0x02014b50);
        for (unsigned field : {20u, 20u, 0u, 0u, 0u, 0u}) put16(central, field);
        for (int k = 0; k < 3; ++k) put32(central, 0);
        put16(central, static_cast<unsigned>(name.size()));
        for (int k = 0; k < 4; ++k) put16(central, 0);
        put32(central, 0);
        put32(central, offset);
        central += name;
      }
      const auto central_offset = static_cast<std::uint32_t>(zip.size());
      zip += central;
      put32(zip, 0x06054b50);
      for (unsigned field : {0u, 0u, kMembers, kMembers}) put16(zip, field);
      put32(zip, static_cast<std::uint32_t>(central.size()));
      put32(zip, central_offset);
      put16(zip, 0);
      write_text(corpus / "zip" / "many_members.zip", zip);
    }
    const std::string object = R"({"x":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})";
    write_text(corpus / "safetensors" / "near_miss_bom.safetensors",
               safetensors("\xEF\xBB\xBF" + object, "\x01\x02"));
    write_text(corpus / "safetensors" / "near_miss_nul_padding.safetensors",
               safetensors(object + std::string(3, '\0'), "\x01\x02"));
    write_text(corpus / "safetensors" / "near_miss_nul_garbage.safetensors",
               safetensors(object + std::string(1, '\0') + "garbage", "\x01\x02"));
    write_text(corpus / "safetensors" / "whitespace_around.safetensors",
               safetensors(" \n" + object + "\t  ", "\x01\x02"));
    write_text(corpus / "jsonl" / "token_ids.jsonl",
               "{\"ids\": [101, 7, 102], \"e\": [0.5, 1]}\n{\"ids\": [], \"e\": [1, 2]}\n");
    write_text(corpus / "jsonl" / "near_miss_nul.jsonl",
               std::string("{\"e\": [0.5, 1]}") + '\0' + "garbage\n");
    // The near-miss sets (tests/test_near_miss.cpp): each file sits on a border the reference
    // libraries draw, which is where the readers' new code paths are.
    auto copy_near_misses = [&](const char* format, const char* extension, const fs::path& to) {
      for (const auto& entry : fs::directory_iterator(data / "near_miss" / format))
        if (entry.path().extension() == extension)
          fs::copy_file(entry.path(), to / ("near_miss_" + entry.path().filename().string()),
                        fs::copy_options::overwrite_existing);
    };
    copy_near_misses("npy", ".npy", corpus / "npy");
    copy_near_misses("zip", ".npz", corpus / "npz");
    copy_near_misses("zip", ".npz", corpus / "zip");
    copy_near_misses("pt", ".pt", corpus / "pt");
    const fs::path paths = corpus / "field_path";
    fs::create_directories(paths);
    const char* flags[] = {"embedding=data.vectors",
                           "question_embedding=rows[*].q_emb",
                           "question=rows[*].q",
                           "text=cache.@keys",
                           "embedding=cache[\"k.2\"]",
                           "embedding=pair[0]",
                           "text=data.texts",
                           "extra_col=rows[*].n",
                           "embedding=.",
                           "embedding=[*]"};
    for (std::size_t i = 0; i < std::size(flags); ++i)
      write_text(paths / ("flag" + std::to_string(i) + ".txt"), flags[i]);
    // The pickles inside the zip-based .pt fixtures, and the legacy ones (a pickle comes first).
    const fs::path pickles = corpus / "pickle";
    fs::create_directories(pickles);
    std::vector<fs::path> pt_files;
    for (const fs::path dir : {data / "pt", data / "near_miss" / "pt"})
      for (const auto& entry : fs::directory_iterator(dir))
        if (entry.path().extension() == ".pt") pt_files.push_back(entry.path());
    std::sort(pt_files.begin(), pt_files.end());
    for (const fs::path& path : pt_files) {
      const bool near_miss = path.parent_path().filename() == "pt" &&
                             path.parent_path().parent_path().filename() == "near_miss";
      const auto file = detail::MappedFile::open(path.string());
      const std::string stem = (near_miss ? "near_miss_" : "") + path.stem().string();
      try {
        const detail::ZipArchive archive(file);
        fs::copy_file(path, corpus / "zip" / (stem + ".pt"), fs::copy_options::overwrite_existing);
        for (const auto& member : archive.members())
          if (member.name.ends_with("data.pkl")) {
            // The Storage owns an inflated member's bytes: keep it alive while they are used.
            const auto storage = archive.read(member);
            const auto bytes = storage.bytes;
            write_text(pickles / (stem + ".pkl"),
                       std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
          }
      } catch (const Error&) {
        if (path.stem().string().starts_with("legacy") ||
            path.stem().string().starts_with("malicious_legacy"))
          fs::copy_file(path, pickles / (stem + ".pkl"), fs::copy_options::overwrite_existing);
      }
    }
  } catch (const Error& error) {
    std::fprintf(stderr, "fuzz_make_corpus: %s\n", error.what());
    return 1;
  }
  return 0;
}
