// Parquet's dates and times (FORMAT.md, "Dates and times"): which leaves are timestamps, dates,
// times of day or INT96 timestamps, the ColumnTime each becomes, and how their physical values
// turn into the i64 gpucache stores. Kept apart from the integer and string mapping
// (parquet_reader.cpp's leaf_type) so that the time rules live in one place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "gpucache/column.hpp"
#include "parquet_metadata.hpp"

namespace gpucache::detail::parquet {

// How a time leaf's physical values become i64.
enum class TimeConversion : std::uint8_t {
  none,         // INT64 values as they are
  widen_int32,  // INT32 (DATE, TIME(MILLIS)) sign-extended
  int96_nanos,  // INT96: 8 bytes of nanoseconds in the day, then a 4-byte Julian day
};

struct TimeLeaf {
  ColumnTime time;
  TimeConversion conversion = TimeConversion::none;
  std::string refusal;  // set: the field is left out with this reason
};

// The time type of a leaf annotated TIMESTAMP, DATE or TIME (LogicalType, else the legacy
// ConvertedType), or of an INT96 leaf; nullopt for any other leaf.
std::optional<TimeLeaf> time_leaf(const SchemaElement& leaf);

// The bytes one INT96 value takes.
inline constexpr std::size_t kInt96Size = 12;

// `count` physical values at `in` (4, 8 or 12 bytes each, little-endian) as i64 at `out`.
void convert_time_values(TimeConversion conversion, const std::byte* in, std::uint64_t count,
                         std::byte* out);

}  // namespace gpucache::detail::parquet
