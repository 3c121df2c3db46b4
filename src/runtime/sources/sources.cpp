#include "sources.hpp"

#include "gpucache/common/cuda_watch.hpp"
#include "source_mapped.hpp"
#include "source_pread.hpp"

namespace gpucache::runtime::detail {

SourceOptions source_options(const CopyPlan& plan, const CudaApi& cuda, const std::string& where) {
  return {&cuda, plan.verify, plan.threads, plan.staging_bytes, where};
}

LoadStats deliver_plan(const CopyPlan& plan, ReadMode mode, Destination& destination,
                       const CudaApi& cuda, const std::string& where) {
  const SourceOptions options = source_options(plan, cuda, where);
  LoadStats stats;
  std::span<const ShardCopies> rest = plan.copies;
  if (mode != ReadMode::pread) {
    MappedSource mapped(options, mode == ReadMode::register_mmap ? MappedSource::OnRefusal::fail
                                                                 : MappedSource::OnRefusal::stop);
    rest = rest.subspan(mapped.deliver(rest, destination, stats));
    cuda_debug("%s: %zu of %zu shards delivered from their registered mappings", where.c_str(),
               plan.copies.size() - rest.size(), plan.copies.size());
  }
  if (!rest.empty()) {
    cuda_debug("%s: %zu shards through pread staging", where.c_str(), rest.size());
    PreadSource(options).deliver(rest, destination, stats);
  }
  return stats;
}

}  // namespace gpucache::runtime::detail
