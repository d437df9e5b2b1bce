#include "agent/probes/probe_result.h"

namespace rxfleet::agent {

std::string_view ProbeFailureName(ProbeFailure failure) {
  switch (failure) {
    case ProbeFailure::kNone:
      return "";
    case ProbeFailure::kUnreachable:
      return "unreachable";
    case ProbeFailure::kBusy:
      return "busy";
    case ProbeFailure::kInterfaceDown:
      return "interface_down";
    case ProbeFailure::kTimeout:
      return "timeout";
    case ProbeFailure::kRefused:
      return "refused";
    case ProbeFailure::kError:
      return "error";
  }
  return "error";
}

std::string BoundedFailureMessage(std::string_view message) {
  if (message.size() <= kMaxProbeFailureMessage) return std::string(message);
  size_t end = kMaxProbeFailureMessage;
  // Do not cut a UTF-8 sequence: back up over continuation bytes (10xxxxxx).
  while (end > 0 && (static_cast<unsigned char>(message[end]) & 0xC0) == 0x80) --end;
  return std::string(message.substr(0, end));
}

}  // namespace rxfleet::agent
