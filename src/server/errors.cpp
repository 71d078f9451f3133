#include "server/errors.h"

namespace sluice::server {

std::string json_text(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

const char* error_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 404:
      return "not_found_error";
    case 501:
      return "not_supported_error";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

std::string error_body(int status, const std::string& message) {
  return json_text(
      {{"error", {{"message", message}, {"type", error_type(status)}, {"code", status}}}});
}

}  // namespace sluice::server
