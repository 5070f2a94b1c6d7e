// The client's native gRPC transport: a channel makes HTTP/2 calls with
// nghttp2 on the JS thread's own libuv loop, so a call costs no thread hop,
// no `node:http2` stream object and no header objects. JS frames nothing
// and parses no HTTP/2: it hands over a call's message bytes and gets back
// each response message as a Buffer and the call's status, in batches
// (one JS call per read from the socket). Everything above the transport
// (deadlines, retries, the pool, the codecs) stays in lib/client/.
//
// What the network can make it hold is bounded: a response message by the
// client's maxMessageBytes (announced length checked before anything is
// allocated), a response's headers by count and bytes, the bytes read at
// once by the read buffer; nghttp2 bounds frames and its header table.
#include "grpc-channel.h"

#include "../core/nghttp2-api.h"
#include "loop-channel.h"

#if defined(TSN_HAVE_NGHTTP2)
#include <uv.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>
#endif

namespace tsn {

#if defined(TSN_HAVE_NGHTTP2)

namespace {

using namespace client;

// Windows as the JS transport opens them: 16 calls of 64 KiB answers fit in one round trip.
constexpr int32_t kStreamWindowBytes = 16 * 1024 * 1024;
constexpr int32_t kConnectionWindowBytes = 64 * 1024 * 1024;
constexpr uint32_t kMaxFrameBytes = 1024 * 1024;
// A response's headers and trailers: Triton sends a handful of short ones.
constexpr size_t kMaxHeaderPairs = 128;
constexpr size_t kMaxHeaderBytes = 64 * 1024;
constexpr uint64_t kPingTimeoutMs = 20000;

struct Connection;

struct Call {
  uint32_t id = 0;
  Connection* conn = nullptr;
  int32_t stream_id = 0;  // 0 until submitted to the session
  std::string path;
  std::string timeout;               // grpc-timeout, or empty
  std::vector<std::string> headers;  // the call's own: name, value, name, …
  std::string out;                   // request bytes (framed) nghttp2 has not taken yet
  size_t out_offset = 0;
  bool out_last = false;  // the request side ends after `out`
  // The response.
  int http_status = 0;
  bool has_status = false;
  int status = 0;
  std::string message;  // grpc-message, percent-encoded as it came
  size_t header_pairs = 0;
  size_t header_bytes = 0;
  uint8_t prefix[5] = {};
  size_t prefix_have = 0;
  Napi::Reference<Napi::Buffer<uint8_t>> body;  // the message being read, from its prefix on
  uint8_t* body_data = nullptr;
  size_t body_need = 0;
  size_t body_have = 0;
  bool body_compressed = false;  // the message being read is, and inflates once whole
  std::string encoding = "identity";  // the response's grpc-encoding
};

class Channel;

// One TCP connection and its HTTP/2 session. A connection that failed or
// was told GOAWAY takes no new call; the next call opens another.
// Its timer: the keepalive ping's interval, then the ping's timeout.
struct Connection : LoopConnection {
  nghttp2_session* session = nullptr;
  bool goaway = false;  // the server sent GOAWAY
  bool ping_outstanding = false;
  std::vector<Call*> waiting;                     // made before the session was up
  std::unordered_map<int32_t, Call*> streams;  // submitted, by stream id
};

Connection* ConnOf(void* user) { return static_cast<Connection*>(user); }

class Channel : public LoopChannel {
 public:
  Channel(Napi::Env env, std::string host, int port, std::string authority, ChannelSettings settings,
          Napi::Function on_events)
      : LoopChannel(env, std::move(host), port, settings, on_events, "tritonserver-node:grpc-channel"),
        h2_(*Nghttp2()),
        authority_(std::move(authority)),
#if defined(TSN_HAVE_OPENSSL)
        scheme_(settings.tls != nullptr ? "https" : "http") {
#else
        scheme_("http") {
#endif
    h2_.session_callbacks_new(&callbacks_);
    h2_.session_callbacks_set_on_header_callback(callbacks_, OnHeader);
    h2_.session_callbacks_set_on_frame_recv_callback(callbacks_, OnFrame);
    h2_.session_callbacks_set_on_data_chunk_recv_callback(callbacks_, OnData);
    h2_.session_callbacks_set_on_stream_close_callback(callbacks_, OnStreamClose);
    h2_.session_callbacks_set_on_frame_not_send_callback(callbacks_, OnFrameNotSent);
  }

  ~Channel() override {
    if (callbacks_ != nullptr) h2_.session_callbacks_del(callbacks_);
  }

  // `data` null: no message (a stream's first comes with send()).
  // The calls from JS (Start, Send, Cancel) may end calls (a write that
  // failed, headers nghttp2 refused): their events go out from a zero
  // timer, never from inside JS's call.
  uint32_t Start(std::string path, std::string timeout, std::vector<std::string> headers, const uint8_t* data,
                 size_t size, bool last) {
    auto call = std::make_unique<Call>();
    Call* raw = call.get();
    do raw->id = ++next_id_;
    while (raw->id == 0 || calls_.count(raw->id) > 0);
    CallStarted();
    raw->path = std::move(path);
    raw->timeout = std::move(timeout);
    raw->headers = std::move(headers);
    Append(raw, data, size, last);
    const uint32_t id = raw->id;
    calls_.emplace(id, std::move(call));
    Place(raw);  // may end the call at once (a connection that failed): `raw` is not used after it
    ScheduleDispatch();
    return id;
  }

  void Send(uint32_t id, const uint8_t* data, size_t size, bool last) {
    Call* call = Find(id);
    if (call == nullptr || call->out_last) return;
    Append(call, data, size, last);
    if (call->stream_id > 0 && call->conn->session != nullptr)
      h2_.session_resume_data(call->conn->session, call->stream_id);
    FlushSoon(call->conn);
    ScheduleDispatch();
  }

  // JS ends the call itself (CANCELLED): no event comes for it.
  void Cancel(uint32_t id) {
    Call* call = Find(id);
    if (call == nullptr) return;
    Connection* conn = call->conn;
    if (call->stream_id > 0 && conn->session != nullptr)
      h2_.submit_rst_stream(conn->session, NGHTTP2_FLAG_NONE, call->stream_id, NGHTTP2_CANCEL);
    Forget(call);
    FlushSoon(conn);
    ScheduleDispatch();
  }

 private:
  // ---- calls ----

  Call* Find(uint32_t id) {
    auto found = calls_.find(id);
    return found == calls_.end() ? nullptr : found->second.get();
  }

  // The request's bytes as gRPC frames them: a flag byte (uncompressed)
  // and the length; with `compress`, gzip'd, as the JS transport sends them.
  void Append(Call* call, const uint8_t* data, size_t size, bool last) {
    if (data != nullptr) {
      if (call->out_offset == call->out.size()) {
        call->out.clear();
        call->out_offset = 0;
      }
      const char* bytes = reinterpret_cast<const char*>(data);
#if defined(TSN_HAVE_ZLIB)
      const bool packed = settings_.compress && AppendCompressedMessage(bytes, size, 31, &call->out);
#else
      const bool packed = false;
#endif
      if (!packed) {
        const uint32_t length = static_cast<uint32_t>(size);
        const char prefix[5] = {0, static_cast<char>(length >> 24), static_cast<char>(length >> 16),
                                static_cast<char>(length >> 8), static_cast<char>(length)};
        call->out.append(prefix, 5);
        call->out.append(bytes, size);
      }
    }
    call->out_last = call->out_last || last;
  }

  // Puts a call on the current connection (opened if need be).
  void Place(Call* call) {
    Connection* conn = Current();
    call->conn = conn;
    if (conn->broken) {  // failed at once (no such host, no route)
      End(call, kStatusUnavailable, conn->why, kNotSent);
      return;
    }
    if (conn->session != nullptr) Submit(conn, call);
    else conn->waiting.push_back(call);
    Ref(conn, true);
    FlushSoon(conn);
  }

  // Removes a call from its connection and the table (no event).
  void Forget(Call* call) {
    Connection* conn = call->conn;
    if (call->stream_id > 0) conn->streams.erase(call->stream_id);
    conn->waiting.erase(std::remove(conn->waiting.begin(), conn->waiting.end(), call), conn->waiting.end());
    calls_.erase(call->id);
    CallEnded();
    if (!conn->broken) Ref(conn, !conn->streams.empty() || !conn->waiting.empty());
    if (!in_session_) Settle();
  }

  // Closes retired connections with no call left, and everything once
  // closed and idle. Never inside nghttp2's callbacks (it deletes sessions).
  void Settle() override {
    for (LoopConnection* each : std::vector<LoopConnection*>(connections())) {
      auto* conn = static_cast<Connection*>(each);
      if (conn != conn_ && conn->streams.empty() && conn->waiting.empty()) Drop(conn);
    }
    LoopChannel::Settle();
  }

  bool Idle() const override { return calls_.empty(); }

  void DropCalls() override {
    for (auto& entry : calls_) entry.second->body.Reset();
    calls_.clear();
  }

  void Message(uint32_t id, napi_value bytes) {
    ChannelEvent event;
    event.id = id;
    event.bytes = bytes;
    Emit(std::move(event));
  }

  void End(Call* call, int code, std::string message, Fault fault) {
    EmitEnd(call->id, code, std::move(message), fault);
    Forget(call);
  }

  // Ends a call from inside nghttp2's callbacks (the stream is reset).
  void Fail(Call* call, int code, std::string message) {
    if (call->stream_id > 0 && call->conn->session != nullptr)
      h2_.submit_rst_stream(call->conn->session, NGHTTP2_FLAG_NONE, call->stream_id, NGHTTP2_CANCEL);
    End(call, code, std::move(message), kNoFault);
  }

  void Submit(Connection* conn, Call* call) {
    std::vector<nghttp2_nv> nv;
    nv.reserve(9 + call->headers.size() / 2);
    auto add = [&nv](const char* name, size_t name_size, const char* value, size_t value_size) {
      nv.push_back({reinterpret_cast<uint8_t*>(const_cast<char*>(name)),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(value)), name_size, value_size,
                    NGHTTP2_NV_FLAG_NONE});
    };
    auto literal = [&add](const char* name, const char* value) {
      add(name, std::strlen(name), value, std::strlen(value));
    };
    literal(":method", "POST");
    literal(":scheme", scheme_);
    add(":path", 5, call->path.data(), call->path.size());
    add(":authority", 10, authority_.data(), authority_.size());
    literal("content-type", "application/grpc");
    literal("te", "trailers");
    // Compressed answers are read where this runtime has zlib for the addon.
    literal("grpc-accept-encoding", compressed_answers_ ? "identity,deflate,gzip" : "identity");
    if (settings_.compress) literal("grpc-encoding", "gzip");
    literal("user-agent", "tritonserver-node");
    if (!call->timeout.empty()) add("grpc-timeout", 12, call->timeout.data(), call->timeout.size());
    for (size_t i = 0; i + 1 < call->headers.size(); i += 2)
      add(call->headers[i].data(), call->headers[i].size(), call->headers[i + 1].data(), call->headers[i + 1].size());
    nghttp2_data_provider provider{};
    provider.read_callback = ReadRequest;
    const int32_t stream_id = h2_.submit_request(conn->session, nullptr, nv.data(), nv.size(), &provider, nullptr);
    if (stream_id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE) {
      // This connection has used every stream id: the call goes on a new one.
      Retire(conn);
      Place(call);
      return;
    }
    if (stream_id < 0) {
      End(call, kStatusInternal, "could not start the call (nghttp2 " + std::to_string(stream_id) + ")", kNoFault);
      return;
    }
    call->stream_id = stream_id;
    conn->streams.emplace(stream_id, call);
  }

