// Threads: the front end's loop thread owns the listener, every connection
// and every Triton request made here (made, cancelled and deleted there).
// Triton's threads only queue completions, JS only queues commands (the
// bytes of the JS front end's answers); both wake the loop with one
// uv_async. The loop runs until it is closed and no request is inside
// Triton, so nothing Triton calls back into is ever gone.
#include "http-frontend.h"

#include <uv.h>

#if !defined(_WIN32)
#include <arpa/inet.h>  // ntohs
#endif

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "errors.h"
#include "grpc-wire.h"
#include "http-wire.h"
#include "nghttp2-api.h"
#include "inference.h"
#include "output-memory.h"
#include "server.h"

namespace tsn {

namespace {

// Received bytes: grown in place and handed whole to a request that ends
// where the reading ended (the usual case), so its body is never copied.
struct Bytes {
  std::unique_ptr<char[]> data;
  size_t size = 0;
  size_t capacity = 0;

  void Reserve(size_t free) {
    if (capacity - size >= free) return;
    size_t grown = capacity == 0 ? 64 * 1024 : capacity;
    while (grown - size < free) grown *= 2;
    std::unique_ptr<char[]> next(new char[grown]);
    if (size > 0) std::memcpy(next.get(), data.get(), size);
    data = std::move(next);
    capacity = grown;
  }
  // Drops the first `count` bytes.
  void Consume(size_t count) {
    if (count < size) std::memmove(data.get(), data.get() + count, size - count);
    size -= count;
  }
};

struct Frontend;
struct Pending;
struct GrpcConn;

// Triton responses held here count in liveObjects() until deleted.
void DeleteResponse(const TritonApi& api, TRITONSERVER_InferenceResponse* response) {
  Live().responses--;
  TakeError(api, api.InferenceResponseDelete(response));
}

// One client connection (loop thread only).
struct Conn {
  uv_tcp_t handle{};
  Frontend* frontend = nullptr;
  uint64_t id = 0;
  Bytes in;
  bool closing = false;
  bool to_node = false;        // Node's parser reads everything from here on
  bool node_attached = false;  // JS has a virtual socket for it
  bool busy = false;           // a request is being answered (here or by JS)
  bool close_after = false;    // the request being answered said Connection: close
  bool reading = true;         // false while a busy connection has a request's worth buffered
  bool ending = false;         // closing once its writes went out
  Pending* in_flight = nullptr;
  std::unique_ptr<GrpcConn> grpc;  // a gRPC connection's HTTP/2 sessions and streams
  uint64_t node_id = 0;            // the connection's id toward JS (for gRPC, its current virtual one)
  bool flush_queued = false;       // gRPC: frames to send once this wake's answers are in
  uint64_t last_active_ms = 0;
  uint64_t request_started_ms = 0;  // first byte of the request being read
  bool head_read = false;           // its head is in, its body is not yet
  std::shared_ptr<Conn> self;  // held while the handle is open
};

// One inference request made here: from its arrival to its answer written
// and Triton's release of it. Deleted on the loop thread once both came.
// Counted in liveObjects() as the addon's other requests are.
struct Pending {
  Pending() { Live().requests++; }
  ~Pending() { Live().requests--; }
  Pending(const Pending&) = delete;
  Pending& operator=(const Pending&) = delete;

  std::shared_ptr<Conn> conn;
  Frontend* frontend = nullptr;
  int32_t stream_id = 0;  // gRPC: the HTTP/2 stream it answers
  Bytes bytes;  // the whole HTTP request or gRPC message: the inputs point into it
  std::string model;
  int64_t version = -1;
  TRITONSERVER_InferenceRequest* request = nullptr;
  // Shared memory the request reads (held mapped until it is settled) and
  // the outputs Triton writes into a region (read by the allocator).
  std::vector<SharedMemoryRef> inputs_held;
  std::vector<std::pair<std::string, SharedMemorySpan>> output_regions;
  // Written on Triton's threads under `mutex`; read on the loop thread after final.
  std::mutex mutex;
  TRITONSERVER_InferenceResponse* response = nullptr;
  std::optional<Failure> failure;
  int responses = 0;
  // Loop thread.
  bool answered = false;
  bool released = false;
};

struct Outgoing {
  uv_write_t write{};
  uv_shutdown_t shutdown{};
  std::shared_ptr<Conn> conn;
  std::string head;
  TRITONSERVER_InferenceResponse* response = nullptr;
  const TritonApi* api = nullptr;
  std::vector<uv_buf_t> bufs;
  bool close_after = false;
};

enum class CommandKind { kWrite, kDone, kEnd, kDestroy };
struct Command {
  CommandKind kind;
  uint64_t conn;
  std::string bytes;
};

struct Completion {
  Pending* pending;
  bool release;  // Triton released the request; else its final response came
};

enum class EventKind { kData = 0, kClose = 1, kClosed = 2 };
struct Event {
  EventKind kind;
  uint64_t conn;
  std::string bytes;
};

struct Settings {
  size_t max_body_bytes = 64 << 20;
  uint64_t keep_alive_ms = 5000;
  uint64_t headers_timeout_ms = 10000;
  uint64_t request_timeout_ms = 60000;
  bool fast_path = true;          // false: every request goes to JS (authorize, inferTimeoutMs)
  bool grpc = false;              // the listener speaks gRPC (HTTP/2), not HTTP/1.1
};

using Header = std::pair<std::string, std::string>;

// Bytes one side sent until the other takes them, read from the front.
struct Queue {
  std::string bytes;
  size_t offset = 0;

  size_t size() const { return bytes.size() - offset; }
  void Append(const char* data, size_t count) {
    if (offset == bytes.size()) {
      bytes.clear();
      offset = 0;
    }
    bytes.append(data, count);
  }
  size_t Take(uint8_t* out, size_t most) {
    const size_t count = std::min(most, size());
    if (count > 0) std::memcpy(out, bytes.data() + offset, count);
    offset += count;
    return count;
  }
};

// One HTTP/2 stream (a gRPC call) of a client. A ModelInfer call the front
// end can answer itself is buffered until its message is whole; every
// other call is passed on, as it comes, to the JS front end over a second
// HTTP/2 session (the connection's virtual socket), and its answer back.
struct GrpcStream {
  int32_t id = 0;
  std::vector<Header> headers;  // the request's
  bool decided = false;         // answered here, or passed on
  bool proxied = false;
  bool request_ended = false;
  Bytes body;                   // while it may be answered here
  Pending* pending = nullptr;   // inside Triton
  int32_t inner_id = 0;         // its stream on the JS session, while open
  Queue to_inner;               // request bytes for JS
  size_t consumed_ahead = 0;    // of them, bytes already given back to the client's stream window
  bool refused = false;         // reset for buffering past the connection's budget
  Queue to_client;              // response bytes for the client
  bool response_ended = false;  // no more DATA for the client
  bool response_sent = false;   // its end went out
  bool stop_client = false;     // JS reset the call after answering: so is the client's, once answered
  std::vector<Header> trailers;
  std::vector<Header> collecting;  // a HEADERS frame from JS, as it arrives
};

struct GrpcConn {
#if defined(TSN_HAVE_NGHTTP2)
  nghttp2_session* session = nullptr;  // with the client
  nghttp2_session* inner = nullptr;    // with the JS front end, once a call needs it
#endif
  std::unordered_map<int32_t, std::unique_ptr<GrpcStream>> streams;
  std::unordered_map<int32_t, GrpcStream*> by_inner;
  size_t buffered = 0;  // request bytes held here (bodies being read, bytes waiting for JS)
  bool goaway_sent = false;

  GrpcStream* Find(int32_t id) {
    auto found = streams.find(id);
    return found == streams.end() ? nullptr : found->second.get();
  }
};

const char* Reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 408: return "Request Timeout";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

struct Frontend {
  Frontend(std::shared_ptr<ServerState> state, Settings settings)
      : state(std::move(state)), api(this->state->api), settings(settings) {}

  std::shared_ptr<ServerState> state;
  const TritonApi& api;
  Settings settings;
  TRITONSERVER_ResponseAllocator* allocator = nullptr;

  uv_loop_t loop{};
  uv_tcp_t listener{};
  uv_async_t wake{};
  uv_timer_t sweep{};
  std::thread thread;
  Napi::ThreadSafeFunction to_js;

  // Loop thread.
  std::unordered_map<uint64_t, std::shared_ptr<Conn>> conns;
  // gRPC connections by the id of their current virtual socket toward JS.
  std::unordered_map<uint64_t, std::shared_ptr<Conn>> node_links;
  std::vector<std::shared_ptr<Conn>> to_flush;
  uint64_t next_conn = 1;
  size_t in_flight = 0;
  bool closing = false;
  bool loop_ended = false;

  // Any thread, under queue_mutex.
  std::mutex queue_mutex;
  std::vector<Command> commands;
  std::vector<Completion> completions;
  bool close_wanted = false;
  bool force_close = false;  // the environment is going: JS will not close its connections
  std::atomic<bool> fast_stopped{false};  // draining: new requests go to JS, which answers 503
  std::atomic<uint64_t> answered{0};      // requests answered here, without JS

