// The one seam between the server and a chat-template engine.
//
// A ChatRenderer turns OpenAI chat `messages` (and `tools`, null when the
// request has none) into the prompt text the model expects; with
// add_generation_prompt it ends with the assistant turn's opening. It may
// throw server::RequestError for a conversation the template rejects (the
// client gets a 400) or sluice::Error for a broken template (a 500). It is
// called concurrently from HTTP threads, so it must be thread-safe.
//
// Without a renderer (an empty function) the server answers
// /v1/chat/completions with 501 "this build has no chat-template renderer".
#pragma once

#include "runtime/chat.h"

namespace sluice::server {

using ChatRenderer = runtime::ChatRenderer;  // the same seam `sluice chat` renders through

}  // namespace sluice::server
