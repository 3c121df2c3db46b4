// The CUDA backend of validation and conversion against the CPU reference, byte for byte, on
// random and adversarial rows, for each step and for the whole two-pass pipeline. Runs only where
// a CUDA device is usable (gpu_test_main.cpp exits 77 elsewhere).
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "compute_backend.hpp"
#include "gpucache/common/float_convert.hpp"
#include "gpucache/validate.hpp"
#include "kernels/row_checks.cuh"

using namespace gpucache;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// Random rows with norms spread over [0.05, 150] (some outside the default bounds), and every
// 13th row replaced by an adversarial one.
std::vector<float> make_rows(std::uint64_t rows, std::uint64_t dim, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<double> log_norm(std::log(0.05), std::log(150.0));
  std::vector<float> values(rows * dim);
  for (std::uint64_t r = 0; r < rows; ++r) {
    float* row = values.data() + r * dim;
    double sum = 0;
    for (std::uint64_t i = 0; i < dim; ++i) {
      row[i] = normal(rng);
      sum += double(row[i]) * row[i];
    }
    const double scale = std::exp(log_norm(rng)) / std::sqrt(sum);
    for (std::uint64_t i = 0; i < dim; ++i) row[i] = float(row[i] * scale);
    switch (r % 13 == 12 ? (r / 13) % 9 : 99) {
      case 0:
        row[rng() % dim] = kNan;
        break;
      case 1:
        row[rng() % dim] = -kInf;
        break;
      case 2:
        std::fill_n(row, dim, 0.0f);
        break;
      case 3:
        std::fill_n(row, dim, -0.0f);
        break;
      case 4:
        for (std::uint64_t i = 0; i < dim; ++i) row[i] = 1e-40f * float(i % 3);
        break;
      case 5:
        row[0] = 1e38f;
        if (dim > 1) row[1] = -3e38f;
        break;
      case 6:
        row[rng() % dim] = 70000.0f;
        break;  // overflows f16 only
      case 7:
        row[rng() % dim] = 1e-9f;
        break;  // flushes to zero in f16
      case 8:
        if (r >= 26) std::memcpy(row, row - 26 * dim, dim * 4);
        break;  // duplicate
      default:
        break;
    }
  }
  return values;
}

// Byte-for-byte equality of two arrays of fixed-layout records (summaries, dot products).
template <typename Record>
void check_same_records(const std::vector<Record>& cpu, const std::vector<Record>& cuda) {
  REQUIRE(cpu.size() == cuda.size());
  std::uint64_t differing = 0, first = ~0ull;
  for (std::size_t r = 0; r < cpu.size(); ++r)
    if (std::memcmp(&cpu[r], &cuda[r], sizeof(Record)) != 0) {
      ++differing;
      first = std::min<std::uint64_t>(first, r);
    }
  INFO("first differing row: ", first);
  CHECK(differing == 0);
}

// The rows of `values` widened-and-narrowed into `input`'s encoding (f16/bf16 by the conversion
// kernel's rounding, f64 exactly; f64_kept slightly off them), so every input type sees the same
// adversarial rows.
std::vector<std::byte> encode_rows(const std::vector<float>& values, detail::InputType input) {
  std::vector<std::byte> bytes(values.size() * detail::input_size(input));
  for (std::size_t i = 0; i < values.size(); ++i) {
    switch (input) {
      case detail::InputType::f32:
        std::memcpy(bytes.data() + 4 * i, &values[i], 4);
        break;
      case detail::InputType::f64: {
        const double wide = values[i];
        std::memcpy(bytes.data() + 8 * i, &wide, 8);
        break;
      }
      case detail::InputType::f64_kept: {
        // Values f32 cannot hold, so the f64 sums (rounded products, never fused) are compared.
        const double wide = static_cast<double>(values[i]) * (1.0 + 0x1p-40);
        std::memcpy(bytes.data() + 8 * i, &wide, 8);
        break;
      }
      case detail::InputType::f16:
      case detail::InputType::bf16: {
        const auto output =
            input == detail::InputType::f16 ? detail::OutputType::f16 : detail::OutputType::bf16;
        const std::uint16_t bits = detail::convert_bits(detail::float_bits(values[i]), output).bits;
        std::memcpy(bytes.data() + 2 * i, &bits, 2);
        break;
      }
    }
  }
  return bytes;
}

