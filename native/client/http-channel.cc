// The client's native HTTP/1.1 transport: a channel keeps up to
// `connections` keep-alive connections to one address and makes one
// request at a time on each (no pipelining), on the JS thread's own loop.
// JS writes a request's head (it knows the routes and headers) and hands
// its body over in pieces as they are (the JSON header, each tensor); the
// channel writes them in one writev, without a copy where the socket takes
// them at once (a request that waits keeps a copy: JS may change its
// arrays once its call returns), reads
// the response (http-response.cc) and hands JS the status, the
// Inference-Header-Content-Length and the body, in one Uint8Array whose
// binary part starts 8-byte aligned. Deadlines and cancellation are JS's:
// a cancelled request closes its connection (HTTP/1.1 has no other way),
// as does a response followed by bytes no request asked for.
//
// Bounded: a response's head (64 KiB, 128 headers), its body (the
// client's maxMessageBytes and 1 MiB for the JSON header), reads (64 KiB
// at once), connections (the pool's size), idle connections (closed after
// kIdleMs, before a server's usual 5 s keep-alive can close them under a
// request).
#include "http-channel.h"

#include <uv.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "http-response.h"
#include "loop-channel.h"

namespace tsn {

namespace {

using namespace client;

constexpr uint64_t kIdleMs = 4000;
// Room for the JSON header beside maxMessageBytes of tensors.
constexpr size_t kHeaderAllowance = 1024 * 1024;

struct HttpConnection;

// A piece of a request's body: the bytes of a Uint8Array while JS's call
// into the channel lasts, then the call's own copy.
struct BodyPart {
  const char* data = nullptr;
  size_t size = 0;
};

struct HttpCall {
  uint32_t id = 0;
  std::string head;  // request line and headers, blank line included
  std::vector<BodyPart> body;
  std::string owned;  // the body, once it outlives the call from JS
  HttpConnection* conn = nullptr;  // null while queued
};


// Its timer: the connect timeout, then the idle timeout.
struct HttpConnection : LoopConnection, ResponseSink {
  explicit HttpConnection(uint64_t max_body) : reader(max_body) {}

  bool OnHead(const ResponseHead& head) override;
  void OnBody(const char* data, size_t size) override;

  HttpCall* call = nullptr;  // in flight (written, or being written)
  bool written = false;
  ResponseReader reader;
  // The response being read.
  ResponseHead head;
  Napi::Reference<Napi::ArrayBuffer> body;  // where Content-Length says how much comes
  uint8_t* body_data = nullptr;
  size_t body_pad = 0;
  size_t body_have = 0;
  std::string spill;  // the body of a chunked response, or one read to the connection's end
  bool out_of_memory = false;
};

class HttpChannel : public LoopChannel {
 public:
  HttpChannel(Napi::Env env, std::string host, int port, ChannelSettings settings, Napi::Function on_events)
      : LoopChannel(env, std::move(host), port, settings, on_events, "tritonserver-node:http-channel") {}

  // A request: its head and its body's pieces. Events come from a zero timer.
  uint32_t Start(std::string head, std::vector<BodyPart> body) {
    auto call = std::make_unique<HttpCall>();
    HttpCall* raw = call.get();
    do raw->id = ++next_id_;
    while (raw->id == 0 || calls_.count(raw->id) > 0);
    raw->head = std::move(head);
    raw->body = std::move(body);
    const uint32_t id = raw->id;
    calls_.emplace(id, std::move(call));
    CallStarted();
    queue_.push_back(raw);
    Pump();
    // The call may have ended already (a write that failed at once): looked up again.
    // JS may change its arrays once this returns: what waits keeps a copy.
    auto found = calls_.find(id);
    if (found != calls_.end() && (found->second->conn == nullptr || !found->second->conn->written)) Own(found->second.get());
    ScheduleDispatch();
    return id;
  }

  // JS ends the call itself (CANCELLED): no event comes for it.
  void Cancel(uint32_t id) {
    auto found = calls_.find(id);
    if (found == calls_.end()) return;
    HttpCall* call = found->second.get();
    if (call->conn != nullptr) {
      HttpConnection* conn = call->conn;
      conn->call = nullptr;
      Forget(call);
      Drop(conn);  // the response still on its way cannot be told apart from the next one's
      Pump();
    } else {
      Forget(call);
    }
    ScheduleDispatch();
  }

