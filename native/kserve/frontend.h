// What the native front ends (native/kserve/http-frontend.cc for HTTP/1.1 and the
// loop, native/kserve/grpc-frontend.cc for gRPC) share: the loop's state, its
// connections and the requests it makes. Internal to those two files.
#pragma once

#include <uv.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <napi.h>

#include "../core/bytes.h"
#include "../core/errors.h"
#include "grpc-wire.h"
#include "http-wire.h"
#include "../core/nghttp2-api.h"
#include "../inference/output-memory.h"
#include "../core/server.h"
#include "../core/tls-session.h"
#include "../core/zlib-api.h"

namespace tsn::frontend {

struct Frontend;
struct Pending;
struct GrpcConn;

// Triton responses held here count in liveObjects() until deleted.
void DeleteResponse(const TritonApi& api, TRITONSERVER_InferenceResponse* response);

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
  bool reading = true;         // read now (UpdateReading)
  bool ending = false;         // closing once its writes went out
  bool lingering = false;      // written and half-closed: late bytes are dropped until the client closes
  uint64_t lingering_since_ms = 0;
  uint64_t to_js_bytes = 0;       // handed to JS (ToNode)
  uint64_t read_by_js_bytes = 0;  // of them, read by Node's parser (JS says so)
  Pending* in_flight = nullptr;
  std::unique_ptr<GrpcConn> grpc;  // a gRPC connection's HTTP/2 sessions and streams
  uint64_t node_id = 0;            // the connection's id toward JS (for gRPC, its current virtual one)
  bool flush_queued = false;       // gRPC: frames to send once this wake's answers are in
  uint64_t last_active_ms = 0;
  uint64_t request_started_ms = 0;  // first byte of the request being read
  bool head_read = false;           // its head is in, its body is not yet
  uint64_t accepted_ms = 0;
#if defined(TSN_HAVE_OPENSSL)
  // A TLS listener's connections: ciphertext on the socket (read into the
  // loop's `sealed_read`); everything above (in, writes, JS) sees plaintext.
  std::unique_ptr<TlsSession> tls;
  bool tls_ready = false;  // handshake done
#endif
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
  size_t inflated = 0;  // gRPC: `bytes` is what a compressed message inflated to, counted in its connection's budget
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

enum class CommandKind { kWrite, kDone, kEnd, kDestroy, kRead };
struct Command {
  CommandKind kind;
  uint64_t conn;
  std::string bytes;   // kWrite
  uint64_t count = 0;  // kRead: bytes JS has read so far
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
  // gRPC: what one connection may take of the server (lib/kserve/options.ts says why these values).
  uint32_t max_concurrent_streams = 1000;
  size_t max_header_list_bytes = 16 * 1024;  // name + value + 32 per header, as HTTP/2 counts
  size_t max_connection_bytes = 256 << 20;   // held both ways: requests, answers, unsent writes
  int response_window_bits = 0;              // gRPC: answers compressed for clients that accept it (responseCompression)
};

// A request's headers past this count are refused, as Node's maxHeaderListPairs does.
inline constexpr size_t kMaxHeaderPairs = 128;

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
  int window_bits = 0;          // its grpc-encoding as zlib reads it (WindowBitsOf); 0: identity
  int answer_window_bits = 0;   // the answer's, where it is compressed here
  bool decided = false;         // answered here, or passed on
  bool proxied = false;
  bool request_ended = false;
  Bytes body;                   // while it may be answered here
  Pending* pending = nullptr;   // inside Triton
  int32_t inner_id = 0;         // its stream on the JS session, while open
  Queue to_inner;               // request bytes for JS
  size_t consumed_ahead = 0;    // of them, bytes already given back to the client's stream window
  bool refused = false;         // reset for buffering past the connection's budget
  size_t header_bytes = 0;      // the request's headers as HTTP/2 counts them (held in `headers`)
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
  size_t buffered = 0;  // request bytes held here (headers, bodies being read, bytes waiting for JS)
  size_t answers = 0;   // response bytes waiting for the client's flow-control window
  size_t inflated = 0;  // what the compressed messages inside Triton inflated to
  bool goaway_sent = false;

  GrpcStream* Find(int32_t id) {
    auto found = streams.find(id);
    return found == streams.end() ? nullptr : found->second.get();
  }
};

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
  void Received(Conn* conn, size_t before, bool ended);
  void Process(const std::shared_ptr<Conn>& conn);
  bool TryFast(const std::shared_ptr<Conn>& conn, const http::RequestHead& head, size_t total);
  bool SubmitHttp(Pending* pending, const http::RequestHead& head);
  bool Submit(Pending* pending, const std::string& id, std::vector<http::FastInput>& inputs,
              const std::vector<http::FastOutput>& outputs);
  std::optional<Failure> TakeResult(Pending* pending, TRITONSERVER_InferenceResponse** response);
  void ToNode(Conn* conn, const char* data, size_t count);
  void UpdateReading(Conn* conn);
  void CloseConn(Conn* conn);
  void Write(const std::shared_ptr<Conn>& conn, Outgoing* out);
  void Send(const std::shared_ptr<Conn>& conn, Outgoing* out);
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
#if defined(TSN_HAVE_OPENSSL)
  std::shared_ptr<TlsContext> tls;  // null: plain TCP
  // Ciphertext as read, for every connection: OpenSSL takes it within the
  // read callback, and libuv reads one stream at a time.
  std::unique_ptr<char[]> sealed_read;
  bool Unseal(Conn* conn, size_t count, bool* ended);
  bool SendSealed(Conn* conn);
#endif
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
                                    ResponseView* view);

#if defined(TSN_HAVE_NGHTTP2)
// nghttp2's callbacks for the sessions with clients (client_side) or with JS (native/kserve/grpc-frontend.cc).
nghttp2_session_callbacks* MakeCallbacks(const Nghttp2Api& h2, bool client_side);
#endif

}  // namespace tsn::frontend