bool same_bits(double a, double b) {
  return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

void check_same_results(const ValidationResult& cpu, const ValidationResult& cuda) {
  CHECK(cuda.device == Device::cuda);
  CHECK(cpu.rows == cuda.rows);
  CHECK(cpu.rows_checked == cuda.rows_checked);
  CHECK(cpu.reasons == cuda.reasons);
  CHECK(cpu.sampled_out == cuda.sampled_out);
  CHECK(cpu.rows_clamped == cuda.rows_clamped);
  REQUIRE(cpu.sources.size() == cuda.sources.size());
  for (std::size_t s = 0; s < cpu.sources.size(); ++s) {
    CHECK(cpu.sources[s].source == cuda.sources[s].source);
    CHECK(cpu.sources[s].rows == cuda.sources[s].rows);
    CHECK(cpu.sources[s].reasons == cuda.sources[s].reasons);
    CHECK(cpu.sources[s].sampled_out == cuda.sources[s].sampled_out);
  }
  REQUIRE(cpu.rejects.size() == cuda.rejects.size());
  for (std::size_t i = 0; i < cpu.rejects.size(); ++i) {
    const auto &a = cpu.rejects[i], &b = cuda.rejects[i];
    CHECK((a.row == b.row && a.source == b.source && a.source_row == b.source_row &&
           a.reason == b.reason && a.column == b.column && same_bits(a.norm, b.norm) &&
           same_bits(a.pair_cosine, b.pair_cosine)));
  }
  REQUIRE(cpu.norms.size() == cuda.norms.size());
  for (std::size_t c = 0; c < cpu.norms.size(); ++c) {
    CHECK(cpu.norms[c].count == cuda.norms[c].count);
    CHECK(same_bits(cpu.norms[c].min, cuda.norms[c].min));
    CHECK(same_bits(cpu.norms[c].max, cuda.norms[c].max));
    CHECK(same_bits(cpu.norms[c].mean, cuda.norms[c].mean));
    CHECK(cpu.norms[c].bin_counts == cuda.norms[c].bin_counts);
  }
}

}  // namespace

TEST_CASE("check pass: CUDA summaries and dot products equal the CPU reference byte for byte") {
  detail::ComputeBackend cpu(Device::cpu, 0), cuda(Device::cuda, 0);
  for (const std::uint64_t dim : {1, 5, 31, 32, 33, 384, 768, 1000, 4096}) {
    const std::uint64_t rows = dim >= 1000 ? 2000 : 5000;
    const auto q = make_rows(rows, dim, dim), a = make_rows(rows, dim, dim + 1);
    for (const auto input :
         {detail::InputType::f32, detail::InputType::f16, detail::InputType::bf16,
          detail::InputType::f64, detail::InputType::f64_kept}) {
      const auto q_bytes = encode_rows(q, input), a_bytes = encode_rows(a, input);
      for (const bool hash : {false, true}) {
        const detail::SummaryParams params{dim, input, hash};
        std::vector<detail::ColumnSummary> on_cpu(rows), on_cuda(rows);
        cpu.summarize_rows(params, q_bytes.data(), rows, on_cpu.data());
        cuda.summarize_rows(params, q_bytes.data(), rows, on_cuda.data());
        INFO("dim ", dim, " input ", int(input), " hash ", hash);
        check_same_records(on_cpu, on_cuda);
      }
      const detail::DotParams dot{dim, input, detail::InputType::f32};
      const auto a_f32 = encode_rows(a, detail::InputType::f32);
      std::vector<double> dot_cpu(rows), dot_cuda(rows);
      cpu.dot_rows(dot, q_bytes.data(), a_f32.data(), rows, dot_cpu.data());
      cuda.dot_rows(dot, q_bytes.data(), a_f32.data(), rows, dot_cuda.data());
      INFO("dot: dim ", dim, " input ", int(input));
      check_same_records(dot_cpu, dot_cuda);
    }
  }
}

