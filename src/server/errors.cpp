#include "server/errors.h"

#include "util/json_text.h"

namespace sluice::server {

const char* error_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 404:
      return "not_found_error";
    case 429:
      return "rate_limit_error";
    case 501:
      return "not_supported_error";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

std::string error_body(int status, const std::string& message) {
  return json_text(nlohmann::json{
      {"error", {{"message", message}, {"type", error_type(status)}, {"code", status}}}});
}

}  // namespace sluice::server
