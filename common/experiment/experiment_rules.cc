// Experiment rules (CheckExperiment), in document order; the parser and ValidateExperiment
// share them (common/experiment/experiment.cc).

#include "common/experiment/experiment_rules.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/host_labels.h"
#include "common/policy/document_reader.h"
#include "common/string_view_compat.h"
#include "common/usb_speed.h"

namespace rxfleet::experiments {
namespace {

using common::RxAggSettings;
using common::Selector;
using common::ToAbslView;

// ---------------------------------------------------------------------------------------------
// Rules on values, shared by the parser (which adds positions) and ValidateExperiment.

// The message of a broken value rule, if any.
std::optional<std::string> Problem(const absl::Status& status) {
  if (status.ok()) return std::nullopt;
  return std::string(status.message());
}

bool IsBuiltinSegmentKey(absl::string_view key) {
  return key == ToAbslView(kSegmentUsbSpeed) || key == ToAbslView(kSegmentChip) ||
         key == ToAbslView(kSegmentHost);
}

std::optional<std::string> SettingsProblem(const RxAggSettings& settings,
                                           const Selector& selector) {
  if (settings.Empty()) {
    return "must set at least one of hold, holdUs, countThreshold, bufferKiB, enable";
  }
  if (settings.force_enable) {
    return "forceEnable is not allowed in experiment arms (it is for lab use on single "
           "adapters; use a policy)";
  }
  return Problem(common::CheckSettingsForSelector(settings, selector));
}

std::string Dur(absl::Duration d) { return absl::FormatDuration(d); }

// The probe metrics an experiment names, with the field naming each, in document order.
std::vector<std::pair<Metric, std::string>> ProbeMetricFields(const Experiment& e) {
  std::vector<std::pair<Metric, std::string>> out;
  if (IsProbeMetric(e.primary_metric)) out.emplace_back(e.primary_metric, "spec.primaryMetric");
  for (size_t i = 0; i < e.secondary_metrics.size(); ++i) {
    if (IsProbeMetric(e.secondary_metrics[i])) {
      out.emplace_back(e.secondary_metrics[i], absl::StrCat("spec.secondaryMetrics[", i, "]"));
    }
  }
  for (size_t i = 0; i < e.guardrails.size(); ++i) {
    if (IsProbeMetric(e.guardrails[i].metric)) {
      out.emplace_back(e.guardrails[i].metric, absl::StrCat("spec.guardrails[", i, "].metric"));
    }
  }
  return out;
}

// What a probe metric needs of the probe: the field and the value it must have, or nullopt.
std::optional<FieldError> ProbeMismatch(Metric metric, const std::string& where,
                                        const common::ProbeSpec& probe) {
  const std::string name(MetricName(metric));
  switch (metric) {
    case Metric::kProbeRxThroughputBps:
      if (probe.direction != common::ProbeDirection::kReverse) {
        return FieldError{"spec.probe.direction",
                          absl::StrCat(name, " (", where,
                                       ") is what the adapter receives and needs direction: "
                                       "reverse; the probe is forward")};
      }
      break;
    case Metric::kProbeTxThroughputBps:
      if (probe.direction != common::ProbeDirection::kForward) {
        return FieldError{"spec.probe.direction",
                          absl::StrCat(name, " (", where,
                                       ") is what the adapter sends and needs direction: "
                                       "forward; the probe is reverse")};
      }
      break;
    case Metric::kProbeUdpLossRatio:
    case Metric::kProbeUdpJitterSeconds:
      if (probe.protocol != common::ProbeProtocol::kUdp) {
        return FieldError{"spec.probe.protocol",
                          absl::StrCat(name, " (", where,
                                       ") is measured by UDP probes only and needs protocol: "
                                       "udp; the probe is tcp")};
      }
      break;
    case Metric::kProbeTcpRetransmits:
      if (probe.protocol != common::ProbeProtocol::kTcp) {
        return FieldError{"spec.probe.protocol",
                          absl::StrCat(name, " (", where,
                                       ") is measured by TCP probes only and needs protocol: "
                                       "tcp; the probe is udp")};
      }
      break;
    default:
      break;
  }
  return std::nullopt;
}

}  // namespace

CheckResult CheckWindowLength(absl::Duration window_length) {
  if (window_length < kMinWindowLength || window_length > kMaxWindowLength ||
      window_length % absl::Seconds(1) != absl::ZeroDuration()) {
    return FieldError{"spec.windowLength", absl::StrCat("windowLength ", Dur(window_length),
                                                        " must be whole seconds in 1s..1h")};
  }
  return std::nullopt;
}

CheckResult CheckBurnIn(absl::Duration burn_in) {
  if (burn_in < absl::ZeroDuration() || burn_in == absl::InfiniteDuration()) {
    return FieldError{"spec.burnIn",
                      absl::StrCat("burnIn ", Dur(burn_in), " must not be negative")};
  }
  return std::nullopt;
}

CheckResult CheckSwitchbackPeriod(absl::Duration window_length, absl::Duration period_length,
                                  absl::Duration burn_in) {
  auto fail = [](std::string field, std::string message) -> CheckResult {
    return FieldError{std::move(field), std::move(message)};
  };
  const absl::Duration zero = absl::ZeroDuration();
  if (period_length == zero) {
    return fail("spec.periodLength", "is required for the switchback design");
  }
  if (period_length < window_length || period_length == absl::InfiniteDuration()) {
    return fail("spec.periodLength",
                absl::StrCat("periodLength ", Dur(period_length), " must be at least windowLength ",
                             Dur(window_length)));
  }
  if (period_length % window_length != zero) {
    return fail(
        "spec.periodLength",
        absl::StrCat("periodLength ", Dur(period_length), " must be a multiple of windowLength ",
                     Dur(window_length), " so windows do not straddle a switch"));
  }
  if (burn_in + window_length > period_length) {
    return fail("spec.burnIn",
                absl::StrCat("burnIn ", Dur(burn_in), " leaves no full window of ",
                             Dur(window_length), " in a period of ", Dur(period_length)));
  }
  return std::nullopt;
}

CheckResult CheckGuardrails(const std::vector<Guardrail>& guardrails) {
  auto fail = [](std::string field, std::string message) -> CheckResult {
    return FieldError{std::move(field), std::move(message)};
  };
  if (guardrails.size() > kMaxGuardrails) {
    return fail("spec.guardrails",
                absl::StrCat("has ", guardrails.size(), " guardrails; at most 32 are allowed"));
  }
  for (size_t i = 0; i < guardrails.size(); ++i) {
    const Guardrail& g = guardrails[i];
    const std::string path = absl::StrCat("spec.guardrails[", i, "]");
    const bool ratio = UnitOf(g.metric) == MetricUnit::kRatio;
    if (!std::isfinite(g.threshold) || g.threshold < 0 || (ratio && g.threshold > 1)) {
      return fail(absl::StrCat(path, ".threshold"),
                  absl::StrCat("threshold ", g.threshold, " of ", ToAbslView(MetricName(g.metric)),
                               ratio ? " must lie in [0, 1]" : " must be finite and >= 0"));
    }
    if (g.min_adapters && (*g.min_adapters < 2 || *g.min_adapters > kMaxMinAdaptersPerArm)) {
      return fail(absl::StrCat(path, ".minAdapters"),
                  absl::StrCat("minAdapters ", *g.min_adapters,
                               " is out of range 2..100000 (a bound needs 2 adapters)"));
    }
    if (g.min_windows && (*g.min_windows < 1 || *g.min_windows > kMaxMinWindowsPerArm)) {
      return fail(absl::StrCat(path, ".minWindows"),
                  absl::StrCat("minWindows ", *g.min_windows, " is out of range 1..10000000"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (guardrails[j].metric == g.metric && guardrails[j].op == g.op) {
        return fail(path, absl::StrCat("duplicate guardrail ", ToAbslView(MetricName(g.metric)),
                                       " ", ToAbslView(GuardrailOpSymbol(g.op)),
                                       " (also spec.guardrails[", j, "])"));
      }
    }
  }
  return std::nullopt;
}

CheckResult CheckSegmentKeys(const std::vector<std::string>& keys, bool host_allowed) {
  auto fail = [](std::string field, std::string message) -> CheckResult {
    return FieldError{std::move(field), std::move(message)};
  };
  if (keys.size() > kMaxSegmentKeys) {
    return fail("spec.segments", absl::StrCat("has ", keys.size(), " keys; at most 4 are allowed"));
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string& key = keys[i];
    const std::string path = absl::StrCat("spec.segments[", i, "]");
    if (!IsBuiltinSegmentKey(key)) {
      if (absl::Status s = common::ValidateLabelKey(key); !s.ok()) {
        return fail(path, absl::StrCat(s.message(), " (segments are usb_speed, chip",
                                       host_allowed ? ", host " : " ", "or a host label key)"));
      }
    }
    const auto seen = keys.begin() + static_cast<std::ptrdiff_t>(i);
    if (std::find(keys.begin(), seen, key) != seen) {
      return fail(path, absl::StrCat("duplicate segment key '", key, "'"));
    }
  }
  return std::nullopt;
}

CheckResult CheckArmMinimums(uint32_t min_adapters, uint32_t min_windows) {
  auto fail = [](std::string field, std::string message) -> CheckResult {
    return FieldError{std::move(field), std::move(message)};
  };
  if (min_adapters < 2 || min_adapters > kMaxMinAdaptersPerArm) {
    return fail("spec.minAdaptersPerArm",
                absl::StrCat("minAdaptersPerArm ", min_adapters,
                             " is out of range 2..100000 (a confidence interval needs 2)"));
  }
  if (min_windows < 1 || min_windows > kMaxMinWindowsPerArm) {
    return fail("spec.minWindowsPerArm",
                absl::StrCat("minWindowsPerArm ", min_windows, " is out of range 1..10000000"));
  }
  return std::nullopt;
}

// Every rule of the document, in document order. The first broken rule is returned.
CheckResult CheckExperiment(const Experiment& e) {
  auto fail = [](std::string field, std::string message) -> CheckResult {
    return FieldError{std::move(field), std::move(message)};
  };
  if (auto p = Problem(common::CheckObjectName("name", e.name))) return fail("metadata.name", *p);
  for (const auto& [key, value] : e.labels) {
    if (absl::Status s = common::ValidateLabelKey(key); !s.ok()) {
      return fail("metadata.labels", std::string(s.message()));
    }
    if (absl::Status s = common::ValidateLabelValue(value); !s.ok()) {
      return fail(absl::StrCat("metadata.labels.", key), std::string(s.message()));
    }
  }
  const Selector& selector = e.selector;
  if (std::optional<common::FieldProblem> p =
          common::FindSelectorProblem(selector, "spec.selector")) {
    return fail(std::move(p->field), std::move(p->message));
  }

  if (e.arms.size() < 2) {
    return fail(
        "spec.arms",
        absl::StrCat("needs at least 2 arms (a control and a treatment), found ", e.arms.size()));
  }
  if (e.arms.size() > kMaxArms) {
    return fail("spec.arms", absl::StrCat("has ", e.arms.size(), " arms; at most 16 are allowed"));
  }
  std::map<std::string, size_t> arm_names;
  for (size_t i = 0; i < e.arms.size(); ++i) {
    const Arm& arm = e.arms[i];
    const std::string path = absl::StrCat("spec.arms[", i, "]");
    if (auto p = Problem(common::CheckObjectName("arm name", arm.name))) {
      return fail(absl::StrCat(path, ".name"), *p);
    }
    if (auto [it, inserted] = arm_names.emplace(arm.name, i); !inserted) {
      return fail(
          absl::StrCat(path, ".name"),
          absl::StrCat("duplicate arm name '", arm.name, "' (also spec.arms[", it->second, "])"));
    }
    if (arm.weight < 1 || arm.weight > kMaxArmWeight) {
      return fail(absl::StrCat(path, ".weight"),
                  absl::StrCat("weight ", arm.weight, " is out of range 1..100"));
    }
    if (auto p = SettingsProblem(arm.settings, selector)) {
      return fail(absl::StrCat(path, ".settings"), *p);
    }
  }
  if (!arm_names.contains(e.control_arm)) {
    return fail(
        "spec.control",
        absl::StrCat("control arm '", e.control_arm, "' is not one of the arms (",
                     absl::StrJoin(e.arms, ", ",
                                   [](std::string* out, const Arm& a) { out->append(a.name); }),
                     ")"));
  }

  const absl::Duration zero = absl::ZeroDuration();
  if (e.duration <= zero || e.duration == absl::InfiniteDuration()) {
    return fail("spec.duration", absl::StrCat("duration ", Dur(e.duration), " must be positive"));
  }
  if (e.duration > kMaxExperimentDuration) {
    return fail("spec.duration",
                absl::StrCat("duration ", Dur(e.duration), " exceeds the limit of 90 days"));
  }
  if (CheckResult p = CheckWindowLength(e.window_length)) return p;
  if (e.window_length > e.duration) {
    return fail("spec.windowLength", absl::StrCat("windowLength ", Dur(e.window_length),
                                                  " is longer than duration ", Dur(e.duration)));
  }
  if (CheckResult p = CheckBurnIn(e.burn_in)) return p;
  if (e.design == Design::kSwitchback) {
    if (CheckResult p = CheckSwitchbackPeriod(e.window_length, e.period_length, e.burn_in)) {
      return p;
    }
    const absl::Duration block = e.period_length * static_cast<int64_t>(e.TotalWeight());
    if (e.duration < block) {
      return fail(
          "spec.duration",
          absl::StrCat("duration ", Dur(e.duration), " is shorter than one balanced block (",
                       e.TotalWeight(), " periods of ", Dur(e.period_length), " = ", Dur(block),
                       ", the sum of the arm weights); every adapter must "
                       "see every arm"));
    }
  } else {
    if (e.period_length != zero) {
      return fail("spec.periodLength", "applies to the switchback design only");
    }
    if (e.burn_in + e.window_length > e.duration) {
      return fail("spec.burnIn",
                  absl::StrCat("burnIn ", Dur(e.burn_in), " leaves no full window of ",
                               Dur(e.window_length), " in duration ", Dur(e.duration)));
    }
  }

  for (size_t i = 0; i < e.secondary_metrics.size(); ++i) {
    const Metric m = e.secondary_metrics[i];
    const std::string path = absl::StrCat("spec.secondaryMetrics[", i, "]");
    if (m == e.primary_metric) {
      return fail(path, absl::StrCat("'", ToAbslView(MetricName(m)), "' is the primary metric"));
    }
    const auto seen = e.secondary_metrics.begin() + static_cast<std::ptrdiff_t>(i);
    if (std::find(e.secondary_metrics.begin(), seen, m) != seen) {
      return fail(path, absl::StrCat("duplicate metric '", ToAbslView(MetricName(m)), "'"));
    }
  }

  if (CheckResult p = CheckGuardrails(e.guardrails)) return p;
  if (CheckResult p = CheckSegmentKeys(e.segment_keys)) return p;
  if (CheckResult p = CheckArmMinimums(e.min_adapters_per_arm, e.min_windows_per_arm)) return p;
  if (auto p = Problem(common::CheckPriority(e.priority))) return fail("spec.priority", *p);

  const std::vector<std::pair<Metric, std::string>> probe_metrics = ProbeMetricFields(e);
  if (!e.probe) {
    if (!probe_metrics.empty()) {
      const auto& [metric, where] = probe_metrics.front();
      return fail(where, absl::StrCat(ToAbslView(MetricName(metric)),
                                      " is measured by an active probe: the experiment needs a "
                                      "spec.probe (an iperf3 server, protocol, direction)"));
    }
    return std::nullopt;
  }
  if (probe_metrics.empty()) {
    return fail("spec.probe",
                "no primary, secondary or guardrail metric is a probe_* metric; a probe costs "
                "airtime in every window, so name one or remove the probe");
  }
  if (auto p = Problem(common::ValidateProbeSpec(*e.probe))) return fail("spec.probe", *p);
  if (e.probe->duration + kProbeSlotMargin > e.window_length) {
    return fail(
        "spec.probe.duration",
        absl::StrCat("probe duration ", Dur(e.probe->duration), " plus its ", Dur(kProbeSlotMargin),
                     " margin does not fit in windowLength ", Dur(e.window_length),
                     " (one probe runs inside each window): shorten the probe or "
                     "lengthen the window"));
  }
  for (const auto& [metric, where] : probe_metrics) {
    if (std::optional<FieldError> p = ProbeMismatch(metric, where, *e.probe)) return p;
  }
  return std::nullopt;
}

}  // namespace rxfleet::experiments
