// On a machine with a GPU: columns whose rows are also in device memory (a CUDA tensor's,
// MemoryColumn::device_values) are checked there by the CUDA backend, with no host-to-device copy
// of those rows, and pack writes exactly the bytes of a pack that uploads them or runs on the CPU.
#include <doctest/doctest.h>

#include "device_view_support.hpp"

#ifdef GPUCACHE_TEST_CUDART
#include <cuda_runtime.h>

using namespace gpucache;

namespace {

// The bytes copied to a fresh allocation on the current device, freed at the end of the scope.
class DeviceCopy {
 public:
  DeviceCopy(const void* host, std::size_t bytes) {
    REQUIRE(cudaMalloc(&data_, bytes) == cudaSuccess);
    REQUIRE(cudaMemcpy(data_, host, bytes, cudaMemcpyHostToDevice) == cudaSuccess);
  }
  ~DeviceCopy() { cudaFree(data_); }
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;
  const void* get() const { return data_; }

 private:
  void* data_ = nullptr;
};

}  // namespace

TEST_CASE("rows in device memory are checked there, without an upload, to the same bytes") {
  test_support::ScratchDir scratch;
  const test_support::DevicePairTable table(20000);
  int device = -1;
  REQUIRE(cudaGetDevice(&device) == cudaSuccess);
  const DeviceCopy question(table.question.data(), table.question_bytes());
  const DeviceCopy answer(table.answer.data(), table.answer_bytes());
  using Table = test_support::DevicePairTable;

  const PackResult cpu = pack(Table::options(table.columns(), scratch / "cpu", Device::cpu));
  const PackResult uploaded =
      pack(Table::options(table.columns(), scratch / "uploaded", Device::cuda));
  const PackResult on_device = pack(Table::options(
      table.columns(question.get(), answer.get(), device), scratch / "on_device", Device::cuda));
  CHECK(uploaded.device.rfind("cuda", 0) == 0);
  CHECK(on_device.device.rfind("cuda", 0) == 0);
  // Without a view every row of both columns is uploaded; with one, none is.
  CHECK(uploaded.validation_uploaded_bytes >= table.question_bytes() + table.answer_bytes());
  CHECK(on_device.validation_uploaded_bytes == 0);
  CHECK(on_device.rows == cpu.rows);
  CHECK(on_device.dropped == cpu.dropped);
  test_support::check_same_dataset(scratch / "cpu", scratch / "uploaded");
  test_support::check_same_dataset(scratch / "cpu", scratch / "on_device");

  // A view on another device than the backend's is not read: the host rows are uploaded.
  const PackResult elsewhere =
      pack(Table::options(table.columns(question.get(), answer.get(), device + 1),
                          scratch / "elsewhere", Device::cuda));
  CHECK(elsewhere.validation_uploaded_bytes == uploaded.validation_uploaded_bytes);
  test_support::check_same_dataset(scratch / "cpu", scratch / "elsewhere");

  // A --part pack reads its share of the view: the window shifts device rows as it shifts host
  // rows.
  for (const char* name : {"cpu_part", "device_part"}) {
    const bool viewed = std::string(name) == "device_part";
    auto options = Table::options(
        viewed ? table.columns(question.get(), answer.get(), device) : table.columns(),
        scratch / name, viewed ? Device::cuda : Device::cpu);
    options.part = PartSpec{1, 3};
    const PackResult part = pack(options);
    if (viewed) CHECK(part.validation_uploaded_bytes == 0);
  }
  test_support::check_same_dataset(scratch / "cpu_part", scratch / "device_part");
}

TEST_CASE("a view that is not aligned for its type is uploaded instead") {
  test_support::ScratchDir scratch;
  const test_support::DevicePairTable table(3000);
  int device = -1;
  REQUIRE(cudaGetDevice(&device) == cudaSuccess);
  // One byte in: the f32 rows would be misaligned for the kernels' loads.
  std::vector<std::byte> shifted(table.question_bytes() + 1);
  std::memcpy(shifted.data() + 1, table.question.data(), table.question_bytes());
  const DeviceCopy question(shifted.data(), shifted.size());
  const DeviceCopy answer(table.answer.data(), table.answer_bytes());
  using Table = test_support::DevicePairTable;
  const PackResult cpu = pack(Table::options(table.columns(), scratch / "cpu", Device::cpu));
  const PackResult misaligned = pack(Table::options(
      table.columns(static_cast<const std::byte*>(question.get()) + 1, answer.get(), device),
      scratch / "misaligned", Device::cuda));
  // The question rows are uploaded (for their summaries and for the pair's dot products), the
  // answer rows read in place.
  CHECK(misaligned.validation_uploaded_bytes >= 2 * table.question_bytes());
  CHECK(misaligned.validation_uploaded_bytes < 2 * table.question_bytes() + table.answer_bytes());
  test_support::check_same_dataset(scratch / "cpu", scratch / "misaligned");
}
#endif
