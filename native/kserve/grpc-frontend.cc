// The native gRPC engine: HTTP/2 with nghttp2 on the front end's loop.
// Each client connection has two sessions: a server session with the
// client, and a client session with the JS `node:http2` server (over the
// connection's virtual socket) that carries every call not answered here.
#include "frontend.h"

#include <algorithm>

namespace tsn::frontend {

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

// What a connection holds of the server's memory: requests being read or
// passed on, answers its client has not taken, writes not yet sent.
size_t Held(Conn* conn) {
  return conn->grpc->buffered + conn->grpc->answers + conn->grpc->inflated + conn->handle.write_queue_size;
}

// Whether a grpc-accept-encoding list names `encoding`.
bool Accepts(const std::string& list, const char* encoding) {
  for (size_t at = 0; at <= list.size();) {
    size_t end = list.find(',', at);
    if (end == std::string::npos) end = list.size();
    size_t first = at, last = end;
    while (first < last && list[first] == ' ') ++first;
    while (last > first && list[last - 1] == ' ') --last;
    if (list.compare(first, last - first, encoding) == 0) return true;
    at = end + 1;
  }
  return false;
}

// Refuses a stream as Node does when a connection asks too much of it.
int Refuse(Conn* conn, int32_t id) {
  conn->frontend->h2->submit_rst_stream(conn->grpc->session, NGHTTP2_FLAG_NONE, id, NGHTTP2_ENHANCE_YOUR_CALM);
  return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
}

// The client's session: its calls arrive. A connection over its budget
// takes no new call until its client has read its answers.
int OnClientBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
    Conn* conn = ConnOf(user);
    if (Held(conn) > conn->frontend->settings.max_connection_bytes) return Refuse(conn, frame->hd.stream_id);
    auto stream = std::make_unique<GrpcStream>();
    stream->id = frame->hd.stream_id;
    conn->grpc->streams[stream->id] = std::move(stream);
  }
  return 0;
}

// A header list past the limit (an HPACK bomb repeats one large header for a
// byte each) resets the stream before it costs more.
int OnClientHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t name_size,
                   const uint8_t* value, size_t value_size, uint8_t, void* user) {
  Conn* conn = ConnOf(user);
  GrpcStream* stream = conn->grpc->Find(frame->hd.stream_id);
  // A client's trailers (no gRPC client sends any) are not passed on.
  if (stream == nullptr || stream->decided) return 0;
  const size_t bytes = name_size + value_size + 32;
  if (stream->header_bytes + bytes > conn->frontend->settings.max_header_list_bytes ||
      stream->headers.size() == kMaxHeaderPairs) {
    stream->refused = true;
    stream->decided = true;
    return Refuse(conn, stream->id);
  }
  stream->header_bytes += bytes;
  conn->grpc->buffered += bytes;
  stream->headers.emplace_back(std::string(reinterpret_cast<const char*>(name), name_size),
                               std::string(reinterpret_cast<const char*>(value), value_size));
  return 0;
}

int OnClientFrame(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  Conn* conn = ConnOf(user);
  GrpcStream* stream = conn->grpc->Find(frame->hd.stream_id);
  if (stream == nullptr || stream->refused) return 0;
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
  if (Held(conn) + size > frontend->settings.max_connection_bytes) {
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
    std::memcpy(stream->body.end(), bytes, size);
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
  grpc.buffered -= stream->header_bytes + stream->body.size + stream->to_inner.size();
  grpc.answers -= stream->to_client.size();
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
  conn->grpc->answers -= count;
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
  const Nghttp2Api& h2 = *conn->frontend->h2;
  // An answer its client does not read, past the connection's budget: the call is reset both ways.
  if (Held(conn) + size > conn->frontend->settings.max_connection_bytes) {
    h2.submit_rst_stream(conn->grpc->inner, NGHTTP2_FLAG_NONE, inner_id, NGHTTP2_CANCEL);
    h2.submit_rst_stream(conn->grpc->session, NGHTTP2_FLAG_NONE, stream->id, NGHTTP2_ENHANCE_YOUR_CALM);
    return 0;
  }
  stream->to_client.Append(reinterpret_cast<const char*>(data), size);
  conn->grpc->answers += size;
  h2.session_resume_data(conn->grpc->session, stream->id);
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
  const nghttp2_settings_entry entries[] = {
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, kStreamWindowBytes},
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, settings.max_concurrent_streams},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<uint32_t>(settings.max_header_list_bytes)}};
  h2->submit_settings(conn->grpc->session, NGHTTP2_FLAG_NONE, entries, 3);
  h2->session_set_local_window_size(conn->grpc->session, NGHTTP2_FLAG_NONE, 0, kConnectionWindowBytes);
  GrpcFlush(conn);
  return true;
}