  void Emit(EventKind kind, uint64_t conn, std::string bytes);
  void Accept();
  void OnRead(Conn* conn, ssize_t nread);
  void Process(const std::shared_ptr<Conn>& conn);
  bool TryFast(const std::shared_ptr<Conn>& conn, const http::RequestHead& head, size_t total);
  bool SubmitHttp(Pending* pending, const http::RequestHead& head);
  bool Submit(Pending* pending, const std::string& id, std::vector<http::FastInput>& inputs,
              const std::vector<http::FastOutput>& outputs);
  std::optional<Failure> TakeResult(Pending* pending, TRITONSERVER_InferenceResponse** response);
  void ToNode(Conn* conn, const char* data, size_t count);
  void CloseConn(Conn* conn);
  void Write(const std::shared_ptr<Conn>& conn, Outgoing* out);
  void WriteText(const std::shared_ptr<Conn>& conn, std::string bytes, bool close_after);
  void EndAfterWrites(const std::shared_ptr<Conn>& conn);
  void OnWake();
  void Answer(Pending* pending);
  void AnswerError(Pending* pending, const Failure& failure);
  void Settle(Pending* pending);
  void RequestDone(const std::shared_ptr<Conn>& conn);
  void Sweep();
  void BeginClose(bool force);
  void MaybeEndLoop();
  Conn* Lookup(uint64_t id);
#if defined(TSN_HAVE_NGHTTP2)
  const Nghttp2Api* h2 = nullptr;
  nghttp2_session_callbacks* client_callbacks = nullptr;  // the client's session (a server session)
  nghttp2_session_callbacks* inner_callbacks = nullptr;   // the session with JS (a client session)
  nghttp2_option* client_options = nullptr;               // flow control by hand (OnClientData)
  bool GrpcOpen(Conn* conn);
  void GrpcRead(Conn* conn, ssize_t nread);
  void GrpcFlush(Conn* conn);
  void GrpcRequestHeaders(Conn* conn, GrpcStream* stream);
  void GrpcRequestEnded(Conn* conn, GrpcStream* stream);
  bool GrpcTryFast(Conn* conn, GrpcStream* stream);
  void GrpcPassOn(Conn* conn, GrpcStream* stream);
  bool GrpcInner(Conn* conn);
  void GrpcDropInner(Conn* conn, bool tell_js);
  void GrpcAnswer(Pending* pending);
  void GrpcRespond(Conn* conn, GrpcStream* stream, std::vector<Header> headers, bool with_data);
  void GrpcFail(Conn* conn, GrpcStream* stream, const Failure& failure);
  void GrpcClose(Conn* conn);
  void QueueFlush(Conn* conn);
#endif
};

void Frontend::Emit(EventKind kind, uint64_t conn, std::string bytes) {
  auto* event = new Event{kind, conn, std::move(bytes)};
  const napi_status status = to_js.NonBlockingCall(event, [](Napi::Env env, Napi::Function callback, Event* event) {
    std::unique_ptr<Event> owned(event);
    if (env == nullptr) return;
    Napi::Value data = env.Undefined();
    if (event->kind == EventKind::kData)
      data = Napi::Buffer<char>::Copy(env, event->bytes.data(), event->bytes.size());
    callback.Call({Napi::Number::New(env, static_cast<int>(event->kind)),
                   Napi::Number::New(env, static_cast<double>(event->conn)), data});
  });
  if (status != napi_ok) delete event;
}

// ---- connections ----------------------------------------------------------------------

// Reads go straight into the connection's buffer, after what it holds.
void AllocateRead(uv_handle_t* handle, size_t, uv_buf_t* buf) {
  Conn* conn = static_cast<Conn*>(handle->data);
  conn->in.Reserve(16 * 1024);
  *buf = uv_buf_init(conn->in.data.get() + conn->in.size,
                     static_cast<unsigned>(std::min<size_t>(conn->in.capacity - conn->in.size, 1u << 30)));
}

void OnReadDone(uv_stream_t* stream, ssize_t nread, const uv_buf_t*) {
  Conn* conn = static_cast<Conn*>(stream->data);
  conn->frontend->OnRead(conn, nread);
}

void Frontend::Accept() {
  auto conn = std::make_shared<Conn>();
  conn->frontend = this;
  conn->id = next_conn++;
  conn->self = conn;
  conn->handle.data = conn.get();
  uv_tcp_init(&loop, &conn->handle);
  if (uv_accept(reinterpret_cast<uv_stream_t*>(&listener), reinterpret_cast<uv_stream_t*>(&conn->handle)) != 0) {
    conn->closing = true;
    uv_close(reinterpret_cast<uv_handle_t*>(&conn->handle),
             [](uv_handle_t* handle) { static_cast<Conn*>(handle->data)->self.reset(); });
    return;
  }
  uv_tcp_nodelay(&conn->handle, 1);
  conn->node_id = conn->id;
  conn->last_active_ms = uv_now(&loop);
  conns.emplace(conn->id, conn);
#if defined(TSN_HAVE_NGHTTP2)
  if (settings.grpc && !GrpcOpen(conn.get())) {
    CloseConn(conn.get());
    return;
  }
#endif
  uv_read_start(reinterpret_cast<uv_stream_t*>(&conn->handle), AllocateRead, OnReadDone);
}

// A connection by the id JS knows it by.
Conn* Frontend::Lookup(uint64_t id) {
  auto found = conns.find(id);
  if (found != conns.end() && found->second->node_id == id) return found->second.get();
  auto linked = node_links.find(id);
  return linked == node_links.end() ? nullptr : linked->second.get();
}

void Frontend::CloseConn(Conn* conn) {
  if (conn->closing) return;
  conn->closing = true;
  std::shared_ptr<Conn> held = conn->self;
  conns.erase(conn->id);
  // A client gone mid-inference cancels its request, as with the JS front end.
  if (conn->in_flight != nullptr && conn->in_flight->request != nullptr &&
      api.InferenceRequestCancel != nullptr)
    TakeError(api, api.InferenceRequestCancel(conn->in_flight->request));
#if defined(TSN_HAVE_NGHTTP2)
  if (conn->grpc != nullptr) {
    GrpcConn& grpc = *conn->grpc;
    for (auto& [id, stream] : grpc.streams)
      if (stream->pending != nullptr && stream->pending->request != nullptr && api.InferenceRequestCancel != nullptr)
        TakeError(api, api.InferenceRequestCancel(stream->pending->request));
    GrpcDropInner(conn, true);
    grpc.streams.clear();
    if (grpc.session != nullptr) h2->session_del(grpc.session);
    grpc.session = nullptr;
  }
#endif
  if (conn->node_attached) Emit(EventKind::kClose, conn->node_id, {});
  uv_close(reinterpret_cast<uv_handle_t*>(&conn->handle), [](uv_handle_t* handle) {
    auto* conn = static_cast<Conn*>(handle->data);
    Frontend* frontend = conn->frontend;
    conn->self.reset();  // may delete conn
    frontend->MaybeEndLoop();
  });
}

void Frontend::Write(const std::shared_ptr<Conn>& conn, Outgoing* out) {
  out->conn = conn;
  out->api = &api;
  out->write.data = out;
  conn->last_active_ms = uv_now(&loop);
  const int rc = uv_write(&out->write, reinterpret_cast<uv_stream_t*>(&conn->handle), out->bufs.data(),
                          static_cast<unsigned>(out->bufs.size()), [](uv_write_t* write, int status) {
                            std::unique_ptr<Outgoing> out(static_cast<Outgoing*>(write->data));
                            if (out->response != nullptr)
                              DeleteResponse(*out->api, out->response);
                            Conn* conn = out->conn.get();
                            if (status < 0) conn->frontend->CloseConn(conn);
                            else if (out->close_after) conn->frontend->EndAfterWrites(out->conn);
                          });
  if (rc < 0) {
    if (out->response != nullptr) DeleteResponse(api, out->response);
    delete out;
    CloseConn(conn.get());
  }
}

void Frontend::WriteText(const std::shared_ptr<Conn>& conn, std::string bytes, bool close_after) {
  if (conn->closing) return;
  auto* out = new Outgoing();
  out->head = std::move(bytes);
  out->bufs.push_back(uv_buf_init(out->head.data(), static_cast<unsigned>(out->head.size())));
  out->close_after = close_after;
  Write(conn, out);
}

// Closes once what was written has gone out.
void Frontend::EndAfterWrites(const std::shared_ptr<Conn>& conn) {
  if (conn->closing || conn->ending) return;
  conn->ending = true;
  auto* out = new Outgoing();
  out->conn = conn;
  out->shutdown.data = out;
  if (uv_shutdown(&out->shutdown, reinterpret_cast<uv_stream_t*>(&conn->handle), [](uv_shutdown_t* req, int) {
        std::unique_ptr<Outgoing> out(static_cast<Outgoing*>(req->data));
        out->conn->frontend->CloseConn(out->conn.get());
      }) != 0) {
    delete out;
    CloseConn(conn.get());
  }
}

void Frontend::ToNode(Conn* conn, const char* data, size_t count) {
  conn->node_attached = true;
  Emit(EventKind::kData, conn->id, std::string(data, count));
}

void Frontend::OnRead(Conn* conn, ssize_t nread) {
  if (nread == UV_ENOBUFS || nread == 0) return;
  // The end of what the client sends (or an error) ends the connection and
  // cancels what it asked for, as Node's server does (httpAllowHalfOpen off).
  if (nread < 0) {
    CloseConn(conn);
    return;
  }
  conn->last_active_ms = uv_now(&loop);
#if defined(TSN_HAVE_NGHTTP2)
  if (conn->grpc != nullptr) {
    conn->in.size += static_cast<size_t>(nread);
    GrpcRead(conn, static_cast<ssize_t>(conn->in.size));
    return;
  }
#endif
  if (conn->in.size == 0) conn->request_started_ms = uv_now(&loop);
  conn->in.size += static_cast<size_t>(nread);
  Process(conn->self);
  // A client that keeps sending while its request is answered waits (as
  // with Node's server) once a whole request's worth is buffered.
  if (!conn->closing && conn->busy && conn->in.size > settings.max_body_bytes + http::kMaxHeadBytes) {
    uv_read_stop(reinterpret_cast<uv_stream_t*>(&conn->handle));
    conn->reading = false;
  }
}

// Answers what the connection has read, one request at a time, in order.
void Frontend::Process(const std::shared_ptr<Conn>& conn) {
  while (!conn->closing && conn->in.size > 0) {
    if (conn->to_node) {
      ToNode(conn.get(), conn->in.data.get(), conn->in.size);
      conn->in.size = 0;
      return;
    }
    if (conn->busy) return;
    http::RequestHead head;
    const http::HeadStatus status = http::ParseHead(conn->in.data.get(), conn->in.size, &head);
    if (status == http::HeadStatus::kIncomplete) return;
    if (status == http::HeadStatus::kToNode || head.content_length > settings.max_body_bytes) {
      // Node's own parser takes the connection (and answers 400, 413, 431...).
      conn->to_node = true;
      continue;
    }
    const size_t total = head.head_bytes + head.content_length;
    if (conn->in.size < total) {
      // Room for the body as it comes, not all at once: a head is no
      // promise that the body follows.
      conn->in.Reserve(std::min<size_t>(total - conn->in.size, size_t{1} << 20));
      conn->head_read = true;
      return;
    }
    conn->busy = true;
    conn->head_read = false;
    // What follows this request started arriving no later than now.
    conn->request_started_ms = uv_now(&loop);
    conn->close_after = head.close;
    if (TryFast(conn, head, total)) continue;
    ToNode(conn.get(), conn->in.data.get(), total);
    conn->in.Consume(total);
  }
}

// ---- the fast path --------------------------------------------------------------------

// Outputs go into the shared memory region the request named for them, or
// to host memory of their own, written from there and freed when the
// response is deleted (after the write).
TRITONSERVER_Error* AllocateOutput(TRITONSERVER_ResponseAllocator*, const char* name, size_t byte_size,
                                   TRITONSERVER_MemoryType, int64_t, void* userp, void** buffer,
                                   void** buffer_userp, TRITONSERVER_MemoryType* memory_type,
                                   int64_t* memory_type_id) {
  *memory_type = TRITONSERVER_MEMORY_CPU;
  *memory_type_id = 0;
  *buffer_userp = nullptr;
  *buffer = nullptr;
  auto* pending = static_cast<Pending*>(userp);
  for (const auto& [output, span] : pending->output_regions) {
    if (output != name) continue;
    if (byte_size > span.size)
      return pending->frontend->api.ErrorNew(TRITONSERVER_ERROR_INTERNAL,
                                             SharedMemoryTooSmall(name, span.size, byte_size).c_str());
    *buffer = span.data;
    *buffer_userp = &kCallerMemory;
    return nullptr;
  }
  if (byte_size == 0) return nullptr;
  *buffer = std::malloc(byte_size);
  if (*buffer == nullptr) {
    const TritonApi& api = pending->frontend->api;
    return api.ErrorNew(TRITONSERVER_ERROR_INTERNAL,
                        (std::string("out of memory allocating output '") + name + "'").c_str());
  }
  Live().output_buffers++;
  return nullptr;
}

TRITONSERVER_Error* ReleaseOutput(TRITONSERVER_ResponseAllocator*, void* buffer, void* buffer_userp, size_t,
                                  TRITONSERVER_MemoryType, int64_t) {
  if (buffer_userp == &kCallerMemory) return nullptr;  // the region's
  if (buffer != nullptr) Live().output_buffers--;
  std::free(buffer);
  return nullptr;
}

void QueueCompletion(Pending* pending, bool release) {
  Frontend* frontend = pending->frontend;
  {
    std::lock_guard<std::mutex> lock(frontend->queue_mutex);
    frontend->completions.push_back({pending, release});
  }
  uv_async_send(&frontend->wake);
}

void OnResponse(TRITONSERVER_InferenceResponse* response, const uint32_t flags, void* userp) {
  auto* pending = static_cast<Pending*>(userp);
  const TritonApi& api = pending->frontend->api;
  {
    std::lock_guard<std::mutex> lock(pending->mutex);
    if (response != nullptr) {
      Live().responses++;
      if (++pending->responses == 1) {
        pending->failure = TakeError(api, api.InferenceResponseError(response));
        if (pending->failure) DeleteResponse(api, response);
        else pending->response = response;
      } else {
        DeleteResponse(api, response);
      }
    }
  }
  if ((flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) != 0) QueueCompletion(pending, false);
}

void OnRelease(TRITONSERVER_InferenceRequest*, const uint32_t flags, void* userp) {
  if ((flags & TRITONSERVER_REQUEST_RELEASE_ALL) != 0) QueueCompletion(static_cast<Pending*>(userp), true);
}

// Hands the request to Triton when it is a plain binary inference. False
// (nothing consumed) when its head already says it is not one; else its
// bytes are taken, and go to the JS front end if Triton does not take it.
bool Frontend::TryFast(const std::shared_ptr<Conn>& conn, const http::RequestHead& head, size_t total) {
  if (!settings.fast_path || fast_stopped.load(std::memory_order_relaxed) || !head.plain_infer_ok ||
      head.method != "POST" || head.content_length == 0 ||
      (head.infer_header_length && (*head.infer_header_length == 0 || *head.infer_header_length > head.content_length)))
    return false;
  auto pending = std::make_unique<Pending>();
  if (!http::InferTarget(head.target, &pending->model, &pending->version)) return false;

  // Triton reads the inputs from the request's own bytes: they leave the
  // connection's buffer first (moved whole when nothing follows them).
  if (conn->in.size == total) {
    pending->bytes = std::move(conn->in);
    conn->in = Bytes{};
  } else {
    pending->bytes.Reserve(total);
    std::memcpy(pending->bytes.data.get(), conn->in.data.get(), total);
    pending->bytes.size = total;
    conn->in.Consume(total);
  }
  pending->frontend = this;
  pending->conn = conn;
  if (SubmitHttp(pending.get(), head)) {
    conn->in_flight = pending.release();  // Settle deletes it
    return true;
  }
  // Not a plain binary inference, or refused before it ran: the JS front
  // end answers it (its checks, its errors).
  ToNode(conn.get(), pending->bytes.data.get(), pending->bytes.size);
  return true;
}

bool Frontend::SubmitHttp(Pending* pending, const http::RequestHead& head) {
  const char* body = pending->bytes.data.get() + head.head_bytes;
  // Without Inference-Header-Content-Length the body is all JSON (its
  // tensors then all in shared memory).
  const size_t json_size = head.infer_header_length.value_or(head.content_length);
  http::FastRequest fast;
  return http::ReadFastRequest(body, json_size, body + json_size, head.content_length - json_size, &fast) &&
         Submit(pending, fast.id, fast.inputs, fast.outputs);
}

// Hands a request read off the wire to Triton. False when Triton does not
// take it (nothing left inside Triton).
bool Frontend::Submit(Pending* pending, const std::string& id, std::vector<http::FastInput>& inputs,
                      const std::vector<http::FastOutput>& outputs) {
  TRITONSERVER_InferenceRequest* request = nullptr;
  {
    std::shared_lock<std::shared_mutex> lifetime(state->lifetime);
    if (state->server == nullptr || state->stopping) return false;
    if (TakeError(api, api.InferenceRequestNew(&request, state->server, pending->model.c_str(),
                                               pending->version)))
      return false;
  }
  bool ok = true;
  auto step = [&](TRITONSERVER_Error* error) {
    if (ok && TakeError(api, error)) ok = false;
    else if (error != nullptr) TakeError(api, error);
  };
  if (!id.empty()) step(api.InferenceRequestSetId(request, id.c_str()));
  // A region that is not there, or a range past its end, is the JS front end's to report.
  auto acquire = [&](const http::FastSharedMemory& range, SharedMemorySpan* span) {
    if (ok && state->shared_memory.Acquire(range.region, range.offset, range.byte_size, span)) ok = false;
  };
  for (http::FastInput& input : inputs) {
    if (!ok) break;
    if (input.shared_memory) {
      SharedMemorySpan span;
      acquire(*input.shared_memory, &span);
      if (!ok) break;
      input.data = span.data;
      input.size = span.size;
      pending->inputs_held.push_back(std::move(span.hold));
    }
    step(api.InferenceRequestAddInput(request, input.name.c_str(), input.datatype, input.shape.data(),
                                      input.shape.size()));
    if (ok && input.size > 0)
      step(api.InferenceRequestAppendInputData(request, input.name.c_str(), input.data, input.size,
                                               TRITONSERVER_MEMORY_CPU, 0));
  }
  for (const http::FastOutput& output : outputs) {
    if (!ok) break;
    if (output.shared_memory) {
      SharedMemorySpan span;
      acquire(*output.shared_memory, &span);
      if (!ok) break;
      pending->output_regions.emplace_back(output.name, std::move(span));
    }
    step(api.InferenceRequestAddRequestedOutput(request, output.name.c_str()));
  }
  if (ok) step(api.InferenceRequestSetReleaseCallback(request, OnRelease, pending));
  if (ok) step(api.InferenceRequestSetResponseCallback(request, allocator, pending, OnResponse, pending));
  if (ok) {
    std::shared_lock<std::shared_mutex> lifetime(state->lifetime);
    if (state->server == nullptr || state->stopping) {
      ok = false;
    } else {
      pending->request = request;
      state->RequestEntered();
      ++in_flight;
      TRITONSERVER_Error* error = api.ServerInferAsync(state->server, request, nullptr);
      if (error == nullptr) return true;
      TakeError(api, error);
      pending->request = nullptr;
      --in_flight;
      state->RequestLeft();
      ok = false;
    }
  }
  TakeError(api, api.InferenceRequestDelete(request));
  return false;
}

// ---- answers (loop thread) --------------------------------------------------------------

void AppendNumber(std::string* out, double value) {
  char text[32];
  const auto result = std::to_chars(text, text + sizeof(text), value);
  out->append(text, result.ptr);
}

// The request's one response, or what went wrong with it.
std::optional<Failure> Frontend::TakeResult(Pending* pending, TRITONSERVER_InferenceResponse** result) {
  answered.fetch_add(1, std::memory_order_relaxed);
  std::optional<Failure> failure;
  TRITONSERVER_InferenceResponse* response = nullptr;
  int responses = 0;
  {
    std::lock_guard<std::mutex> lock(pending->mutex);
    failure = std::move(pending->failure);
    response = pending->response;
    pending->response = nullptr;
    responses = pending->responses;
  }
  // One response per request, as model.infer() (lib/inference.ts) says it.
  if (!failure && responses == 0)
    failure = Failure{TRITONSERVER_ERROR_INTERNAL,
                      "model '" + pending->model + "' completed the request without a response"};
  if (!failure && responses > 1)
    failure = Failure{TRITONSERVER_ERROR_UNSUPPORTED,
                      "model '" + pending->model + "' sent " + std::to_string(responses) +
                          " responses to one request; use model.stream() for decoupled models"};
  if (failure && response != nullptr) DeleteResponse(api, response);
  *result = failure ? nullptr : response;
  return failure;
}

// What an answer is made of, read off Triton's response (and pointing into it).
struct ResponseView {
  const char* id = "";
  const char* model = nullptr;
  int64_t version = 0;
  std::vector<grpc::ResponseParameter> parameters;  // BYTES ones left out, as the JS front end does
  struct Output {
    const char* name;
    TRITONSERVER_DataType datatype;
    const int64_t* shape;
    uint64_t dims;
    const void* data;
    size_t size;
    bool in_region;  // written into a shared memory region
  };
  std::vector<Output> outputs;
};

std::optional<Failure> ReadResponse(const TritonApi& api, TRITONSERVER_InferenceResponse* response,
                                    ResponseView* view) {
  const char* id = nullptr;
  if (!TakeError(api, api.InferenceResponseId(response, &id)) && id != nullptr) view->id = id;
  TakeError(api, api.InferenceResponseModel(response, &view->model, &view->version));
  uint32_t parameter_count = 0;
  TakeError(api, api.InferenceResponseParameterCount(response, &parameter_count));
  for (uint32_t i = 0; i < parameter_count; ++i) {
    const char* name = nullptr;
    TRITONSERVER_ParameterType type = TRITONSERVER_PARAMETER_STRING;
    const void* value = nullptr;
    if (!TakeError(api, api.InferenceResponseParameter(response, i, &name, &type, &value)) && name != nullptr &&
        value != nullptr && type != TRITONSERVER_PARAMETER_BYTES)
      view->parameters.push_back({name, type, value});
  }
  uint32_t output_count = 0;
  TakeError(api, api.InferenceResponseOutputCount(response, &output_count));
  for (uint32_t i = 0; i < output_count; ++i) {
    ResponseView::Output output{nullptr, TRITONSERVER_TYPE_INVALID, nullptr, 0, nullptr, 0, false};
    TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
    int64_t memory_id = 0;
    void* userp = nullptr;
    if (auto error = TakeError(api, api.InferenceResponseOutput(response, i, &output.name, &output.datatype,
                                                                  &output.shape, &output.dims, &output.data,
                                                                  &output.size, &memory, &memory_id, &userp)))
      return error;
    if (output.name == nullptr) output.name = "";
    output.in_region = userp == &kCallerMemory;
    view->outputs.push_back(output);
  }
  return std::nullopt;
}

void Frontend::Answer(Pending* pending) {
  const std::shared_ptr<Conn>& conn = pending->conn;
  TRITONSERVER_InferenceResponse* response = nullptr;
  if (auto failure = TakeResult(pending, &response)) {
    AnswerError(pending, *failure);
    return;
  }
  ResponseView view;
  if (auto error = ReadResponse(api, response, &view)) {
    DeleteResponse(api, response);
    AnswerError(pending, *error);
    return;
  }
  auto* out = new Outgoing();
  out->response = response;
  out->close_after = conn->close_after;
  std::string json = "{";
  if (view.id[0] != '\0') {
    json += "\"id\":";
    http::AppendJsonString(&json, view.id);
    json += ',';
  }
  json += "\"model_name\":";
  http::AppendJsonString(&json, view.model != nullptr ? view.model : pending->model.c_str());
  json += ",\"model_version\":\"" + std::to_string(view.version) + "\"";
  bool first = true;
  for (const grpc::ResponseParameter& parameter : view.parameters) {
    json += first ? ",\"parameters\":{" : ",";
    first = false;
    http::AppendJsonString(&json, parameter.name);
    json += ':';
    switch (parameter.type) {
      case TRITONSERVER_PARAMETER_STRING: http::AppendJsonString(&json, static_cast<const char*>(parameter.value)); break;
      case TRITONSERVER_PARAMETER_INT: AppendNumber(&json, static_cast<double>(*static_cast<const int64_t*>(parameter.value))); break;
      case TRITONSERVER_PARAMETER_BOOL: json += *static_cast<const bool*>(parameter.value) ? "true" : "false"; break;
      default: AppendNumber(&json, *static_cast<const double*>(parameter.value)); break;
    }
  }
  if (!first) json += '}';
  json += ",\"outputs\":[";
  size_t binary_bytes = 0;
  out->bufs.emplace_back();  // the head and the JSON, once known
  // Outputs written into shared memory are listed after the others, by
  // name, datatype and shape only (as the JS front end and Triton do).
  std::string in_regions;
  bool first_output = true;
  for (const ResponseView::Output& output : view.outputs) {
    std::string text = "{\"name\":";
    http::AppendJsonString(&text, output.name);
    const char* type_name = http::DataTypeName(output.datatype);
    text += ",\"datatype\":\"";
    text += type_name != nullptr ? type_name : "INVALID";
    text += "\",\"shape\":[";
    for (uint64_t d = 0; d < output.dims; ++d) {
      if (d > 0) text += ',';
      text += std::to_string(output.shape[d]);
    }
    text += ']';
    if (output.in_region) {
      in_regions += ',';
      in_regions += text + '}';
      continue;
    }
    text += ",\"parameters\":{\"binary_data_size\":" + std::to_string(output.size) + "}}";
    if (!first_output) json += ',';
    first_output = false;
    json += text;
    if (output.size > 0)
      out->bufs.push_back(uv_buf_init(static_cast<char*>(const_cast<void*>(output.data)), static_cast<unsigned>(output.size)));
    binary_bytes += output.size;
  }
  if (!in_regions.empty()) json.append(in_regions, first_output ? 1 : 0, std::string::npos);
  json += "]}";
  const char* connection = conn->close_after ? "\r\nConnection: close\r\n\r\n" : "\r\nConnection: keep-alive\r\n\r\n";
  if (binary_bytes == 0) {
    // Nothing binary to send: plain JSON, as the JS front end answers then.
    out->head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                std::to_string(json.size()) + connection;
  } else {
    out->head = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nInference-Header-Content-Length: " +
                std::to_string(json.size()) + "\r\nContent-Length: " + std::to_string(json.size() + binary_bytes) +
                connection;
  }
  out->head += json;
  out->bufs[0] = uv_buf_init(out->head.data(), static_cast<unsigned>(out->head.size()));
  if (conn->closing) {
    DeleteResponse(api, response);
    delete out;
    return;
  }
  Write(conn, out);
}

void Frontend::AnswerError(Pending* pending, const Failure& failure) {
  std::string body = "{\"error\":";
  http::AppendJsonString(&body, failure.message);
  body += '}';
  const int status = http::HttpStatus(failure.code);
  const bool close = pending->conn->close_after;
  WriteText(pending->conn,
            "HTTP/1.1 " + std::to_string(status) + " " + Reason(status) +
                "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                (close ? "\r\nConnection: close\r\n\r\n" : "\r\nConnection: keep-alive\r\n\r\n") + body,
            close);
}

// ---- gRPC (HTTP/2, nghttp2) ------------------------------------------------------------

#if defined(TSN_HAVE_NGHTTP2)

constexpr char kModelInferPath[] = "/inference.GRPCInferenceService/ModelInfer";
constexpr char kAcceptEncoding[] = "identity,deflate,gzip";  // as lib/kserve/grpc.ts says it
// Flow-control windows as the JS front end opens them (gRPC's C++ server's size).
constexpr int32_t kStreamWindowBytes = 16 * 1024 * 1024;
constexpr int32_t kConnectionWindowBytes = 64 * 1024 * 1024;

std::vector<nghttp2_nv> HeaderList(const std::vector<Header>& headers) {
  std::vector<nghttp2_nv> list;
  list.reserve(headers.size());
  for (const Header& header : headers)
    list.push_back({reinterpret_cast<uint8_t*>(const_cast<char*>(header.first.data())),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(header.second.data())), header.first.size(),
                    header.second.size(), NGHTTP2_NV_FLAG_NONE});
  return list;
}

Conn* ConnOf(void* user) { return static_cast<Conn*>(user); }

// The client's session: its calls arrive.
int OnClientBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
    auto stream = std::make_unique<GrpcStream>();
    stream->id = frame->hd.stream_id;
    ConnOf(user)->grpc->streams[stream->id] = std::move(stream);
  }
  return 0;
}

int OnClientHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t name_size,
                   const uint8_t* value, size_t value_size, uint8_t, void* user) {
  GrpcStream* stream = ConnOf(user)->grpc->Find(frame->hd.stream_id);
  // A client's trailers (no gRPC client sends any) are not passed on.
  if (stream != nullptr && !stream->decided)
    stream->headers.emplace_back(std::string(reinterpret_cast<const char*>(name), name_size),
                                 std::string(reinterpret_cast<const char*>(value), value_size));
  return 0;
}

int OnClientFrame(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  Conn* conn = ConnOf(user);
  GrpcStream* stream = conn->grpc->Find(frame->hd.stream_id);
  if (stream == nullptr) return 0;
  if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
    conn->frontend->GrpcRequestHeaders(conn, stream);
  if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
      (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0)
    conn->frontend->GrpcRequestEnded(conn, stream);
  return 0;
}

// Flow control: the connection's window reopens at once; a stream's once
// its bytes are used (handed to Triton or read by JS), so a call JS reads
// slowly holds its client back, as with Node's server. What a connection
// holds is capped as Node's maxSessionMemory caps it.
int OnClientData(nghttp2_session* session, uint8_t, int32_t id, const uint8_t* data, size_t size, void* user) {
  Conn* conn = ConnOf(user);
  Frontend* frontend = conn->frontend;
  const Nghttp2Api& h2 = *frontend->h2;
  GrpcConn& grpc = *conn->grpc;
  h2.session_consume_connection(session, size);
  GrpcStream* stream = grpc.Find(id);
  if (stream == nullptr || stream->refused) return 0;
  const size_t limit = frontend->settings.max_body_bytes;
  if (grpc.buffered + size > std::max<size_t>(size_t{64} << 20, 4 * limit)) {
    stream->refused = true;
    h2.submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, NGHTTP2_ENHANCE_YOUR_CALM);
    return 0;
  }
  const char* bytes = reinterpret_cast<const char*>(data);
  if (!stream->decided && stream->body.size + size > limit + 5)
    frontend->GrpcPassOn(conn, stream);  // too large for here: the JS front end says so
  if (!stream->decided) {
    // The whole message is needed before anything is done with it.
    stream->body.Reserve(size);
    std::memcpy(stream->body.data.get() + stream->body.size, bytes, size);
    stream->body.size += size;
    grpc.buffered += size;
    h2.session_consume_stream(session, id, size);
  } else if (stream->proxied && stream->inner_id > 0) {
    stream->to_inner.Append(bytes, size);
    grpc.buffered += size;
    h2.session_resume_data(grpc.inner, stream->inner_id);
  } else {
    h2.session_consume_stream(session, id, size);  // no one reads it any more
  }
  return 0;
}

