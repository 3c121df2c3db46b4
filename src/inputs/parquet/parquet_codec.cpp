// Parquet's codecs through the libraries Debian packages: snappy (libsnappy), gzip (zlib), zstd
// (libzstd), LZ4_RAW and the Hadoop-framed LZ4 (liblz4) and BROTLI (libbrotlidec), the last two
// when the build found them. LZO is recognised and refused by name.
#include "parquet_codec.hpp"

#include <snappy.h>
#include <zlib.h>
#include <zstd.h>

#include <array>
#include <climits>
#include <cstring>

#include "gpucache/error.hpp"

#if GPUCACHE_PARQUET_LZ4
#include <lz4.h>
#endif
#if GPUCACHE_PARQUET_BROTLI
#include <brotli/decode.h>
#endif

namespace gpucache::detail::parquet {
namespace {

using DecompressFn = bool (*)(std::span<const std::byte> in, std::span<std::byte> out);

bool copy_uncompressed(std::span<const std::byte> in, std::span<std::byte> out) {
  if (in.size() != out.size()) return false;
  if (!in.empty()) std::memcpy(out.data(), in.data(), in.size());
  return true;
}

bool decompress_snappy(std::span<const std::byte> in, std::span<std::byte> out) {
  const auto* source = reinterpret_cast<const char*>(in.data());
  std::size_t length = 0;
  return snappy::GetUncompressedLength(source, in.size(), &length) && length == out.size() &&
         snappy::RawUncompress(source, in.size(), reinterpret_cast<char*>(out.data()));
}

// A gzip stream (one member or several, as concatenated gzip files are).
bool decompress_gzip(std::span<const std::byte> in, std::span<std::byte> out) {
  if (in.size() > UINT_MAX || out.size() > UINT_MAX) return false;
  z_stream stream{};
  if (inflateInit2(&stream, 16 + MAX_WBITS) != Z_OK) return false;
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data()));
  stream.avail_in = static_cast<uInt>(in.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  int status = Z_OK;
  for (;;) {
    status = inflate(&stream, Z_FINISH);
    if (status != Z_STREAM_END || stream.avail_in == 0 || stream.avail_out == 0) break;
    if (inflateReset(&stream) != Z_OK) {
      status = Z_DATA_ERROR;
      break;
    }
  }
  const bool whole = status == Z_STREAM_END && stream.avail_out == 0;
  inflateEnd(&stream);
  return whole;
}

bool decompress_zstd(std::span<const std::byte> in, std::span<std::byte> out) {
  const std::size_t written = ZSTD_decompress(out.data(), out.size(), in.data(), in.size());
  return !ZSTD_isError(written) && written == out.size();
}

#if GPUCACHE_PARQUET_LZ4
bool decompress_lz4_raw(std::span<const std::byte> in, std::span<std::byte> out) {
  if (in.size() > INT_MAX || out.size() > INT_MAX) return false;
  const int written = LZ4_decompress_safe(
      reinterpret_cast<const char*>(in.data()), reinterpret_cast<char*>(out.data()),
      static_cast<int>(in.size()), static_cast<int>(out.size()));
  return written >= 0 && static_cast<std::size_t>(written) == out.size();
}
constexpr DecompressFn kLz4Raw = decompress_lz4_raw;

std::uint32_t big_endian_u32(const std::byte* at) {
  return (std::uint32_t(at[0]) << 24) | (std::uint32_t(at[1]) << 16) | (std::uint32_t(at[2]) << 8) |
         std::uint32_t(at[3]);
}

// Codec 5, LZ4: Hadoop's framing (blocks of a big-endian decompressed size, a big-endian
// compressed size and that many bytes of an LZ4 block), as parquet-mr and old Spark wrote it;
// when the bytes are not such blocks, one plain LZ4 block, as fastparquet and old pyarrow wrote
// it. Arrow reads codec 5 the same way (Lz4HadoopCodec, with its raw fallback).
bool decompress_lz4_hadoop(std::span<const std::byte> in, std::span<std::byte> out) {
  std::size_t read = 0, written = 0;
  bool framed = in.size() >= 8;
  while (framed && in.size() - read >= 8) {
    const std::uint32_t size = big_endian_u32(in.data() + read);
    const std::uint32_t compressed = big_endian_u32(in.data() + read + 4);
    read += 8;
    if (compressed > in.size() - read || size > out.size() - written ||
        !decompress_lz4_raw(in.subspan(read, compressed), out.subspan(written, size))) {
      framed = false;
      break;
    }
    read += compressed;
    written += size;
  }
  if (framed && read == in.size() && written == out.size()) return true;
  return decompress_lz4_raw(in, out);
}
constexpr DecompressFn kLz4Hadoop = decompress_lz4_hadoop;
#else
constexpr DecompressFn kLz4Raw = nullptr;
constexpr DecompressFn kLz4Hadoop = nullptr;
#endif

#if GPUCACHE_PARQUET_BROTLI
bool decompress_brotli(std::span<const std::byte> in, std::span<std::byte> out) {
  std::size_t size = out.size();
  return BrotliDecoderDecompress(in.size(), reinterpret_cast<const std::uint8_t*>(in.data()), &size,
                                 reinterpret_cast<std::uint8_t*>(out.data())) ==
             BROTLI_DECODER_RESULT_SUCCESS &&
         size == out.size();
}
constexpr DecompressFn kBrotli = decompress_brotli;
#else
constexpr DecompressFn kBrotli = nullptr;
#endif

struct CodecEntry {
  Codec codec;
  std::string_view name;
  DecompressFn decompress;  // nullptr: refused, for `why_not`
  std::string_view why_not = {};
};

constexpr std::array kCodecs{
    CodecEntry{Codec::uncompressed, "UNCOMPRESSED", copy_uncompressed},
    CodecEntry{Codec::snappy, "SNAPPY", decompress_snappy},
    CodecEntry{Codec::gzip, "GZIP", decompress_gzip},
    CodecEntry{Codec::lzo, "LZO", nullptr, "no writer of today's Parquet uses it"},
    CodecEntry{Codec::brotli, "BROTLI", kBrotli,
               "this gpucache was built without libbrotli (install libbrotli-dev and rebuild)"},
    CodecEntry{Codec::lz4, "LZ4", kLz4Hadoop,
               "this gpucache was built without liblz4 (install liblz4-dev and rebuild)"},
    CodecEntry{Codec::zstd, "ZSTD", decompress_zstd},
    CodecEntry{Codec::lz4_raw, "LZ4_RAW", kLz4Raw,
               "this gpucache was built without liblz4 (install liblz4-dev and rebuild)"},
};

const CodecEntry* find_codec(Codec codec) noexcept {
  for (const auto& entry : kCodecs)
    if (entry.codec == codec) return &entry;
  return nullptr;
}

}  // namespace

std::string codec_name(Codec codec) {
  const CodecEntry* entry = find_codec(codec);
  return entry ? std::string(entry->name) : "codec " + std::to_string(static_cast<int>(codec));
}

void decompress(Codec codec, std::span<const std::byte> in, std::span<std::byte> out,
                const std::string& origin, const std::string& where) {
  const CodecEntry* entry = find_codec(codec);
  if (!entry) throw Error(origin, where, "compressed with an unknown " + codec_name(codec));
  if (!entry->decompress)
    throw Error(origin, where,
                "compressed with " + std::string(entry->name) + ", which gpucache cannot read (" +
                    std::string(entry->why_not) +
                    "); rewrite the file with pyarrow (compression='zstd' or 'snappy') or pack "
                    "pyarrow.parquet.read_table(PATH) from Python");
  if (!entry->decompress(in, out))
    throw Error(origin, where,
                "its " + std::string(entry->name) + " data does not decompress to the " +
                    std::to_string(out.size()) +
                    " bytes its page header gives: the file is corrupt");
}

}  // namespace gpucache::detail::parquet
