#pragma once
// The HTTPS endpoint's TLS context (--http-use-ssl). Internal to
// src/server/http.
#include <boost/asio/ssl/context.hpp>
#include <memory>

#include "core/Status.h"
#include "server/http/HttpServer.h"

namespace ortserve::http {

// Certificate chain and key, TLS 1.2 and later; with a root certificate,
// client certificates are required and verified against it. Every error names
// the flag and the file (missing, unreadable, not PEM, key not matching).
Result<std::unique_ptr<boost::asio::ssl::context>> MakeTlsContext(const HttpServerOptions::Tls& tls);

}  // namespace ortserve::http
