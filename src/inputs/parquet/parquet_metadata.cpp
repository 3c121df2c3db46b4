// Field ids from parquet-format's parquet.thrift (FORMAT.md lists the ones read here).
#include "parquet_metadata.hpp"

#include "thrift_compact.hpp"

namespace gpucache::detail::parquet {
namespace {

// A list of structs, each read by read_one(reader, element).
template <class T, class ReadOne>
std::vector<T> read_struct_list(ThriftReader& reader, WireType type, ReadOne&& read_one) {
  const auto list = reader.read_list_header(type);
  if (list.element != WireType::structure) reader.fail("a list of structs holds something else");
  std::vector<T> items(list.size);
  for (auto& item : items) read_one(reader, item);
  return items;
}

// TimestampType and TimeType: 1 isAdjustedToUTC (bool), 2 unit (a union of empty structs:
// 1 MILLIS, 2 MICROS, 3 NANOS).
void read_time_type(ThriftReader& reader, SchemaElement& element) {
  reader.read_struct([&](std::int16_t field, WireType field_type) {
    if (field == 1) {
      element.time_adjusted_to_utc = reader.read_bool(field_type);
      return true;
    }
    if (field != 2 || field_type != WireType::structure) return false;
    reader.read_struct([&](std::int16_t unit, WireType unit_type) {
      if (unit_type != WireType::structure || unit < 1 || unit > 3) return false;
      element.time_unit = static_cast<TimeUnitCode>(unit);
      return false;  // its empty struct is skipped
    });
    return true;
  });
}

// DecimalType: 1 scale, 2 precision (both i32).
void read_decimal_members(ThriftReader& reader, SchemaElement& element) {
  reader.read_struct([&](std::int16_t field, WireType field_type) {
    if (field == 1)
      element.decimal_scale = reader.read_i32(field_type);
    else if (field == 2)
      element.decimal_precision = reader.read_i32(field_type);
    else
      return false;
    return true;
  });
}

void read_logical_type(ThriftReader& reader, SchemaElement& element) {
  reader.read_struct([&](std::int16_t id, WireType type) {
    if (type != WireType::structure) return false;
    element.logical = static_cast<Logical>(id);
    if (id == static_cast<std::int16_t>(Logical::timestamp) ||
        id == static_cast<std::int16_t>(Logical::time)) {
      read_time_type(reader, element);
      return true;
    }
    if (id == static_cast<std::int16_t>(Logical::decimal)) {
      read_decimal_members(reader, element);
      return true;
    }
    if (id != static_cast<std::int16_t>(Logical::integer)) return false;
    reader.read_struct([&](std::int16_t field, WireType field_type) {
      if (field == 1)
        element.integer_bits = static_cast<std::int32_t>(reader.read_integer(field_type));
      else if (field == 2)
        element.integer_signed = reader.read_bool(field_type);
      else
        return false;
      return true;
    });
    return true;
  });
}

void read_schema_element(ThriftReader& reader, SchemaElement& element) {
  reader.read_struct([&](std::int16_t id, WireType type) {
    switch (id) {
      case 1:
        element.type = static_cast<PhysicalType>(reader.read_i32(type));
        return true;
      case 2:
        element.type_length = reader.read_i32(type);
        return true;
      case 3:
        element.repetition = static_cast<Repetition>(reader.read_i32(type));
        return true;
      case 4:
        element.name = std::string(reader.read_binary(type));
        return true;
      case 5:
        element.num_children = reader.read_i32(type);
        return true;
      case 6:
        element.converted = static_cast<Converted>(reader.read_i32(type));
        return true;
      case 7:  // scale and precision of a DECIMAL ConvertedType
        element.decimal_scale = reader.read_i32(type);
        return true;
      case 8:
        element.decimal_precision = reader.read_i32(type);
        return true;
      case 10:
        if (type != WireType::structure) return false;
        read_logical_type(reader, element);
        return true;
      default:
        return false;
    }
  });
}

void read_column_metadata(ThriftReader& reader, ColumnMetadata& metadata) {
  reader.read_struct([&](std::int16_t id, WireType type) {
    switch (id) {
      case 1:
        metadata.type = static_cast<PhysicalType>(reader.read_i32(type));
        return true;
      case 3: {
        const auto list = reader.read_list_header(type);
        if (list.element != WireType::binary) reader.fail("path_in_schema holds something else");
        for (std::uint32_t i = 0; i < list.size; ++i)
          metadata.path.emplace_back(reader.read_binary(WireType::binary));
        return true;
      }
      case 4:
        metadata.codec = static_cast<Codec>(reader.read_i32(type));
        return true;
      case 5:
        metadata.num_values = reader.read_integer(type);
        return true;
      case 6:
        metadata.total_uncompressed_size = reader.read_integer(type);
        return true;
      case 7:
        metadata.total_compressed_size = reader.read_integer(type);
        return true;
      case 9:
        metadata.data_page_offset = reader.read_integer(type);
        return true;
      case 11:
        metadata.dictionary_page_offset = reader.read_integer(type);
        return true;
      default:
        return false;
    }
  });
}

void read_column_chunk(ThriftReader& reader, ColumnChunk& chunk) {
  reader.read_struct([&](std::int16_t id, WireType type) {
    switch (id) {
      case 1:
        chunk.file_path = std::string(reader.read_binary(type));
        return true;
      case 3:
        if (type != WireType::structure) return false;
        read_column_metadata(reader, chunk.metadata.emplace());
        return true;
      case 8:  // crypto_metadata
      case 9:  // encrypted_column_metadata
        chunk.encrypted = true;
        return false;
      default:
        return false;
    }
  });
}

void read_row_group(ThriftReader& reader, RowGroup& group) {
  reader.read_struct([&](std::int16_t id, WireType type) {
    switch (id) {
      case 1:
        group.columns = read_struct_list<ColumnChunk>(reader, type, read_column_chunk);
        return true;
      case 3:
        group.num_rows = reader.read_integer(type);
        return true;
      default:
        return false;
    }
  });
}

void read_data_page_header(ThriftReader& reader, PageHeader& page) {
  reader.read_struct([&](std::int16_t id, WireType type) {
    switch (id) {
      case 1:
        page.num_values = reader.read_i32(type);
        return true;
      case 2:
        page.encoding = static_cast<Encoding>(reader.read_i32(type));
        return true;
      case 3:
        page.definition_level_encoding = static_cast<Encoding>(reader.read_i32(type));
        return true;
      case 4:
        page.repetition_level_encoding = static_cast<Encoding>(reader.read_i32(type));
        return true;
      default:
        return false;
    }
  });
}

void read_dictionary_page_header(ThriftReader& reader, PageHeader& page) {
  reader.read_struct([&](std::int16_t id, WireType type) {
    switch (id) {
      case 1:
        page.num_values = reader.read_i32(type);
        return true;
      case 2:
        page.encoding = static_cast<Encoding>(reader.read_i32(type));
        return true;
      default:
        return false;
    }
  });
}

void read_data_page_header_v2(ThriftReader& reader, PageHeader& page) {
  reader.read_struct([&](std::int16_t id, WireType type) {
    switch (id) {
      case 1:
        page.num_values = reader.read_i32(type);
        return true;
      case 3:
        page.num_rows = reader.read_i32(type);
        return true;
      case 4:
        page.encoding = static_cast<Encoding>(reader.read_i32(type));
        return true;
      case 5:
        page.definition_levels_bytes = reader.read_i32(type);
        return true;
      case 6:
        page.repetition_levels_bytes = reader.read_i32(type);
        return true;
      case 7:
        page.values_compressed = reader.read_bool(type);
        return true;
      default:
        return false;
    }
  });
}

}  // namespace

FileMetadata parse_file_metadata(std::span<const std::byte> bytes, const std::string& origin,
                                 std::uint64_t base_offset) {
  ThriftReader reader(bytes, origin, base_offset);
  FileMetadata file;
  reader.read_struct([&](std::int16_t id, WireType type) {
    switch (id) {
      case 2:
        file.schema = read_struct_list<SchemaElement>(reader, type, read_schema_element);
        return true;
      case 3:
        file.num_rows = reader.read_integer(type);
        return true;
      case 4:
        file.row_groups = read_struct_list<RowGroup>(reader, type, read_row_group);
        return true;
      case 6:
        file.created_by = std::string(reader.read_binary(type));
        return true;
      case 8:
        file.encrypted = true;
        return false;
      default:
        return false;
    }
  });
  return file;
}

PageHeader parse_page_header(std::span<const std::byte> bytes, const std::string& origin,
                             std::uint64_t base_offset) {
  ThriftReader reader(bytes, origin, base_offset);
  PageHeader page;
  bool data = false, dictionary = false, data_v2 = false;
  reader.read_struct([&](std::int16_t id, WireType type) {
    switch (id) {
      case 1:
        page.type = static_cast<PageType>(reader.read_i32(type));
        return true;
      case 2:
        page.uncompressed_size = reader.read_i32(type);
        return true;
      case 3:
        page.compressed_size = reader.read_i32(type);
        return true;
      case 5:
      case 7:
      case 8:
        if (type != WireType::structure) return false;
        if (id == 5)
          read_data_page_header(reader, page);
        else if (id == 7)
          read_dictionary_page_header(reader, page);
        else
          read_data_page_header_v2(reader, page);
        (id == 5 ? data : id == 7 ? dictionary : data_v2) = true;
        return true;
      default:
        return false;
    }
  });
  page.has_page_header = (page.type == PageType::data && data) ||
                         (page.type == PageType::dictionary && dictionary) ||
                         (page.type == PageType::data_v2 && data_v2);
  page.header_bytes = reader.position();
  return page;
}

}  // namespace gpucache::detail::parquet
