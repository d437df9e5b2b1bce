#pragma once

// libiperf's error codes (i_errno, iperf_api.h of iperf 3.12) in the words of
// ProbeResult.failure_reason. Translated once, here.

#include "agent/probes/probe_result.h"

namespace rxfleet::agent {

/// The failure an i_errno value stands for:
///  - IEACCESSDENIED (the server is running another test) -> kBusy (retried by the scheduler);
///  - no connection to the server: IECONNECT, IECREATESTREAM, IESTREAMCONNECT, IESENDCOOKIE,
///    IENOMSG (nothing received for the receive timeout) -> kUnreachable;
///  - the server stopped the test or broke the protocol: IESERVERTERM, IECTRLCLOSE,
///    IERECVMESSAGE, IERECVPARAMS, IERECVRESULTS, IEMESSAGE, IESTREAMCLOSE, IESTREAMREAD,
///    IEAUTHTEST, IETOTALRATE -> kRefused;
///  - IEBINDDEV, IEBINDDEVNOSUPPORT (SO_BINDTODEVICE refused: needs CAP_NET_RAW) and every other
///    code -> kError; IENONE -> kNone.
ProbeFailure ClassifyIperfError(int iperf_errno);

/// iperf_strerror(iperf_errno): libiperf's text (it includes strerror(errno) where libiperf
/// does). Reads the global errno, so call it right after the failing libiperf call.
std::string IperfErrorText(int iperf_errno);

}  // namespace rxfleet::agent