  static ssize_t ReadRequest(nghttp2_session*, int32_t stream_id, uint8_t* buffer, size_t length, uint32_t* flags,
                             nghttp2_data_source*, void* user) {
    Connection* conn = ConnOf(user);
    auto found = conn->streams.find(stream_id);
    if (found == conn->streams.end()) {  // ended here (cancelled, failed): nothing more to send
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      return 0;
    }
    Call* call = found->second;
    const size_t count = std::min(length, call->out.size() - call->out_offset);
    std::memcpy(buffer, call->out.data() + call->out_offset, count);
    call->out_offset += count;
    if (call->out_offset < call->out.size()) return static_cast<ssize_t>(count);
    call->out.clear();
    call->out_offset = 0;
    if (call->out_last) *flags |= NGHTTP2_DATA_FLAG_EOF;
    else if (count == 0) return NGHTTP2_ERR_DEFERRED;
    return static_cast<ssize_t>(count);
  }

  // ---- the response, from nghttp2's callbacks ----

  Call* StreamCall(Connection* conn, int32_t stream_id) {
    auto found = conn->streams.find(stream_id);
    return found == conn->streams.end() ? nullptr : found->second;
  }

  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t name_size,
                      const uint8_t* value, size_t value_size, uint8_t, void* user) {
    Connection* conn = ConnOf(user);
    Channel* self = Of(conn);
    Call* call = self->StreamCall(conn, frame->hd.stream_id);
    if (call == nullptr) return 0;
    call->header_pairs++;
    call->header_bytes += name_size + value_size;
    if (call->header_pairs > kMaxHeaderPairs || call->header_bytes > kMaxHeaderBytes) {
      self->Fail(call, kStatusInternal, "the response's headers are past the client's limit (128 or 64 KiB)");
      return 0;
    }
    const std::string_view key(reinterpret_cast<const char*>(name), name_size);
    const std::string_view text(reinterpret_cast<const char*>(value), value_size);
    if (key == ":status") {
      call->http_status = std::atoi(std::string(text).c_str());
    } else if (key == "grpc-status") {
      call->has_status = true;
      call->status = std::atoi(std::string(text).c_str());
    } else if (key == "grpc-message") {
      call->message.assign(text);
    } else if (key == "grpc-encoding") {
      call->encoding.assign(text);
    }
    return 0;
  }