 private:
  // ---- calls ----

  // Puts queued calls on idle connections, opening new ones up to the limit.
  void Pump() {
    while (!queue_.empty()) {
      HttpConnection* conn = nullptr;
      if (!idle_.empty()) {
        conn = idle_.back();
        idle_.pop_back();
      } else if (open_ < settings_.connections) {
        conn = new HttpConnection(settings_.max_message_bytes + kHeaderAllowance);
        open_++;
        Dial(conn);
        if (conn->broken) {  // failed at once (no such host): Break ended the queue
          continue;
        }
      } else {
        return;
      }
      HttpCall* call = queue_.front();
      queue_.pop_front();
      Assign(conn, call);
    }
  }

  void Assign(HttpConnection* conn, HttpCall* call) {
    conn->call = call;
    call->conn = conn;
    Ref(conn, true);
    if (conn->open) {
      uv_timer_stop(&conn->timer);
      Write(conn);
    }
  }

  void Own(HttpCall* call) {
    size_t size = 0;
    for (const BodyPart& part : call->body) size += part.size;
    call->owned.reserve(size);
    for (const BodyPart& part : call->body) call->owned.append(part.data, part.size);
    call->body.assign(1, BodyPart{call->owned.data(), call->owned.size()});
  }

  // Writes the request at once where the socket takes it (most requests:
  // no copy, no write request, no watcher to change); what is left is
  // copied and goes later (LoopChannel::SendBytes).
  void Write(HttpConnection* conn) {
    HttpCall* call = conn->call;
    conn->written = true;
    conn->reader.Reset();
    std::vector<uv_buf_t> bufs;
    bufs.reserve(1 + call->body.size());
    bufs.push_back(uv_buf_init(call->head.data(), static_cast<unsigned>(call->head.size())));
    for (const BodyPart& part : call->body)
      bufs.push_back(uv_buf_init(const_cast<char*>(part.data), static_cast<unsigned>(part.size)));
    SendBytes(conn, bufs.data(), bufs.size());
  }

  // Removes a call (no event).
  void Forget(HttpCall* call) {
    queue_.erase(std::remove(queue_.begin(), queue_.end(), call), queue_.end());
    calls_.erase(call->id);
    CallEnded();
    Settle();
  }

  void End(HttpCall* call, int code, std::string message, Fault fault) {
    EmitEnd(call->id, code, std::move(message), fault);
    Forget(call);
  }

  // ---- responses ----

  void OnOpen(LoopConnection* each) override {
    auto* conn = static_cast<HttpConnection*>(each);
    uv_tcp_keepalive(&conn->tcp, 1, static_cast<unsigned>(std::max<uint64_t>(1, settings_.keep_alive_ms / 1000)));
    if (conn->call != nullptr) Write(conn);
    else Rest(conn);
  }

  void OnBytes(LoopConnection* each, const char* data, size_t size) override {
    auto* conn = static_cast<HttpConnection*>(each);
    if (conn->call == nullptr || !conn->written) {
      Break(conn, "the server sent bytes no request asked for", true);
      return;
    }
    size_t used = 0;
    const ResponseReader::Status status = conn->reader.Feed(data, size, conn, &used);
    if (status == ResponseReader::Status::kMore) return;
    // Bytes past the response answer no request: the response stands, the connection goes.
    if (status == ResponseReader::Status::kDone && used < size) conn->head.close = true;
    Finish(conn, status);
  }

  void OnReadEnd(LoopConnection* each, int status) override {
    auto* conn = static_cast<HttpConnection*>(each);
    if (conn->call == nullptr) {  // an idle connection the server closed
      Drop(conn);
      return;
    }
    if (status == UV_EOF && conn->written && conn->reader.End() == ResponseReader::Status::kDone) {
      conn->head.close = true;
      Finish(conn, ResponseReader::Status::kDone);
      return;
    }
    LoopChannel::OnReadEnd(conn, status);
  }