int OnClientStreamClose(nghttp2_session*, int32_t id, uint32_t, void* user) {
  Conn* conn = ConnOf(user);
  GrpcConn& grpc = *conn->grpc;
  GrpcStream* stream = grpc.Find(id);
  if (stream == nullptr) return 0;
  Frontend* frontend = conn->frontend;
  // A call the client cancelled cancels its Triton request, or its JS call.
  if (stream->pending != nullptr && stream->pending->request != nullptr &&
      frontend->api.InferenceRequestCancel != nullptr)
    TakeError(frontend->api, frontend->api.InferenceRequestCancel(stream->pending->request));
  if (stream->inner_id > 0 && grpc.inner != nullptr) {
    frontend->h2->submit_rst_stream(grpc.inner, NGHTTP2_FLAG_NONE, stream->inner_id, NGHTTP2_CANCEL);
    grpc.by_inner.erase(stream->inner_id);
  }
  grpc.buffered -= stream->body.size + stream->to_inner.size();
  grpc.streams.erase(id);  // a connection closing is done once none is left (GrpcFlush, after this)
  return 0;
}

// The response's DATA for the client, and its trailers after them.
ssize_t ReadForClient(nghttp2_session* session, int32_t id, uint8_t* buf, size_t size, uint32_t* flags,
                      nghttp2_data_source*, void* user) {
  Conn* conn = ConnOf(user);
  GrpcStream* stream = conn->grpc->Find(id);
  if (stream == nullptr) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  const size_t count = stream->to_client.Take(buf, size);
  if (stream->to_client.size() > 0) return static_cast<ssize_t>(count);
  if (!stream->response_ended) return count > 0 ? static_cast<ssize_t>(count) : static_cast<ssize_t>(NGHTTP2_ERR_DEFERRED);
  *flags |= NGHTTP2_DATA_FLAG_EOF;
  if (!stream->trailers.empty()) {
    *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    const std::vector<nghttp2_nv> list = HeaderList(stream->trailers);
    conn->frontend->h2->submit_trailer(session, id, list.data(), list.size());
  }
  return static_cast<ssize_t>(count);
}

