#pragma once

// A deterministic simulated segment for hold tuning tests, on the experiments' fleet simulator
// (tests/server/experiments/fleet_sim.h): adapters whose window metrics follow a SYNTHETIC
// hold -> metrics model (not measurements), running the holds the planner assigns, with the
// planner updated at every period boundary as the server would.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/tuning/hold_tuning.h"
#include "server/tuning/planner.h"
#include "tests/server/experiments/fleet_sim.h"

namespace rxfleet::tuning::testing {

using experiments::Window;
using experiments::testing::ArmEffect;
using experiments::testing::SimAdapter;

inline const absl::Time kStart = absl::FromUnixSeconds(1767225600);  // 2026-01-01 00:00 UTC

// A synthetic model: the means of an adapter's window metrics under a hold (µs).
using HoldModel = std::function<ArmEffect(uint32_t hold_us)>;

inline HoldTuning MustParseTuning(const std::string& text) {
  absl::StatusOr<HoldTuning> t = ParseHoldTuning(text, "tuning.yaml");
  if (!t.ok()) {
    ADD_FAILURE() << t.status();
    return HoldTuning{};
  }
  return *t;
}

// `n` rtw89 adapters on distinct hosts, levels spread over +-10 %.
inline SegmentInput Segment(size_t n, uint32_t incumbent_hold_us) {
  SegmentInput input;
  input.segment = {"super"};
  input.incumbent_hold_us = incumbent_hold_us;
  for (size_t i = 0; i < n; ++i) {
    common::AdapterAttributes a;
    a.host = absl::StrCat("host-", i);
    a.adapter_id = "port-1";
    a.chip = "rtl8922au";
    a.family = "rtw89";
    a.usb_speed = common::UsbSpeed::kSuper;
    input.adapters.push_back(a);
  }
  return input;
}

// What a simulation saw, for the tests' checks.
struct SimTrace {
  std::vector<Window> windows;            // every window of the epoch(s), in time order
  std::vector<SegmentState> states;       // the state after each Update
  size_t max_concurrent_challengers = 0;  // adapters on a challenger at one window start
};

class SegmentSim {
 public:
  SegmentSim(HoldTuning tuning, SegmentInput input, HoldModel model, double noise = 0.03)
      : tuning_(std::move(tuning)),
        input_(std::move(input)),
        model_(std::move(model)),
        noise_(noise),
        rng_(7) {
    for (size_t i = 0; i < input_.adapters.size(); ++i) {
      const common::AdapterAttributes& a = input_.adapters[i];
      adapters_.push_back({experiments::AdapterKey(a.host, a.adapter_id),
                           input_.segment,
                           {},
                           0.9 + 0.2 * static_cast<double>(i) / input_.adapters.size()});
    }
  }

  void set_model(HoldModel model) { model_ = std::move(model); }
  // SYNTHETIC time-of-day swing: throughput times 1 + amplitude * sin(2 pi t / 24 h), the same
  // for every hold and adapter.
  void set_diurnal(double amplitude) { diurnal_ = amplitude; }
  const HoldTuning& tuning() const { return tuning_; }
  const SegmentInput& input() const { return input_; }
  SegmentState& state() { return state_; }
  SimTrace& trace() { return trace_; }

  absl::Status Start(absl::Time now = kStart) {
    absl::StatusOr<SegmentState> s = StartSegment(tuning_, input_, now);
    if (!s.ok()) return s.status();
    state_ = *std::move(s);
    epoch_windows_.clear();
    return absl::OkStatus();
  }

  // Runs the period of the state's epoch grid holding `from` (from `from` on), then updates the
  // planner at the period's end with every window of the epoch. Returns the period's end.
  absl::StatusOr<absl::Time> RunPeriod(absl::Time from) {
    const absl::Time epoch = state_.epoch_start;
    const int64_t index = WholePeriods(from - epoch, tuning_.period_length);
    const absl::Time period_start = epoch + tuning_.period_length * index;
    const absl::Time period_end = period_start + tuning_.period_length;
    for (absl::Time t = std::max(from, period_start); t + tuning_.window_length <= period_end;
         t += tuning_.window_length) {
      size_t on_challenger = 0;
      for (const SimAdapter& adapter : adapters_) {
        absl::StatusOr<HoldAssignment> a = AssignmentFor(tuning_, state_, adapter.key, t);
        if (!a.ok()) return a.status();
        if (a->role == Role::kChallenger) ++on_challenger;
        ArmEffect effect = model_(a->hold_us);
        effect.rx_bps *= 1 + diurnal_ * std::sin(2 * M_PI * absl::ToDoubleHours(t - kStart) / 24);
        Window w = experiments::testing::SimulatedWindow(adapter, effect, t, tuning_.window_length,
                                                         noise_, rng_);
        w.arm = a->arm;
        w.period_index = a->period_index;
        w.valid = !a->in_burn_in;
        if (!w.valid) w.invalid_reason = "burn_in";
        epoch_windows_.push_back(w);
        trace_.windows.push_back(std::move(w));
      }
      trace_.max_concurrent_challengers =
          std::max(trace_.max_concurrent_challengers, on_challenger);
    }
    const absl::Time now = period_end;
    absl::StatusOr<SegmentState> next = Update(tuning_, state_, input_, epoch_windows_, now);
    if (!next.ok()) return next.status();
    if (next->epoch_start != state_.epoch_start) epoch_windows_.clear();
    state_ = *std::move(next);
    trace_.states.push_back(state_);
    return period_end;
  }

  // Runs periods until the phase leaves `phase` or `max_periods` ran. Returns the last time.
  absl::StatusOr<absl::Time> RunWhile(Phase phase, absl::Time from, int max_periods) {
    absl::Time t = from;
    for (int i = 0; i < max_periods && state_.phase == phase; ++i) {
      absl::StatusOr<absl::Time> next = RunPeriod(t);
      if (!next.ok()) return next.status();
      t = std::max(*next, state_.epoch_start);
    }
    return t;
  }

 private:
  HoldTuning tuning_;
  SegmentInput input_;
  HoldModel model_;
  double noise_;
  double diurnal_ = 0;
  experiments::SplitMix64 rng_;
  std::vector<SimAdapter> adapters_;
  std::vector<Window> epoch_windows_;
  SegmentState state_;
  SimTrace trace_;
};

}  // namespace rxfleet::tuning::testing
