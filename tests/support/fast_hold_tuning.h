#pragma once

// The hold tuning the process tests run on the emulated tuning labs (tests/labs/tuning-*.yaml):
// segments by USB speed and board, four candidates, two-second periods (one second of burn-in,
// one valid one-second window), half of each segment exploring and 240 windows of budget per
// segment, i.e. three rounds of Sequential Halving over the three challengers of a segment.

#include <string>
#include <string_view>

namespace rxfleet::testing {

/// The document as `rxfleetctl tune create -f` takes it, named `name`.
inline std::string FastHoldTuningYaml(std::string_view name) {
  return std::string(R"(apiVersion: rxfleet/v1
kind: HoldTuning
metadata: {name: )") +
         std::string(name) + R"(}
spec:
  selector: {chips: [rtl8922au]}
  segments: [usb_speed, board]
  candidates: [32us, 128us, 512us, 1024us]
  objective: {metric: rx_throughput_bps, direction: maximize}
  guardrails:
    - {metric: rx_drop_ratio, op: "<=", threshold: 0.05}
  budget: {adapterShare: 0.5, maxWindows: 240}
  minEffect: 0.05
  windowLength: 1s
  periodLength: 2s
  burnIn: 1s
  recheckShare: 0
  minAdaptersPerArm: 3
  minWindowsPerArm: 6
)";
}

}  // namespace rxfleet::testing