// The session with JS: the answers of the calls passed on.
GrpcStream* InnerStream(void* user, int32_t inner_id) {
  auto& by_inner = ConnOf(user)->grpc->by_inner;
  auto found = by_inner.find(inner_id);
  return found == by_inner.end() ? nullptr : found->second;
}

int OnInnerBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  if (GrpcStream* stream = InnerStream(user, frame->hd.stream_id)) stream->collecting.clear();
  return 0;
}

int OnInnerHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t name_size,
                  const uint8_t* value, size_t value_size, uint8_t, void* user) {
  if (GrpcStream* stream = InnerStream(user, frame->hd.stream_id))
    stream->collecting.emplace_back(std::string(reinterpret_cast<const char*>(name), name_size),
                                    std::string(reinterpret_cast<const char*>(value), value_size));
  return 0;
}

int OnInnerFrame(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  Conn* conn = ConnOf(user);
  GrpcStream* stream = InnerStream(user, frame->hd.stream_id);
  if (stream == nullptr) return 0;
  Frontend* frontend = conn->frontend;
  const bool ended = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_RESPONSE) {
    if (ended) stream->response_ended = true;
    // Trailers-only (a status and nothing else) has no DATA to follow.
    frontend->GrpcRespond(conn, stream, std::move(stream->collecting), !ended);
  } else if (frame->hd.type == NGHTTP2_HEADERS) {
    stream->trailers = std::move(stream->collecting);
    stream->response_ended = true;
    frontend->h2->session_resume_data(conn->grpc->session, stream->id);
  } else if (frame->hd.type == NGHTTP2_DATA && ended) {
    stream->response_ended = true;
    frontend->h2->session_resume_data(conn->grpc->session, stream->id);
  }
  return 0;
}

int OnInnerData(nghttp2_session*, uint8_t, int32_t inner_id, const uint8_t* data, size_t size, void* user) {
  Conn* conn = ConnOf(user);
  GrpcStream* stream = InnerStream(user, inner_id);
  if (stream == nullptr) return 0;
  stream->to_client.Append(reinterpret_cast<const char*>(data), size);
  conn->frontend->h2->session_resume_data(conn->grpc->session, stream->id);
  return 0;
}

int OnInnerStreamClose(nghttp2_session*, int32_t inner_id, uint32_t error_code, void* user) {
  Conn* conn = ConnOf(user);
  GrpcStream* stream = InnerStream(user, inner_id);
  if (stream == nullptr) return 0;
  conn->grpc->by_inner.erase(inner_id);
  stream->inner_id = 0;
  // JS reset a call it had not finished answering: so is the client's.
  // After its answer, a reset tells a client still sending to stop (as
  // gRPC servers do): sent once the answer is out.
  const Nghttp2Api& h2 = *conn->frontend->h2;
  if (!stream->response_ended)
    h2.submit_rst_stream(conn->grpc->session, NGHTTP2_FLAG_NONE, stream->id,
                         error_code == NGHTTP2_NO_ERROR ? uint32_t{NGHTTP2_INTERNAL_ERROR} : error_code);
  else if (!stream->request_ended && stream->response_sent)
    h2.submit_rst_stream(conn->grpc->session, NGHTTP2_FLAG_NONE, stream->id, NGHTTP2_NO_ERROR);
  else if (!stream->request_ended)
    stream->stop_client = true;
  return 0;
}

int OnClientFrameSent(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
  if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
      (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) == 0)
    return 0;
  Conn* conn = ConnOf(user);
  GrpcStream* stream = conn->grpc->Find(frame->hd.stream_id);
  if (stream == nullptr) return 0;
  stream->response_sent = true;
  if (stream->stop_client && !stream->request_ended)
    conn->frontend->h2->submit_rst_stream(session, NGHTTP2_FLAG_NONE, stream->id, NGHTTP2_NO_ERROR);
  return 0;
}

// The request's bytes for JS, as the client sends them.
ssize_t ReadForInner(nghttp2_session*, int32_t inner_id, uint8_t* buf, size_t size, uint32_t* flags,
                     nghttp2_data_source*, void* user) {
  GrpcStream* stream = InnerStream(user, inner_id);
  if (stream == nullptr) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  Conn* conn = ConnOf(user);
  const size_t count = stream->to_inner.Take(buf, size);
  // JS has these bytes: the client may send as many more.
  const size_t ahead = std::min(count, stream->consumed_ahead);
  stream->consumed_ahead -= ahead;
  if (count > ahead) conn->frontend->h2->session_consume_stream(conn->grpc->session, stream->id, count - ahead);
  conn->grpc->buffered -= count;
  if (stream->to_inner.size() > 0) return static_cast<ssize_t>(count);
  if (!stream->request_ended) return count > 0 ? static_cast<ssize_t>(count) : static_cast<ssize_t>(NGHTTP2_ERR_DEFERRED);
  *flags |= NGHTTP2_DATA_FLAG_EOF;
  return static_cast<ssize_t>(count);
}

