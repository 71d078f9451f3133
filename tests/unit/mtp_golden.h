// The NextN/MTP head against a llama.cpp-made MTP case (shared/golden's
// deepseek2-mtp-f32 and qwen35moe-mtp-f32, tests/golden's *-mtp-* cases): the
// trunk's hidden states and the head's normalised outputs tightly, its draft
// logits and K-step chains under the case's rule, the chains' clear drafts
// exactly. Defined in mtp_test.cpp.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace sluice::test {

// `c`: the case's JSON (tokens, mtp); `gguf`: its model; `files_dir`: where the
// files named by c["mtp"]["files"] lie. Reports through gtest assertions.
void expect_mtp_matches_llama_cpp(const nlohmann::json& c, const std::string& gguf, const std::string& files_dir);

}  // namespace sluice::test
