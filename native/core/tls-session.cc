#include "tls-session.h"

#if defined(TSN_HAVE_OPENSSL)
#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

namespace tsn {

namespace {

// The queue of OpenSSL errors is the thread's, shared with Node's own
// crypto on this thread: read and emptied right where ours arise.
std::string TakeErrors(const OpenSslApi& api) {
  std::string text;
  while (const unsigned long code = api.ERR_get_error()) {
    char buffer[256];
    api.ERR_error_string_n(code, buffer, sizeof buffer);
    if (!text.empty()) text += "; ";
    text += buffer;
  }
  return text;
}

bool IsAddress(const std::string& name) {
  unsigned char bytes[16];
  return inet_pton(AF_INET, name.c_str(), bytes) == 1 || inet_pton(AF_INET6, name.c_str(), bytes) == 1;
}


// Every certificate of the PEM text `ca` into `store`; how many there were.
int AddCertificates(const OpenSslApi& api, X509_STORE* store, const std::string& ca) {
  BIO* bio = api.BIO_new_mem_buf(ca.data(), static_cast<int>(ca.size()));
  int count = 0;
  while (X509* x509 = api.PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    api.X509_STORE_add_cert(store, x509);
    api.X509_free(x509);
    count++;
  }
  api.BIO_free(bio);
  api.ERR_clear_error();  // the end of the PEM text reads as an error
  return count;
}

// The certificate (then its chain, sent with it) and its private key.
bool UseCertificate(const OpenSslApi& api, SSL_CTX* ctx, const std::string& cert, const std::string& key,
                    const std::string& passphrase, std::string* error) {
  BIO* cert_bio = api.BIO_new_mem_buf(cert.data(), static_cast<int>(cert.size()));
  X509* x509 = api.PEM_read_bio_X509(cert_bio, nullptr, nullptr, nullptr);
  bool chained = x509 != nullptr && api.SSL_CTX_use_certificate(ctx, x509) == 1;
  if (x509 != nullptr) api.X509_free(x509);
  while (chained) {
    X509* link = api.PEM_read_bio_X509(cert_bio, nullptr, nullptr, nullptr);
    if (link == nullptr) break;
    if (api.SSL_CTX_ctrl(ctx, SSL_CTRL_EXTRA_CHAIN_CERT, 0, link) != 1) api.X509_free(link);  // taken on success
  }
  api.BIO_free(cert_bio);
  api.ERR_clear_error();
  BIO* key_bio = api.BIO_new_mem_buf(key.data(), static_cast<int>(key.size()));
  // With no callback, OpenSSL takes the last argument as the passphrase.
  EVP_PKEY* pkey = api.PEM_read_bio_PrivateKey(key_bio, nullptr, nullptr,
                                                const_cast<char*>(passphrase.c_str()));
  api.BIO_free(key_bio);
  const bool keyed = pkey != nullptr && api.SSL_CTX_use_PrivateKey(ctx, pkey) == 1;
  if (pkey != nullptr) api.EVP_PKEY_free(pkey);
  if (!chained || !keyed || api.SSL_CTX_check_private_key(ctx) != 1) {
    *error = "tls.cert and tls.key do not load as a PEM certificate and its private key: " + TakeErrors(api);
    return false;
  }
  return true;
}

// requestCert without rejectUnauthorized: any certificate (or none) is let in, as Node does.
int AcceptAnyCertificate(int, X509_STORE_CTX*) { return 1; }

// ALPN on a listener: its protocol where the client offers it. Where the
// client offers others only, gRPC ends the handshake (as Node's HTTP/2
// server does) and HTTP/1.1 goes on without.
int SelectProtocol(SSL*, const unsigned char** out, unsigned char* out_length, const unsigned char* in,
                   unsigned in_length, void* arg) {
  const auto* context = static_cast<const TlsContext*>(arg);
  const std::string& wanted = context->alpn();
  for (unsigned at = 0; at < in_length;) {
    const unsigned length = in[at];
    if (at + 1 + length > in_length) break;
    if (length == wanted.size() && std::memcmp(in + at + 1, wanted.data(), length) == 0) {
      *out = in + at + 1;
      *out_length = static_cast<unsigned char>(length);
      return SSL_TLSEXT_ERR_OK;
    }
    at += 1 + length;
  }
  return wanted == "h2" ? SSL_TLSEXT_ERR_ALERT_FATAL : SSL_TLSEXT_ERR_NOACK;
}

}  // namespace

std::shared_ptr<TlsContext> TlsContext::Client(const std::string& ca, const std::string& cert, const std::string& key,
                                               const std::string& alpn, std::string* error) {
  const OpenSslApi& api = *OpenSsl();
  api.ERR_clear_error();
  SSL_CTX* ctx = api.SSL_CTX_new(api.TLS_client_method());
  if (ctx == nullptr) {
    *error = "could not make a TLS context: " + TakeErrors(api);
    return nullptr;
  }
  std::shared_ptr<TlsContext> context(new TlsContext(ctx, alpn, false));
  api.SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, nullptr);
  api.SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  // Every certificate of `ca` is trusted (Node's tls.rootCertificates by default).
  if (AddCertificates(api, api.SSL_CTX_get_cert_store(ctx), ca) == 0) {
    *error = "tls.ca holds no PEM certificate";
    return nullptr;
  }
  if ((!cert.empty() || !key.empty()) && !UseCertificate(api, ctx, cert, key, "", error)) return nullptr;
  // ALPN's wire form: each protocol with its length before it.
  std::string wire(1, static_cast<char>(alpn.size()));
  wire += alpn;
  if (api.SSL_CTX_set_alpn_protos(ctx, reinterpret_cast<const unsigned char*>(wire.data()),
                                  static_cast<unsigned>(wire.size())) != 0) {
    *error = "could not set ALPN: " + TakeErrors(api);
    return nullptr;
  }
  return context;
}