nghttp2_session_callbacks* MakeCallbacks(const Nghttp2Api& h2, bool client_side) {
  nghttp2_session_callbacks* callbacks = nullptr;
  if (h2.session_callbacks_new(&callbacks) != 0) return nullptr;
  if (client_side) {
    h2.session_callbacks_set_on_begin_headers_callback(callbacks, OnClientBeginHeaders);
    h2.session_callbacks_set_on_header_callback(callbacks, OnClientHeader);
    h2.session_callbacks_set_on_frame_recv_callback(callbacks, OnClientFrame);
    h2.session_callbacks_set_on_data_chunk_recv_callback(callbacks, OnClientData);
    h2.session_callbacks_set_on_stream_close_callback(callbacks, OnClientStreamClose);
    h2.session_callbacks_set_on_frame_send_callback(callbacks, OnClientFrameSent);
  } else {
    h2.session_callbacks_set_on_begin_headers_callback(callbacks, OnInnerBeginHeaders);
    h2.session_callbacks_set_on_header_callback(callbacks, OnInnerHeader);
    h2.session_callbacks_set_on_frame_recv_callback(callbacks, OnInnerFrame);
    h2.session_callbacks_set_on_data_chunk_recv_callback(callbacks, OnInnerData);
    h2.session_callbacks_set_on_stream_close_callback(callbacks, OnInnerStreamClose);
  }
  return callbacks;
}

bool Frontend::GrpcOpen(Conn* conn) {
  conn->grpc = std::make_unique<GrpcConn>();
  if (h2->session_server_new2(&conn->grpc->session, client_callbacks, conn, client_options) != 0) return false;
  const nghttp2_settings_entry entries[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, kStreamWindowBytes}};
  h2->submit_settings(conn->grpc->session, NGHTTP2_FLAG_NONE, entries, 1);
  h2->session_set_local_window_size(conn->grpc->session, NGHTTP2_FLAG_NONE, 0, kConnectionWindowBytes);
  GrpcFlush(conn);
  return true;
}

void Frontend::GrpcRead(Conn* conn, ssize_t nread) {
  const ssize_t used = h2->session_mem_recv(conn->grpc->session, reinterpret_cast<const uint8_t*>(conn->in.data.get()),
                                            static_cast<size_t>(nread));
  conn->in.size = 0;
  if (used < 0) {
    CloseConn(conn);  // not HTTP/2: nghttp2 has queued its GOAWAY, which no one reads
    return;
  }
  GrpcFlush(conn);
}

void Frontend::QueueFlush(Conn* conn) {
  if (conn->flush_queued) return;
  conn->flush_queued = true;
  to_flush.push_back(conn->self);
}

// Sends what both sessions have for the other side: frames for the client
// (one write), bytes for the JS front end (one event).
void Frontend::GrpcFlush(Conn* conn) {
  conn->flush_queued = false;
  if (conn->closing) return;
  GrpcConn& grpc = *conn->grpc;
  std::string out;
  for (;;) {
    const uint8_t* data = nullptr;
    const ssize_t size = h2->session_mem_send(grpc.session, &data);
    if (size < 0) {
      CloseConn(conn);
      return;
    }
    if (size == 0) break;
    out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(size));
  }
  if (!out.empty()) WriteText(conn->self, std::move(out), false);
  if (grpc.inner != nullptr) {
    std::string to_js;
    for (;;) {
      const uint8_t* data = nullptr;
      const ssize_t size = h2->session_mem_send(grpc.inner, &data);
      if (size <= 0) break;
      to_js.append(reinterpret_cast<const char*>(data), static_cast<size_t>(size));
    }
    if (!to_js.empty()) Emit(EventKind::kData, conn->node_id, std::move(to_js));
  }
  // Done after a GOAWAY (either side's) once no call is open.
  if (grpc.streams.empty() &&
      (grpc.goaway_sent || (!h2->session_want_read(grpc.session) && !h2->session_want_write(grpc.session))))
    EndAfterWrites(conn->self);
}

// Answered here only when nothing in its headers asks for what the JS
// front end does (a deadline, compression); else passed on at once.
void Frontend::GrpcRequestHeaders(Conn* conn, GrpcStream* stream) {
  bool fast = settings.fast_path && !fast_stopped.load(std::memory_order_relaxed) && !closing;
  bool post = false, infer = false, grpc_type = false;
  for (const Header& header : stream->headers) {
    if (header.first == ":method") post = header.second == "POST";
    else if (header.first == ":path") infer = header.second == kModelInferPath;
    else if (header.first == "content-type")
      grpc_type = header.second == "application/grpc" || header.second == "application/grpc+proto";
    else if (header.first == "grpc-timeout") fast = false;
    else if (header.first == "grpc-encoding") fast = fast && header.second == "identity";
  }
  if (!(fast && post && infer && grpc_type)) GrpcPassOn(conn, stream);
}

void Frontend::GrpcRequestEnded(Conn* conn, GrpcStream* stream) {
  stream->request_ended = true;
  if (stream->proxied) {
    if (stream->inner_id > 0) h2->session_resume_data(conn->grpc->inner, stream->inner_id);
  } else if (!stream->decided && !GrpcTryFast(conn, stream)) {
    GrpcPassOn(conn, stream);
  }
}

// A ModelInfer call whose one message this front end reads goes to Triton.
bool Frontend::GrpcTryFast(Conn* conn, GrpcStream* stream) {
  Bytes& body = stream->body;
  if (body.size < 5 || body.data[0] != 0) return false;
  const auto* prefix = reinterpret_cast<const uint8_t*>(body.data.get());
  const size_t length = (size_t{prefix[1]} << 24) | (size_t{prefix[2]} << 16) | (size_t{prefix[3]} << 8) | prefix[4];
  if (length != body.size - 5) return false;
  grpc::InferRequest request;
  if (!grpc::ReadInferRequest(body.data.get() + 5, length, &request)) return false;
  auto pending = std::make_unique<Pending>();
  pending->frontend = this;
  pending->conn = conn->self;
  pending->stream_id = stream->id;
  pending->model = request.model;
  pending->version = request.version;
  pending->bytes = std::move(body);  // the inputs point into it, wherever it lives
  body = Bytes{};
  if (!Submit(pending.get(), request.id, request.inputs, request.outputs)) {
    body = std::move(pending->bytes);
    return false;
  }
  stream->decided = true;
  conn->grpc->buffered -= pending->bytes.size;
  stream->pending = pending.release();  // Settle deletes it
  return true;
}

// Sends the call on to the JS front end, with what it already sent.
void Frontend::GrpcPassOn(Conn* conn, GrpcStream* stream) {
  stream->decided = true;
  stream->proxied = true;
  GrpcConn& grpc = *conn->grpc;
  if (!GrpcInner(conn)) {
    h2->submit_rst_stream(grpc.session, NGHTTP2_FLAG_NONE, stream->id, NGHTTP2_INTERNAL_ERROR);
    return;
  }
  if (stream->body.size > 0) stream->to_inner.Append(stream->body.data.get(), stream->body.size);
  stream->consumed_ahead = stream->body.size;  // read whole before it was passed on
  stream->body = Bytes{};
  const std::vector<nghttp2_nv> list = HeaderList(stream->headers);
  nghttp2_data_provider provider{};
  provider.read_callback = ReadForInner;
  const int32_t inner_id = h2->submit_request(grpc.inner, nullptr, list.data(), list.size(), &provider, nullptr);
  if (inner_id < 0) {
    h2->submit_rst_stream(grpc.session, NGHTTP2_FLAG_NONE, stream->id, NGHTTP2_REFUSED_STREAM);
    return;
  }
  stream->inner_id = inner_id;
  grpc.by_inner[inner_id] = stream;
}

// The connection's HTTP/2 session with the JS front end, over a virtual
// socket of its own (a new one after JS closed the last).
bool Frontend::GrpcInner(Conn* conn) {
  GrpcConn& grpc = *conn->grpc;
  if (grpc.inner != nullptr) return true;
  if (h2->session_client_new(&grpc.inner, inner_callbacks, conn) != 0) {
    grpc.inner = nullptr;
    return false;
  }
  const nghttp2_settings_entry entries[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                            {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, kStreamWindowBytes}};
  h2->submit_settings(grpc.inner, NGHTTP2_FLAG_NONE, entries, 2);
  h2->session_set_local_window_size(grpc.inner, NGHTTP2_FLAG_NONE, 0, kConnectionWindowBytes);
  conn->node_id = next_conn++;
  conn->node_attached = true;
  node_links[conn->node_id] = conn->self;
  return true;
}

// JS closed (or will not read) the connection's session: the calls still
// passed on to it are reset.
void Frontend::GrpcDropInner(Conn* conn, bool tell_js) {
  GrpcConn& grpc = *conn->grpc;
  if (grpc.inner == nullptr) return;
  for (auto& [inner_id, stream] : grpc.by_inner) {
    stream->inner_id = 0;
    if (!stream->response_ended)
      h2->submit_rst_stream(grpc.session, NGHTTP2_FLAG_NONE, stream->id, NGHTTP2_REFUSED_STREAM);
  }
  grpc.by_inner.clear();
  h2->session_del(grpc.inner);
  grpc.inner = nullptr;
  node_links.erase(conn->node_id);
  if (tell_js && conn->node_attached) Emit(EventKind::kClose, conn->node_id, {});
  conn->node_attached = false;
}

void Frontend::GrpcRespond(Conn* conn, GrpcStream* stream, std::vector<Header> headers, bool with_data) {
  const std::vector<nghttp2_nv> list = HeaderList(headers);
  nghttp2_data_provider provider{};
  provider.read_callback = ReadForClient;
  h2->submit_response(conn->grpc->session, stream->id, list.data(), list.size(), with_data ? &provider : nullptr);
}

// An error as the JS front end sends it: the status alone (trailers-only).
void Frontend::GrpcFail(Conn* conn, GrpcStream* stream, const Failure& failure) {
  std::vector<Header> headers{{":status", "200"},
                              {"content-type", "application/grpc"},
                              {"grpc-accept-encoding", kAcceptEncoding},
                              {"grpc-status", std::to_string(grpc::GrpcStatus(failure.code))}};
  if (!failure.message.empty()) headers.emplace_back("grpc-message", grpc::PercentEncode(failure.message));
  stream->response_ended = true;
  GrpcRespond(conn, stream, std::move(headers), false);
}

