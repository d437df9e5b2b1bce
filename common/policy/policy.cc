#include "common/policy/policy.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/host_labels.h"
#include "common/policy/document_reader.h"
#include "common/regular_file.h"
#include "common/string_view_compat.h"

namespace rxfleet::common {
namespace {

// ---------------------------------------------------------------------------------------------
// Field rules shared by the parser (which adds positions) and ValidatePolicy.

absl::Status CheckPolicyName(std::string_view name) {
  if (absl::Status s = CheckObjectName("name", name); !s.ok()) return s;
  if (name == kBuiltinDefaultPolicyName) {
    return absl::InvalidArgumentError(
        absl::StrCat("name '", ToAbslView(name), "' is reserved for the built-in default policy"));
  }
  return absl::OkStatus();
}

absl::Status CheckLabels(const std::map<std::string, std::string>& labels) {
  for (const auto& [key, value] : labels) {
    if (absl::Status s = ValidateLabelKey(key); !s.ok()) return s;
    if (absl::Status s = ValidateLabelValue(value); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// Cross-field settings rules: not empty (unless the policy only probes), valid, and valid for
// every layout it may reach.
absl::Status CheckSettings(const RxAggSettings& settings, const Selector& selector,
                           bool has_probe) {
  if (settings.Empty() && has_probe) return absl::OkStatus();
  if (settings.Empty()) {
    return absl::InvalidArgumentError(
        "spec.settings must set at least one of hold, holdUs, countThreshold, bufferKiB, enable");
  }
  if (absl::Status s = CheckSettingsForSelector(settings, selector); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("spec.settings: ", s.message()));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// YAML reading with positions.

class PolicyReader : public DocumentReader {
 public:
  using DocumentReader::DocumentReader;

  absl::Status ReadSpec(const YAML::Node& node, Policy* policy, YAML::Node* settings_node) {
    FieldMap f;
    if (absl::Status s = ReadMap(node, "spec", {"priority", "selector", "settings", "probe"}, &f);
        !s.ok()) {
      return s;
    }
    if (auto it = f.find("priority"); it != f.end()) {
      absl::StatusOr<int64_t> priority = ReadInt(it->second.second, "spec.priority");
      if (!priority.ok()) return priority.status();
      if (absl::Status s = CheckPriority(*priority); !s.ok()) {
        return Error(it->second.second, "spec.priority", s.message());
      }
      policy->priority = static_cast<int>(*priority);
    }
    if (auto it = f.find("selector"); it != f.end()) {
      if (absl::Status s =
              ReadSelector(it->second.second, SelectorItemChecks::kWhileReading, &policy->selector);
          !s.ok()) {
        return s;
      }
    }
    if (auto it = f.find("probe"); it != f.end()) {
      ProbeSpec probe;
      if (absl::Status s = ReadProbe(it->second.second, "spec.probe", &probe); !s.ok()) return s;
      policy->probe = std::move(probe);
      if (!f.contains("settings")) {
        *settings_node = node;
        return absl::OkStatus();  // A policy that only probes.
      }
    }
    if (absl::Status s = RequireFields(node, "spec", {"settings"}, f); !s.ok()) return s;
    *settings_node = f["settings"].second;
    if (absl::Status s =
            ReadSettings(*settings_node, "spec.settings", SettingsReadOptions{}, &policy->settings);
        !s.ok()) {
      return s;
    }
    if (policy->probe.has_value() && policy->settings.Empty()) {
      // `settings: {}` next to a probe says nothing; refuse it as without a probe.
      return Error(*settings_node, "spec.settings",
                   "must set at least one of hold, holdUs, countThreshold, bufferKiB, enable "
                   "(or leave settings out: the policy then only probes)");
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Policy> ReadDocument(const YAML::Node& doc) {
    FieldMap f;
    if (absl::Status s = ReadTopLevel(doc, kPolicyApiVersion, kPolicyKind, &f); !s.ok()) return s;
    DocumentMetadata metadata;
    if (absl::Status s = ReadMetadata(f["metadata"].second, &CheckPolicyName,
                                      /*validate_labels=*/true, &metadata);
        !s.ok()) {
      return s;
    }
    Policy policy;
    policy.name = std::move(metadata.name);
    policy.labels = std::move(metadata.labels);
    policy.resource_version = std::move(metadata.resource_version);
    YAML::Node settings_node;
    if (absl::Status s = ReadSpec(f["spec"].second, &policy, &settings_node); !s.ok()) return s;
    if (absl::Status s = CheckSettings(policy.settings, policy.selector, policy.probe.has_value());
        !s.ok()) {
      return Error(settings_node, "spec.settings",
                   absl::StripPrefix(s.message(), "spec.settings: "));
    }
    policy.source = SourceLine(doc);
    return policy;
  }
};

// ---------------------------------------------------------------------------------------------
// Files.

bool HasPolicySuffix(const std::filesystem::path& path, bool include_json) {
  const std::string ext = path.extension().string();
  return ext == ".yaml" || ext == ".yml" || (include_json && ext == ".json");
}

// A policy file's text; every failure names the OS reason (common/regular_file.h).
absl::StatusOr<std::string> ReadSmallFile(const std::filesystem::path& path) {
  absl::StatusOr<std::string> text = ReadRegularFile(path.string(), kMaxPolicyInputBytes);
  if (absl::IsOutOfRange(text.status())) {
    std::error_code ec;
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": ",
                                                   std::filesystem::file_size(path, ec),
                                                   " bytes exceeds the 1 MiB policy file limit"));
  }
  return text;
}

}  // namespace

absl::StatusOr<std::vector<Policy>> ParsePolicyDocuments(std::string_view std_text,
                                                         std::string_view std_source_name) {
  PolicyReader reader(ToAbslView(std_source_name));
  absl::StatusOr<std::vector<YAML::Node>> docs = reader.LoadDocuments(
      ToAbslView(std_text), "policy", kMaxPolicyInputBytes, kMaxPolicyDocuments);
  if (!docs.ok()) return docs.status();
  return reader.ReadNamedDocuments<Policy>(
      *docs, "policy", [&](const YAML::Node& doc) { return reader.ReadDocument(doc); });
}

absl::Status ValidatePolicy(const Policy& policy) {
  const std::string prefix = absl::StrCat("policy '", policy.name, "': ");
  auto fail = [&](absl::string_view field, const absl::Status& s) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, field, ": ", s.message()));
  };
  if (absl::Status s = CheckPolicyName(policy.name); !s.ok()) return fail("metadata.name", s);
  if (absl::Status s = CheckLabels(policy.labels); !s.ok()) return fail("metadata.labels", s);
  if (absl::Status s = CheckPriority(policy.priority); !s.ok()) return fail("spec.priority", s);
  const Selector& selector = policy.selector;
  if (std::optional<FieldProblem> p = FindSelectorProblem(selector, "spec.selector")) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, p->field, ": ", p->message));
  }
  if (absl::Status s = CheckSettings(policy.settings, selector, policy.probe.has_value());
      !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, s.message()));
  }
  if (policy.probe.has_value()) {
    if (absl::Status s = ValidateProbeSpec(*policy.probe); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(prefix, "spec.", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Policy>> LoadPolicyFiles(const std::vector<std::string>& paths_or_dirs) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (const std::string& entry : paths_or_dirs) {
    const fs::path path(entry);
    std::error_code ec;
    const fs::file_status status = fs::status(path, ec);
    if (status.type() == fs::file_type::not_found) {
      if (HasPolicySuffix(path, /*include_json=*/true)) {
        return absl::NotFoundError(absl::StrCat(entry, ": policy file not found"));
      }
      continue;  // A policy directory that does not exist yet holds no policies.
    }
    if (ec) return absl::UnavailableError(absl::StrCat(entry, ": ", ec.message()));
    if (fs::is_directory(status)) {
      std::vector<fs::path> in_dir;
      fs::directory_iterator it(path, ec);
      if (ec) return absl::UnavailableError(absl::StrCat(entry, ": ", ec.message()));
      for (; it != fs::directory_iterator(); it.increment(ec)) {
        if (ec) break;
        const fs::path& child = it->path();
        const std::string filename = child.filename().string();
        if (filename.empty() || filename.front() == '.') continue;
        if (!HasPolicySuffix(child, /*include_json=*/false)) continue;
        std::error_code file_ec;
        if (!fs::is_regular_file(child, file_ec)) continue;
        in_dir.push_back(child);
      }
      if (ec) return absl::UnavailableError(absl::StrCat(entry, ": ", ec.message()));
      std::sort(in_dir.begin(), in_dir.end());
      files.insert(files.end(), in_dir.begin(), in_dir.end());
    } else {
      files.push_back(path);
    }
  }
  std::vector<Policy> all;
  std::map<std::string, std::string> first_seen;
  for (const fs::path& file : files) {
    absl::StatusOr<std::string> text = ReadSmallFile(file);
    if (!text.ok()) return text.status();
    absl::StatusOr<std::vector<Policy>> policies = ParsePolicyDocuments(*text, file.string());
    if (!policies.ok()) return policies.status();
    for (Policy& policy : *policies) {
      auto [it, inserted] = first_seen.emplace(policy.name, policy.source);
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat(policy.source, ": duplicate policy name '",
                                                       policy.name, "' (first defined at ",
                                                       it->second, ")"));
      }
      all.push_back(std::move(policy));
    }
  }
  return all;
}

std::string PolicyToYaml(const Policy& policy) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "apiVersion" << YAML::Value << std::string(kPolicyApiVersion);
  out << YAML::Key << "kind" << YAML::Value << std::string(kPolicyKind);
  out << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << policy.name;
  if (!policy.labels.empty()) EmitLabels(out, "labels", policy.labels);
  if (!policy.resource_version.empty()) {
    out << YAML::Key << "resourceVersion" << YAML::Value << YAML::DoubleQuoted
        << policy.resource_version;
  }
  out << YAML::EndMap;
  out << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "priority" << YAML::Value << policy.priority;
  EmitSelector(out, policy.selector);
  if (!policy.settings.Empty() || !policy.probe.has_value()) {
    out << YAML::Key << "settings" << YAML::Value << YAML::BeginMap;
    EmitSettingsFields(out, policy.settings);
    out << YAML::EndMap;  // settings
  }
  if (policy.probe.has_value()) EmitProbe(out, *policy.probe);
  out << YAML::EndMap;  // spec
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace rxfleet::common
