// Page decompression for the Parquet reader: UNCOMPRESSED, SNAPPY (libsnappy), GZIP (zlib) and
// ZSTD (libzstd). Other codecs (LZO, BROTLI, LZ4, LZ4_RAW) are refused by name. Internal.
#pragma once

#include <cstddef>
#include <cstdint>

namespace grpo::io::parquet {

bool codec_supported(int32_t codec);
// Decompresses [src, src + n) into exactly `expected` bytes at dst; throws grpo::Error (no file
// context) when the data is corrupt or does not decompress to exactly that size.
void decompress(int32_t codec, const uint8_t* src, size_t n, uint8_t* dst, size_t expected);

}  // namespace grpo::io::parquet
