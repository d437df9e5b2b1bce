#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"
#include "rxfleet/v1/event.pb.h"

namespace rxfleet::cli {

/// The object an event is about, as `-o name` spells it: "adapter/pi1/port-2-2",
/// "host/pi1", "policy/usb3-short"; "fleet" when the event names no object.
std::string EventObject(const v1::Event& event);

/// The "Events:" section of describe: TYPE, REASON, AGE, FROM, MESSAGE, oldest first; AGE
/// reads "5m (x3 over 20m)" for folded repeats. Prints "Events:  <none>" when empty.
void PrintEventsSection(const std::vector<v1::Event>& events, absl::Time now, std::ostream& out);

/// One line per event for `watch` (columns separated by two spaces, not aligned across
/// lines because the stream is unbounded):
/// "2024-05-01T10:00:00Z  Warning  DriftRepaired  adapter/pi1/port-2-2  hold drifted (x2)".
std::string FormatEventLine(const v1::Event& event);

}  // namespace rxfleet::cli
