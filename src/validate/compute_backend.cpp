#include "compute_backend.hpp"

#include <array>
#include <optional>

#include "gpucache/common/parallel.hpp"
#include "gpucache/error.hpp"
#include "gpucache/validate.hpp"
#include "kernels/validate_cpu.hpp"

#ifdef GPUCACHE_HAVE_CUDA
#include "gpucache/error.hpp"
#include "kernels/cuda_kernels.hpp"
#endif

namespace gpucache {

namespace {

// Each float storage type: the kernels' input type when the checks read rows of it, and their
// output type when rows are converted to it. (The validate module's one dtype table; the names and
// sizes are common's.)
struct FloatStorage {
  DType dtype;
  detail::InputType read_as;
  std::optional<detail::OutputType> converted_to;
};
constexpr std::array<FloatStorage, 4> kFloatStorage{{
    {DType::f32, detail::InputType::f32, detail::OutputType::f32},
    {DType::f16, detail::InputType::f16, detail::OutputType::f16},
    {DType::bf16, detail::InputType::bf16, detail::OutputType::bf16},
    // stored as the input holds it, never converted to
    {DType::f64, detail::InputType::f64, std::nullopt},
}};

const FloatStorage* float_storage(DType dtype) noexcept {
  for (const auto& entry : kFloatStorage)
    if (entry.dtype == dtype) return &entry;
  return nullptr;
}

}  // namespace

bool float_storage_dtype(DType dtype) noexcept {
  return float_storage(dtype) != nullptr;
}

bool float_conversion_dtype(DType dtype) noexcept {
  const FloatStorage* entry = float_storage(dtype);
  return entry && entry->converted_to;
}

}  // namespace gpucache