std::shared_ptr<TlsContext> TlsContext::Server(const TlsServerSettings& settings, std::string* error) {
  const OpenSslApi& api = *OpenSsl();
  api.ERR_clear_error();
  SSL_CTX* ctx = api.SSL_CTX_new(api.TLS_server_method());
  if (ctx == nullptr) {
    *error = "could not make a TLS context: " + TakeErrors(api);
    return nullptr;
  }
  std::shared_ptr<TlsContext> context(new TlsContext(ctx, settings.alpn, true));
  api.SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, nullptr);
  if (!UseCertificate(api, ctx, settings.cert, settings.key, settings.passphrase, error)) return nullptr;
  if (settings.request_cert) {
    if (AddCertificates(api, api.SSL_CTX_get_cert_store(ctx), settings.ca) == 0) {
      *error = "tls.ca holds no PEM certificate";
      return nullptr;
    }
    if (settings.reject_unauthorized)
      api.SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    else
      api.SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, AcceptAnyCertificate);
  }
  // Resumed sessions of verified clients need a context name (any fixed one).
  static const unsigned char kSessionContext[] = "tritonserver-node";
  api.SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof kSessionContext - 1);
  api.SSL_CTX_set_alpn_select_cb(ctx, SelectProtocol, context.get());
  return context;
}

TlsContext::~TlsContext() { OpenSsl()->SSL_CTX_free(ctx_); }

TlsSession::TlsSession(std::shared_ptr<TlsContext> context, const std::string& name)
    : context_(std::move(context)), api_(*OpenSsl()), name_(name) {
  api_.ERR_clear_error();
  ssl_ = api_.SSL_new(context_->ctx());
  if (ssl_ == nullptr) {
    SetError("could not start a TLS session");
    return;
  }
  in_ = api_.BIO_new(api_.BIO_s_mem());
  out_ = api_.BIO_new(api_.BIO_s_mem());
  api_.SSL_set_bio(ssl_, in_, out_);
  if (context_->server()) {
    api_.SSL_set_accept_state(ssl_);
    return;
  }
  api_.SSL_set_connect_state(ssl_);
  if (IsAddress(name)) {
    api_.X509_VERIFY_PARAM_set1_ip_asc(api_.SSL_get0_param(ssl_), name.c_str());
  } else {
    api_.SSL_ctrl(ssl_, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name, const_cast<char*>(name.c_str()));
    api_.SSL_set1_host(ssl_, name.c_str());
  }
}

TlsSession::~TlsSession() {
  if (ssl_ != nullptr) api_.SSL_free(ssl_);  // frees both BIOs
}

