#include "zlib-api.h"

#if defined(TSN_HAVE_ZLIB)
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>

namespace tsn {

namespace {

const ZlibApi* Load() {
  static ZlibApi api;
  bool all = true;
#define TSN_ZLIB_RESOLVE(name)                                                         \
  api.name = reinterpret_cast<decltype(&::name)>(dlsym(RTLD_DEFAULT, "Cr_z_" #name)); \
  all = all && api.name != nullptr;
  TSN_ZLIB_FUNCTIONS(TSN_ZLIB_RESOLVE)
#undef TSN_ZLIB_RESOLVE
  return all ? &api : nullptr;
}

// zlib counts in 32-bit units: larger spans go in steps.
constexpr size_t kStep = size_t{1} << 30;

}  // namespace

const ZlibApi* Zlib() {
  static const ZlibApi* api = Load();
  return api;
}

int WindowBitsOf(const std::string& encoding) {
  if (encoding == "gzip") return 31;
  if (encoding == "deflate") return 15;
  return 0;
}

bool InflateAll(const char* data, size_t size, int window_bits, size_t limit, Bytes* out, bool* too_large) {
  *too_large = false;
  const ZlibApi* zlib = Zlib();
  if (zlib == nullptr) return false;
  z_stream stream{};
  if (zlib->inflateInit2_(&stream, window_bits, ZLIB_VERSION, static_cast<int>(sizeof(z_stream))) != Z_OK)
    return false;
  size_t produced = 0;
  size_t left = size;
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
  int status = Z_OK;
  while (status == Z_OK) {
    if (stream.avail_in == 0 && left > 0) {
      stream.avail_in = static_cast<uInt>(std::min(left, kStep));
      left -= stream.avail_in;
    }
    if (produced == limit) {
      // Full: whole only if nothing but the stream's end is left.
      char probe;
      stream.next_out = reinterpret_cast<Bytef*>(&probe);
      stream.avail_out = 1;
      status = zlib->inflate(&stream, Z_NO_FLUSH);
      if (status != Z_STREAM_END || stream.avail_out == 0) {
        *too_large = stream.avail_out == 0 || status == Z_OK;
        status = Z_DATA_ERROR;
      }
      break;
    }
    // Room as the output grows (4× the input to start), never past the limit.
    out->Reserve(std::min(std::max<size_t>(size * 4, 4096), limit - produced));
    const size_t room = std::min({out->room(), limit - produced, kStep});
    stream.next_out = reinterpret_cast<Bytef*>(out->end());
    stream.avail_out = static_cast<uInt>(room);
    status = zlib->inflate(&stream, Z_NO_FLUSH);
    const size_t made = room - stream.avail_out;
    out->size += made;
    produced += made;
    if (status == Z_BUF_ERROR && stream.avail_in == 0 && left == 0) break;  // cut short
    if (status == Z_BUF_ERROR) status = Z_OK;  // no progress this step: room or input comes next
  }
  const bool whole = status == Z_STREAM_END && stream.avail_in == 0 && left == 0;
  zlib->inflateEnd(&stream);
  return whole;
}

bool DeflateAll(const char* data, size_t size, int window_bits, std::string* out) {
  const ZlibApi* zlib = Zlib();
  if (zlib == nullptr || size > UINT32_MAX) return false;
  // zlib sets up about 256 KiB of state for its 32 KiB window and largest
  // hash: most of a small message's cost. A window as large as the message
  // (512 B at least) and a hash to match compress it as well, for less.
  int bits = 9;
  while (bits < 15 && (size_t{1} << bits) < size) ++bits;
  const int mem_level = std::max(1, std::min(8, bits - 6));
  z_stream stream{};
  if (zlib->deflateInit2_(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, window_bits - 15 + bits, mem_level,
                          Z_DEFAULT_STRATEGY, ZLIB_VERSION, static_cast<int>(sizeof(z_stream))) != Z_OK)
    return false;
  const size_t at = out->size();
  const size_t bound = zlib->deflateBound(&stream, static_cast<uLong>(size));
  out->resize(at + bound);
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
  stream.avail_in = static_cast<uInt>(size);
  stream.next_out = reinterpret_cast<Bytef*>(out->data() + at);
  stream.avail_out = static_cast<uInt>(std::min<size_t>(bound, UINT32_MAX));
  const int status = zlib->deflate(&stream, Z_FINISH);  // the bound holds it all in one call
  out->resize(at + (bound - stream.avail_out));
  zlib->deflateEnd(&stream);
  if (status != Z_STREAM_END) out->resize(at);
  return status == Z_STREAM_END;
}

bool AppendCompressedMessage(const char* data, size_t size, int window_bits, std::string* out) {
  const size_t at = out->size();
  out->append(5, '\0');
  if (!DeflateAll(data, size, window_bits, out) || out->size() - at - 5 > UINT32_MAX) {
    out->resize(at);
    return false;
  }
  const auto length = static_cast<uint32_t>(out->size() - at - 5);
  (*out)[at] = 1;
  for (int i = 0; i < 4; ++i) (*out)[at + 1 + i] = static_cast<char>(length >> (24 - 8 * i));
  return true;
}

}  // namespace tsn
#endif