namespace gpucache::detail {

OutputType output_type_for(DType dtype, bool converting, const std::string& option) {
  const FloatStorage* entry = float_storage(dtype);
  if (entry && entry->converted_to) return *entry->converted_to;
  if (entry && !converting) return OutputType::f32;
  throw Error("", option,
              std::string(converting ? "rows are converted to " : "float columns are stored as ") +
                  std::string(kFloatConversionDTypes) + (converting ? "" : " or f64") + ", not " +
                  std::string(dtype_name(dtype)));
}

std::optional<InputType> input_type_for(DType dtype) noexcept {
  const FloatStorage* entry = float_storage(dtype);
  return entry ? std::optional(entry->read_as) : std::nullopt;
}

#ifdef GPUCACHE_HAVE_CUDA
// The kernels' table (resolve_device chose cuda only when it loaded) and the staging made by it.
struct ComputeBackend::Cuda {
  const CudaKernels& kernels;
  CudaStaging* staging;
  Cuda(const CudaKernels& table, unsigned threads)
      : kernels(table), staging(table.staging_create(threads)) {}
  ~Cuda() { kernels.staging_destroy(staging); }
  Cuda(const Cuda&) = delete;
  Cuda& operator=(const Cuda&) = delete;
};

namespace {

const CudaKernels& loaded_kernels() {
  std::string why;
  const CudaKernels* kernels = cuda_kernels(&why);
  if (!kernels) throw Error("", "CUDA", why);
  return *kernels;
}

// Device rows the staging's device can read as they are: on that device and aligned for the
// kernels' loads. Anything else (another GPU, a misaligned view) is uploaded from the host copy.
const std::byte* usable_device_rows(const CudaKernels& kernels, const CudaStaging& staging,
                                    DeviceRows device, std::size_t value_size) {
  if (!device.rows || device.ordinal != kernels.staging_device(staging)) return nullptr;
  if (reinterpret_cast<std::uintptr_t>(device.rows) % value_size != 0) return nullptr;
  return device.rows;
}

}  // namespace
#else
struct ComputeBackend::Cuda {};
#endif

ComputeBackend::ComputeBackend(Device requested, unsigned threads)
    : threads_(resolve_thread_count(threads)) {
  device_ = resolve_device(requested, &description_);
}

ComputeBackend::~ComputeBackend() = default;
ComputeBackend::ComputeBackend(ComputeBackend&&) noexcept = default;
ComputeBackend& ComputeBackend::operator=(ComputeBackend&&) noexcept = default;

void ComputeBackend::summarize_rows(const SummaryParams& params, const std::byte* rows,
                                    std::uint64_t count, ColumnSummary* out, DeviceRows device) {
#ifdef GPUCACHE_HAVE_CUDA
  if (device_ == Device::cuda) {
    if (!cuda_) cuda_ = std::make_unique<Cuda>(loaded_kernels(), threads_);
    cuda_->kernels.summarize_rows(
        *cuda_->staging, params, rows,
        usable_device_rows(cuda_->kernels, *cuda_->staging, device, input_size(params.input)),
        count, out);
    return;
  }
#else
  (void)device;
#endif
  cpu_summarize_rows(params, rows, count, out, threads_);
}

void ComputeBackend::summarize_row_pointers(const SummaryParams& params,
                                            const std::byte* const* rows, std::uint64_t count,
                                            ColumnSummary* out) {
  cpu_summarize_row_pointers(params, rows, count, out, threads_);
}

void ComputeBackend::dot_rows(const DotParams& params, const std::byte* a, const std::byte* b,
                              std::uint64_t count, double* out, DeviceRows device_a,
                              DeviceRows device_b) {
#ifdef GPUCACHE_HAVE_CUDA
  if (device_ == Device::cuda) {
    if (!cuda_) cuda_ = std::make_unique<Cuda>(loaded_kernels(), threads_);
    cuda_->kernels.dot_rows(
        *cuda_->staging, params, a,
        usable_device_rows(cuda_->kernels, *cuda_->staging, device_a, input_size(params.a)), b,
        usable_device_rows(cuda_->kernels, *cuda_->staging, device_b, input_size(params.b)), count,
        out);
    return;
  }
#else
  (void)device_a;
  (void)device_b;
#endif
  cpu_dot_rows(params, a, b, count, out, threads_);
}

void ComputeBackend::dot_row_pointers(const DotParams& params, const std::byte* const* a,
                                      const std::byte* const* b, std::uint64_t count, double* out) {
  cpu_dot_row_pointers(params, a, b, count, out, threads_);
}

ConvertCounts ComputeBackend::convert_rows(const ConvertParams& params, const float* in,
                                           std::uint64_t rows, std::byte* out) {
#ifdef GPUCACHE_HAVE_CUDA
  if (device_ == Device::cuda) {
    if (!cuda_) cuda_ = std::make_unique<Cuda>(loaded_kernels(), threads_);
    return cuda_->kernels.convert_rows(*cuda_->staging, params, in, rows, out);
  }
#endif
  return cpu_convert_rows(params, in, rows, out, threads_);
}

std::uint64_t ComputeBackend::uploaded_bytes() const noexcept {
#ifdef GPUCACHE_HAVE_CUDA
  if (cuda_) return cuda_->kernels.staging_uploaded_bytes(*cuda_->staging);
#endif
  return 0;
}

void ComputeBackend::sort_by_key(std::uint64_t* keys, std::uint64_t* values, std::uint64_t count) {
#ifdef GPUCACHE_HAVE_CUDA
  if (device_ == Device::cuda && loaded_kernels().sort_by_key(keys, values, count)) return;
#endif
  cpu_sort_by_key(keys, values, count, threads_);
}

std::uint64_t ComputeBackend::order_selected_rows(const std::uint8_t* selected, std::uint64_t count,
                                                  bool by_key, std::uint64_t seed,
                                                  std::uint64_t purpose, std::uint64_t* out) {
#ifdef GPUCACHE_HAVE_CUDA
  std::uint64_t written = 0;
  if (device_ == Device::cuda &&
      loaded_kernels().order_selected_rows(selected, count, by_key, seed, purpose, out, &written))
    return written;
#endif
  return cpu_order_selected_rows(selected, count, by_key, seed, purpose, out, threads_);
}

}  // namespace gpucache::detail
