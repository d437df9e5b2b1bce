#include "agent/probes/iperf_errors.h"

#include <cstdint>
#include <string>

// iperf_api.h needs uint64_t declared first.
#include <iperf_api.h>

namespace rxfleet::agent {

ProbeFailure ClassifyIperfError(int iperf_errno) {
  switch (iperf_errno) {
    case IENONE:
      return ProbeFailure::kNone;
    case IEACCESSDENIED:
      return ProbeFailure::kBusy;
    case IECONNECT:
    case IECREATESTREAM:
    case IESTREAMCONNECT:
    case IESENDCOOKIE:
    case IENOMSG:
      return ProbeFailure::kUnreachable;
    case IESERVERTERM:
    case IECTRLCLOSE:
    case IERECVMESSAGE:
    case IERECVPARAMS:
    case IERECVRESULTS:
    case IEMESSAGE:
    case IESTREAMCLOSE:
    case IESTREAMREAD:
    case IEAUTHTEST:
    case IETOTALRATE:
      return ProbeFailure::kRefused;
    default:
      return ProbeFailure::kError;
  }
}

std::string IperfErrorText(int iperf_errno) {
  const char* text = iperf_strerror(iperf_errno);
  return text != nullptr ? std::string(text)
                         : std::string("iperf3 error ") + std::to_string(iperf_errno);
}

}  // namespace rxfleet::agent
