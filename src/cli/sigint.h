// Ctrl-C as a request, not a death: while a SigintToFlag lives, SIGINT only
// sets a flag that the generating loops poll between tokens, so `run` can stop
// and still print its summary and `chat` can stop one answer and go on.
#pragma once

#include <signal.h>

namespace sluice::cli {

// Installs the handler (without SA_RESTART, so a blocking read at chat's
// prompt returns); restores the previous one when it goes.
class SigintToFlag {
 public:
  SigintToFlag();
  ~SigintToFlag();
  SigintToFlag(const SigintToFlag&) = delete;
  SigintToFlag& operator=(const SigintToFlag&) = delete;

 private:
  struct sigaction old_ {};
};

bool sigint_received();
void clear_sigint();

// Thrown by a command that stopped on SIGINT after printing what it owes
// (run: the text so far and its summary); main exits 130, as a shell
// reports a process ended by SIGINT.
struct Interrupted {};

}  // namespace sluice::cli
