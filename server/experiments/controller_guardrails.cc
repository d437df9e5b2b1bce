// ExperimentController's guardrails (evaluated on the cached windows, stopping arms per
// segment) and its gauges (rxfleet_server_experiment_info, ..._arm_stopped).

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/experiments/aggregate.h"
#include "server/experiments/controller.h"
#include "server/experiments/controller_internal.h"
#include "server/experiments/convert.h"
#include "server/experiments/guardrails.h"

namespace rxfleet::server {

using controller_internal::PhaseName;
using controller_internal::SegmentLabel;
using experiments::Experiment;

bool ExperimentController::Guardrails(Entry& entry, absl::Time now) {
  const Experiment& e = entry.experiment;
  if (e.guardrails.empty()) return false;
  absl::StatusOr<const std::vector<experiments::Window>*> windows = Windows(entry);
  if (!windows.ok()) return false;
  absl::StatusOr<experiments::Aggregate> aggregate =
      experiments::AggregateWindows(e, entry.assigner->start(), **windows);
  if (!aggregate.ok()) return false;
  absl::StatusOr<std::vector<experiments::GuardrailDecision>> decisions =
      experiments::EvaluateGuardrails(e, *aggregate, entry.stopped);
  if (!decisions.ok() || decisions->empty()) return false;
  std::vector<experiments::StoppedArm> stopped = entry.stopped;
  for (const experiments::GuardrailDecision& d : *decisions) {
    stopped.push_back(experiments::ToStoppedArm(d, now));
  }
  v1::ExperimentStatus status = entry.proto.status();
  status.clear_stopped_arms();
  for (const experiments::StoppedArm& s : stopped) {
    *status.add_stopped_arms() = experiments::StoppedArmToProto(e, s);
  }
  if (!SaveStatus(entry, status, now).ok()) return false;  // retried at the next evaluation
  entry.stopped = std::move(stopped);
  const std::string& name = entry.proto.metadata().name();
  for (const experiments::GuardrailDecision& d : *decisions) {
    RecordEvent(name, v1::EVENT_TYPE_WARNING, std::string(experiments::kReasonGuardrailTripped),
                absl::StrCat("arm ", d.arm, " stopped in segment ", SegmentLabel(e, d.segment),
                             ": ", d.message),
                now);
  }
  // Every non-control arm stopped in every segment with data: nothing left to compare.
  bool all = !aggregate->segments.empty();
  for (size_t i = 0; all && i < e.arms.size(); ++i) {
    if (i == e.ControlIndex()) continue;
    for (const experiments::SegmentData& segment : aggregate->segments) {
      if (!experiments::IsStopped(entry.stopped, e.arms[i].name, segment.values)) all = false;
    }
  }
  if (all) {
    (void)End(entry, v1::EXPERIMENT_PHASE_STOPPED, now, experiments::kReasonGuardrailTripped,
              "guardrails stopped every non-control arm in every segment", now);
  }
  return true;
}

void ExperimentController::UpdateGauges() {
  for (const auto& [name, entry] : entries_) {
    const std::string phase = PhaseName(entry.proto.status().phase());
    const std::string key = absl::StrCat(name, "\n", phase);
    if (info_gauges_.contains(key)) continue;
    for (auto it = info_gauges_.lower_bound(absl::StrCat(name, "\n"));
         it != info_gauges_.end() && it->first.starts_with(absl::StrCat(name, "\n"));) {
      deps_.metrics->experiment_info->Remove(it->second);
      it = info_gauges_.erase(it);
    }
    prometheus::Gauge& gauge =
        deps_.metrics->experiment_info->Add({{"experiment", name}, {"phase", phase}});
    gauge.Set(1);
    info_gauges_[key] = &gauge;
  }
  // Stopped arms are exported while the experiment runs (an alert fires on them); an ended
  // experiment's series go away.
  for (auto it = stopped_gauges_.begin(); it != stopped_gauges_.end();) {
    const std::string name = it->first.substr(0, it->first.find('\n'));
    const auto entry = entries_.find(name);
    if (entry != entries_.end() && Running(entry->second)) {
      ++it;
      continue;
    }
    deps_.metrics->experiment_arm_stopped->Remove(it->second);
    it = stopped_gauges_.erase(it);
  }
  for (const auto& [name, entry] : entries_) {
    if (!Running(entry)) continue;
    for (const experiments::StoppedArm& s : entry.stopped) {
      const std::string segment = SegmentLabel(entry.experiment, s.segment);
      const std::string key = absl::StrCat(name, "\n", s.arm, "\n", segment);
      if (stopped_gauges_.contains(key)) continue;
      prometheus::Gauge& gauge = deps_.metrics->experiment_arm_stopped->Add(
          {{"experiment", name}, {"arm", s.arm}, {"segment", segment}});
      gauge.Set(1);
      stopped_gauges_[key] = &gauge;
    }
  }
}

}  // namespace rxfleet::server
