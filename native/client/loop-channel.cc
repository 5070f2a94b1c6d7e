#include "loop-channel.h"

#include <algorithm>
#include <utility>

namespace tsn::client {

namespace {
constexpr size_t kReadBytes = 64 * 1024;
}  // namespace

// What the socket did not take at once, copied: libuv writes it later.
struct LoopWrite {
  uv_write_t req{};  // its data: this LoopWrite
  LoopConnection* conn = nullptr;
  std::string bytes;
};

struct LoopChannel::Resolve {
  uv_getaddrinfo_t req{};  // its data: this Resolve
  LoopConnection* conn = nullptr;
  bool synchronous = false;  // failed inside uv_getaddrinfo: the call from JS delivers the events
};

LoopChannel::LoopChannel(Napi::Env env, std::string host, int port, ChannelSettings settings,
                         Napi::Function on_events, const char* resource_name)
    : env_(env), host_(std::move(host)), port_(port), settings_(settings), context_(env, resource_name) {
  on_events_ = Napi::Weak(on_events);
  napi_get_uv_event_loop(env, &loop_);
  read_buffer_.reset(new char[kReadBytes]);
  uv_timer_init(loop_, &dispatch_);
  dispatch_.data = this;
  uv_unref(reinterpret_cast<uv_handle_t*>(&dispatch_));
  handles_++;
}

void LoopChannel::Hold(std::shared_ptr<LoopChannel> self) {
  self_ = std::move(self);
  napi_add_async_cleanup_hook(env_, OnEnvCleanup, this, &cleanup_hook_);
}

void LoopChannel::Close() {
  closed_ = true;
  Settle();
}

void LoopChannel::Abandon() {
  if (abandoned_) return;
  abandoned_ = true;
  closed_ = true;
  events_.clear();
  on_events_.Reset();
  DropCalls();
  TearDown();
}

// ---- connections ----

void LoopChannel::Dial(LoopConnection* conn) {
  conn->channel = this;
  uv_tcp_init(loop_, &conn->tcp);
  conn->tcp.data = conn;
  uv_timer_init(loop_, &conn->timer);
  conn->timer.data = conn;
  uv_unref(reinterpret_cast<uv_handle_t*>(&conn->timer));
  conn->holds = 2;
  handles_ += 2;
  conns_.push_back(conn);
  uv_timer_start(&conn->timer, OnConnectionTimer, settings_.connect_timeout_ms, 0);
  sockaddr_storage address{};
  if (uv_ip4_addr(host_.c_str(), port_, reinterpret_cast<sockaddr_in*>(&address)) == 0 ||
      uv_ip6_addr(host_.c_str(), port_, reinterpret_cast<sockaddr_in6*>(&address)) == 0) {
    Connect(conn, reinterpret_cast<const sockaddr*>(&address));
    return;
  }
  auto* resolve = new Resolve();
  resolve->conn = conn;
  resolve->req.data = resolve;
  conn->holds++;
  handles_++;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  const std::string port = std::to_string(port_);
  const int rc = uv_getaddrinfo(loop_, &resolve->req, OnResolved, host_.c_str(), port.c_str(), &hints);
  if (rc != 0) {
    resolve->synchronous = true;
    OnResolved(&resolve->req, rc, nullptr);
  }
}

void LoopChannel::OnResolved(uv_getaddrinfo_t* req, int status, addrinfo* result) {
  auto* resolve = static_cast<Resolve*>(req->data);
  LoopConnection* conn = resolve->conn;
  LoopChannel* self = conn->channel;
  const std::shared_ptr<LoopChannel> hold = self->shared_from_this();
  const bool synchronous = resolve->synchronous;
  delete resolve;
  Napi::HandleScope scope(self->env_);
  if (!conn->broken) {
    if (status != 0 || result == nullptr) {
      self->Break(conn, std::string("getaddrinfo ") + uv_err_name(status) + " " + self->host_, false);
    } else {
      self->Connect(conn, result->ai_addr);
    }
  }
  if (result != nullptr) uv_freeaddrinfo(result);
  self->Release(conn);
  self->HandleClosed();
  if (!synchronous) self->Dispatch();
}

void LoopChannel::Connect(LoopConnection* conn, const sockaddr* address) {
  const int rc = uv_tcp_connect(&conn->connect, &conn->tcp, address, OnConnected);
  if (rc != 0) Break(conn, std::string("connect ") + uv_err_name(rc) + " " + Where(), false);
}

void LoopChannel::OnConnected(uv_connect_t* req, int status) {
  auto* conn = static_cast<LoopConnection*>(req->handle->data);
  LoopChannel* self = conn->channel;
  if (conn->broken || status == UV_ECANCELED) return;
  Napi::HandleScope scope(self->env_);
  if (status != 0) {
    self->Break(conn, std::string("connect ") + uv_err_name(status) + " " + self->Where(), false);
  } else {
    uv_tcp_nodelay(&conn->tcp, 1);
    conn->connected = true;
    uv_read_start(reinterpret_cast<uv_stream_t*>(&conn->tcp), OnAlloc, OnRead);
#if defined(TSN_HAVE_OPENSSL)
    if (self->settings_.tls != nullptr) {
      conn->tls = std::make_unique<TlsSession>(self->settings_.tls, self->settings_.tls_name);
      if (!conn->tls->ok()) self->Break(conn, "TLS: " + conn->tls->error(), false);
      else self->Shake(conn);  // the connect timeout runs on through the handshake
      self->Dispatch();
      return;
    }
#endif
    self->Opened(conn);
  }
  self->Dispatch();
}

void LoopChannel::Opened(LoopConnection* conn) {
  uv_timer_stop(&conn->timer);
  conn->open = true;
  OnOpen(conn);
}

#if defined(TSN_HAVE_OPENSSL)
void LoopChannel::Shake(LoopConnection* conn) {
  const TlsSession::Step step = conn->tls->Handshake();
  if (!FlushTls(conn)) return;
  if (step == TlsSession::Step::kFailed) {
    Break(conn, "TLS: " + conn->tls->error(), false);
  } else if (step == TlsSession::Step::kDone) {
    Opened(conn);
  }
}

bool LoopChannel::FlushTls(LoopConnection* conn) {
  cipher_.clear();
  conn->tls->TakeOutput(&cipher_);
  if (cipher_.empty()) return true;
  uv_buf_t buf = uv_buf_init(cipher_.data(), static_cast<unsigned>(cipher_.size()));
  return SendRaw(conn, &buf, 1);
}

void LoopChannel::ReadTls(LoopConnection* conn, const char* data, size_t size) {
  if (!conn->tls->Feed(data, size)) {
    Break(conn, "TLS: " + conn->tls->error(), conn->open);
    return;
  }
  if (!conn->open) {
    Shake(conn);
    if (!conn->open || conn->broken) return;
  }
  if (plain_buffer_ == nullptr) plain_buffer_.reset(new char[kReadBytes]);
  for (;;) {
    size_t got = 0;
    if (!conn->tls->Read(plain_buffer_.get(), kReadBytes, &got)) {
      // A close_notify ends the stream as the connection's end would.
      if (conn->tls->closed()) OnReadEnd(conn, UV_EOF);
      else Break(conn, "TLS: " + conn->tls->error(), true);
      return;
    }
    if (got == 0) break;
    OnBytes(conn, plain_buffer_.get(), got);
    if (conn->broken) return;
  }
  FlushTls(conn);
}
#endif

bool LoopChannel::SendBytes(LoopConnection* conn, const uv_buf_t* bufs, size_t count) {
  if (conn->broken) return false;
#if defined(TSN_HAVE_OPENSSL)
  if (conn->tls != nullptr) {
    for (size_t i = 0; i < count; ++i) {
      if (!conn->tls->Write(bufs[i].base, bufs[i].len)) {
        Break(conn, "TLS: " + conn->tls->error(), true);
        return false;
      }
    }
    return FlushTls(conn);
  }
#endif
  return SendRaw(conn, bufs, count);
}

bool LoopChannel::SendRaw(LoopConnection* conn, const uv_buf_t* bufs, size_t count) {
  auto* stream = reinterpret_cast<uv_stream_t*>(&conn->tcp);
  const int written = uv_try_write(stream, bufs, static_cast<unsigned>(count));
  if (written < 0 && written != UV_EAGAIN) {
    Break(conn, std::string("write ") + uv_err_name(written), true);
    return false;
  }
  size_t skip = written > 0 ? static_cast<size_t>(written) : 0;
  std::string rest;
  for (size_t i = 0; i < count; ++i) {
    if (skip >= bufs[i].len) {
      skip -= bufs[i].len;
      continue;
    }
    rest.append(bufs[i].base + skip, bufs[i].len - skip);
    skip = 0;
  }
  if (rest.empty()) return true;
  auto* write = new LoopWrite();
  write->req.data = write;
  write->conn = conn;
  write->bytes = std::move(rest);
  uv_buf_t buf = uv_buf_init(write->bytes.data(), static_cast<unsigned>(write->bytes.size()));
  const int rc = uv_write(&write->req, stream, &buf, 1, OnWritten);
  if (rc != 0) {
    delete write;
    Break(conn, std::string("write ") + uv_err_name(rc), true);
    return false;
  }
  return true;
}

void LoopChannel::OnWritten(uv_write_t* req, int status) {
  auto* write = static_cast<LoopWrite*>(req->data);
  LoopConnection* conn = write->conn;
  delete write;
  if (status == 0 || status == UV_ECANCELED || conn->broken) return;
  LoopChannel* self = conn->channel;
  Napi::HandleScope scope(self->env_);
  self->Break(conn, std::string("write ") + uv_err_name(status), true);
  self->Dispatch();
}

void LoopChannel::OnConnectionTimer(uv_timer_t* timer) {
  auto* conn = static_cast<LoopConnection*>(timer->data);
  LoopChannel* self = conn->channel;
  if (conn->broken) return;
  Napi::HandleScope scope(self->env_);
  if (!conn->open) {
    self->Break(conn,
                (conn->connected ? "no TLS session within " : "no connection within ") +
                    std::to_string(self->settings_.connect_timeout_ms) + " ms",
                false);
  } else {
    self->OnTimer(conn);
  }
  self->Dispatch();
}

void LoopChannel::RestartTimer(LoopConnection* conn, uint64_t ms) {
  uv_timer_start(&conn->timer, OnConnectionTimer, ms, 0);
}

void LoopChannel::OnAlloc(uv_handle_t* handle, size_t, uv_buf_t* buf) {
  LoopChannel* self = static_cast<LoopConnection*>(handle->data)->channel;
  *buf = uv_buf_init(self->read_buffer_.get(), kReadBytes);
}

void LoopChannel::OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  auto* conn = static_cast<LoopConnection*>(stream->data);
  LoopChannel* self = conn->channel;
  if (conn->broken || nread == 0) return;
  Napi::HandleScope scope(self->env_);
  if (nread < 0) self->OnReadEnd(conn, static_cast<int>(nread));
#if defined(TSN_HAVE_OPENSSL)
  else if (conn->tls != nullptr) self->ReadTls(conn, buf->base, static_cast<size_t>(nread));
#endif
  else self->OnBytes(conn, buf->base, static_cast<size_t>(nread));
  self->Dispatch();
}

