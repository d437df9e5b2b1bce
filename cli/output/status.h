#pragma once

#include <ostream>

#include "absl/time/time.h"
#include "rxfleet/v1/local_status.pb.h"

namespace rxfleet::cli {

/// `rxfleetctl --local status` as text: host, labels, agent, machine, server link and bundle
/// in effect, local policy file, metrics address, then the adapters (ADAPTER, CHIP, USB, HOLD
/// desired/observed, STATE, POLICY deciding the hold, NETDEV) and every adapter diagnosis.
void PrintLocalStatus(const v1::GetStatusResponse& status, absl::Time now, std::ostream& out);

}  // namespace rxfleet::cli
