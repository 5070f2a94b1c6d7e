// TLS over memory BIOs, for the native transports of the client
// (native/client/) and the native engines (native/kserve/): a context per
// channel or listener (certificates, trust, ALPN) and a session per
// connection, so each keeps doing its own socket I/O on its loop:
// ciphertext from the socket goes in with Feed, plaintext comes out of
// Read; plaintext goes in with Write, ciphertext for the socket comes out
// of TakeOutput. Node's own OpenSSL (core/openssl-api.h).
#pragma once

#include <memory>
#include <string>

#include "openssl-api.h"

namespace tsn {

#if defined(TSN_HAVE_OPENSSL)

// A listener's TLS: its certificate (with its chain) and key, and whether
// (and against which CAs) clients must show certificates of their own.
struct TlsServerSettings {
  std::string cert;        // PEM: the certificate, then its chain
  std::string key;         // PEM
  std::string passphrase;  // of an encrypted key
  std::string ca;          // PEM: CAs the clients' certificates are checked against
  bool request_cert = false;
  bool reject_unauthorized = true;  // with request_cert: no trusted certificate, no connection
  std::string alpn;                 // "h2" (gRPC: required where the client offers ALPN) or "http/1.1"
};

class TlsContext {
 public:
  // A client's: `ca` the certificates to trust (every one in it), `cert`
  // and `key` its own (both or neither); `alpn` the protocol to offer
  // ("h2", "http/1.1"). Null with `error` set where they do not load.
  static std::shared_ptr<TlsContext> Client(const std::string& ca, const std::string& cert, const std::string& key,
                                            const std::string& alpn, std::string* error);
  static std::shared_ptr<TlsContext> Server(const TlsServerSettings& settings, std::string* error);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  SSL_CTX* ctx() const { return ctx_; }
  const std::string& alpn() const { return alpn_; }
  bool server() const { return server_; }

 private:
  TlsContext(SSL_CTX* ctx, std::string alpn, bool server) : ctx_(ctx), alpn_(std::move(alpn)), server_(server) {}
  SSL_CTX* ctx_;
  std::string alpn_;
  bool server_;
};

class TlsSession {
 public:
  enum class Step { kDone, kMore, kFailed };

  // `name` (clients only): the name (or IP address) the server's
  // certificate must carry, also sent as SNI where it is a name.
  TlsSession(std::shared_ptr<TlsContext> context, const std::string& name);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  bool ok() const { return ssl_ != nullptr; }
  // False where OpenSSL would not take the bytes (no memory).
  bool Feed(const char* data, size_t size);
  // Moves the handshake on; kFailed with error() saying why (an untrusted
  // certificate, a name it does not carry, no common protocol).
  Step Handshake();
  // Plaintext read so far, up to `capacity`; 0 when there is none yet.
  // False where the session failed (error()) or the peer closed it
  // (closed(): a close_notify, which ends the stream as EOF would).
  bool Read(char* buffer, size_t capacity, size_t* size);
  bool closed() const { return closed_; }
  bool Write(const char* data, size_t size);
  // Says the session ends (close_notify), to be sent with TakeOutput.
  void Close();
  // Appends the ciphertext to send to `out`.
  void TakeOutput(std::string* out);
  const std::string& error() const { return error_; }

 private:
  void SetError(const char* what);

  std::shared_ptr<TlsContext> context_;
  const OpenSslApi& api_;
  const std::string name_;
  SSL* ssl_ = nullptr;
  BIO* in_ = nullptr;   // owned by ssl_
  BIO* out_ = nullptr;  // owned by ssl_
  bool closed_ = false;
  std::string error_;
};

#endif

}  // namespace tsn