void LoopChannel::OnReadEnd(LoopConnection* conn, int status) {
  Break(conn, status == UV_EOF ? "the server closed the connection" : std::string("read ") + uv_err_name(status), true);
}

bool LoopChannel::Live(LoopConnection* conn) const {
  return std::find(conns_.begin(), conns_.end(), conn) != conns_.end() && !conn->broken;
}

void LoopChannel::Drop(LoopConnection* conn) {
  if (uv_is_closing(reinterpret_cast<uv_handle_t*>(&conn->tcp))) return;
  conn->broken = true;
  Detach(conn);
  auto closed = [](uv_handle_t* handle) {
    auto* conn = static_cast<LoopConnection*>(handle->data);
    LoopChannel* self = conn->channel;
    self->Release(conn);
    self->HandleClosed();
  };
  uv_close(reinterpret_cast<uv_handle_t*>(&conn->tcp), closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&conn->timer), closed);
}

void LoopChannel::Release(LoopConnection* conn) {
  if (--conn->holds > 0) return;
  conns_.erase(std::remove(conns_.begin(), conns_.end(), conn), conns_.end());
  delete conn;
}

void LoopChannel::Ref(LoopConnection* conn, bool busy) {
  auto* handle = reinterpret_cast<uv_handle_t*>(&conn->tcp);
  if (uv_is_closing(handle)) return;
  if (busy) uv_ref(handle);
  else uv_unref(handle);
}

