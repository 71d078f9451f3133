// The JSON text the server writes: every body goes through util/json_text.h's
// json_text() (invalid UTF-8 becomes U+FFFD), and
// every error has the OpenAI shape {"error": {"message", "type", "code"}}.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace sluice::server {

// "authentication_error" (401), "not_found_error" (404), "rate_limit_error" (429),
// "not_supported_error" (501), "server_error" (5xx), else "invalid_request_error".
const char* error_type(int status);

// The error body for `status`; never throws.
std::string error_body(int status, const std::string& message);

}  // namespace sluice::server
