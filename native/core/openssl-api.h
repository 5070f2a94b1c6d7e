// OpenSSL, for TLS in the native client transports and engines, found at run time
// among the symbols Node exports to addons (Node links OpenSSL in and
// exports it, as it does nghttp2): the same library Node's own `tls` uses,
// never a second copy. Its headers come with Node's (node-gyp's include
// directory). Where a runtime exports none (Electron ships BoringSSL
// without them), OpenSsl() is null and TLS stays with the JS transports.
#pragma once

#if defined(__has_include)
#if __has_include(<openssl/ssl.h>) && !defined(_WIN32)
#define TSN_HAVE_OPENSSL 1
#endif
#endif

#if defined(TSN_HAVE_OPENSSL)
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

namespace tsn {

#define TSN_OPENSSL_FUNCTIONS(X)  \
  X(TLS_client_method)            \
  X(TLS_server_method)            \
  X(SSL_CTX_new)                  \
  X(SSL_CTX_free)                 \
  X(SSL_CTX_ctrl)                 \
  X(SSL_CTX_set_verify)           \
  X(SSL_CTX_get_cert_store)       \
  X(SSL_CTX_use_certificate)      \
  X(SSL_CTX_use_PrivateKey)       \
  X(SSL_CTX_check_private_key)    \
  X(SSL_CTX_set_alpn_protos)      \
  X(SSL_CTX_set_alpn_select_cb)   \
  X(SSL_CTX_set_session_id_context) \
  X(SSL_new)                      \
  X(SSL_free)                     \
  X(SSL_ctrl)                     \
  X(SSL_set_bio)                  \
  X(SSL_set_connect_state)        \
  X(SSL_set_accept_state)         \
  X(SSL_is_init_finished)         \
  X(SSL_shutdown)                 \
  X(SSL_set1_host)                \
  X(SSL_get0_param)               \
  X(SSL_do_handshake)             \
  X(SSL_read)                     \
  X(SSL_write)                    \
  X(SSL_get_error)                \
  X(SSL_get_verify_result)        \
  X(SSL_get0_alpn_selected)       \
  X(X509_VERIFY_PARAM_set1_ip_asc) \
  X(X509_STORE_add_cert)          \
  X(X509_verify_cert_error_string) \
  X(X509_free)                    \
  X(EVP_PKEY_free)                \
  X(PEM_read_bio_X509)            \
  X(PEM_read_bio_PrivateKey)      \
  X(BIO_new)                      \
  X(BIO_new_mem_buf)              \
  X(BIO_s_mem)                    \
  X(BIO_free)                     \
  X(BIO_read)                     \
  X(BIO_write)                    \
  X(BIO_ctrl_pending)             \
  X(ERR_get_error)                \
  X(ERR_error_string_n)           \
  X(ERR_clear_error)

struct OpenSslApi {
#define TSN_OPENSSL_FIELD(name) decltype(&::name) name = nullptr;
  TSN_OPENSSL_FUNCTIONS(TSN_OPENSSL_FIELD)
#undef TSN_OPENSSL_FIELD
};

// The functions, or null when the process exports no OpenSSL 3.
const OpenSslApi* OpenSsl();

}  // namespace tsn
#endif