// ---- calls and events ----

void LoopChannel::CallStarted() {
  if (calls_++ == 0 && !abandoned_) on_events_.Ref();
}

void LoopChannel::CallEnded() {
  if (--calls_ == 0 && !abandoned_) on_events_.Unref();
}

void LoopChannel::EmitEnd(uint32_t id, int code, std::string message, Fault fault) {
  ChannelEvent event;
  event.id = id;
  event.code = code;
  event.message = std::move(message);
  event.extra = fault;
  events_.push_back(std::move(event));
}

void LoopChannel::ScheduleDispatch() {
  if (!events_.empty() && !in_dispatch_ && !torn_down_) uv_timer_start(&dispatch_, OnDispatchTimer, 0, 0);
}

void LoopChannel::OnDispatchTimer(uv_timer_t* timer) {
  auto* self = static_cast<LoopChannel*>(timer->data);
  Napi::HandleScope scope(self->env_);
  self->Dispatch();
}

void LoopChannel::Dispatch() {
  if (in_dispatch_) return;
  if (!events_.empty() && !abandoned_ && !on_events_.IsEmpty()) {
    std::vector<napi_value> args;
    args.reserve(events_.size() * 5);
    for (const ChannelEvent& event : events_) {
      args.push_back(Napi::Number::New(env_, event.id));
      if (event.bytes != nullptr) {
        args.push_back(Napi::Number::New(env_, 0));
        args.push_back(event.bytes);
        args.push_back(Napi::Number::New(env_, event.code));
        args.push_back(Napi::Number::New(env_, static_cast<double>(event.extra)));
      } else {
        args.push_back(Napi::Number::New(env_, 1));
        args.push_back(Napi::Number::New(env_, event.code));
        args.push_back(Napi::String::New(env_, event.message));
        args.push_back(Napi::Number::New(env_, static_cast<double>(event.extra)));
      }
    }
    events_.clear();
    // Kept alive through the call: JS may drop its object from inside it.
    std::shared_ptr<LoopChannel> hold = shared_from_this();
    in_dispatch_ = true;
    Napi::Function callback = on_events_.Value();
    if (!callback.IsEmpty()) {
      // Raw Node-API: nothing may be thrown from here, and a worker being
      // ended refuses the call (napi_cannot_run_js), which is no error.
      napi_value result = nullptr;
      const napi_status status =
          napi_make_callback(env_, context_, env_.Global(), callback, args.size(), args.data(), &result);
      napi_value error = nullptr;
      if (status == napi_pending_exception && napi_get_and_clear_last_exception(env_, &error) == napi_ok)
        napi_fatal_exception(env_, error);
    }
    in_dispatch_ = false;
  }
  if (abandoned_) events_.clear();
  if (!torn_down_) AfterDispatch();
  ScheduleDispatch();  // events of the calls JS made meanwhile
}

