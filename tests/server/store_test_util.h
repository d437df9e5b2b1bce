#pragma once

// Records the store tests write (tests/server/store_*_test.cc).

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/proto/time.h"
#include "server/store/store.h"

namespace rxfleet::server::store_test {

inline const absl::Time kNow = absl::FromUnixSeconds(1767225600);

inline v1::Policy MakePolicy(const std::string& name, uint32_t hold_us,
                             const std::string& resource_version = "") {
  v1::Policy policy;
  policy.mutable_metadata()->set_name(name);
  policy.mutable_metadata()->set_resource_version(resource_version);
  policy.mutable_spec()->mutable_settings()->set_hold_us(hold_us);
  return policy;
}

inline v1::Event MakeEvent(const std::string& name, uint64_t version, absl::Time last_time) {
  v1::Event event;
  event.mutable_metadata()->set_name(name);
  event.mutable_metadata()->set_resource_version(absl::StrCat(version));
  event.set_reason("Connected");
  *event.mutable_last_time() = common::TimeToProto(last_time);
  return event;
}

inline StoredWindow MakeWindow(const std::string& experiment, const std::string& host,
                               std::vector<std::string> segment, bool valid) {
  StoredWindow w;
  w.experiment = experiment;
  w.host_id = host;
  w.segment = std::move(segment);
  w.window.set_adapter_id("port-1");
  w.window.set_experiment(experiment);
  w.window.set_arm("short");
  w.window.set_rx_bytes(12345);
  w.window.set_valid(valid);
  return w;
}

/// A hold tuning as a server creates it: spec set, status RUNNING with one segment and its
/// planner state (what UpdateTuningStatus persists between rounds).
inline v1::HoldTuning MakeTuning(const std::string& name) {
  v1::HoldTuning tuning;
  tuning.mutable_metadata()->set_name(name);
  (*tuning.mutable_metadata()->mutable_labels())["team"] = "edge";
  v1::HoldTuningSpec* spec = tuning.mutable_spec();
  spec->add_segment_label_keys("speed");
  for (uint32_t hold_us : {32u, 64u, 128u}) spec->add_candidate_hold_us(hold_us);
  spec->set_objective_metric("rx_throughput");
  spec->set_objective_direction(v1::TUNING_DIRECTION_MAXIMIZE);
  spec->set_adapter_share(0.5);
  spec->set_max_windows(1000);
  spec->mutable_window_length()->set_seconds(60);
  v1::HoldTuningStatus* status = tuning.mutable_status();
  status->set_phase(v1::HOLD_TUNING_PHASE_RUNNING);
  *status->mutable_start_time() = common::TimeToProto(kNow);
  v1::HoldTuningSegment* segment = status->add_segments();
  (*segment->mutable_segment())["speed"] = "super";
  segment->set_phase("exploring");
  segment->set_incumbent_hold_us(64);
  segment->mutable_planner_state()->set_incumbent_hold_us(64);
  segment->mutable_planner_state()->add_rounds()->set_number(1);
  return tuning;
}

/// Opens a store at `where` (path or URI), failing the test if it cannot.
inline std::unique_ptr<Store> OpenStore(const std::string& where,
                                        absl::Duration busy_timeout = absl::Seconds(5)) {
  StoreOptions options;
  options.path = where;
  options.busy_timeout = busy_timeout;
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(options);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

}  // namespace rxfleet::server::store_test
