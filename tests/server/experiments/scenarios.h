#pragma once

// Experiments and fleets shared by the report, guardrail, conversion and promotion tests,
// modelled on the project's seed measurements (RTL8922AU, hold 1024 µs vs 32 µs):
//  - x86 hosts on USB 3: TCP download 613 -> 1002 Mbit/s, round trip 2.33 -> 1.29 ms,
//    busiest core 8.4 % -> 12.8 %;
//  - Raspberry Pi 1 on USB 2: TCP 102.3 -> 87.7 Mbit/s, CPU 50.5 % -> 77.4 %, UDP loss
//    3.8 % -> 85.7 % (the guardrail case);
//  - one Pi 5 on USB 2: 297 -> 296 Mbit/s (a segment too small to conclude anything).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/experiment/experiment.h"
#include "server/experiments/assignment.h"
#include "tests/server/experiments/fleet_sim.h"

namespace rxfleet::experiments::testing {

inline const absl::Time kStart = absl::FromUnixSeconds(1767225600);  // 2026-01-01 00:00 UTC

inline constexpr char kSwitchbackFleet[] = R"(apiVersion: rxfleet/v1
kind: Experiment
metadata: {name: hold-fleet}
spec:
  selector: {chips: [rtl8922au]}
  arms:
    - {name: control, settings: {hold: 1024us}}
    - {name: short, settings: {hold: 32us}}
  design: switchback
  duration: 8h
  windowLength: 60s
  periodLength: 30m
  burnIn: 5m
  primaryMetric: rx_throughput_bps
  secondaryMetrics: [rtt_p99_seconds, busiest_core_ratio, rx_drop_ratio]
  guardrails:
    - {metric: rx_drop_ratio, op: "<=", threshold: 0.05}
    - {metric: busiest_core_ratio, op: "<=", threshold: 0.9}
    - {metric: rtt_p99_seconds, op: "<=", threshold: 20ms}
  segments: [usb_speed, board]
  minAdaptersPerArm: 3
)";

inline Experiment MustParseExperiment(const std::string& text) {
  absl::StatusOr<Experiment> e = ParseExperiment(text, "scenario.yaml");
  if (!e.ok()) {
    ADD_FAILURE() << e.status();
    return Experiment{};
  }
  return *e;
}

inline Assigner MustAssigner(const Experiment& e, absl::Time start = kStart) {
  absl::StatusOr<Assigner> a = Assigner::Create(e, start);
  if (!a.ok()) ADD_FAILURE() << a.status();
  return *std::move(a);
}

// Arm effects: index 0 = control (1024 µs), 1 = short (32 µs).
inline std::vector<ArmEffect> X86Usb3() {
  return {{613e6, 0.002, 0.00233, 0.084}, {1002e6, 0.002, 0.00129, 0.128}};
}
inline std::vector<ArmEffect> Pi1Usb2() {
  return {{102.3e6, 0.038, 0.0030, 0.505}, {87.7e6, 0.857, 0.0025, 0.774}};
}
inline std::vector<ArmEffect> Pi5Usb2() {
  return {{297e6, 0.002, 0.00147, 0.019}, {296e6, 0.002, 0.00065, 0.025}};
}

// 6 x86/USB 3 adapters, 4 Pi 1/USB 2 adapters and 1 Pi 5/USB 2 adapter, hosts differing by
// up to +-20 % in throughput.
inline std::vector<SimAdapter> MixedFleet() {
  std::vector<SimAdapter> fleet;
  for (int i = 0; i < 6; ++i) {
    fleet.push_back({AdapterKey(absl::StrCat("x86-", i), "port-2"),
                     {"super", "x86"},
                     X86Usb3(),
                     0.8 + 0.08 * i});
  }
  for (int i = 0; i < 4; ++i) {
    fleet.push_back({AdapterKey(absl::StrCat("pi1-", i), "port-1"),
                     {"high", "pi1"},
                     Pi1Usb2(),
                     0.9 + 0.05 * i});
  }
  fleet.push_back({AdapterKey("pi5-0", "port-1"), {"high", "pi5"}, Pi5Usb2(), 1.0});
  return fleet;
}

}  // namespace rxfleet::experiments::testing
