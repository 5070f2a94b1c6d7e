// nghttp2, the HTTP/2 library of the native gRPC engine and the client's
// native transport, found at run time: Node's own copy (node exports its
// symbols to addons), else the system's libnghttp2.so.14. Only its header
// is needed to build (Debian's libnghttp2-dev); without it the addon builds
// without either, and serveKServe and the client use their JS ones.
#pragma once

#if defined(__has_include)
#if __has_include(<nghttp2/nghttp2.h>) && !defined(_WIN32)
#define TSN_HAVE_NGHTTP2 1
#endif
#endif

#if defined(TSN_HAVE_NGHTTP2)
#include <nghttp2/nghttp2.h>

namespace tsn {

#define TSN_NGHTTP2_FUNCTIONS(X)                        \
  X(session_callbacks_new)                              \
  X(session_callbacks_del)                              \
  X(session_callbacks_set_on_begin_headers_callback)    \
  X(session_callbacks_set_on_header_callback)           \
  X(session_callbacks_set_on_frame_recv_callback)       \
  X(session_callbacks_set_on_data_chunk_recv_callback)  \
  X(session_callbacks_set_on_stream_close_callback)     \
  X(session_callbacks_set_on_frame_send_callback)       \
  X(session_callbacks_set_on_frame_not_send_callback)   \
  X(option_new)                                         \
  X(option_del)                                         \
  X(option_set_no_auto_window_update)                   \
  X(session_server_new2)                                \
  X(session_client_new)                                 \
  X(session_del)                                        \
  X(session_mem_recv)                                   \
  X(session_mem_send)                                   \
  X(session_resume_data)                                \
  X(session_consume_connection)                         \
  X(session_consume_stream)                             \
  X(session_set_local_window_size)                      \
  X(session_get_last_proc_stream_id)                    \
  X(session_want_read)                                  \
  X(session_want_write)                                 \
  X(submit_settings)                                    \
  X(submit_request)                                     \
  X(submit_response)                                    \
  X(submit_trailer)                                     \
  X(submit_rst_stream)                                  \
  X(submit_goaway)                                      \
  X(submit_ping)

struct Nghttp2Api {
#define TSN_NGHTTP2_FIELD(name) decltype(&nghttp2_##name) name = nullptr;
  TSN_NGHTTP2_FUNCTIONS(TSN_NGHTTP2_FIELD)
#undef TSN_NGHTTP2_FIELD
};

// The functions, or null when no nghttp2 is to be found.
const Nghttp2Api* Nghttp2();

}  // namespace tsn
#endif
