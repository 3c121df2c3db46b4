// Columns in memory with a device view (a CUDA tensor's rows, MemoryColumn::device_values): only
// the CUDA validation backend reads it, so a pack validated on the CPU never touches it and writes
// the bytes a pack without it writes. tests/test_gpu_pack_device_view.cpp covers the CUDA side.
#include <doctest/doctest.h>

#include "device_view_support.hpp"
#include "gpucache/error.hpp"
#include "pack_inputs.hpp"
#include "pack_part.hpp"
#include "pack_source.hpp"

using namespace gpucache;

TEST_CASE("a device view is ignored when validation runs on the CPU") {
  test_support::ScratchDir scratch;
  const test_support::DevicePairTable table(4000);
  const PackResult host =
      pack(test_support::DevicePairTable::options(table.columns(), scratch / "host", Device::cpu));
  // Pointers that fault if dereferenced: the CPU path must not read them.
  const auto* bogus = reinterpret_cast<const void*>(std::uintptr_t{64});
  const PackResult viewed = pack(test_support::DevicePairTable::options(
      table.columns(bogus, bogus, 0), scratch / "viewed", Device::cpu));
  // Something is dropped for every reason the table plants, so the comparison covers them.
  for (const auto reason : {DropReason::nan_inf, DropReason::zero, DropReason::norm_high,
                            DropReason::duplicate, DropReason::pair_cos}) {
    CAPTURE(drop_reason_name(reason));
    CHECK(host.dropped[static_cast<std::size_t>(reason)] > 0);
  }
  CHECK(viewed.rows == host.rows);
  CHECK(viewed.device == "cpu");
  CHECK(viewed.validation_uploaded_bytes == 0);
  test_support::check_same_dataset(scratch / "host", scratch / "viewed");
}

TEST_CASE("a device view is taken for tensor columns only") {
  const std::vector<std::int64_t> offsets{0, 2, 3};
  const std::vector<std::int32_t> values{1, 2, 3};
  MemoryColumn sequence{
      "tokens", ColumnKind::sequence, DType::i32, 2, {}, std::as_bytes(std::span(values)), offsets};
  sequence.device_values = reinterpret_cast<const void*>(std::uintptr_t{64});
  sequence.device_ordinal = 0;
  CHECK_THROWS_WITH_AS(memory_input({sequence}),
                       doctest::Contains("memory:tokens: device values: are taken for tensor "
                                         "columns only, not sequence columns"),
                       Error);
}

TEST_CASE("a device view reaches pack's inputs row for row, --part windows included") {
  const test_support::DevicePairTable table(3000);
  // Stand-ins for device memory: only their addresses are compared, nothing is read.
  const std::vector<std::byte> question(1), answer(1);
  PackOptions options;
  options.memory_columns = table.columns(question.data(), answer.data(), 2);
  auto sources = detail::open_sources(options);
  const std::uint64_t pitch = test_support::DevicePairTable::kDim * 2;  // an answer row (bf16)
  int ordinal = -1;
  {
    const detail::PackInputs whole(sources);
    CHECK(whole.device_rows(1, 10, 5, &ordinal) == answer.data() + 10 * pitch);
    CHECK(ordinal == 2);
  }
  // Part 1 of 3 holds rows [1000, 2000): its row 0 is row 1000 of the view.
  const detail::PackInputs part(detail::part_row_ranges(std::move(sources), PartSpec{1, 3}));
  REQUIRE(part.total_rows() == 1000);
  ordinal = -1;
  CHECK(part.device_rows(1, 7, 1, &ordinal) == answer.data() + 1007 * pitch);
  CHECK(ordinal == 2);
  // Columns without a view have none.
  options.memory_columns = table.columns();
  const detail::PackInputs plain(detail::open_sources(options));
  CHECK(plain.device_rows(0, 0, 1, &ordinal) == nullptr);
}