  // The response is read (or could not be): its event, then the connection
  // takes the next request, rests or closes.
  void Finish(HttpConnection* conn, ResponseReader::Status status) {
    HttpCall* call = conn->call;
    if (status != ResponseReader::Status::kDone) {
      const bool large = conn->reader.too_large();
      std::string why = conn->out_of_memory ? "no memory for a response body"
                        : large ? "the response is larger than maxMessageBytes (" +
                                      std::to_string(settings_.max_message_bytes) + ")"
                                : conn->reader.error();
      ReleaseBody(conn);
      conn->call = nullptr;
      End(call, large || conn->out_of_memory ? kStatusResourceExhausted : kStatusInternal, std::move(why), kNoFault);
      Drop(conn);
      Pump();
      return;
    }
    ChannelEvent event;
    event.id = call->id;
    event.code = conn->head.status;
    event.extra = conn->head.infer_header_length.has_value() ? static_cast<int64_t>(*conn->head.infer_header_length) : -1;
    if (conn->head.encoding.empty()) {
      event.bytes = Body(conn);
    } else {
      bool too_large = false;
      Bytes plain;
      std::string why = Inflate(conn, &too_large, &plain);
      ReleaseBody(conn);
      if (!why.empty()) {
        conn->call = nullptr;
        End(call, too_large ? kStatusResourceExhausted : kStatusInternal, std::move(why), kNoFault);
        Drop(conn);
        Pump();
        return;
      }
      event.bytes = Copied(conn->head, plain.begin(), plain.size);
    }
    if (event.bytes == nullptr) {
      conn->call = nullptr;
      End(call, kStatusResourceExhausted, "no memory for a response body", kNoFault);
      Drop(conn);
      Pump();
      return;
    }
    Emit(std::move(event));
    const bool close = conn->head.close;
    conn->call = nullptr;
    conn->written = false;
    Forget(call);
    if (close || closed_) Drop(conn);
    else Rest(conn);
    Pump();
  }

  // What a compressed body (read whole into `spill`) inflates to, within
  // the body's limit, into `plain`; why not, or empty. Only where the
  // request asked for compression (`compress`: JS sent Accept-Encoding).
  std::string Inflate(HttpConnection* conn, bool* too_large, Bytes* plain) {
    const std::string& encoding = conn->head.encoding;
#if defined(TSN_HAVE_ZLIB)
    const int window_bits = WindowBitsOf(encoding);
    if (!settings_.compress || window_bits == 0)
#endif
      return "the response is compressed (" + encoding + ") although the native transport asked for " +
             (settings_.compress ? "gzip or deflate" : "none");
#if defined(TSN_HAVE_ZLIB)
    const size_t limit = settings_.max_message_bytes + kHeaderAllowance;
    if (!InflateAll(conn->spill.data(), conn->spill.size(), window_bits, limit, plain, too_large))
      return *too_large ? "the response is larger than maxMessageBytes (" + std::to_string(settings_.max_message_bytes) +
                             ") once inflated"
                       : "could not read the " + encoding + " response: not a whole " + encoding + " stream";
    if (conn->head.infer_header_length.value_or(0) > plain->size)
      return "the response's Inference-Header-Content-Length is larger than its body";
    return "";
#endif
  }

  // The body as a Uint8Array over an ArrayBuffer of its own, its binary
  // part (after the JSON header) 8-byte aligned; null without memory.
  napi_value Body(HttpConnection* conn) {
    napi_value view = nullptr;
    if (!conn->body.IsEmpty()) {
      Napi::ArrayBuffer buffer = conn->body.Value();
      napi_create_typedarray(env_, napi_uint8_array, conn->body_have, buffer, conn->body_pad, &view);
      ReleaseBody(conn);
      return view;
    }
    view = Copied(conn->head, conn->spill.data(), conn->spill.size());
    conn->spill.clear();
    conn->spill.shrink_to_fit();
    return view;
  }

  // A copy of `size` bytes as Body gives them; null without memory.
  napi_value Copied(const ResponseHead& head, const char* bytes, size_t size) {
    const size_t pad = Pad(head, size);
    char* data = nullptr;
    napi_value buffer = NewBuffer(pad + size, &data);
    if (buffer == nullptr) return nullptr;
    if (size > 0) std::memcpy(data + pad, bytes, size);
    napi_value view = nullptr;
    napi_create_typedarray(env_, napi_uint8_array, size, buffer, pad, &view);
    return view;
  }