void TlsSession::SetError(const char* what) {
  std::string detail = TakeErrors(api_);
  error_ = detail.empty() ? what : std::string(what) + ": " + detail;
}

bool TlsSession::Feed(const char* data, size_t size) {
  api_.ERR_clear_error();
  while (size > 0) {
    const int chunk = static_cast<int>(std::min<size_t>(size, 1 << 30));
    const int written = api_.BIO_write(in_, data, chunk);
    if (written <= 0) {
      SetError("could not take the peer's bytes");
      return false;
    }
    data += written;
    size -= static_cast<size_t>(written);
  }
  return true;
}

TlsSession::Step TlsSession::Handshake() {
  api_.ERR_clear_error();
  const int rc = api_.SSL_do_handshake(ssl_);
  if (rc == 1) {
    if (context_->server()) return Step::kDone;  // SelectProtocol chose
    const unsigned char* chosen = nullptr;
    unsigned length = 0;
    api_.SSL_get0_alpn_selected(ssl_, &chosen, &length);
    // HTTP/1.1 servers often do without ALPN; gRPC needs h2 agreed.
    const bool none_is_fine = length == 0 && context_->alpn() == "http/1.1";
    if (!none_is_fine &&
        (length != context_->alpn().size() || std::memcmp(chosen, context_->alpn().data(), length) != 0)) {
      error_ = "the server did not agree to " + context_->alpn() + " (ALPN)";
      return Step::kFailed;
    }
    return Step::kDone;
  }
  const int reason = api_.SSL_get_error(ssl_, rc);
  if (reason == SSL_ERROR_WANT_READ || reason == SSL_ERROR_WANT_WRITE) return Step::kMore;
  const long verify = api_.SSL_get_verify_result(ssl_);
  if (context_->server()) {
    if (verify != X509_V_OK) {
      api_.ERR_clear_error();
      error_ = std::string("the client's certificate is not trusted: ") + api_.X509_verify_cert_error_string(verify);
    } else {
      SetError("the TLS handshake failed");
    }
    return Step::kFailed;
  }
  if (verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH) {
    api_.ERR_clear_error();
    error_ = "the server's certificate is not for " + name_ + " (" + api_.X509_verify_cert_error_string(verify) + ")";
  } else if (verify != X509_V_OK) {
    api_.ERR_clear_error();
    error_ = std::string("the server's certificate is not trusted: ") + api_.X509_verify_cert_error_string(verify);
  } else {
    SetError("the TLS handshake failed");
  }
  return Step::kFailed;
}

bool TlsSession::Read(char* buffer, size_t capacity, size_t* size) {
  *size = 0;
  api_.ERR_clear_error();
  const int rc = api_.SSL_read(ssl_, buffer, static_cast<int>(std::min<size_t>(capacity, 1 << 30)));
  if (rc > 0) {
    *size = static_cast<size_t>(rc);
    return true;
  }
  const int reason = api_.SSL_get_error(ssl_, rc);
  if (reason == SSL_ERROR_WANT_READ || reason == SSL_ERROR_WANT_WRITE) return true;
  if (reason == SSL_ERROR_ZERO_RETURN) {
    closed_ = true;
    error_ = "the peer closed the TLS session";
  } else {
    SetError("TLS");
  }
  return false;
}

bool TlsSession::Write(const char* data, size_t size) {
  api_.ERR_clear_error();
  while (size > 0) {
    const int rc = api_.SSL_write(ssl_, data, static_cast<int>(std::min<size_t>(size, 1 << 30)));
    if (rc <= 0) {
      SetError("TLS");
      return false;
    }
    data += rc;
    size -= static_cast<size_t>(rc);
  }
  return true;
}

void TlsSession::Close() {
  api_.ERR_clear_error();
  if (api_.SSL_is_init_finished(ssl_) == 1) api_.SSL_shutdown(ssl_);
  api_.ERR_clear_error();
}

void TlsSession::TakeOutput(std::string* out) {
  while (const size_t pending = api_.BIO_ctrl_pending(out_)) {
    const size_t at = out->size();
    out->resize(at + pending);
    const int got = api_.BIO_read(out_, out->data() + at, static_cast<int>(pending));
    out->resize(at + static_cast<size_t>(got > 0 ? got : 0));
    if (got <= 0) break;
  }
}

}  // namespace tsn
#endif