  static int OnFrame(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    Connection* conn = ConnOf(user);
    Channel* self = Of(conn);
    switch (frame->hd.type) {
      case NGHTTP2_PING:
        if ((frame->hd.flags & NGHTTP2_FLAG_ACK) != 0 && conn->ping_outstanding) {
          conn->ping_outstanding = false;
          self->KeepAlive(conn);
        }
        return 0;
      case NGHTTP2_GOAWAY:
        conn->goaway = true;
        self->Retire(conn);  // its open calls go on; nghttp2 refuses those the server did not take
        return 0;
      case NGHTTP2_HEADERS:
      case NGHTTP2_DATA:
        if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) == 0) return 0;
        if (Call* call = self->StreamCall(conn, frame->hd.stream_id)) self->Complete(call);
        return 0;
      default:
        return 0;
    }
  }

  // The server ended the stream: its status ends the call.
  void Complete(Call* call) {
    if (call->has_status) {
      if (call->status == 0 && call->body_data != nullptr) {
        Fail(call, kStatusInternal, "the response ended inside a message");
        return;
      }
      End(call, call->status, std::move(call->message), kNoFault);
      return;
    }
    if (call->http_status != 200) {
      const int s = call->http_status;
      const int code = s == 502 || s == 503 || s == 504 ? kStatusUnavailable : kStatusUnknown;
      End(call, code, "HTTP " + std::to_string(s) + " from a gRPC endpoint", kNoFault);
      return;
    }
    End(call, kStatusUnavailable, "the stream ended without a status", kSent);
  }

  static int OnData(nghttp2_session*, uint8_t, int32_t stream_id, const uint8_t* data, size_t size, void* user) {
    Connection* conn = ConnOf(user);
    Channel* self = Of(conn);
    Call* call = self->StreamCall(conn, stream_id);
    if (call != nullptr) self->Deframe(call, data, size);
    return 0;
  }

  // Cuts gRPC messages out of DATA: each is read into a Buffer of its
  // announced length, allocated once that length is known to be allowed.
  void Deframe(Call* call, const uint8_t* data, size_t size) {
    while (size > 0) {
      if (call->body_data == nullptr) {
        const size_t take = std::min(size, sizeof call->prefix - call->prefix_have);
        std::memcpy(call->prefix + call->prefix_have, data, take);
        call->prefix_have += take;
        data += take;
        size -= take;
        if (call->prefix_have < sizeof call->prefix) return;
        call->prefix_have = 0;
        const uint8_t flag = call->prefix[0];
        const size_t length = (size_t{call->prefix[1]} << 24) | (size_t{call->prefix[2]} << 16) |
                              (size_t{call->prefix[3]} << 8) | size_t{call->prefix[4]};
        if (flag > 1) {
          Fail(call, kStatusInternal,
               "a response message's compressed flag is " + std::to_string(flag) + ": only 0 and 1 are defined");
          return;
        }
        if (flag == 1 && !compressed_answers_) {
          Fail(call, kStatusInternal,
               "could not read a compressed message: the native transport asked for none (grpc-accept-encoding: identity)");
          return;
        }
        call->body_compressed = flag == 1;
        if (length > settings_.max_message_bytes) {
          Fail(call, kStatusResourceExhausted,
               "a response message is larger than maxMessageBytes (" + std::to_string(settings_.max_message_bytes) + ")");
          return;
        }
        Napi::Buffer<uint8_t> buffer;
        try {  // nothing may be thrown through nghttp2
          buffer = Napi::Buffer<uint8_t>::New(env_, length);
        } catch (const Napi::Error&) {
          Fail(call, kStatusResourceExhausted, "no memory for a response message of " + std::to_string(length) + " bytes");
          return;
        }
        if (length == 0) {
          if (!call->body_compressed) Message(call->id, buffer);
          else if (!Inflated(call, nullptr, 0)) return;  // no gzip or zlib stream is empty: it fails
          continue;
        }
        call->body = Napi::Persistent(buffer);
        call->body_data = buffer.Data();
        call->body_need = length;
        call->body_have = 0;
        continue;
      }
      const size_t take = std::min(size, call->body_need - call->body_have);
      std::memcpy(call->body_data + call->body_have, data, take);
      call->body_have += take;
      data += take;
      size -= take;
      if (call->body_have == call->body_need) {
        if (call->body_compressed) {
          if (!Inflated(call, call->body_data, call->body_need)) return;
        } else {
          Message(call->id, call->body.Value());
        }
        call->body.Reset();
        call->body_data = nullptr;
      }
    }
  }

  // A compressed message read whole: what it inflates to (within
  // maxMessageBytes) is the message; false where the call ended instead.
  bool Inflated(Call* call, const uint8_t* data, size_t size) {
#if defined(TSN_HAVE_ZLIB)
    const int window_bits = WindowBitsOf(call->encoding);
    if (window_bits == 0) {
      Fail(call, kStatusInternal, "a compressed message with grpc-encoding '" + call->encoding + "'");
      return false;
    }
    Bytes plain;
    bool too_large = false;
    if (!InflateAll(reinterpret_cast<const char*>(data), size, window_bits, settings_.max_message_bytes, &plain,
                    &too_large)) {
      Fail(call, too_large ? kStatusResourceExhausted : kStatusInternal,
           too_large ? "a response message is larger than maxMessageBytes (" + std::to_string(settings_.max_message_bytes) +
                           ") once inflated"
                     : "could not read a compressed message: not a whole " + call->encoding + " stream");
      return false;
    }
    try {  // nothing may be thrown through nghttp2
      Message(call->id, Napi::Buffer<uint8_t>::Copy(env_, reinterpret_cast<const uint8_t*>(plain.begin()), plain.size));
    } catch (const Napi::Error&) {
      Fail(call, kStatusResourceExhausted, "no memory for a response message of " + std::to_string(plain.size) + " bytes");
      return false;
    }
    return true;
#else
    (void)data;
    (void)size;
    Fail(call, kStatusInternal, "could not read a compressed message: this addon has no zlib");
    return false;
#endif
  }

  // A request nghttp2 would not send (its headers past the 64 KiB a header
  // block may have): the stream never opened, so no close comes for it.
  static int OnFrameNotSent(nghttp2_session*, const nghttp2_frame* frame, int error, void* user) {
    Connection* conn = ConnOf(user);
    Channel* self = Of(conn);
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    if (Call* call = self->StreamCall(conn, frame->hd.stream_id))
      self->End(call, kStatusInvalidArgument,
                "could not send the call's headers (nghttp2 " + std::to_string(error) +
                    "): more than an HTTP/2 header block holds (64 KiB)",
                kNoFault);
    return 0;
  }

  static int OnStreamClose(nghttp2_session*, int32_t stream_id, uint32_t error_code, void* user) {
    Connection* conn = ConnOf(user);
    Channel* self = Of(conn);
    Call* call = self->StreamCall(conn, stream_id);
    if (call == nullptr) return 0;
    if (error_code == NGHTTP2_REFUSED_STREAM) {
      self->End(call, kStatusUnavailable, "the server refused the call (REFUSED_STREAM)", kNotSent);
    } else {
      self->End(call, kStatusUnavailable,
                "the stream closed without a status (RST_STREAM " + std::to_string(error_code) + ")", kSent);
    }
    return 0;
  }

  // ---- connections ----

  static Channel* Of(Connection* conn) { return static_cast<Channel*>(conn->channel); }

  // The connection new calls go on, opened if there is none.
  Connection* Current() {
    if (conn_ != nullptr) return conn_;
    auto* conn = new Connection();
    conn_ = conn;
    Dial(conn);
    return conn;
  }

  void OnOpen(LoopConnection* each) override {
    auto* conn = static_cast<Connection*>(each);
    if (h2_.session_client_new(&conn->session, callbacks_, conn) != 0) {
      Break(conn, "could not start an HTTP/2 session", false);
      return;
    }
    const nghttp2_settings_entry entries[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                              {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, kStreamWindowBytes},
                                              {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, kMaxFrameBytes}};
    h2_.submit_settings(conn->session, NGHTTP2_FLAG_NONE, entries, 3);
    h2_.session_set_local_window_size(conn->session, NGHTTP2_FLAG_NONE, 0, kConnectionWindowBytes);
    KeepAlive(conn);
    std::vector<Call*> waiting;
    waiting.swap(conn->waiting);
    for (Call* call : waiting) Submit(conn, call);
    Flush(conn);
  }

  void OnBytes(LoopConnection* each, const char* data, size_t size) override {
    auto* conn = static_cast<Connection*>(each);
    in_session_ = true;
    const ssize_t used = h2_.session_mem_recv(conn->session, reinterpret_cast<const uint8_t*>(data), size);
    in_session_ = false;
    if (used < 0) Break(conn, "an HTTP/2 protocol error (nghttp2 " + std::to_string(used) + ")", true);
    // Written after JS has seen the responses: the calls it starts from them go in the same write.
    flush_after_dispatch_ = true;
  }

  // Sends what the session has: one write, the rest queued where the socket is full.
  void Flush(Connection* conn) {
    if (conn->broken || conn->session == nullptr) return;
    out_.clear();
    for (;;) {
      const uint8_t* data = nullptr;
      in_session_ = true;
      const ssize_t size = h2_.session_mem_send(conn->session, &data);
      in_session_ = false;
      if (size < 0) {
        Break(conn, "an HTTP/2 protocol error (nghttp2 " + std::to_string(size) + ")", true);
        return;
      }
      if (size == 0) break;
      out_.append(reinterpret_cast<const char*>(data), static_cast<size_t>(size));
    }
    if (!out_.empty()) {
      uv_buf_t buf = uv_buf_init(out_.data(), static_cast<unsigned>(out_.size()));
      if (!SendBytes(conn, &buf, 1)) return;
    }
    // nghttp2 is done with the session (a GOAWAY both ways, an error sent).
    if (!h2_.session_want_read(conn->session) && !h2_.session_want_write(conn->session))
      Break(conn, conn->goaway ? "the server ended the connection (GOAWAY)"
                               : "an HTTP/2 protocol error (does the server speak gRPC over HTTP/2?)",
            true);
    Settle();
  }

  // Writes now, or after the events being delivered (JS may start more calls from them).
  void FlushSoon(Connection* conn) {
    if (in_dispatch_) {
      flush_after_dispatch_ = true;
      return;
    }
    Flush(conn);
  }

  void AfterDispatch() override {
    if (!flush_after_dispatch_) return;
    flush_after_dispatch_ = false;
    for (LoopConnection* conn : std::vector<LoopConnection*>(connections()))
      if (Live(conn)) Flush(static_cast<Connection*>(conn));
  }

  // No new call goes on this connection; it ends with its last call.
  void Retire(Connection* conn) {
    if (conn == conn_) conn_ = nullptr;
  }

  // The connection failed: its calls end (UNAVAILABLE, `sent` where a
  // request may have reached the server) and it closes.
  void Break(LoopConnection* each, const std::string& why, bool was_open) override {
    auto* conn = static_cast<Connection*>(each);
    if (conn->broken) return;
    Retire(conn);
    conn->broken = true;
    conn->why = why;
    std::vector<Call*> calls(conn->waiting.begin(), conn->waiting.end());
    for (auto& entry : conn->streams) calls.push_back(entry.second);
    std::sort(calls.begin(), calls.end(), [](Call* a, Call* b) { return a->id < b->id; });
    for (Call* call : calls) {
      const Fault fault = was_open && call->stream_id > 0 ? kSent : kNotSent;
      End(call, kStatusUnavailable, why, fault);
    }
    Drop(conn);
  }

  void Detach(LoopConnection* each) override {
    auto* conn = static_cast<Connection*>(each);
    Retire(conn);
    conn->waiting.clear();
    conn->streams.clear();
    if (conn->session != nullptr) {
      h2_.session_del(conn->session);
      conn->session = nullptr;
    }
  }

  // Pings while calls are in flight, every keepAliveMs.
  void KeepAlive(Connection* conn) { RestartTimer(conn, settings_.keep_alive_ms); }

  // The keepalive interval, or an unanswered ping's timeout.
  void OnTimer(LoopConnection* each) override {
    auto* conn = static_cast<Connection*>(each);
    if (conn->ping_outstanding) {
      Break(conn, "keepalive ping unanswered", true);
      return;
    }
    if (conn->streams.empty()) {
      KeepAlive(conn);
      return;
    }
    conn->ping_outstanding = true;
    h2_.submit_ping(conn->session, NGHTTP2_FLAG_NONE, nullptr);
    RestartTimer(conn, kPingTimeoutMs);
    Flush(conn);
  }

  // ---- fields ----

  const Nghttp2Api& h2_;
  std::string authority_;
  const char* scheme_;
