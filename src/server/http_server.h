// cpp-httplib's server with each connection's request head bounded before
// cpp-httplib reads it (request_head.h), and exactly one request served per
// connection (the answer says "Connection: close"), so the check covers every
// request and a refused body's unread rest is never parsed as a next request.
//
// Included only by server.cpp (the routes); this file and server.cpp are the
// only ones that see cpp-httplib.
#pragma once

#include <httplib.h>

namespace sluice::server {

class HttpServer : public httplib::Server {
 private:
  // cpp-httplib's hook for each accepted connection (run on a pool thread).
  bool process_and_close_socket(socket_t sock) override;
};

}  // namespace sluice::server
