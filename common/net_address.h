// HOST:PORT addresses given on command lines and in config files.
#pragma once

#include <string_view>

#include "absl/status/status.h"

namespace rxfleet::common {

/// Checks a `HOST:PORT` address as the programs' `--server`, `--listen` and similar flags take
/// it: HOST is a name, an IPv4 address or a bracketed IPv6 address (`[::1]`), PORT a decimal
/// number in 0..65535 (0 lets the kernel choose, where a program listens).
/// Returns InvalidArgument naming what is wrong (missing port, port out of range, empty host);
/// gRPC itself would silently wrap a port above 65535 onto another port.
[[nodiscard]] absl::Status ValidateHostPort(std::string_view address);

}  // namespace rxfleet::common