  // An ArrayBuffer of `size` bytes, not zeroed (every byte is written before
  // JS sees it); null without memory.
  napi_value NewBuffer(size_t size, char** data) {
    napi_value node_buffer = nullptr;
    void* bytes = nullptr;
    if (napi_create_buffer(env_, size, &bytes, &node_buffer) != napi_ok) {
      napi_value error = nullptr;
      napi_get_and_clear_last_exception(env_, &error);
      return nullptr;
    }
    napi_value buffer = nullptr;
    size_t offset = 0;
    napi_get_typedarray_info(env_, node_buffer, nullptr, nullptr, nullptr, &buffer, &offset);
    *data = static_cast<char*>(bytes) - offset;
    return buffer;
  }

  static size_t Pad(const ResponseHead& head, size_t size) {
    const uint64_t json = head.infer_header_length.value_or(size);
    return static_cast<size_t>((8 - json % 8) % 8);
  }

  void ReleaseBody(HttpConnection* conn) {
    conn->body.Reset();
    conn->body_data = nullptr;
    conn->body_have = 0;
    conn->spill.clear();
    conn->spill.shrink_to_fit();
  }

 public:
  // The reader's sink (HttpConnection forwards here).
  bool Head(HttpConnection* conn, const ResponseHead& head) {
    conn->head = head;
    conn->out_of_memory = false;
    if (!head.content_length.has_value() || !head.encoding.empty()) return true;  // spilled
    const size_t length = static_cast<size_t>(*head.content_length);
    const size_t pad = Pad(head, length);
    char* data = nullptr;
    // Pages are touched as the body's bytes arrive: a large announced body
    // costs address space until then.
    napi_value buffer = NewBuffer(pad + length, &data);
    if (buffer == nullptr) {
      conn->out_of_memory = true;
      return false;
    }
    conn->body = Napi::Persistent(Napi::ArrayBuffer(env_, buffer));
    conn->body_data = reinterpret_cast<uint8_t*>(data) + pad;
    conn->body_pad = pad;
    conn->body_have = 0;
    return true;
  }

  void Body(HttpConnection* conn, const char* data, size_t size) {
    if (conn->body_data != nullptr) {
      std::memcpy(conn->body_data + conn->body_have, data, size);
      conn->body_have += size;
    } else {
      conn->spill.append(data, size);
    }
  }

 private:
  // An idle connection: back in the pool until kIdleMs pass.
  void Rest(HttpConnection* conn) {
    Ref(conn, false);
    idle_.push_back(conn);
    RestartTimer(conn, kIdleMs);
  }

  void OnTimer(LoopConnection* each) override {
    auto* conn = static_cast<HttpConnection*>(each);
    if (conn->call == nullptr) Drop(conn);  // idle too long
  }

  // The connection failed: its call ends, and where it never connected,
  // the queued calls too (the server is not there).
  void Break(LoopConnection* each, const std::string& why, bool was_open) override {
    auto* conn = static_cast<HttpConnection*>(each);
    if (conn->broken) return;
    conn->broken = true;
    conn->why = why;
    if (HttpCall* call = conn->call) {
      conn->call = nullptr;
      ReleaseBody(conn);
      End(call, kStatusUnavailable, why, was_open && conn->written ? kSent : kNotSent);
    }
    if (!was_open) {
      std::deque<HttpCall*> queue;
      queue.swap(queue_);
      for (HttpCall* call : queue) End(call, kStatusUnavailable, why, kNotSent);
    }
    Drop(conn);
    if (was_open) Pump();
  }

  void Detach(LoopConnection* each) override {
    auto* conn = static_cast<HttpConnection*>(each);
    idle_.erase(std::remove(idle_.begin(), idle_.end(), conn), idle_.end());
    if (conn->call != nullptr) conn->call->conn = nullptr;
    conn->call = nullptr;
    ReleaseBody(conn);
    open_--;
  }