TEST_CASE("check pass over many chunks and both staging slots") {
  detail::ComputeBackend cpu(Device::cpu, 0), cuda(Device::cuda, 0);
  const std::uint64_t rows = 300000, dim = 256;  // ~300 MB: several 64 MiB chunks
  const auto q = make_rows(rows, dim, 77);
  const auto bytes = encode_rows(q, detail::InputType::f32);
  const detail::SummaryParams params{dim, detail::InputType::f32, 1};
  std::vector<detail::ColumnSummary> on_cpu(rows), on_cuda(rows);
  cpu.summarize_rows(params, bytes.data(), rows, on_cpu.data());
  cuda.summarize_rows(params, bytes.data(), rows, on_cuda.data());
  check_same_records(on_cpu, on_cuda);
  cuda.summarize_rows(params, bytes.data(), 17, on_cuda.data());  // a tiny batch after a large one
  on_cuda.resize(17);
  on_cpu.resize(17);
  check_same_records(on_cpu, on_cuda);
}

TEST_CASE("conversion kernel: byte-identical output and identical counts") {
  detail::ComputeBackend cpu(Device::cpu, 0), cuda(Device::cuda, 0);
  for (const std::uint64_t dim : {1, 33, 384, 1000}) {
    const std::uint64_t rows = 3000;
    auto in = make_rows(rows, dim, dim * 3);
    for (auto& x :
         in)  // the converter sees only finite rows after validation, but must be exact on any
      if (std::isnan(x)) x = 0.5f;
    for (const auto output :
         {detail::OutputType::f32, detail::OutputType::f16, detail::OutputType::bf16}) {
      for (const bool normalize : {false, true}) {
        for (const auto mode : {detail::OverflowMode::clamp, detail::OverflowMode::error}) {
          detail::ConvertParams params;
          params.dim = dim;
          params.padded_dim = (dim + 15) / 16 * 16 + (dim == 1 ? 16 : 0);
          params.output = output;
          params.normalize = normalize;
          params.on_overflow = mode;
          const std::size_t bytes =
              rows * params.padded_dim * (output == detail::OutputType::f32 ? 4 : 2);
          std::vector<std::byte> on_cpu(bytes, std::byte{0x5a}), on_cuda(bytes, std::byte{0xa5});
          const auto cpu_counts = cpu.convert_rows(params, in.data(), rows, on_cpu.data());
          const auto cuda_counts = cuda.convert_rows(params, in.data(), rows, on_cuda.data());
          INFO("dim ", dim, " output ", int(output), " normalize ", normalize, " mode ", int(mode));
          CHECK(on_cpu == on_cuda);
          CHECK(cpu_counts.overflowed == cuda_counts.overflowed);
          CHECK(cpu_counts.flushed == cuda_counts.flushed);
          CHECK(cpu_counts.first_overflow_row == cuda_counts.first_overflow_row);
          if (output == detail::OutputType::f16 && !normalize) CHECK(cpu_counts.overflowed > 0);
        }
      }
    }
  }
}

TEST_CASE("ordering: CUB sort and compaction equal the CPU sort") {
  detail::ComputeBackend cpu(Device::cpu, 0), cuda(Device::cuda, 0);
  std::mt19937_64 rng(3);
  const std::uint64_t count = 1'000'003;
  std::vector<std::uint64_t> keys(count), values(count);
  for (std::uint64_t i = 0; i < count; ++i) {
    keys[i] = rng() % 100000;  // many equal keys: ties must fall back to the value
    values[i] = i * 3;
  }
  auto cpu_keys = keys, cpu_values = values;
  cpu.sort_by_key(cpu_keys.data(), cpu_values.data(), count);
  cuda.sort_by_key(keys.data(), values.data(), count);
  CHECK(cpu_keys == keys);
  CHECK(cpu_values == values);

  std::vector<std::uint8_t> selected(count);
  for (auto& flag : selected) flag = rng() % 3 != 0;
  for (const bool by_key : {false, true}) {
    std::vector<std::uint64_t> on_cpu(count), on_cuda(count);
    const auto kept_cpu = cpu.order_selected_rows(selected.data(), count, by_key, 9,
                                                  detail::kPurposeShuffle, on_cpu.data());
    const auto kept_cuda = cuda.order_selected_rows(selected.data(), count, by_key, 9,
                                                    detail::kPurposeShuffle, on_cuda.data());
    CHECK(kept_cpu == kept_cuda);
    CHECK(on_cpu == on_cuda);
  }
}

