// The native front ends' loop, and the HTTP/1.1 engine on it (the gRPC
// engine's HTTP/2 is native/kserve/grpc-frontend.cc; what both share, frontend.h).
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

#include "frontend.h"
#include "../inference/inference.h"
#include "../server-wrap.h"

namespace tsn {

namespace frontend {

void DeleteResponse(const TritonApi& api, TRITONSERVER_InferenceResponse* response) {
  Live().responses--;
  TakeError(api, api.InferenceResponseDelete(response));
}



// Bytes of pipelined requests read ahead of the one being answered.
constexpr size_t kPipelinedBytes = 64 * 1024;
// Bytes handed to Node's parser that JS has not read yet, before the connection waits.
constexpr uint64_t kUnreadByJsBytes = 1 << 20;
// How long a closing connection's late bytes are read and dropped.
constexpr uint64_t kLingerMs = 2000;
// How long a TLS handshake may take (Node's tls servers allow 120 s: a
// client that holds connections open without a session costs less here).
constexpr uint64_t kHandshakeMs = 10000;
// Ciphertext read at once from a TLS connection.
constexpr size_t kSealedReadBytes = 64 * 1024;

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

// Reads go straight into the connection's buffer, after what it holds
// (TLS: into a buffer of ciphertext, opened into it).
void AllocateRead(uv_handle_t* handle, size_t, uv_buf_t* buf) {
  Conn* conn = static_cast<Conn*>(handle->data);
#if defined(TSN_HAVE_OPENSSL)
  if (conn->tls != nullptr) {
    std::unique_ptr<char[]>& sealed = conn->frontend->sealed_read;
    if (sealed == nullptr) sealed.reset(new char[kSealedReadBytes]);
    *buf = uv_buf_init(sealed.get(), static_cast<unsigned>(kSealedReadBytes));
    return;
  }
#endif
  conn->in.Reserve(16 * 1024);
  *buf = uv_buf_init(conn->in.end(), static_cast<unsigned>(std::min<size_t>(conn->in.room(), 1u << 30)));
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
  conn->last_active_ms = conn->accepted_ms = uv_now(&loop);
  conns.emplace(conn->id, conn);
  bool handshake_first = false;  // a gRPC session starts once TLS is up
#if defined(TSN_HAVE_OPENSSL)
  if (tls != nullptr) {
    conn->tls = std::make_unique<TlsSession>(tls, "");
    handshake_first = true;
    if (!conn->tls->ok()) {
      CloseConn(conn.get());
      return;
    }
  }
#endif
#if defined(TSN_HAVE_NGHTTP2)
  if (settings.grpc && !handshake_first && !GrpcOpen(conn.get())) {
    CloseConn(conn.get());
    return;
  }
#endif
  (void)handshake_first;
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

// Over TLS the answer is sealed here, so its response is deleted now (the
// ciphertext is what waits for the socket).
void Frontend::Write(const std::shared_ptr<Conn>& conn, Outgoing* out) {
#if defined(TSN_HAVE_OPENSSL)
  if (conn->tls != nullptr) {
    bool sealed = conn->tls_ready;
    for (const uv_buf_t& buf : out->bufs) sealed = sealed && conn->tls->Write(buf.base, buf.len);
    if (out->response != nullptr) DeleteResponse(api, out->response);
    out->response = nullptr;
    out->head.clear();
    if (!sealed) {
      delete out;
      CloseConn(conn.get());
      return;
    }
    conn->tls->TakeOutput(&out->head);
    out->bufs.assign(1, uv_buf_init(out->head.data(), static_cast<unsigned>(out->head.size())));
  }
#endif
  Send(conn, out);
}

// Writes `out` to the socket as it is.
void Frontend::Send(const std::shared_ptr<Conn>& conn, Outgoing* out) {
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
  if (conn->closing || conn->ending) return;  // its write side is shut (or shutting) down
  auto* out = new Outgoing();
  out->head = std::move(bytes);
  out->bufs.push_back(uv_buf_init(out->head.data(), static_cast<unsigned>(out->head.size())));
  out->close_after = close_after;
  Write(conn, out);
}

// Closes once what was written has gone out. In between, what the client
// still sends is read and dropped for up to kLingerMs (a lingering close):
// closing with its bytes unread would reset the connection, and an answer
// given before the request ended (400, 408) could be lost with it.
void Frontend::EndAfterWrites(const std::shared_ptr<Conn>& conn) {
  if (conn->closing || conn->ending) return;
  conn->ending = true;
#if defined(TSN_HAVE_OPENSSL)
  if (conn->tls != nullptr) {
    conn->tls->Close();  // close_notify, where a session was made
    if (!SendSealed(conn.get())) return;
  }
#endif
  auto* out = new Outgoing();
  out->conn = conn;
  out->shutdown.data = out;
  if (uv_shutdown(&out->shutdown, reinterpret_cast<uv_stream_t*>(&conn->handle), [](uv_shutdown_t* req, int status) {
        std::unique_ptr<Outgoing> out(static_cast<Outgoing*>(req->data));
        Conn* conn = out->conn.get();
        Frontend* frontend = conn->frontend;
        if (status < 0 || conn->closing || frontend->closing) {
          frontend->CloseConn(conn);
          return;
        }
        conn->lingering = true;
        conn->lingering_since_ms = uv_now(&frontend->loop);
        conn->in.Consume(conn->in.size);
        frontend->UpdateReading(conn);
      }) != 0) {
    delete out;
    CloseConn(conn.get());
  }
}

void Frontend::ToNode(Conn* conn, const char* data, size_t count) {
  conn->node_attached = true;
  conn->to_js_bytes += count;
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
  const size_t before = conn->in.size;
  bool ended = false;
#if defined(TSN_HAVE_OPENSSL)
  if (conn->tls != nullptr) {
    if (conn->lingering) return;  // the rest of a request answered early: dropped unopened
    if (!Unseal(conn, static_cast<size_t>(nread), &ended)) return;
  } else
#endif
  {
    conn->in.size += static_cast<size_t>(nread);
  }
  Received(conn, before, ended);
}

// The connection's plaintext grew from `before` bytes; `ended`: the client
// closed its TLS session after them (an end, as that of the connection).
void Frontend::Received(Conn* conn, size_t before, bool ended) {
  if (conn->lingering) {
    conn->in.Consume(conn->in.size);  // the rest of a request answered early: read and dropped
  } else if (conn->in.size > before) {
#if defined(TSN_HAVE_NGHTTP2)
    if (conn->grpc != nullptr) {
      GrpcRead(conn, static_cast<ssize_t>(conn->in.size));
    } else
#endif
    {
      if (before == 0) conn->request_started_ms = uv_now(&loop);
      Process(conn->self);
      UpdateReading(conn);
    }
  }
  if (ended) CloseConn(conn);
}

#if defined(TSN_HAVE_OPENSSL)
// Ciphertext read into `sealed_read` moves the handshake on, then opens into
// `in`. False where the connection ends (a failed handshake: its alert
// goes out first).
bool Frontend::Unseal(Conn* conn, size_t count, bool* ended) {
  TlsSession& session = *conn->tls;
  bool ok = session.Feed(sealed_read.get(), count);
  if (ok && !conn->tls_ready) {
    const TlsSession::Step step = session.Handshake();
    ok = step != TlsSession::Step::kFailed;
    if (step == TlsSession::Step::kDone) {
      conn->tls_ready = true;
#if defined(TSN_HAVE_NGHTTP2)
      // Its SETTINGS are sealed after the handshake's last bytes, in the same output.
      if (settings.grpc && !GrpcOpen(conn)) {
        CloseConn(conn);
        return false;
      }
#endif
    }
  }
  // Bounded by what was fed: at most kSealedReadBytes of ciphertext a read.
  while (ok && conn->tls_ready) {
    conn->in.Reserve(16 * 1024);
    size_t got = 0;
    ok = session.Read(conn->in.end(), conn->in.room(), &got);
    if (got == 0) break;
    conn->in.size += got;
  }
  if (!SendSealed(conn)) return false;  // handshake messages, alerts, session tickets
  if (ok) return true;
  if (session.closed()) {
    *ended = true;
    return true;
  }
  EndAfterWrites(conn->self);
  return false;
}

// Sends what the session has sealed (not through Write: nothing to seal).
bool Frontend::SendSealed(Conn* conn) {
  auto* out = new Outgoing();
  conn->tls->TakeOutput(&out->head);
  if (out->head.empty()) {
    delete out;
    return true;
  }
  out->bufs.push_back(uv_buf_init(out->head.data(), static_cast<unsigned>(out->head.size())));
  Send(conn->self, out);
  return !conn->closing;
}
#endif

// Whether the connection is read now. Bounded both ways: while a request
// is answered, no more than kPipelinedBytes of what follows are read ahead
// (then the client waits, as TCP makes it); bytes handed to Node's parser
// wait for JS to read them past kUnreadByJsBytes.
void Frontend::UpdateReading(Conn* conn) {
  bool want = !conn->closing;
  if (want && !conn->lingering && conn->grpc == nullptr) {
    if (conn->to_node) want = conn->to_js_bytes - conn->read_by_js_bytes < kUnreadByJsBytes;
    else if (conn->busy) want = conn->in.size < kPipelinedBytes;
  }
  if (want == conn->reading) return;
  conn->reading = want;
  if (want) uv_read_start(reinterpret_cast<uv_stream_t*>(&conn->handle), AllocateRead, OnReadDone);
  else uv_read_stop(reinterpret_cast<uv_stream_t*>(&conn->handle));
}

// Answers what the connection has read, one request at a time, in order.
void Frontend::Process(const std::shared_ptr<Conn>& conn) {
  while (!conn->closing && conn->in.size > 0) {
    if (conn->ending) {  // answered for the last time: what follows is not read
      conn->in.Consume(conn->in.size);
      return;
    }
    if (conn->to_node) {
      ToNode(conn.get(), conn->in.begin(), conn->in.size);
      conn->in.Consume(conn->in.size);
      return;
    }
    if (conn->busy) return;
    http::RequestHead head;
    const http::HeadStatus status = http::ParseHead(conn->in.begin(), conn->in.size, &head);
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
    ToNode(conn.get(), conn->in.begin(), total);
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
    std::memcpy(pending->bytes.begin(), conn->in.begin(), total);
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
  ToNode(conn.get(), pending->bytes.begin(), pending->bytes.size);
  return true;
}

bool Frontend::SubmitHttp(Pending* pending, const http::RequestHead& head) {
  const char* body = pending->bytes.begin() + head.head_bytes;
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


// Triton is done with a request once its final response came and it released it.
void Frontend::Settle(Pending* pending) {
  if (!pending->answered || !pending->released) return;
  std::unique_ptr<Pending> owned(pending);
  if (pending->inflated > 0 && pending->conn->grpc != nullptr) pending->conn->grpc->inflated -= pending->inflated;
  TakeError(api, api.InferenceRequestDelete(pending->request));
  --in_flight;
  state->RequestLeft();
  MaybeEndLoop();
}

void Frontend::RequestDone(const std::shared_ptr<Conn>& conn) {
  conn->busy = false;
  conn->last_active_ms = uv_now(&loop);
  if (closing && !conn->to_node) {
    EndAfterWrites(conn);
    return;
  }
  Process(conn);
  if (!conn->closing) UpdateReading(conn.get());
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
      if (command.kind == CommandKind::kRead) continue;  // HTTP/2 flow control paces the session with JS
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
      case CommandKind::kRead:
        conn->read_by_js_bytes = std::max(conn->read_by_js_bytes, command.count);
        UpdateReading(conn.get());
        break;
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
    if (conn->lingering) {
      if (now - conn->lingering_since_ms >= kLingerMs) idle.push_back(conn);
      continue;
    }
#if defined(TSN_HAVE_OPENSSL)
    if (conn->tls != nullptr && !conn->tls_ready) {
      if (now - conn->accepted_ms >= kHandshakeMs) idle.push_back(conn);
      continue;
    }
#endif
    if (conn->busy || conn->to_node || conn->ending || conn->grpc != nullptr) continue;
    const uint64_t quiet = now - conn->last_active_ms;
    const uint64_t reading = now - conn->request_started_ms;
    if (conn->in.size == 0) {
      if (quiet >= settings.keep_alive_ms) idle.push_back(conn);
    } else if (reading >= (conn->head_read ? settings.request_timeout_ms : settings.headers_timeout_ms)) {
      slow.push_back(conn);
    }
  }
  for (auto& conn : idle) CloseConn(conn.get());
  for (auto& conn : slow) {
    conn->in.Consume(conn->in.size);
    conn->busy = true;  // answered: nothing more is read from it
    WriteText(conn, "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", true);
  }
}

void Frontend::BeginClose(bool force) {
  if (!closing) uv_close(reinterpret_cast<uv_handle_t*>(&listener), nullptr);
  closing = true;
  fast_stopped = true;
  std::vector<std::shared_ptr<Conn>> idle;
  std::vector<std::shared_ptr<Conn>> calls_open;
  for (auto& [id, conn] : conns) {
    if (force || conn->lingering || (!conn->busy && !conn->to_node && conn->grpc == nullptr)) idle.push_back(conn);
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


}  // namespace frontend

namespace {

using namespace frontend;

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
                           InstanceMethod<&HttpFrontendWrap::Send<CommandKind::kRead>>("read"),
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
    settings.max_concurrent_streams = static_cast<uint32_t>(number("maxConcurrentStreams", settings.max_concurrent_streams));
    settings.max_header_list_bytes = static_cast<size_t>(number("maxHeaderListBytes", static_cast<double>(settings.max_header_list_bytes)));
    settings.max_connection_bytes = static_cast<size_t>(number("maxConnectionBytes", static_cast<double>(settings.max_connection_bytes)));
    const std::string compression = options.Get("responseCompression").IsString() ? options.Get("responseCompression").As<Napi::String>().Utf8Value() : "";
    settings.response_window_bits = compression == "gzip" ? 31 : compression == "deflate" ? 15 : 0;
    const std::string host = options.Get("host").ToString().Utf8Value();
    const int port = static_cast<int>(number("port", 0));
#if defined(TSN_HAVE_OPENSSL)
    std::shared_ptr<TlsContext> tls = ReadTls(env, options.Get("tls"), settings.grpc);
#else
    if (!options.Get("tls").IsUndefined())
      throw ToJsError(env, TRITONSERVER_ERROR_UNSUPPORTED, "this addon was built without OpenSSL's headers: no TLS in the native engines");
#endif

    frontend_ = std::make_unique<Frontend>(server->StateForFrontEnd(), settings);
    Frontend& f = *frontend_;
#if defined(TSN_HAVE_OPENSSL)
    f.tls = std::move(tls);
#endif
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

#if defined(TSN_HAVE_OPENSSL)
  // { cert, key, passphrase, ca, requestCert, rejectUnauthorized } (PEM text; lib/kserve/native-tls.ts), or none.
  static std::shared_ptr<TlsContext> ReadTls(Napi::Env env, Napi::Value value, bool grpc) {
    if (value.IsUndefined()) return nullptr;
    if (!value.IsObject()) throw ToJsError(env, TRITONSERVER_ERROR_INVALID_ARG, "tls: an object of PEM text");
    if (OpenSsl() == nullptr)
      throw ToJsError(env, TRITONSERVER_ERROR_UNSUPPORTED,
                      "TLS in the native engines needs the OpenSSL 3 that Node exports, which this process lacks");
    Napi::Object tls = value.As<Napi::Object>();
    auto text = [&](const char* name) {
      Napi::Value item = tls.Get(name);
      return item.IsString() ? item.As<Napi::String>().Utf8Value() : std::string();
    };
    TlsServerSettings settings;
    settings.cert = text("cert");
    settings.key = text("key");
    settings.passphrase = text("passphrase");
    settings.ca = text("ca");
    settings.request_cert = tls.Get("requestCert").ToBoolean().Value();
    settings.reject_unauthorized = tls.Get("rejectUnauthorized").ToBoolean().Value();
    settings.alpn = grpc ? "h2" : "http/1.1";
    std::string error;
    std::shared_ptr<TlsContext> context = TlsContext::Server(settings, &error);
    if (context == nullptr) throw ToJsError(env, TRITONSERVER_ERROR_INVALID_ARG, "tls: " + error);
    return context;
  }
#endif

  template <CommandKind kind>
  Napi::Value Send(const Napi::CallbackInfo& info) {
    if (!frontend_ || joined_) return info.Env().Undefined();
    // Called by lib/kserve/native-http.ts only; still, nothing unchecked reaches the loop.
    if (!info[0].IsNumber() || (kind == CommandKind::kWrite && !info[1].IsTypedArray()) ||
        (kind == CommandKind::kRead && !info[1].IsNumber()))
      throw ToJsError(info.Env(), TRITONSERVER_ERROR_INVALID_ARG, "(connection: number, bytes: Uint8Array | number)");
    Command command{kind, static_cast<uint64_t>(info[0].As<Napi::Number>().Int64Value()), {}, 0};
    if (kind == CommandKind::kRead) command.count = static_cast<uint64_t>(std::max(0.0, info[1].As<Napi::Number>().DoubleValue()));
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
#if defined(TSN_HAVE_NGHTTP2)
  exports.Set("nativeGrpc", Napi::Boolean::New(env, Nghttp2() != nullptr));
#else
  exports.Set("nativeGrpc", Napi::Boolean::New(env, false));
#endif
}

}  // namespace tsn