void LoopChannel::Settle() {
  if (closed_ && Idle()) TearDown();
}

// ---- the end ----

void LoopChannel::TearDown() {
  if (torn_down_) return;
  torn_down_ = true;
  std::vector<LoopConnection*> conns = conns_;
  for (LoopConnection* conn : conns) Drop(conn);
  uv_close(reinterpret_cast<uv_handle_t*>(&dispatch_),
           [](uv_handle_t* handle) { static_cast<LoopChannel*>(handle->data)->HandleClosed(); });
}

// Once every handle is closed: the environment's cleanup may go on, and
// the channel lives on only as long as its JS object.
void LoopChannel::HandleClosed() {
  if (--handles_ > 0) return;
  if (cleanup_hook_ != nullptr) {
    napi_remove_async_cleanup_hook(cleanup_hook_);
    cleanup_hook_ = nullptr;
  }
  std::shared_ptr<LoopChannel> self = std::move(self_);
}

void LoopChannel::OnEnvCleanup(napi_async_cleanup_hook_handle, void* data) {
  static_cast<LoopChannel*>(data)->Abandon();
}

// ---- what JS passes ----

ChannelSettings ReadSettings(Napi::Env env, Napi::Value value, const char* what) {
  const std::string usage = std::string(what) +
                            " settings: [connectTimeoutMs, keepAliveMs, maxMessageBytes, connections, compress], each >= 1 but compress (0 or 1)";
  if (!value.IsArray()) throw Napi::TypeError::New(env, usage);
  Napi::Array list = value.As<Napi::Array>();
  double values[4];
  for (uint32_t i = 0; i < 4; ++i) {
    Napi::Value item = list.Get(i);
    values[i] = item.IsNumber() ? item.As<Napi::Number>().DoubleValue() : 0;
    if (!(values[i] >= 1 && values[i] <= 9007199254740991.0)) throw Napi::RangeError::New(env, usage);
  }
  if (values[3] > 65536) throw Napi::RangeError::New(env, std::string(what) + ": at most 65536 connections");
  ChannelSettings settings;
  settings.compress = list.Get(4u).ToBoolean().Value();
#if defined(TSN_HAVE_ZLIB)
  if (settings.compress && Zlib() == nullptr)
#else
  if (settings.compress)
#endif
    throw Napi::Error::New(env, "this runtime exports no zlib to addons: no native compression");
  settings.connect_timeout_ms = static_cast<uint64_t>(values[0]);
  settings.keep_alive_ms = static_cast<uint64_t>(values[1]);
  settings.max_message_bytes = static_cast<size_t>(values[2]);
  settings.connections = static_cast<uint32_t>(values[3]);
  return settings;
}

