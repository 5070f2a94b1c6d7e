// What the client's native transports (grpc-channel.cc, http-channel.cc)
// share: a channel to one address on the JS thread's own libuv loop, its
// TCP connections (resolved and dialed on demand, each with a timer), and
// the events of its calls, handed to JS in batches: one JS call per read
// from the socket. Each protocol adds its framing and its calls.
#pragma once

#include <napi.h>
#include <uv.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../core/tls-session.h"
#include "../core/zlib-api.h"

namespace tsn::client {

// gRPC status codes the channels end calls with (JS reads both as gRPC's).
constexpr int kStatusUnknown = 2;
constexpr int kStatusInvalidArgument = 3;
constexpr int kStatusResourceExhausted = 8;
constexpr int kStatusInternal = 13;
constexpr int kStatusUnavailable = 14;

// Whether a call ended by a failed connection may have reached the server.
enum Fault : int32_t { kNoFault = 0, kSent = 1, kNotSent = 2 };

struct ChannelSettings {
  uint64_t connect_timeout_ms = 10000;
  uint64_t keep_alive_ms = 300000;
  size_t max_message_bytes = 64 << 20;
  uint32_t connections = 1;  // HTTP/1.1: calls in flight at once (one per connection)
  bool compress = false;     // gRPC: requests gzip'd; both: compressed answers taken (core/zlib-api.h)
#if defined(TSN_HAVE_OPENSSL)
  std::shared_ptr<TlsContext> tls;  // null: plain TCP
  std::string tls_name;             // the name (or address) the server's certificate must carry
#endif
};

// An event as JS reads it, five values each: a message
// [id, 0, bytes, status, headerLength] (gRPC: status and headerLength 0;
// HTTP/1.1: the response's status, Inference-Header-Content-Length or -1),
// or the call's end [id, 1, code, message, fault].
struct ChannelEvent {
  uint32_t id = 0;
  napi_value bytes = nullptr;  // a message: made in the scope of the read that completed it
  int code = 0;                // the end's status code, or a message's HTTP status
  std::string message;
  int64_t extra = 0;           // the end's Fault, or a message's header length
};

class LoopChannel;

// One TCP connection. It closes with its timer; the object goes once both
// handles (and a name resolution under way) are done with it.
struct LoopConnection {
  virtual ~LoopConnection() = default;
  uv_tcp_t tcp{};
  uv_connect_t connect{};
  uv_timer_t timer{};  // the connect timeout, then what the protocol times
  LoopChannel* channel = nullptr;
  bool connected = false;  // TCP is up
  bool open = false;       // and TLS where asked for: the protocol may speak
  bool broken = false;
  std::string why;  // what broke it
  int holds = 0;
#if defined(TSN_HAVE_OPENSSL)
  std::unique_ptr<TlsSession> tls;
#endif
};

class LoopChannel : public std::enable_shared_from_this<LoopChannel> {
 public:
  virtual ~LoopChannel() = default;
  // Held by itself while it has libuv handles, and by its JS object.
  void Hold(std::shared_ptr<LoopChannel> self);
  // Takes no new call; the connections go once the calls in flight are over.
  void Close();
  // The JS object is gone or the environment is: everything goes now, and JS hears nothing more.
  void Abandon();
  bool closed() const { return closed_; }

 protected:
  LoopChannel(Napi::Env env, std::string host, int port, ChannelSettings settings, Napi::Function on_events,
              const char* resource_name);

  // ---- connections ----
  // Opens `conn` (made by the protocol, then owned here): resolves the host
  // where it is a name and connects; OnOpen or Break follows.
  void Dial(LoopConnection* conn);
  // Connected (TCP_NODELAY set, reading, TLS established where asked for):
  // the protocol starts its calls.
  virtual void OnOpen(LoopConnection* conn) = 0;
  // Writes `bufs` (encrypted where the connection is TLS): at once where the
  // socket takes them, the rest copied and written later. False where the
  // connection broke (Break has run).
  bool SendBytes(LoopConnection* conn, const uv_buf_t* bufs, size_t count);
  virtual void OnBytes(LoopConnection* conn, const char* data, size_t size) = 0;
  // The server ended the connection (UV_EOF) or reading failed.
  virtual void OnReadEnd(LoopConnection* conn, int status);
  // The connection's timer, once connected (the connect timeout is handled here).
  virtual void OnTimer(LoopConnection*) {}
  void RestartTimer(LoopConnection* conn, uint64_t ms);
  // The connection failed: the protocol ends its calls (UNAVAILABLE, `sent`
  // where a request may have reached the server) and drops it.
  virtual void Break(LoopConnection* conn, const std::string& why, bool was_open) = 0;
  // Closes a connection: the protocol lets go of it first (Detach).
  void Drop(LoopConnection* conn);
  virtual void Detach(LoopConnection* conn) = 0;
  // A connection keeps the process alive only while it has calls.
  static void Ref(LoopConnection* conn, bool busy);
  std::string Where() const { return host_ + ":" + std::to_string(port_); }
  const std::vector<LoopConnection*>& connections() const { return conns_; }
  bool Live(LoopConnection* conn) const;