void Frontend::GrpcRead(Conn* conn, ssize_t nread) {
  const ssize_t used = h2->session_mem_recv(conn->grpc->session, reinterpret_cast<const uint8_t*>(conn->in.begin()),
                                            static_cast<size_t>(nread));
  conn->in.Consume(conn->in.size);
  if (used < 0) {
    // Not HTTP/2 (or a broken session): the GOAWAY nghttp2 queued goes out, then the connection closes.
    const uint8_t* data = nullptr;
    const ssize_t size = h2->session_mem_send(conn->grpc->session, &data);
    if (size > 0) WriteText(conn->self, std::string(reinterpret_cast<const char*>(data), static_cast<size_t>(size)), false);
    EndAfterWrites(conn->self);
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
  if (conn->closing) return;  // the write failed: CloseConn deleted the sessions
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
  // Done after our GOAWAY once no call is open; at once after nghttp2 ended
  // the session (a protocol error: its GOAWAY is written), open calls or not.
  const bool session_over = !h2->session_want_read(grpc.session) && !h2->session_want_write(grpc.session);
  if (session_over || (grpc.streams.empty() && grpc.goaway_sent)) EndAfterWrites(conn->self);
}

// Answered here only when nothing in its headers asks for what the JS
// front end does (a deadline, an encoding other than gzip or deflate, or
// compression without zlib here); else passed on at once.
void Frontend::GrpcRequestHeaders(Conn* conn, GrpcStream* stream) {
  bool fast = settings.fast_path && !fast_stopped.load(std::memory_order_relaxed) && !closing;
  bool post = false, infer = false, grpc_type = false;
  std::string accepted;
  for (const Header& header : stream->headers) {
    if (header.first == ":method") post = header.second == "POST";
    else if (header.first == ":path") infer = header.second == kModelInferPath;
    else if (header.first == "content-type")
      grpc_type = header.second == "application/grpc" || header.second == "application/grpc+proto";
    else if (header.first == "grpc-timeout") fast = false;
    else if (header.first == "grpc-encoding") {
#if defined(TSN_HAVE_ZLIB)
      stream->window_bits = WindowBitsOf(header.second);
#endif
      fast = fast && (stream->window_bits != 0 || header.second == "identity");
    } else if (header.first == "grpc-accept-encoding") {
      accepted = header.second;
    }
  }
  // Answers compressed as the JS front end compresses them: where the client accepts the encoding.
  if (settings.response_window_bits == 31 && Accepts(accepted, "gzip")) stream->answer_window_bits = 31;
  if (settings.response_window_bits == 15 && Accepts(accepted, "deflate")) stream->answer_window_bits = 15;
#if defined(TSN_HAVE_ZLIB)
  if ((stream->window_bits != 0 || stream->answer_window_bits != 0) && Zlib() == nullptr) fast = false;
#else
  if (stream->answer_window_bits != 0) fast = false;
#endif
  if (!(fast && post && infer && grpc_type)) GrpcPassOn(conn, stream);
}

void Frontend::GrpcRequestEnded(Conn* conn, GrpcStream* stream) {
  stream->request_ended = true;
  if (stream->refused) return;  // reset, its bytes dropped: nothing to answer
  if (stream->proxied) {
    if (stream->inner_id > 0) h2->session_resume_data(conn->grpc->inner, stream->inner_id);
  } else if (!stream->decided && !GrpcTryFast(conn, stream)) {
    GrpcPassOn(conn, stream);
  }
}

// A ModelInfer call whose one message this front end reads goes to Triton;
// a compressed one (gzip, deflate) once inflated, within the message limit.
// What it cannot read (a corrupt or oversized message among them) goes to
// the JS front end, which says what is wrong.
bool Frontend::GrpcTryFast(Conn* conn, GrpcStream* stream) {
  Bytes& body = stream->body;
  if (body.size < 5 || static_cast<uint8_t>(body.begin()[0]) > 1) return false;
  const bool compressed = body.begin()[0] == 1;
  const auto* prefix = reinterpret_cast<const uint8_t*>(body.begin());
  const size_t length = (size_t{prefix[1]} << 24) | (size_t{prefix[2]} << 16) | (size_t{prefix[3]} << 8) | prefix[4];
  if (length != body.size - 5 || (compressed && stream->window_bits == 0)) return false;
  const size_t received = body.size;
  Bytes message;  // what a compressed message inflates to: the inputs point into it
#if defined(TSN_HAVE_ZLIB)
  bool too_large = false;
  if (compressed && !InflateAll(body.begin() + 5, length, stream->window_bits, settings.max_body_bytes, &message, &too_large))
    return false;
  // Inflated messages count in the connection's budget while Triton holds them: a small bomb cannot hold much.
  if (compressed && Held(conn) + message.size > settings.max_connection_bytes) {
    stream->decided = true;
    GrpcFail(conn, stream, Failure{TRITONSERVER_ERROR_UNAVAILABLE, "the connection holds more than grpc.maxConnectionBytes of inflated messages: retry once its calls are answered"});
    QueueFlush(conn);
    return true;
  }
#else
  if (compressed) return false;
#endif
  const char* start = compressed ? message.begin() : body.begin() + 5;
  grpc::InferRequest request;
  if (!grpc::ReadInferRequest(start, compressed ? message.size : length, &request)) return false;
  auto pending = std::make_unique<Pending>();
  pending->frontend = this;
  pending->conn = conn->self;
  pending->stream_id = stream->id;
  pending->model = request.model;
  pending->version = request.version;
  if (compressed) {
    pending->inflated = message.size;
    pending->bytes = std::move(message);
  } else {
    pending->bytes = std::move(body);  // the inputs point into it, wherever it lives
    body = Bytes{};
  }
  if (!Submit(pending.get(), request.id, request.inputs, request.outputs)) {
    if (!compressed) body = std::move(pending->bytes);
    return false;
  }
  stream->decided = true;
  conn->grpc->buffered -= received;
  conn->grpc->inflated += pending->inflated;
  body = Bytes{};
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
  if (stream->body.size > 0) stream->to_inner.Append(stream->body.begin(), stream->body.size);
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
  std::vector<Header> headers{{":status", "200"}, {"content-type", "application/grpc"}, {"grpc-accept-encoding", kAcceptEncoding}};
#if defined(TSN_HAVE_ZLIB)
  if (stream->answer_window_bits != 0) {
    // The message after its 5-byte prefix, compressed, behind a prefix of its own.
    const std::string& plain = stream->to_client.bytes;
    std::string packed;
    if (!AppendCompressedMessage(plain.data() + 5, plain.size() - 5, stream->answer_window_bits, &packed)) {
      GrpcFail(conn, stream, Failure{TRITONSERVER_ERROR_INTERNAL, "could not compress the response"});
      return;
    }
    stream->to_client.bytes = std::move(packed);
    headers.emplace_back("grpc-encoding", stream->answer_window_bits == 31 ? "gzip" : "deflate");
  }
#endif
  conn->grpc->answers += stream->to_client.size();
  stream->response_ended = true;
  stream->trailers = {{"grpc-status", "0"}};
  GrpcRespond(conn, stream, std::move(headers), true);
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

}  // namespace tsn::frontend
