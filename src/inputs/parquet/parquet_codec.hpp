// The compression codecs of Parquet pages: one table (parquet_codec.cpp) says, per codec, its
// name and how to decompress it, or why this build cannot.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "parquet_metadata.hpp"

namespace gpucache::detail::parquet {

// "SNAPPY", "ZSTD", ... as parquet.thrift spells them; "codec 9" for one it does not name.
std::string codec_name(Codec codec);

// Decompresses `in` into exactly out.size() bytes. Throws gpucache::Error (origin, where) when
// the codec is unknown or not built in, or the data does not decompress to that size.
void decompress(Codec codec, std::span<const std::byte> in, std::span<std::byte> out,
                const std::string& origin, const std::string& where);

}  // namespace gpucache::detail::parquet
