#pragma once
// TLS contexts for allotd (server) and its clients (agent, CLI), on Boost.Asio's OpenSSL
// binding. One place decides the protocol floor (TLS 1.2) and how a client checks the server:
// the certificate chains to the given CA (or the system's CAs) and names the host it dialled.
// Errors come back as Status; no exception leaves these functions.

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

#include "common/status.h"

typedef struct ssl_st SSL;

namespace allot::tls {

// allotd's context: its certificate chain and private key (PEM files).
Result<std::shared_ptr<boost::asio::ssl::context>> serverContext(const std::string& certFile,
                                                                 const std::string& keyFile);

// A client's context that verifies the server against `caFile` (PEM), or the system's trusted
// CAs when it is empty.
Result<std::shared_ptr<boost::asio::ssl::context>> clientContext(const std::string& caFile);

// Before the handshake on a client connection: sends `host` as SNI and has the handshake fail
// unless the certificate names it (a DNS name, or an IP address in its subjectAltName).
Status expectPeerName(SSL* ssl, const std::string& host);

}  // namespace allot::tls
