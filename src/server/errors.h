// The JSON text the server writes: every body goes through json_text(), and
// every error has the OpenAI shape {"error": {"message", "type", "code"}}.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace sluice::server {

// Compact JSON that never throws: invalid UTF-8 (text a model generated that
// ends mid-character, input echoed in an error message) becomes U+FFFD.
std::string json_text(const nlohmann::json& j);

// "authentication_error" (401), "not_found_error" (404),
// "not_supported_error" (501), "server_error" (5xx), else "invalid_request_error".
const char* error_type(int status);

// The error body for `status`; never throws.
std::string error_body(int status, const std::string& message);

}  // namespace sluice::server
