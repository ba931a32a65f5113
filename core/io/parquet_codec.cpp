// Parquet page codecs: see parquet_codec.h. Each decoder writes into a buffer of the size the
// page header states and nothing else; libsnappy, zlib and libzstd bounds-check their input.
#include "core/io/parquet_codec.h"

#include <cstring>
#include <memory>
#include <string>

#include <snappy.h>
#include <zlib.h>
#include <zstd.h>

#include "core/common/error.h"
#include "core/io/parquet_meta.h"

namespace grpo::io::parquet {
namespace {

std::string sizes(size_t got, size_t expected) {
  return std::to_string(got) + " bytes, the page header says " + std::to_string(expected);
}

void inflate_gzip(const uint8_t* src, size_t n, uint8_t* dst, size_t expected) {
  z_stream s{};
  // 15 + 32: a zlib or gzip header, detected.
  if (inflateInit2(&s, 15 + 32) != Z_OK) fail("GZIP: cannot initialise zlib");
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&s, inflateEnd);
  s.next_in = const_cast<Bytef*>(src);
  s.next_out = dst;
  size_t in_left = n, out_left = expected;
  for (;;) {
    uInt in_chunk = static_cast<uInt>(std::min<size_t>(in_left, 1u << 30));
    uInt out_chunk = static_cast<uInt>(std::min<size_t>(out_left, 1u << 30));
    s.avail_in = in_chunk;
    s.avail_out = out_chunk;
    int rc = inflate(&s, Z_NO_FLUSH);
    in_left -= in_chunk - s.avail_in;
    out_left -= out_chunk - s.avail_out;
    if (rc == Z_STREAM_END) {
      // Some writers concatenate gzip members: continue with the next one if data is left.
      if (in_left == 0 || out_left == 0) break;
      if (inflateReset(&s) != Z_OK) fail("GZIP: cannot reset zlib");
      continue;
    }
    if (rc == Z_BUF_ERROR) {  // no progress possible
      if (out_left == 0) fail("GZIP: data decompresses to more than " + std::to_string(expected) + " bytes");
      fail("GZIP: data ends early: " + sizes(expected - out_left, expected));
    }
    if (rc != Z_OK) fail(std::string("GZIP: corrupt data (") + (s.msg ? s.msg : "zlib error " + std::to_string(rc)) + ")");
  }
  if (out_left != 0) fail("GZIP: decompressed to " + sizes(expected - out_left, expected));
}

struct DCtxDeleter {
  void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
};

void zstd(const uint8_t* src, size_t n, uint8_t* dst, size_t expected) {
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxDeleter> ctx(ZSTD_createDCtx());
  if (!ctx) fail("ZSTD: cannot create a decompression context");
  size_t got = ZSTD_decompressDCtx(ctx.get(), dst, expected, src, n);
  if (ZSTD_isError(got)) fail(std::string("ZSTD: corrupt data (") + ZSTD_getErrorName(got) + ")");
  if (got != expected) fail("ZSTD: decompressed to " + sizes(got, expected));
}

void snappy_raw(const uint8_t* src, size_t n, uint8_t* dst, size_t expected) {
  size_t len = 0;
  const char* in = reinterpret_cast<const char*>(src);
  if (!snappy::GetUncompressedLength(in, n, &len)) fail("SNAPPY: corrupt data (bad length preamble)");
  if (len != expected) fail("SNAPPY: data decompresses to " + sizes(len, expected));
  if (!snappy::RawUncompress(in, n, reinterpret_cast<char*>(dst))) fail("SNAPPY: corrupt data");
}

}  // namespace

bool codec_supported(int32_t codec) {
  return codec == UNCOMPRESSED || codec == SNAPPY || codec == GZIP || codec == ZSTD;
}

void decompress(int32_t codec, const uint8_t* src, size_t n, uint8_t* dst, size_t expected) {
  if (n == 0 && expected == 0 && codec_supported(codec)) return;
  uint8_t dummy = 0;
  if (expected == 0) dst = &dummy;  // never a null output pointer, even for an empty page
  switch (codec) {
    case UNCOMPRESSED:
      if (n != expected) fail("uncompressed page holds " + sizes(n, expected));
      if (n) std::memcpy(dst, src, n);
      return;
    case SNAPPY: snappy_raw(src, n, dst, expected); return;
    case GZIP: inflate_gzip(src, n, dst, expected); return;
    case ZSTD: zstd(src, n, dst, expected); return;
    default:
      if (std::string(codec_name(codec)) == "unknown")
        fail("unknown compression codec " + std::to_string(codec) + " (the file is corrupt or newer than this reader)");
      fail(std::string("unsupported compression codec ") + codec_name(codec) + " (" + std::to_string(codec) +
           "); this reader supports UNCOMPRESSED, SNAPPY, GZIP and ZSTD");
  }
}

}  // namespace grpo::io::parquet