bool TlsAvailable() {
#if defined(TSN_HAVE_OPENSSL)
  return OpenSsl() != nullptr;
#else
  return false;
#endif
}

void ReadTls(Napi::Env env, Napi::Value value, const char* alpn, ChannelSettings* settings) {
  if (value.IsUndefined()) return;
#if defined(TSN_HAVE_OPENSSL)
  if (!value.IsArray() || value.As<Napi::Array>().Length() != 4)
    throw Napi::TypeError::New(env, "tls settings: [ca, cert, key, name], PEM text");
  Napi::Array list = value.As<Napi::Array>();
  std::string text[4];
  for (uint32_t i = 0; i < 4; ++i) {
    Napi::Value item = list.Get(i);
    if (!item.IsString()) throw Napi::TypeError::New(env, "tls settings: [ca, cert, key, name], PEM text");
    text[i] = item.As<Napi::String>().Utf8Value();
  }
  if (OpenSsl() == nullptr) throw Napi::Error::New(env, "this process exports no OpenSSL 3 for native TLS");
  std::string error;
  settings->tls = TlsContext::Client(text[0], text[1], text[2], alpn, &error);
  if (settings->tls == nullptr) throw Napi::Error::New(env, error);
  settings->tls_name = text[3];
#else
  (void)alpn;
  (void)settings;
  throw Napi::Error::New(env, "the addon was built without OpenSSL's headers: no native TLS");
#endif
}

int ReadPort(Napi::Env env, Napi::Value value, const char* what) {
  const double port = value.IsNumber() ? value.As<Napi::Number>().DoubleValue() : 0;
  if (!(port >= 1 && port <= 65535)) throw Napi::RangeError::New(env, std::string(what) + ": port must be 1-65535");
  return static_cast<int>(port);
}

}  // namespace tsn::client
