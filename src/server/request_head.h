// Bounding a request's head (request line + headers) before cpp-httplib reads
// it. Debian's cpp-httplib 0.11 caps each header line but keeps any number of
// them, so without this one request could grow the server's memory without
// end. The head is only peeked at here (MSG_PEEK): cpp-httplib still parses it.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace sluice::server {

enum class HeadCheck {
  Fits,      // the head ends ("\r\n\r\n") within the limit
  TooLarge,  // `limit` bytes arrived and the head has not ended
  Gone,      // the client closed, failed, or paused longer than pause_ms first
};

// Waits until the bytes queued on the connected TCP socket `fd` decide the
// check, consuming none of them. Each wait for more bytes lasts at most
// `pause_ms`, and ends (Gone) soon after `running` (when given) turns false:
// a server that stops does not wait out an idle client. Leaves the socket's
// SO_RCVLOWAT at 1.
HeadCheck peek_request_head(int fd, size_t limit, int pause_ms,
                            const std::function<bool()>& running = {});

// Sends `response` (a whole HTTP response), then closes `fd` without a reset:
// what the client still uploads is read and dropped (at most 1 MiB, each wait
// at most pause_ms) so that the client gets to read the answer.
void answer_and_close(int fd, const std::string& response, int pause_ms);

}  // namespace sluice::server
