#include "common/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/ip/address.hpp>

namespace allot::tls {

namespace ssl = boost::asio::ssl;

namespace {

Status floorAtTls12(ssl::context& ctx) {
  if (SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_2_VERSION) != 1)
    return Status::Internal("cannot set the TLS 1.2 minimum");
  ctx.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                  ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  return Status::Ok();
}

}  // namespace

Result<std::shared_ptr<ssl::context>> serverContext(const std::string& certFile,
                                                    const std::string& keyFile) {
  if (certFile.empty() || keyFile.empty())
    return Status::InvalidArgument("tls: both a certificate and a key are needed");
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  ALLOT_RETURN_IF_ERROR(floorAtTls12(*ctx));
  boost::system::error_code ec;
  ctx->use_certificate_chain_file(certFile, ec);
  if (ec)
    return Status::InvalidArgument("tls: cannot load certificate " + certFile + ": " +
                                   ec.message());
  ctx->use_private_key_file(keyFile, ssl::context::pem, ec);
  if (ec) return Status::InvalidArgument("tls: cannot load key " + keyFile + ": " + ec.message());
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1)
    return Status::InvalidArgument("tls: the key " + keyFile + " does not match the certificate " +
                                   certFile);
  return ctx;
}

Result<std::shared_ptr<ssl::context>> clientContext(const std::string& caFile) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  ALLOT_RETURN_IF_ERROR(floorAtTls12(*ctx));
  boost::system::error_code ec;
  if (caFile.empty()) {
    ctx->set_default_verify_paths(ec);
  } else {
    ctx->load_verify_file(caFile, ec);
  }
  if (ec)
    return Status::InvalidArgument("tls: cannot load CA certificates " +
                                   (caFile.empty() ? std::string("(system)") : caFile) + ": " +
                                   ec.message());
  ctx->set_verify_mode(ssl::verify_peer);
  return ctx;
}

Status expectPeerName(SSL* ssl, const std::string& host) {
  boost::system::error_code ec;
  boost::asio::ip::make_address(host, ec);
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  if (!ec) {
    // An address: matched against the certificate's IP subjectAltNames; no SNI for addresses.
    if (X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) != 1)
      return Status::InvalidArgument("tls: bad server address '" + host + "'");
    return Status::Ok();
  }
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  if (SSL_set1_host(ssl, host.c_str()) != 1 || SSL_set_tlsext_host_name(ssl, host.c_str()) != 1)
    return Status::InvalidArgument("tls: bad server name '" + host + "'");
  return Status::Ok();
}

}  // namespace allot::tls
