#include "common/policy/selectors.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/host_labels.h"
#include "common/string_view_compat.h"

namespace rxfleet::common {
namespace {

template <typename T, typename U>
bool ListAllows(const std::vector<T>& list, const U& value) {
  return list.empty() || std::find(list.begin(), list.end(), value) != list.end();
}

// Splits "a,b , c" into trimmed non-empty terms; an empty term between commas is an error.
absl::StatusOr<std::vector<absl::string_view>> SplitTerms(absl::string_view text,
                                                          absl::string_view what) {
  std::vector<absl::string_view> terms;
  if (absl::StripAsciiWhitespace(text).empty()) return terms;
  for (absl::string_view term : absl::StrSplit(text, ',')) {
    term = absl::StripAsciiWhitespace(term);
    if (term.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " '", text, "' has an empty term (check the commas)"));
    }
    terms.push_back(term);
  }
  return terms;
}

}  // namespace

bool Matches(const Selector& selector, const AdapterAttributes& adapter) {
  for (const auto& [key, value] : selector.match_labels) {
    auto it = adapter.host_labels.find(key);
    if (it == adapter.host_labels.end() || it->second != value) return false;
  }
  if (!ListAllows(selector.usb_speeds, adapter.usb_speed)) return false;
  if (!ListAllows(selector.chips, adapter.chip)) return false;
  if (!ListAllows(selector.vid_pids, VidPid{adapter.vid, adapter.pid})) return false;
  if (!ListAllows(selector.adapters, adapter.adapter_id)) return false;
  if (!ListAllows(selector.families, adapter.family)) return false;
  return true;
}

bool LabelSelector::Matches(const std::map<std::string, std::string>& labels) const {
  for (const Requirement& r : requirements) {
    auto it = labels.find(r.key);
    const bool present = it != labels.end();
    switch (r.op) {
      case Op::kEquals:
        if (!present || it->second != r.value) return false;
        break;
      case Op::kNotEquals:
        if (present && it->second == r.value) return false;
        break;
      case Op::kExists:
        if (!present) return false;
        break;
      case Op::kNotExists:
        if (present) return false;
        break;
    }
  }
  return true;
}

absl::StatusOr<LabelSelector> ParseLabelSelector(std::string_view std_text) {
  const absl::string_view text = ToAbslView(std_text);
  absl::StatusOr<std::vector<absl::string_view>> terms = SplitTerms(text, "label selector");
  if (!terms.ok()) return terms.status();
  LabelSelector selector;
  for (absl::string_view term : *terms) {
    LabelSelector::Requirement r;
    absl::string_view key = term;
    absl::string_view value;
    if (size_t pos = term.find("!="); pos != absl::string_view::npos) {
      r.op = LabelSelector::Op::kNotEquals;
      key = term.substr(0, pos);
      value = term.substr(pos + 2);
    } else if (pos = term.find("=="); pos != absl::string_view::npos) {
      r.op = LabelSelector::Op::kEquals;
      key = term.substr(0, pos);
      value = term.substr(pos + 2);
    } else if (pos = term.find('='); pos != absl::string_view::npos) {
      r.op = LabelSelector::Op::kEquals;
      key = term.substr(0, pos);
      value = term.substr(pos + 1);
    } else if (term.front() == '!') {
      r.op = LabelSelector::Op::kNotExists;
      key = term.substr(1);
    } else {
      r.op = LabelSelector::Op::kExists;
    }
    key = absl::StripAsciiWhitespace(key);
    value = absl::StripAsciiWhitespace(value);
    if (absl::Status s = ValidateLabelKey(ToStdView(key)); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("label selector term '", term, "': ", s.message()));
    }
    if (absl::Status s = ValidateLabelValue(ToStdView(value)); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("label selector term '", term, "': ", s.message()));
    }
    r.key = std::string(key);
    r.value = std::string(value);
    selector.requirements.push_back(std::move(r));
  }
  return selector;
}

bool FieldSelector::Matches(const AdapterAttributes& adapter) const {
  for (const Term& t : terms) {
    bool equal = false;
    switch (t.field) {
      case Field::kUsbSpeed:
        equal = adapter.usb_speed == t.usb_speed;
        break;
      case Field::kChip:
        equal = adapter.chip == t.value;
        break;
      case Field::kVidPid:
        equal = adapter.vid == t.vid_pid.vid && adapter.pid == t.vid_pid.pid;
        break;
      case Field::kHost:
        equal = adapter.host == t.value;
        break;
      case Field::kAdapter:
        equal = adapter.adapter_id == t.value;
        break;
    }
    if (equal == t.negated) return false;
  }
  return true;
}

absl::StatusOr<FieldSelector> ParseFieldSelector(std::string_view std_text) {
  const absl::string_view text = ToAbslView(std_text);
  absl::StatusOr<std::vector<absl::string_view>> terms = SplitTerms(text, "field selector");
  if (!terms.ok()) return terms.status();
  FieldSelector selector;
  for (absl::string_view term : *terms) {
    FieldSelector::Term t;
    absl::string_view name;
    absl::string_view value;
    if (size_t pos = term.find("!="); pos != absl::string_view::npos) {
      t.negated = true;
      name = term.substr(0, pos);
      value = term.substr(pos + 2);
    } else if (pos = term.find("=="); pos != absl::string_view::npos) {
      name = term.substr(0, pos);
      value = term.substr(pos + 2);
    } else if (pos = term.find('='); pos != absl::string_view::npos) {
      name = term.substr(0, pos);
      value = term.substr(pos + 1);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "field selector term '", term, "' must have the form field=value or field!=value"));
    }
    name = absl::StripAsciiWhitespace(name);
    value = absl::StripAsciiWhitespace(value);
    auto bad_value = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("field selector term '", term, "': ", why));
    };
    if (name == "usb_speed") {
      t.field = FieldSelector::Field::kUsbSpeed;
      absl::StatusOr<UsbSpeed> speed = ParseUsbSpeed(ToStdView(value));
      if (!speed.ok()) return bad_value(speed.status().message());
      t.usb_speed = *speed;
      t.value = std::string(UsbSpeedName(*speed));
    } else if (name == "chip") {
      t.field = FieldSelector::Field::kChip;
      t.value = absl::AsciiStrToLower(value);
    } else if (name == "vid_pid") {
      t.field = FieldSelector::Field::kVidPid;
      absl::StatusOr<VidPid> id = ParseVidPid(ToStdView(value));
      if (!id.ok()) return bad_value(id.status().message());
      t.vid_pid = *id;
      t.value = FormatVidPid(id->vid, id->pid);
    } else if (name == "host") {
      t.field = FieldSelector::Field::kHost;
      t.value = std::string(value);
    } else if (name == "adapter") {
      t.field = FieldSelector::Field::kAdapter;
      t.value = std::string(value);
    } else {
      return bad_value(absl::StrCat("unknown field '", name,
                                    "' (expected usb_speed, chip, vid_pid, host or adapter)"));
    }
    if (t.value.empty()) return bad_value("value must not be empty");
    selector.terms.push_back(std::move(t));
  }
  return selector;
}

}  // namespace rxfleet::common