TEST_CASE("the two-pass pipeline gives the same rows, report and bytes on CUDA and CPU") {
  const std::uint64_t rows = 40000, dim = 384;
  const auto q = make_rows(rows, dim, 1), a = make_rows(rows, dim, 2);
  for (const int variant : {0, 1, 2}) {
    ValidationOptions options;
    options.dedup = true;
    options.seed = 1234;
    options.shuffle = variant != 2;
    options.normalize = variant == 1;
    options.output_dtype = variant == 2 ? DType::bf16 : DType::f16;
    options.on_overflow = variant == 0 ? OverflowPolicy::clamp : OverflowPolicy::drop;
    options.sample_fraction = 0.8;
    options.max_rows_per_source = 12000;
    const bool dialogue = variant != 1;
    if (dialogue) options.pair_cos_max = 0.1;
    const std::vector<std::uint64_t> dims =
        dialogue ? std::vector<std::uint64_t>{dim, dim} : std::vector<std::uint64_t>{dim};
    const auto fetch = [&](std::uint64_t row, std::size_t column, std::span<float> out) {
      std::memcpy(out.data(), (column ? a : q).data() + row * dim, out.size_bytes());
    };
    const auto validate = [&](Device device) {
      options.device = device;
      Validator validator(options, dims);
      for (std::uint64_t first = 0; first < rows; first += 7000) {
        const std::uint64_t count = std::min<std::uint64_t>(7000, rows - first);
        const float* pointers[2] = {q.data() + first * dim, a.data() + first * dim};
        validator.check_batch(pointers, first, count, first < 21000 ? 0 : 1);
      }
      return validator.finish(fetch);
    };
    // Rows lying apart (a tensor each): the CPU checks them in place, CUDA gathers them first.
    const auto validate_apart = [&](Device device) {
      options.device = device;
      Validator validator(options, dims);
      std::vector<const float*> q_rows(rows), a_rows(rows);
      for (std::uint64_t r = 0; r < rows; ++r) {
        q_rows[r] = q.data() + r * dim;
        a_rows[r] = a.data() + r * dim;
      }
      for (std::uint64_t first = 0; first < rows; first += 7000) {
        const std::uint64_t count = std::min<std::uint64_t>(7000, rows - first);
        const float* const* columns[2] = {q_rows.data() + first, a_rows.data() + first};
        validator.check_rows(columns, first, count, first < 21000 ? 0 : 1);
      }
      return validator.finish(fetch);
    };
    const ValidationResult on_cpu = validate(Device::cpu);
    const ValidationResult on_cuda = validate(Device::cuda);
    INFO("variant ", variant);
    check_same_results(on_cpu, on_cuda);
    check_same_results(on_cpu, validate_apart(Device::cpu));
    check_same_results(on_cpu, validate_apart(Device::cuda));
    CHECK(on_cpu.rows.size() > 1000);

    // Pass 2 on the kept rows in output order, as pack does.
    std::vector<float> gathered(on_cpu.rows.size() * dim);
    for (std::size_t i = 0; i < on_cpu.rows.size(); ++i)
      std::memcpy(gathered.data() + i * dim, q.data() + on_cpu.rows[i] * dim, dim * 4);
    ConversionOptions cpu_options = conversion_options(options, 400);
    cpu_options.device = Device::cpu;
    ConversionOptions cuda_options = cpu_options;
    cuda_options.device = Device::cuda;
    RowConverter cpu_converter(cpu_options), cuda_converter(cuda_options);
    CHECK(cuda_converter.device() == Device::cuda);
    std::vector<std::byte> cpu_out(on_cpu.rows.size() * cpu_converter.row_bytes(dim));
    std::vector<std::byte> cuda_out(cpu_out.size());
    const auto cpu_counts =
        cpu_converter.convert(gathered.data(), on_cpu.rows.size(), dim, cpu_out.data());
    const auto cuda_counts =
        cuda_converter.convert(gathered.data(), on_cpu.rows.size(), dim, cuda_out.data());
    CHECK(cpu_out == cuda_out);
    CHECK(cpu_counts.overflowed == cuda_counts.overflowed);
    CHECK(cpu_counts.flushed_to_zero == cuda_counts.flushed_to_zero);
  }
}

