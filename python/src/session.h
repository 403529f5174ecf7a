// The Python Session: a DeterministicSession and the folder it was opened from.
#pragma once

#include <string>

#include "detinfer/session.h"

namespace detinfer_py {

struct PySession {
  detinfer::DeterministicSession session;
  std::string model_dir;
};

}  // namespace detinfer_py
