// Access to a session's inside (session_impl.h) for this repository's tests. Internal:
// never installed, never included by include/detinfer/.
#pragma once

#include "detinfer/session.h"
#include "session/session_impl.h"

namespace detinfer {

struct SessionInternals {
  static DeterministicSession::Impl& of(DeterministicSession& session) { return *session.impl_; }
};

}  // namespace detinfer
