#include "gpucache/column.hpp"

#include <iterator>

#include "gpucache/column_name.hpp"
#include "gpucache/common/utf8.hpp"

namespace gpucache {

namespace {

bool forbidden_byte(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return byte < 0x20 || byte == 0x7f || c == '/';
}

}  // namespace

bool valid_column_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > kMaxColumnNameBytes || name.front() == '@' || name == "." ||
      name == "..")
    return false;
  for (char c : name)
    if (forbidden_byte(c)) return false;
  return detail::valid_utf8(name);
}

std::string legal_column_name(std::string_view name) {
  std::string legal;
  legal.reserve(name.size() + 1);
  if (!name.empty() && name.front() == '@') legal += '_';
  for (std::size_t pos = 0; pos < name.size();) {
    const std::size_t length = detail::utf8_sequence_length(name, pos);
    const bool replaced = length == 0 || (length == 1 && forbidden_byte(name[pos]));
    // Cut before a character that would not fit whole: a name stays UTF-8.
    if (legal.size() + (replaced ? 1 : length) > kMaxColumnNameBytes) break;
    if (replaced) {
      legal += '_';
      ++pos;
    } else {
      legal.append(name.substr(pos, length));
      pos += length;
    }
  }
  if (legal == "." || legal == "..") legal.assign(legal.size(), '_');
  return legal;
}

std::string_view column_kind_name(ColumnKind kind) noexcept {
  switch (kind) {
    case ColumnKind::tensor:
      return "tensor";
    case ColumnKind::text:
      return "text";
    case ColumnKind::sequence:
      return "sequence";
  }
  return "unknown";
}

std::optional<ColumnKind> parse_column_kind(std::string_view name) noexcept {
  for (ColumnKind kind : {ColumnKind::tensor, ColumnKind::text, ColumnKind::sequence})
    if (column_kind_name(kind) == name) return kind;
  return std::nullopt;
}

std::string_view column_role_name(ColumnRole role) noexcept {
  switch (role) {
    case ColumnRole::embedding:
      return "embedding";
    case ColumnRole::tensor:
      return "tensor";
    case ColumnRole::sequence:
      return "sequence";
    case ColumnRole::text:
      return "text";
  }
  return "unknown";
}

std::optional<ColumnRole> parse_column_role(std::string_view name) noexcept {
  for (ColumnRole role :
       {ColumnRole::embedding, ColumnRole::tensor, ColumnRole::sequence, ColumnRole::text})
    if (column_role_name(role) == name) return role;
  return std::nullopt;
}

namespace {
constexpr std::string_view kTimeKindNames[] = {"timestamp", "date", "time", "duration"};
constexpr std::string_view kTimeUnitNames[] = {"s", "ms", "us", "ns", "D"};
}  // namespace

std::string_view time_kind_name(TimeKind kind) noexcept {
  const auto index = static_cast<std::size_t>(kind);
  return index < std::size(kTimeKindNames) ? kTimeKindNames[index] : "unknown";
}

std::optional<TimeKind> parse_time_kind(std::string_view name) noexcept {
  for (std::size_t i = 0; i < std::size(kTimeKindNames); ++i)
    if (kTimeKindNames[i] == name) return static_cast<TimeKind>(i);
  return std::nullopt;
}

std::string_view time_unit_name(TimeUnit unit) noexcept {
  const auto index = static_cast<std::size_t>(unit);
  return index < std::size(kTimeUnitNames) ? kTimeUnitNames[index] : "unknown";
}

std::optional<TimeUnit> parse_time_unit(std::string_view name) noexcept {
  for (std::size_t i = 0; i < std::size(kTimeUnitNames); ++i)
    if (kTimeUnitNames[i] == name) return static_cast<TimeUnit>(i);
  return std::nullopt;
}

bool time_is_valid(const ColumnTime& time) noexcept {
  if (!time.tz.empty() && time.kind != TimeKind::timestamp) return false;
  if (time.unit == TimeUnit::D) return time.kind == TimeKind::date;
  // A date64 (Arrow) is milliseconds since the epoch, so a date may have a finer unit too.
  return static_cast<std::size_t>(time.kind) < std::size(kTimeKindNames) &&
         static_cast<std::size_t>(time.unit) < std::size(kTimeUnitNames);
}

std::string describe_time(const ColumnTime& time) {
  std::string text =
      std::string(time_kind_name(time.kind)) + "[" + std::string(time_unit_name(time.unit));
  if (!time.tz.empty()) text += ", " + time.tz;
  return text + "]";
}

std::uint64_t Column::dim() const noexcept {
  if (kind == ColumnKind::sequence) return 0;
  return row_shape.empty() ? 1 : row_shape.back();
}

std::uint8_t Column::rank() const noexcept {
  if (kind == ColumnKind::sequence) return 2;
  return static_cast<std::uint8_t>(1 + row_shape.size());
}

std::uint64_t Column::row_elements() const noexcept {
  std::uint64_t elements = 1;
  for (std::uint64_t extent : row_shape) elements *= extent;
  return elements;
}

std::uint64_t Column::stored_row_elements() const noexcept {
  if (kind == ColumnKind::sequence) return 0;
  std::uint64_t elements = padded_dim;
  for (std::size_t d = 0; d + 1 < row_shape.size(); ++d) elements *= row_shape[d];
  return elements;
}

std::string describe_column(const Column& column) {
  std::string text = "'" + column.name + "' " + std::string(column_kind_name(column.kind)) + " " +
                     std::string(dtype_name(column.dtype));
  if (column.kind != ColumnKind::tensor) return text;
  text += " [";
  for (std::size_t d = 0; d < column.row_shape.size(); ++d)
    text += (d ? ", " : "") + std::to_string(column.row_shape[d]);
  text += "]";
  if (column.padded()) text += " padded to " + std::to_string(column.padded_dim);
  return text;
}

}  // namespace gpucache
