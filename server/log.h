#pragma once

// The server logs through common/log.h (shared with rxfleet-agent): Log(LogLevel::kWarning,
// "...") writes one line to stderr, with the journald priority prefix under journald.

#include "common/log.h"

namespace rxfleet::server {

using common::Log;
using common::LogLevel;

}  // namespace rxfleet::server
