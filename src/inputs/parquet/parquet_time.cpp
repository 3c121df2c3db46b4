#include "parquet_time.hpp"

#include <cstring>

namespace gpucache::detail::parquet {
namespace {

// The Julian day of 1970-01-01, and nanoseconds per day: an INT96 timestamp is
// (julian_day - kJulianEpoch) * kNanosPerDay + nanos_of_day, as Arrow computes it.
constexpr std::int64_t kJulianEpoch = 2440588;
constexpr std::int64_t kNanosPerDay = 86400LL * 1000 * 1000 * 1000;

std::optional<TimeUnit> unit_of(TimeUnitCode code) {
  switch (code) {
    case TimeUnitCode::millis:
      return TimeUnit::ms;
    case TimeUnitCode::micros:
      return TimeUnit::us;
    case TimeUnitCode::nanos:
      return TimeUnit::ns;
    default:
      return std::nullopt;
  }
}

TimeLeaf refuse(std::string why) {
  return {{}, TimeConversion::none, std::move(why)};
}

}  // namespace

std::optional<TimeLeaf> time_leaf(const SchemaElement& leaf) {
  using enum PhysicalType;
  const PhysicalType type = *leaf.type;
  if (type == int96) {
    // Impala's and old Spark's timestamps; Arrow reads them as timestamp[ns] without a zone.
    if (leaf.logical != Logical::none || leaf.converted)
      return refuse("an INT96 with an annotation");
    return TimeLeaf{{TimeKind::timestamp, TimeUnit::ns, ""}, TimeConversion::int96_nanos, ""};
  }
  auto on = [&](PhysicalType physical, ColumnTime time) -> TimeLeaf {
    if (type != physical)
      return refuse("a " + std::string(time_kind_name(time.kind)) +
                    " annotation on another physical type than " +
                    (physical == int32 ? "INT32" : "INT64"));
    return {time, physical == int32 ? TimeConversion::widen_int32 : TimeConversion::none, ""};
  };
  switch (leaf.logical) {
    case Logical::timestamp: {
      const auto unit = unit_of(leaf.time_unit);
      if (!unit) return refuse("a timestamp without a unit");
      return on(int64, {TimeKind::timestamp, *unit, leaf.time_adjusted_to_utc ? "UTC" : ""});
    }
    case Logical::time: {
      const auto unit = unit_of(leaf.time_unit);
      if (!unit) return refuse("a time of day without a unit");
      // Times of day are milliseconds in an INT32, finer units in an INT64. isAdjustedToUTC is
      // not kept: a time of day carries no zone in gpucache (nor in numpy).
      return on(*unit == TimeUnit::ms ? int32 : int64, {TimeKind::time, *unit, ""});
    }
    case Logical::date:
      return on(int32, {TimeKind::date, TimeUnit::D, ""});
    case Logical::none:
      break;
    default:
      return std::nullopt;
  }
  if (!leaf.converted) return std::nullopt;
  // Legacy ConvertedTypes, written before LogicalType: their timestamps are UTC-adjusted.
  switch (*leaf.converted) {
    case Converted::date:
      return on(int32, {TimeKind::date, TimeUnit::D, ""});
    case Converted::time_millis:
      return on(int32, {TimeKind::time, TimeUnit::ms, ""});
    case Converted::time_micros:
      return on(int64, {TimeKind::time, TimeUnit::us, ""});
    case Converted::timestamp_millis:
      return on(int64, {TimeKind::timestamp, TimeUnit::ms, "UTC"});
    case Converted::timestamp_micros:
      return on(int64, {TimeKind::timestamp, TimeUnit::us, "UTC"});
    default:
      return std::nullopt;
  }
}

void convert_time_values(TimeConversion conversion, const std::byte* in, std::uint64_t count,
                         std::byte* out) {
  switch (conversion) {
    case TimeConversion::none:
      std::memcpy(out, in, count * 8);
      return;
    case TimeConversion::widen_int32:
      for (std::uint64_t i = 0; i < count; ++i) {
        std::int32_t value;
        std::memcpy(&value, in + i * 4, 4);
        const std::int64_t wide = value;
        std::memcpy(out + i * 8, &wide, 8);
      }
      return;
    case TimeConversion::int96_nanos:
      for (std::uint64_t i = 0; i < count; ++i) {
        std::uint64_t nanos;
        std::uint32_t julian;
        std::memcpy(&nanos, in + i * kInt96Size, 8);
        std::memcpy(&julian, in + i * kInt96Size + 8, 4);
        // In unsigned arithmetic, so that a day far outside int64's range of nanoseconds wraps
        // as Arrow's does instead of being undefined behaviour.
        const std::uint64_t days =
            static_cast<std::uint64_t>(static_cast<std::int64_t>(julian) - kJulianEpoch);
        const std::uint64_t value = days * static_cast<std::uint64_t>(kNanosPerDay) + nanos;
        std::memcpy(out + i * 8, &value, 8);
      }
      return;
  }
}

}  // namespace gpucache::detail::parquet