  // ---- calls and events ----
  // The first call in flight holds the JS callback strongly; the last lets it go.
  void CallStarted();
  void CallEnded();
  void Emit(ChannelEvent event) { events_.push_back(std::move(event)); }
  void EmitEnd(uint32_t id, int code, std::string message, Fault fault);
  // Events that arose in a call from JS go out from a zero timer, never inside it.
  void ScheduleDispatch();
  // Hands the events gathered to JS in one call, then AfterDispatch.
  void Dispatch();
  // Writes what the calls JS made from the events asked for.
  virtual void AfterDispatch() {}
  // Closes what no call needs; everything once closed and without calls.
  virtual void Settle();
  virtual bool Idle() const = 0;
  // Abandon: the protocol forgets its calls (no event).
  virtual void DropCalls() = 0;
  void TearDown();

  Napi::Env env_;
  uv_loop_t* loop_ = nullptr;
  const std::string host_;
  const int port_;
  const ChannelSettings settings_;
  bool in_dispatch_ = false;
  bool closed_ = false;
  bool abandoned_ = false;
  bool torn_down_ = false;

 private:
  struct Resolve;
  void Connect(LoopConnection* conn, const sockaddr* address);
  void Opened(LoopConnection* conn);
  bool SendRaw(LoopConnection* conn, const uv_buf_t* bufs, size_t count);
  static void OnWritten(uv_write_t* req, int status);
#if defined(TSN_HAVE_OPENSSL)
  void Shake(LoopConnection* conn);
  // Ciphertext the session has for the socket (handshake, alerts, key updates).
  bool FlushTls(LoopConnection* conn);
  void ReadTls(LoopConnection* conn, const char* data, size_t size);
#endif
  void Release(LoopConnection* conn);  // a handle or resolution of it is done
  void HandleClosed();
  static void OnResolved(uv_getaddrinfo_t* req, int status, addrinfo* result);
  static void OnConnected(uv_connect_t* req, int status);
  static void OnConnectionTimer(uv_timer_t* timer);
  static void OnAlloc(uv_handle_t* handle, size_t, uv_buf_t* buf);
  static void OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void OnDispatchTimer(uv_timer_t* timer);
  static void OnEnvCleanup(napi_async_cleanup_hook_handle, void* data);

  Napi::FunctionReference on_events_;  // strong only while calls are in flight
  Napi::AsyncContext context_;
  uv_timer_t dispatch_{};
  std::unique_ptr<char[]> read_buffer_;
  std::unique_ptr<char[]> plain_buffer_;  // TLS: plaintext of a read
  std::string cipher_;                    // TLS: ciphertext of a send
  std::vector<ChannelEvent> events_;
  std::vector<LoopConnection*> conns_;
  size_t calls_ = 0;
  int handles_ = 0;
  napi_async_cleanup_hook_handle cleanup_hook_ = nullptr;
  std::shared_ptr<LoopChannel> self_;
};

// The settings JS passes ([connectTimeoutMs, keepAliveMs, maxMessageBytes,
// connections]), checked again here: a zero keepalive would spin the loop.
ChannelSettings ReadSettings(Napi::Env env, Napi::Value value, const char* what);
// A port JS passes, 1-65535.
int ReadPort(Napi::Env env, Napi::Value value, const char* what);
// TLS settings JS passes ([ca, cert, key, name], PEM text; undefined: plain
// TCP) into `settings`, with `alpn` the protocol to offer. Throws where
// they do not load or this process has no OpenSSL.
void ReadTls(Napi::Env env, Napi::Value value, const char* alpn, ChannelSettings* settings);
// Whether this process exports the OpenSSL the native transports use for TLS.
bool TlsAvailable();

}  // namespace tsn::client