TEST_CASE("N columns of mixed float types, each with its own checks: CUDA equals the CPU") {
  const std::uint64_t rows = 20000;
  // Columns: f32 [384] embedding (all checks), f16 [63] tensor (finite), bf16 [7] tensor (norm with
  // open bounds), f64 [33] embedding (finite, norm), f32 [1] weight stored as bf16 (no checks:
  // overflow only), and a second f32 [384] embedding paired with the first.
  const std::vector<std::uint64_t> values{384, 63, 7, 33, 1, 384};
  const std::vector<detail::InputType> inputs{detail::InputType::f32,  detail::InputType::f16,
                                              detail::InputType::bf16, detail::InputType::f64,
                                              detail::InputType::f32,  detail::InputType::f32};
  const std::vector<DType> dtypes{DType::f32, DType::f16, DType::bf16,
                                  DType::f64, DType::f32, DType::f32};
  std::vector<std::vector<std::byte>> data;
  for (std::size_t c = 0; c < values.size(); ++c)
    data.push_back(encode_rows(make_rows(rows, values[c], 100 + c), inputs[c]));
  ValidationOptions options;
  options.seed = 5;
  options.shuffle = true;
  options.on_overflow = OverflowPolicy::drop;
  options.pair_cos_min = -0.05;
  options.pair_cos_max = 0.05;
  const double inf = std::numeric_limits<double>::infinity();
  options.columns = std::vector<ColumnChecks>{
      {"a", {Check::finite, Check::nonzero, Check::norm, Check::pair_cos, Check::dedup}},
      {"b", {Check::finite}},
      {"c", {Check::norm}, 0.0, inf},
      {"d", {Check::finite, Check::norm}, 0.5, 50.0},
      {"e", {}},
      {"f", {Check::finite, Check::nonzero, Check::norm, Check::pair_cos}}};
  std::vector<ColumnLayout> layouts;
  for (std::size_t c = 0; c < values.size(); ++c)
    layouts.emplace_back(values[c], c == 4 ? DType::bf16 : DType::f32);
  const auto fetch = [&](std::uint64_t row, std::size_t column, std::span<float> out) {
    const std::size_t row_bytes = values[column] * detail::input_size(inputs[column]);
    detail::widen_to_f32(dtypes[column], data[column].data() + row * row_bytes, out.data(),
                         out.size());
  };
  const auto validate = [&](Device device) {
    options.device = device;
    Validator validator(options, layouts);
    for (std::uint64_t first = 0; first < rows; first += 6000) {
      const std::uint64_t count = std::min<std::uint64_t>(6000, rows - first);
      std::vector<ColumnBatch> batch;
      for (std::size_t c = 0; c < values.size(); ++c)
        batch.push_back(
            {data[c].data() + first * values[c] * detail::input_size(inputs[c]), dtypes[c]});
      validator.check_batch(batch, first, count, first < 10000 ? 0 : 1);
    }
    return validator.finish(fetch);
  };
  const ValidationResult on_cpu = validate(Device::cpu);
  check_same_results(on_cpu, validate(Device::cuda));
  CHECK(on_cpu.rows.size() > 1000);
  CHECK(on_cpu.norms.size() == 4);  // a, c, d, f
}
