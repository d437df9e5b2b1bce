#pragma once

// The agent logs through common/log.h (shared with rxfleet-server); these names keep agent
// code reading LogLevel and LogSink.

#include "common/log.h"

namespace rxfleet::agent {

using common::FormatLogLine;
using common::LogLevel;
using common::LogLevelName;
using common::LogSink;
using common::StderrLogSink;

}  // namespace rxfleet::agent