  void Settle() override {
    if (closed_ && calls_.empty()) {
      for (HttpConnection* conn : std::vector<HttpConnection*>(idle_)) Drop(conn);
    }
    LoopChannel::Settle();
  }

  bool Idle() const override { return calls_.empty(); }

  void DropCalls() override {
    queue_.clear();
    for (LoopConnection* conn : connections()) static_cast<HttpConnection*>(conn)->call = nullptr;
    calls_.clear();
  }

  std::unordered_map<uint32_t, std::unique_ptr<HttpCall>> calls_;
  std::deque<HttpCall*> queue_;         // waiting for a connection
  std::vector<HttpConnection*> idle_;   // connected, no request
  uint32_t open_ = 0;                   // connections not yet dropped
  uint32_t next_id_ = 0;
};

bool HttpConnection::OnHead(const ResponseHead& response) {
  return static_cast<HttpChannel*>(channel)->Head(this, response);
}

void HttpConnection::OnBody(const char* data, size_t size) {
  static_cast<HttpChannel*>(channel)->Body(this, data, size);
}

// The JS object: new HttpChannel(host, port, [connectTimeoutMs, keepAliveMs, maxMessageBytes, connections], onEvents).
class HttpChannelWrap : public Napi::ObjectWrap<HttpChannelWrap> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "HttpChannel",
                       {InstanceMethod<&HttpChannelWrap::Start>("start"),
                        InstanceMethod<&HttpChannelWrap::Cancel>("cancel"),
                        InstanceMethod<&HttpChannelWrap::Close>("close")});
  }

  explicit HttpChannelWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<HttpChannelWrap>(info) {
    Napi::Env env = info.Env();
    if (info.Length() < 4 || !info[0].IsString() || !info[3].IsFunction())
      throw Napi::TypeError::New(env, "new HttpChannel(host, port, settings, onEvents, tls)");
    const int port = ReadPort(env, info[1], "HttpChannel");
    ChannelSettings settings = ReadSettings(env, info[2], "HttpChannel");
    ReadTls(env, info[4], "http/1.1", &settings);
    channel_ = std::make_shared<HttpChannel>(env, info[0].As<Napi::String>().Utf8Value(), port, settings,
                                             info[3].As<Napi::Function>());
    channel_->Hold(channel_);
  }

  ~HttpChannelWrap() override {
    if (channel_ != nullptr) channel_->Abandon();
  }

 private:
  // start(head: string, body: Uint8Array[]) → id
  Napi::Value Start(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (channel_->closed()) throw Napi::Error::New(env, "the channel is closed");
    if (info.Length() < 2 || !info[0].IsString() || !info[1].IsArray())
      throw Napi::TypeError::New(env, "start(head, bodyParts)");
    Napi::Array list = info[1].As<Napi::Array>();
    std::vector<BodyPart> body;
    body.reserve(list.Length());
    for (uint32_t i = 0; i < list.Length(); ++i) {
      Napi::Value item = list.Get(i);
      if (!item.IsTypedArray() || item.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array)
        throw Napi::TypeError::New(env, "start: the body's parts must be Uint8Arrays");
      Napi::Uint8Array bytes = item.As<Napi::Uint8Array>();
      if (bytes.ByteLength() == 0) continue;
      body.push_back(BodyPart{reinterpret_cast<const char*>(bytes.Data()), bytes.ByteLength()});
    }
    std::string head = info[0].As<Napi::String>().Utf8Value();
    const uint32_t id = channel_->Start(std::move(head), std::move(body));
    return Napi::Number::New(env, id);
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

  std::shared_ptr<HttpChannel> channel_;
};

}  // namespace

void RegisterHttpChannel(Napi::Env env, Napi::Object exports) {
  exports.Set("HttpChannel", HttpChannelWrap::Define(env));
  exports.Set("nativeTls", Napi::Boolean::New(env, TlsAvailable()));
#if defined(TSN_HAVE_ZLIB)
  exports.Set("nativeCompression", Napi::Boolean::New(env, Zlib() != nullptr));
#else
  exports.Set("nativeCompression", Napi::Boolean::New(env, false));
#endif
}

}  // namespace tsn