#if defined(TSN_HAVE_ZLIB)
  const bool compressed_answers_ = Zlib() != nullptr;
#else
  const bool compressed_answers_ = false;
#endif
  nghttp2_session_callbacks* callbacks_ = nullptr;
  std::string out_;
  std::unordered_map<uint32_t, std::unique_ptr<Call>> calls_;
  Connection* conn_ = nullptr;  // where new calls go
  uint32_t next_id_ = 0;
  bool in_session_ = false;  // inside nghttp2 (mem_recv, mem_send): no session may be deleted
  bool flush_after_dispatch_ = false;
};

// The JS object: new GrpcChannel(host, port, authority, [connectTimeoutMs, keepAliveMs, maxMessageBytes, connections], onEvents).
class GrpcChannelWrap : public Napi::ObjectWrap<GrpcChannelWrap> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "GrpcChannel",
                       {InstanceMethod<&GrpcChannelWrap::Start>("start"), InstanceMethod<&GrpcChannelWrap::Send>("send"),
                        InstanceMethod<&GrpcChannelWrap::Cancel>("cancel"),
                        InstanceMethod<&GrpcChannelWrap::Close>("close")});
  }

  explicit GrpcChannelWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<GrpcChannelWrap>(info) {
    Napi::Env env = info.Env();
    if (info.Length() < 5 || !info[0].IsString() || !info[1].IsNumber() || !info[2].IsString() || !info[3].IsArray() ||
        !info[4].IsFunction())
      throw Napi::TypeError::New(env, "new GrpcChannel(host, port, authority, settings, onEvents, tls)");
    const int port = ReadPort(env, info[1], "GrpcChannel");
    ChannelSettings settings = ReadSettings(env, info[3], "GrpcChannel");
    ReadTls(env, info[5], "h2", &settings);
    channel_ = std::make_shared<Channel>(env, info[0].As<Napi::String>().Utf8Value(), port,
                                         info[2].As<Napi::String>().Utf8Value(), settings,
                                         info[4].As<Napi::Function>());
    channel_->Hold(channel_);
  }

  ~GrpcChannelWrap() override {
    if (channel_ != nullptr) channel_->Abandon();
  }

 private:
  // A message's bytes (never null, even for an empty message: null means none).
  static bool Bytes(Napi::Value value, const uint8_t** data, size_t* size) {
    if (!value.IsTypedArray()) return false;
    Napi::TypedArray array = value.As<Napi::TypedArray>();
    if (array.TypedArrayType() != napi_uint8_array) return false;
    Napi::Uint8Array bytes = value.As<Napi::Uint8Array>();
    static const uint8_t kEmpty = 0;
    *data = bytes.ByteLength() == 0 ? &kEmpty : bytes.Data();
    *size = bytes.ByteLength();
    return true;
  }

  // start(path, timeout | undefined, headers: string[], message | undefined, last) → id
  Napi::Value Start(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (channel_->closed()) throw Napi::Error::New(env, "the channel is closed");
    if (info.Length() < 5 || !info[0].IsString() || !info[2].IsArray())
      throw Napi::TypeError::New(env, "start(path, timeout, headers, message, last)");
    std::string timeout = info[1].IsString() ? info[1].As<Napi::String>().Utf8Value() : std::string();
    Napi::Array list = info[2].As<Napi::Array>();
    if (list.Length() % 2 != 0) throw Napi::TypeError::New(env, "start: headers go as name, value pairs");
    std::vector<std::string> headers;
    headers.reserve(list.Length());
    for (uint32_t i = 0; i < list.Length(); ++i) headers.push_back(list.Get(i).As<Napi::String>().Utf8Value());
    const uint8_t* data = nullptr;
    size_t size = 0;
    if (!info[3].IsUndefined() && !Bytes(info[3], &data, &size))
      throw Napi::TypeError::New(env, "start: the message must be a Uint8Array");
    const uint32_t id = channel_->Start(info[0].As<Napi::String>().Utf8Value(), std::move(timeout), std::move(headers),
                                        data, size, info[4].ToBoolean().Value());
    return Napi::Number::New(env, id);
  }

  // send(id, message | undefined, last)
  Napi::Value Send(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    const uint8_t* data = nullptr;
    size_t size = 0;
    if (info.Length() < 3 || !info[0].IsNumber() || (!info[1].IsUndefined() && !Bytes(info[1], &data, &size)))
      throw Napi::TypeError::New(env, "send(id, message, last)");
    channel_->Send(info[0].As<Napi::Number>().Uint32Value(), data, size, info[2].ToBoolean().Value());
    return env.Undefined();
  }

  Napi::Value Cancel(const Napi::CallbackInfo& info) {
    if (info.Length() < 1 || !info[0].IsNumber()) throw Napi::TypeError::New(info.Env(), "cancel(id)");
    channel_->Cancel(info[0].As<Napi::Number>().Uint32Value());
    return info.Env().Undefined();
  }

  Napi::Value Close(const Napi::CallbackInfo& info) {
    channel_->Close();
    return info.Env().Undefined();
  }

  std::shared_ptr<Channel> channel_;
};

}  // namespace

void RegisterGrpcChannel(Napi::Env env, Napi::Object exports) {
  if (Nghttp2() == nullptr) return;
  exports.Set("GrpcChannel", GrpcChannelWrap::Define(env));
}

#else

void RegisterGrpcChannel(Napi::Env, Napi::Object) {}

#endif

}  // namespace tsn