void Frontend::GrpcAnswer(Pending* pending) {
  Conn* conn = pending->conn.get();
  TRITONSERVER_InferenceResponse* response = nullptr;
  std::optional<Failure> failure = TakeResult(pending, &response);
  GrpcStream* stream = conn->grpc->Find(pending->stream_id);
  if (stream != nullptr) stream->pending = nullptr;
  if (stream == nullptr || conn->closing) {  // the client cancelled it, or went
    if (response != nullptr) DeleteResponse(api, response);
    return;
  }
  QueueFlush(conn);
  if (failure) {
    GrpcFail(conn, stream, *failure);
    return;
  }
  ResponseView view;
  if (auto error = ReadResponse(api, response, &view)) {
    DeleteResponse(api, response);
    GrpcFail(conn, stream, *error);
    return;
  }
  // Outputs written into a region are listed last, with empty contents (as Triton, and the JS front end).
  std::vector<grpc::ResponseOutput> outputs;
  for (bool regions : {false, true}) {
    for (const ResponseView::Output& output : view.outputs) {
      if (output.in_region != regions) continue;
      const char* type_name = http::DataTypeName(output.datatype);
      outputs.push_back({output.name, type_name != nullptr ? type_name : "INVALID", output.shape,
                         static_cast<size_t>(output.dims), regions ? nullptr : output.data, regions ? 0 : output.size});
    }
  }
  stream->to_client.bytes = grpc::EncodeInferResponse(view.model != nullptr ? view.model : pending->model,
                                                      view.version, view.id, view.parameters, outputs);
  DeleteResponse(api, response);
  stream->response_ended = true;
  stream->trailers = {{"grpc-status", "0"}};
  GrpcRespond(conn, stream,
              {{":status", "200"}, {"content-type", "application/grpc"}, {"grpc-accept-encoding", kAcceptEncoding}},
              true);
}

// Closing: no new calls (GOAWAY); the connection ends once its calls are answered.
void Frontend::GrpcClose(Conn* conn) {
  GrpcConn& grpc = *conn->grpc;
  if (!grpc.goaway_sent) {
    grpc.goaway_sent = true;
    h2->submit_goaway(grpc.session, NGHTTP2_FLAG_NONE, h2->session_get_last_proc_stream_id(grpc.session),
                      NGHTTP2_NO_ERROR, nullptr, 0);
  }
  GrpcFlush(conn);
}

#endif  // TSN_HAVE_NGHTTP2

// Triton is done with a request once its final response came and it released it.
void Frontend::Settle(Pending* pending) {
  if (!pending->answered || !pending->released) return;
  std::unique_ptr<Pending> owned(pending);
  TakeError(api, api.InferenceRequestDelete(pending->request));
  --in_flight;
  state->RequestLeft();
  MaybeEndLoop();
}

void Frontend::RequestDone(const std::shared_ptr<Conn>& conn) {
  conn->busy = false;
  if (!conn->reading && !conn->closing) {
    conn->reading = true;
    uv_read_start(reinterpret_cast<uv_stream_t*>(&conn->handle), AllocateRead, OnReadDone);
  }
  conn->last_active_ms = uv_now(&loop);
  if (closing && !conn->to_node) {
    EndAfterWrites(conn);
    return;
  }
  Process(conn);
}

void Frontend::OnWake() {
  std::vector<Command> commands_now;
  std::vector<Completion> completions_now;
  bool close_now = false;
  bool force = false;
  {
    std::lock_guard<std::mutex> lock(queue_mutex);
    commands_now.swap(commands);
    completions_now.swap(completions);
    close_now = close_wanted && !closing;
    force = force_close;
  }
  for (const Completion& completion : completions_now) {
    Pending* pending = completion.pending;
    if (completion.release) {
      // Deleted with the last of the two events (Settle): a Python model
      // releases its request before answering, and a hang-up in between
      // must still be able to cancel it.
      pending->released = true;
    } else {
      pending->answered = true;
      std::shared_ptr<Conn> conn = pending->conn;
      if (conn->in_flight == pending) conn->in_flight = nullptr;
#if defined(TSN_HAVE_NGHTTP2)
      if (conn->grpc != nullptr) {
        GrpcAnswer(pending);
        Settle(pending);
        continue;
      }
#endif
      if (!conn->closing) {
        Answer(pending);
        RequestDone(conn);
      } else {
        std::lock_guard<std::mutex> lock(pending->mutex);
        if (pending->response != nullptr) DeleteResponse(api, pending->response);
        pending->response = nullptr;
      }
    }
    Settle(pending);
  }
  for (Command& command : commands_now) {
    Conn* found = Lookup(command.conn);
    if (found == nullptr) continue;
    std::shared_ptr<Conn> conn = found->self;
#if defined(TSN_HAVE_NGHTTP2)
    if (conn->grpc != nullptr) {
      // JS's side of the connection's session with it.
      GrpcConn& grpc = *conn->grpc;
      if (command.kind == CommandKind::kWrite && grpc.inner != nullptr &&
          h2->session_mem_recv(grpc.inner, reinterpret_cast<const uint8_t*>(command.bytes.data()),
                               command.bytes.size()) < 0)
        GrpcDropInner(conn.get(), true);
      else if (command.kind == CommandKind::kEnd || command.kind == CommandKind::kDestroy)
        GrpcDropInner(conn.get(), command.kind == CommandKind::kEnd);
      QueueFlush(conn.get());
      continue;
    }
#endif
    switch (command.kind) {
      case CommandKind::kWrite: WriteText(conn, std::move(command.bytes), false); break;
      case CommandKind::kDone: RequestDone(conn); break;
      case CommandKind::kEnd: EndAfterWrites(conn); break;
      case CommandKind::kDestroy: CloseConn(conn.get()); break;
    }
  }
  if (close_now || (force && closing)) BeginClose(force);
#if defined(TSN_HAVE_NGHTTP2)
  std::vector<std::shared_ptr<Conn>> flushing;
  flushing.swap(to_flush);
  for (const auto& conn : flushing)
    if (conn->flush_queued) GrpcFlush(conn.get());
#endif
}

// Idle keep-alive connections, heads and requests that take too long to
// arrive are closed as Node's server would (its keepAliveTimeout,
// headersTimeout and requestTimeout, counted from the request's first
// byte). Connections JS is answering are Node's to time out.
void Frontend::Sweep() {
  const uint64_t now = uv_now(&loop);
  std::vector<std::shared_ptr<Conn>> idle;
  std::vector<std::shared_ptr<Conn>> slow;
  for (auto& [id, conn] : conns) {
    if (conn->busy || conn->to_node || conn->grpc != nullptr) continue;
    const uint64_t quiet = now - conn->last_active_ms;
    const uint64_t reading = now - conn->request_started_ms;
    if (conn->in.size == 0) {
      if (quiet >= settings.keep_alive_ms) idle.push_back(conn);
    } else if (reading >= (conn->head_read ? settings.request_timeout_ms : settings.headers_timeout_ms)) {
      slow.push_back(conn);
    }
  }
  for (auto& conn : idle) CloseConn(conn.get());
  for (auto& conn : slow)
    WriteText(conn, "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", true);
}

void Frontend::BeginClose(bool force) {
  if (!closing) uv_close(reinterpret_cast<uv_handle_t*>(&listener), nullptr);
  closing = true;
  fast_stopped = true;
  std::vector<std::shared_ptr<Conn>> idle;
  std::vector<std::shared_ptr<Conn>> calls_open;
  for (auto& [id, conn] : conns) {
    if (force || (!conn->busy && !conn->to_node && conn->grpc == nullptr)) idle.push_back(conn);
    else if (conn->grpc != nullptr) calls_open.push_back(conn);
  }
  for (auto& conn : idle) CloseConn(conn.get());
#if defined(TSN_HAVE_NGHTTP2)
  for (auto& conn : calls_open) GrpcClose(conn.get());
#endif
  MaybeEndLoop();
}

// The loop ends once closed, with no connection left and nothing inside Triton.
void Frontend::MaybeEndLoop() {
  if (!closing || loop_ended || !conns.empty() || in_flight > 0) return;
  loop_ended = true;
  uv_close(reinterpret_cast<uv_handle_t*>(&wake), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&sweep), nullptr);
}


// ---- the JS object ------------------------------------------------------------------------

