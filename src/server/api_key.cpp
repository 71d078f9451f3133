#include "server/api_key.h"

namespace sluice::server {

bool constant_time_equal(std::string_view given, std::string_view secret) {
  // Differences are OR-ed into one accumulator; `volatile` keeps the compiler
  // from turning the loop back into an early-exit compare.
  volatile unsigned char diff = given.size() == secret.size() ? 0 : 1;
  for (size_t i = 0; i < secret.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff = diff | static_cast<unsigned char>(g ^ static_cast<unsigned char>(secret[i]));
  }
  return diff == 0;
}

bool bearer_matches(std::string_view authorization, std::string_view api_key) {
  constexpr std::string_view kScheme = "Bearer ";
  // The scheme is public: comparing it normally leaks nothing.
  if (authorization.substr(0, kScheme.size()) != kScheme) return false;
  return constant_time_equal(authorization.substr(kScheme.size()), api_key);
}

}  // namespace sluice::server
