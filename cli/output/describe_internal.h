#pragma once

// The pieces every `describe` layout shares (describe.cc for hosts, adapters, policies and
// experiments; describe_tuning.cc for hold tunings): labelled fields, selectors, conditions,
// metadata, segments and guardrail tables. Internal to cli/output.

#include <cstddef>
#include <ostream>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "rxfleet/v1/common.pb.h"
#include "rxfleet/v1/experiment.pb.h"

namespace rxfleet::cli::describe_internal {

/// Width of the label column of `describe` output.
inline constexpr size_t kLabelWidth = 22;

/// "Label:   value" at kLabelWidth.
void Field(std::ostream& out, absl::string_view label, absl::string_view value);
/// "yes" or "no".
std::string YesNo(bool b);
/// The selector's criteria, one field each ("<all adapters>" for an empty one).
void PrintSelector(const v1::AdapterSelector& sel, std::ostream& out);
/// A TYPE/STATUS/REASON/SINCE/MESSAGE table ("<none>" without conditions).
void PrintConditions(const google::protobuf::RepeatedPtrField<v1::Condition>& conditions,
                     absl::Time now, std::ostream& out);
/// Name, labels, annotations and creation time with its age.
void PrintMetadata(const v1::ObjectMeta& meta, absl::Time now, std::ostream& out);
/// Segment values as labels ("<all>" for none).
std::string FormatSegment(const google::protobuf::Map<std::string, std::string>& segment);
/// A threshold as %g.
std::string FormatThreshold(double value);
/// Guardrails as the condition to keep and the one that trips them (experiments, tunings).
void PrintGuardrails(const google::protobuf::RepeatedPtrField<v1::Guardrail>& all,
                     std::ostream& out);

}  // namespace rxfleet::cli::describe_internal
