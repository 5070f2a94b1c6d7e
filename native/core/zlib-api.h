// zlib, for compressed gRPC messages on the native engine's path: Node's
// own copy, which Node exports to addons under Chromium's `Cr_z_` names
// (as it exports nghttp2 and OpenSSL), every function taken from that one
// set. Not the system's libz.so.1: Node also exports unprefixed zlib
// symbols from another build, and those take the place of libz's own
// internal calls once it is loaded into a Node process (its deflateInit2_
// called Node's deflateReset on another state layout: a crash, and the
// heap corruption seen in an earlier attempt). Only a zlib header is
// needed to build (Node ships one); where the runtime exports no such
// copy, compressed calls go to the JS front end as before.
#pragma once

#if defined(__has_include)
#if __has_include(<zlib.h>) && !defined(_WIN32)
#define TSN_HAVE_ZLIB 1
#endif
#endif

#if defined(TSN_HAVE_ZLIB)
#include <zlib.h>

#include <cstddef>
#include <string>

#include "bytes.h"

namespace tsn {

#define TSN_ZLIB_FUNCTIONS(X) \
  X(inflateInit2_)            \
  X(inflate)                  \
  X(inflateEnd)               \
  X(deflateInit2_)            \
  X(deflate)                  \
  X(deflateEnd)               \
  X(deflateBound)

struct ZlibApi {
#define TSN_ZLIB_FIELD(name) decltype(&::name) name = nullptr;
  TSN_ZLIB_FUNCTIONS(TSN_ZLIB_FIELD)
#undef TSN_ZLIB_FIELD
};

// The functions, or null where the runtime exports no Cr_z_ zlib.
const ZlibApi* Zlib();

// zlib's window bits for a gRPC/HTTP encoding: gzip 31, deflate (the zlib
// format) 15; 0 for anything else.
int WindowBitsOf(const std::string& encoding);

// Inflates `size` bytes that are one whole gzip or zlib stream
// (`window_bits`) into `out`, after what it holds, never past `limit`
// bytes of output. False for anything else: past the limit (`*too_large`
// set), corrupt, cut short, or followed by other bytes.
bool InflateAll(const char* data, size_t size, int window_bits, size_t limit, Bytes* out, bool* too_large);

// `size` bytes compressed whole (gzip or zlib by `window_bits`: 31 or 15,
// zlib's default level, a window no larger than the message), appended to `out`.
bool DeflateAll(const char* data, size_t size, int window_bits, std::string* out);

// A gRPC message of `size` bytes, compressed, appended to `out` as gRPC
// frames it (what both native gRPC sides send): flag 1, the compressed
// length (4 bytes, big-endian), the compressed bytes. False, `out` as it
// was, where it does not compress.
bool AppendCompressedMessage(const char* data, size_t size, int window_bits, std::string* out);

}  // namespace tsn

#endif
