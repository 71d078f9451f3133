// The API key check of `sluice serve --api-key`.
#pragma once

#include <string>
#include <string_view>

namespace sluice::server {

// a == b, in time that depends only on the lengths: every byte of `secret` is
// compared whatever the earlier ones were (no early exit that would let a
// client find the key byte by byte from response times).
bool constant_time_equal(std::string_view given, std::string_view secret);

// Whether an Authorization header value is "Bearer KEY" with KEY == api_key
// (compared in constant time).
bool bearer_matches(std::string_view authorization, std::string_view api_key);

}  // namespace sluice::server
