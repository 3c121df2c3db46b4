// Throughput of the validation pass (Validator::check_batch, then finish) on f32 rows already in
// host memory, against a single-threaded memcpy of the same bytes as the peer. Prints one JSON
// object; scripts/bench/cases_cpu.py and gpu_child.py run it.
//
//   gpucache_bench_validate --rows N --dim D [--columns 1|2] [--device cpu|cuda] [--threads T]
//                           [--reps R] [--batch-rows B]
//
// With --device cuda the rows still start in host memory (the public API takes host pointers),
// so the figure includes the host-to-device staging; a kernel-only figure needs a device-pointer
// entry point.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "gpucache/device.hpp"
#include "gpucache/validate.hpp"

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Deterministic values with row norms near 1 (uniform in [-a, a] with a = sqrt(3 / dim)).
void fill(std::vector<float>& data, std::uint64_t dim, std::uint64_t seed) {
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  const float scale = std::sqrt(3.0f / static_cast<float>(dim)) * 2.0f;
  for (auto& value : data) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    value = (static_cast<float>(state >> 40) / static_cast<float>(1ull << 24) - 0.5f) * scale;
  }
}

std::string json_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}

std::string samples_json(const std::vector<double>& samples) {
  std::string out = "[";
  for (std::size_t i = 0; i < samples.size(); ++i) {
    char text[64];
    std::snprintf(text, sizeof text, "%s%.9f", i ? ", " : "", samples[i]);
    out += text;
  }
  return out + "]";
}

}  // namespace

int run(int argc, char** argv) {
  std::uint64_t rows = 65536, dim = 1024, batch_rows = 16384;
  unsigned columns = 1, threads = 1, reps = 5;
  std::string device_name = "cpu";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--rows")
      rows = std::stoull(value);
    else if (flag == "--dim")
      dim = std::stoull(value);
    else if (flag == "--columns")
      columns = static_cast<unsigned>(std::stoul(value));
    else if (flag == "--device")
      device_name = value;
    else if (flag == "--threads")
      threads = static_cast<unsigned>(std::stoul(value));
    else if (flag == "--reps")
      reps = static_cast<unsigned>(std::stoul(value));
    else if (flag == "--batch-rows")
      batch_rows = std::stoull(value);
    else {
      std::fprintf(stderr, "unknown option %s\n", flag.c_str());
      return 2;
    }
  }
  if (columns < 1 || columns > 2 || rows == 0 || dim == 0 || reps == 0 || batch_rows == 0) {
    std::fprintf(stderr, "bad arguments\n");
    return 2;
  }
  const gpucache::Device device =
      device_name == "cuda" ? gpucache::Device::cuda : gpucache::Device::cpu;

  std::vector<std::vector<float>> data(columns, std::vector<float>(rows * dim));
  for (unsigned c = 0; c < columns; ++c) fill(data[c], dim, c + 1);
  std::vector<float> copy(rows * dim);
  const std::uint64_t bytes = rows * dim * sizeof(float) * columns;

  gpucache::ValidationOptions options;
  options.device = device;
  options.threads = threads;
  const std::vector<std::uint64_t> dims(columns, dim);

  std::vector<double> check, total, memcpy_seconds;
  std::uint64_t kept = 0;
  std::string description;
  for (unsigned rep = 0; rep <= reps; ++rep) {  // rep 0 is the warm-up
    const auto start = std::chrono::steady_clock::now();
    gpucache::Validator validator(options, dims);
    for (std::uint64_t first = 0; first < rows; first += batch_rows) {
      const std::uint64_t count = std::min(batch_rows, rows - first);
      const float* pointers[2] = {data[0].data() + first * dim,
                                  columns > 1 ? data[1].data() + first * dim : nullptr};
      validator.check_batch(pointers, first, count, 0);
    }
    const double checked = seconds_since(start);
    description = validator.device_description();
    const auto result = validator.finish();
    const double finished = seconds_since(start);
    kept = result.rows.size();

    const auto copy_start = std::chrono::steady_clock::now();
    for (unsigned c = 0; c < columns; ++c)
      std::memcpy(copy.data(), data[c].data(), rows * dim * sizeof(float));
    const double copied = seconds_since(copy_start);
    if (rep == 0) continue;
    check.push_back(checked);
    total.push_back(finished);
    memcpy_seconds.push_back(copied);
  }
  std::printf(
      "{\"rows\": %llu, \"dim\": %llu, \"columns\": %u, \"bytes\": %llu, \"threads\": %u, "
      "\"device\": \"%s\", \"description\": \"%s\", \"rows_kept\": %llu, \"check\": %s, "
      "\"check_and_finish\": %s, \"memcpy_1_thread\": %s}\n",
      static_cast<unsigned long long>(rows), static_cast<unsigned long long>(dim), columns,
      static_cast<unsigned long long>(bytes), threads, device_name.c_str(),
      json_escape(description).c_str(), static_cast<unsigned long long>(kept),
      samples_json(check).c_str(), samples_json(total).c_str(),
      samples_json(memcpy_seconds).c_str());
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "gpucache_bench_validate: %s\n", error.what());
    return 3;
  }
}