class HttpFrontendWrap : public Napi::ObjectWrap<HttpFrontendWrap> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "NativeHttpFrontend",
                       {
                           InstanceAccessor<&HttpFrontendWrap::Port>("port"),
                           InstanceAccessor<&HttpFrontendWrap::Address>("address"),
                           InstanceAccessor<&HttpFrontendWrap::Answered>("answered"),
                           InstanceMethod<&HttpFrontendWrap::Send<CommandKind::kWrite>>("write"),
                           InstanceMethod<&HttpFrontendWrap::Send<CommandKind::kDone>>("done"),
                           InstanceMethod<&HttpFrontendWrap::Send<CommandKind::kEnd>>("end"),
                           InstanceMethod<&HttpFrontendWrap::Send<CommandKind::kDestroy>>("destroy"),
                           InstanceMethod<&HttpFrontendWrap::Drain>("drain"),
                           InstanceMethod<&HttpFrontendWrap::Close>("close"),
                           InstanceMethod<&HttpFrontendWrap::Join>("join"),
                       });
  }

  // new NativeHttpFrontend(server, { host, port, maxBodyBytes, keepAliveTimeoutMs,
  //   headersTimeoutMs, fastPath }, onEvent(kind, conn, bytes))
  HttpFrontendWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<HttpFrontendWrap>(info) {
    Napi::Env env = info.Env();
    if (info.Length() < 3 || !info[0].IsObject() || !info[1].IsObject() || !info[2].IsFunction())
      throw ToJsError(env, TRITONSERVER_ERROR_INVALID_ARG, "NativeHttpFrontend(server, options, onEvent)");
    ServerWrap* server = ServerWrap::Unwrap(info[0].As<Napi::Object>());
    if (server == nullptr || server->StateForFrontEnd() == nullptr)
      throw ToJsError(env, TRITONSERVER_ERROR_UNAVAILABLE, "the server is stopped");
    Napi::Object options = info[1].As<Napi::Object>();
    Settings settings;
    auto number = [&](const char* name, double fallback) {
      Napi::Value value = options.Get(name);
      return value.IsNumber() ? value.As<Napi::Number>().DoubleValue() : fallback;
    };
    settings.max_body_bytes = static_cast<size_t>(number("maxBodyBytes", 64 << 20));
    settings.keep_alive_ms = static_cast<uint64_t>(number("keepAliveTimeoutMs", 5000));
    settings.headers_timeout_ms = static_cast<uint64_t>(number("headersTimeoutMs", 10000));
    settings.request_timeout_ms = static_cast<uint64_t>(number("requestTimeoutMs", 60000));
    settings.fast_path = options.Get("fastPath").ToBoolean().Value();
    settings.grpc = options.Get("protocol").ToString().Utf8Value() == "grpc";
    const std::string host = options.Get("host").ToString().Utf8Value();
    const int port = static_cast<int>(number("port", 0));

    frontend_ = std::make_unique<Frontend>(server->StateForFrontEnd(), settings);
    Frontend& f = *frontend_;
    const TritonApi& api = f.api;
    if (settings.grpc) {
#if defined(TSN_HAVE_NGHTTP2)
      f.h2 = Nghttp2();
      if (f.h2 != nullptr) {
        f.client_callbacks = MakeCallbacks(*f.h2, true);
        f.inner_callbacks = MakeCallbacks(*f.h2, false);
        if (f.h2->option_new(&f.client_options) == 0) f.h2->option_set_no_auto_window_update(f.client_options, 1);
      }
      if (f.client_callbacks == nullptr || f.inner_callbacks == nullptr || f.client_options == nullptr) {
        DeleteCallbacks();
        throw ToJsError(env, TRITONSERVER_ERROR_UNSUPPORTED, "the native gRPC engine needs nghttp2, which this process lacks");
      }
#else
      throw ToJsError(env, TRITONSERVER_ERROR_UNSUPPORTED, "this addon was built without the native gRPC engine (no nghttp2 header)");
#endif
    }
    if (auto failure = TakeError(api, api.ResponseAllocatorNew(&f.allocator, AllocateOutput, ReleaseOutput, nullptr))) {
      DeleteCallbacks();
      throw ToJsError(env, *failure);
    }

    sockaddr_storage address{};
    if (uv_ip4_addr(host.c_str(), port, reinterpret_cast<sockaddr_in*>(&address)) != 0 &&
        uv_ip6_addr(host.c_str(), port, reinterpret_cast<sockaddr_in6*>(&address)) != 0) {
      DeleteAllocator();
      DeleteCallbacks();
      throw ToJsError(env, TRITONSERVER_ERROR_INVALID_ARG, "host '" + host + "' is not an IP address");
    }
    uv_loop_init(&f.loop);
    uv_tcp_init(&f.loop, &f.listener);
    f.listener.data = &f;
    int rc = uv_tcp_bind(&f.listener, reinterpret_cast<const sockaddr*>(&address), 0);
    if (rc == 0)
      rc = uv_listen(reinterpret_cast<uv_stream_t*>(&f.listener), 511, [](uv_stream_t* server, int status) {
        if (status == 0) static_cast<Frontend*>(server->data)->Accept();
      });
    if (rc != 0) {
      uv_close(reinterpret_cast<uv_handle_t*>(&f.listener), nullptr);
      uv_run(&f.loop, UV_RUN_DEFAULT);
      uv_loop_close(&f.loop);
      DeleteAllocator();
      DeleteCallbacks();
      Napi::Error error = Napi::Error::New(env, std::string("listen ") + uv_err_name(rc) + ": " + uv_strerror(rc) +
                                                    " " + host + ":" + std::to_string(port));
      error.Set("code", uv_err_name(rc));
      throw error;
    }
    sockaddr_storage bound{};
    int length = sizeof(bound);
    uv_tcp_getsockname(&f.listener, reinterpret_cast<sockaddr*>(&bound), &length);
    char text[64] = "";
    if (bound.ss_family == AF_INET6) {
      port_ = ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
      uv_ip6_name(reinterpret_cast<sockaddr_in6*>(&bound), text, sizeof(text));
    } else {
      port_ = ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
      uv_ip4_name(reinterpret_cast<sockaddr_in*>(&bound), text, sizeof(text));
    }
    address_ = text;
    uv_async_init(&f.loop, &f.wake, [](uv_async_t* async) { static_cast<Frontend*>(async->data)->OnWake(); });
    f.wake.data = &f;
    uv_timer_init(&f.loop, &f.sweep);
    f.sweep.data = &f;
    uv_timer_start(&f.sweep, [](uv_timer_t* timer) { static_cast<Frontend*>(timer->data)->Sweep(); }, 1000, 1000);
    f.to_js = Napi::ThreadSafeFunction::New(env, info[2].As<Napi::Function>(), "tritonserver-node http", 0, 1);
    f.thread = std::thread([&f] {
      uv_run(&f.loop, UV_RUN_DEFAULT);
      uv_loop_close(&f.loop);
      f.Emit(EventKind::kClosed, 0, {});
      f.to_js.Release();
    });
    napi_add_env_cleanup_hook(env, CleanupHook, this);
    cleanup_hook_ = true;
  }

  ~HttpFrontendWrap() {
    if (cleanup_hook_) napi_remove_env_cleanup_hook(Env(), CleanupHook, this);
    End(true);
  }

 private:
  Napi::Value Port(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), port_); }
  Napi::Value Address(const Napi::CallbackInfo& info) { return Napi::String::New(info.Env(), address_); }
  Napi::Value Answered(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), static_cast<double>(frontend_->answered.load(std::memory_order_relaxed)));
  }

  template <CommandKind kind>
  Napi::Value Send(const Napi::CallbackInfo& info) {
    if (!frontend_ || joined_) return info.Env().Undefined();
    // Called by lib/kserve/native-http.ts only; still, nothing unchecked reaches the loop.
    if (!info[0].IsNumber() || (kind == CommandKind::kWrite && !info[1].IsTypedArray()))
      throw ToJsError(info.Env(), TRITONSERVER_ERROR_INVALID_ARG, "(connection: number, bytes: Uint8Array)");
    Command command{kind, static_cast<uint64_t>(info[0].As<Napi::Number>().Int64Value()), {}};
    if (kind == CommandKind::kWrite) {
      auto bytes = info[1].As<Napi::Uint8Array>();
      command.bytes.assign(reinterpret_cast<const char*>(bytes.Data()), bytes.ByteLength());
    }
    {
      std::lock_guard<std::mutex> lock(frontend_->queue_mutex);
      frontend_->commands.push_back(std::move(command));
    }
    uv_async_send(&frontend_->wake);
    return info.Env().Undefined();
  }

  Napi::Value Drain(const Napi::CallbackInfo& info) {
    if (frontend_) frontend_->fast_stopped = true;
    return info.Env().Undefined();
  }

  // Stops listening; the loop ends (event kClosed) once every connection
  // closed and no request is inside Triton.
  Napi::Value Close(const Napi::CallbackInfo& info) {
    if (frontend_ && !joined_) {
      {
        std::lock_guard<std::mutex> lock(frontend_->queue_mutex);
        frontend_->close_wanted = true;
      }
      uv_async_send(&frontend_->wake);
    }
    return info.Env().Undefined();
  }

  Napi::Value Join(const Napi::CallbackInfo& info) {
    End(false);
    return info.Env().Undefined();
  }

  // Waits for the loop thread; `force` first closes every connection (JS is
  // not there to close its own).
  void End(bool force) {
    if (!frontend_ || joined_) return;
    if (force) {
      {
        std::lock_guard<std::mutex> lock(frontend_->queue_mutex);
        frontend_->close_wanted = true;
        frontend_->force_close = true;
      }
      uv_async_send(&frontend_->wake);
    }
    if (frontend_->thread.joinable()) frontend_->thread.join();
    joined_ = true;
    DeleteAllocator();
    DeleteCallbacks();
  }

  void DeleteCallbacks() {
#if defined(TSN_HAVE_NGHTTP2)
    Frontend& f = *frontend_;
    if (f.client_callbacks != nullptr) f.h2->session_callbacks_del(f.client_callbacks);
    if (f.inner_callbacks != nullptr) f.h2->session_callbacks_del(f.inner_callbacks);
    if (f.client_options != nullptr) f.h2->option_del(f.client_options);
    f.client_callbacks = f.inner_callbacks = nullptr;
    f.client_options = nullptr;
#endif
  }

  void DeleteAllocator() {
    if (frontend_->allocator != nullptr)
      TakeError(frontend_->api, frontend_->api.ResponseAllocatorDelete(frontend_->allocator));
    frontend_->allocator = nullptr;
  }

  static void CleanupHook(void* self) {
    auto* wrap = static_cast<HttpFrontendWrap*>(self);
    wrap->cleanup_hook_ = false;
    wrap->End(true);
  }

  std::unique_ptr<Frontend> frontend_;
  int port_ = 0;
  std::string address_;
  bool joined_ = false;
  bool cleanup_hook_ = false;
};

}  // namespace

void RegisterHttpFrontend(Napi::Env env, Napi::Object exports) {
  exports.Set("NativeHttpFrontend", HttpFrontendWrap::Define(env));
}

}  // namespace tsn
