// Length reason: FleetApi is the one place that validates and serves every FleetService read
// and policy write (fleet_api.h); the bounds it checks live in bundle_limit and metadata_bounds.
#include "server/api/fleet_api.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/host_labels.h"
#include "common/policy/selectors.h"
#include "common/proto/convert.h"
#include "common/proto/time.h"
#include "common/string_view_compat.h"
#include "server/api/bundle_limit.h"
#include "server/api/explain.h"
#include "server/api/family_guard.h"
#include "server/api/metadata_bounds.h"
#include "server/api/paging.h"
#include "server/experiments/controller.h"
#include "server/registry/audit_event.h"

namespace rxfleet::server {
namespace {

using common::ToAbslView;

constexpr size_t kMaxDescriptionLength = 1024;

absl::Status Required(std::string_view field) {
  return absl::InvalidArgumentError(absl::StrCat(ToAbslView(field), " is required"));
}

absl::StatusOr<common::LabelSelector> LabelSelectorOf(const std::string& text) {
  absl::StatusOr<common::LabelSelector> selector = common::ParseLabelSelector(text);
  if (!selector.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("label_selector: ", selector.status().message()));
  }
  return selector;
}

bool IsStoreFailure(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kInternal:
      return true;
    default:
      return false;
  }
}

// The selector of the valid stored policy `name`, if there is one.
const common::Selector* SelectorOf(const PolicySnapshot& snapshot, const std::string& name) {
  for (const common::Policy& p : snapshot.valid) {
    if (p.name == name) return &p.selector;
  }
  return nullptr;
}

// The policy set after putting (or, with a null `policy`, removing) `name`.
std::vector<common::Policy> Replaced(const std::vector<common::Policy>& policies,
                                     const std::string& name, const common::Policy* policy) {
  std::vector<common::Policy> out;
  out.reserve(policies.size() + 1);
  for (const common::Policy& p : policies) {
    if (p.name != name) out.push_back(p);
  }
  if (policy != nullptr) out.push_back(*policy);
  return out;
}

v1::Event PolicyEvent(std::string_view reason, const std::string& name, std::string message) {
  v1::Event event;
  event.set_type(v1::EVENT_TYPE_NORMAL);
  event.set_reason(std::string(reason));
  event.set_message(std::move(message));
  event.mutable_involved_object()->set_kind("Policy");
  event.mutable_involved_object()->set_name(name);
  return event;
}

}  // namespace

bool HostFieldSelector::Matches(const v1::Host& host) const {
  for (const Term& term : terms) {
    const bool actual = term.stale_field ? host.status().stale() : host.status().connected();
    if ((actual == term.value) == term.negated) return false;
  }
  return true;
}

absl::StatusOr<HostFieldSelector> ParseHostFieldSelector(std::string_view text) {
  HostFieldSelector selector;
  for (absl::string_view raw : absl::StrSplit(ToAbslView(text), ',', absl::SkipWhitespace())) {
    const absl::string_view term = absl::StripAsciiWhitespace(raw);
    HostFieldSelector::Term out;
    size_t op = term.find("!=");
    size_t value_at = 0;
    if (op != absl::string_view::npos) {
      out.negated = true;
      value_at = op + 2;
    } else {
      op = term.find('=');
      if (op == absl::string_view::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("field_selector: term '", term, "' must be field=value or field!=value"));
      }
      value_at = op + (term.substr(op).rfind("==", 0) == 0 ? 2 : 1);
    }
    const absl::string_view field = absl::StripAsciiWhitespace(term.substr(0, op));
    const std::string value =
        absl::AsciiStrToLower(absl::StripAsciiWhitespace(term.substr(value_at)));
    if (field == "connected") {
      out.stale_field = false;
    } else if (field == "stale") {
      out.stale_field = true;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("field_selector: unknown host field '", field,
                                                     "' (known: connected, stale)"));
    }
    if (value != "true" && value != "false") {
      return absl::InvalidArgumentError(
          absl::StrCat("field_selector: ", field, " must be true or false, not '", value, "'"));
    }
    out.value = value == "true";
    selector.terms.push_back(out);
  }
  return selector;
}

FleetApi::FleetApi(FleetApiDeps deps) : deps_(std::move(deps)) {}

absl::StatusOr<v1::ListHostsResponse> FleetApi::ListHosts(
    const v1::ListHostsRequest& request) const {
  absl::StatusOr<common::LabelSelector> labels = LabelSelectorOf(request.label_selector());
  if (!labels.ok()) return labels.status();
  absl::StatusOr<HostFieldSelector> fields = ParseHostFieldSelector(request.field_selector());
  if (!fields.ok()) return fields.status();
  absl::StatusOr<size_t> page_size = PageSize(request.page_size());
  if (!page_size.ok()) return page_size.status();
  const std::string query =
      absl::StrCat("hosts\n", request.label_selector(), "\n", request.field_selector());
  absl::StatusOr<std::string> after = ParsePageToken(request.page_token(), query);
  if (!after.ok()) return after.status();

  const uint64_t latest = deps_.policies->snapshot()->bundle_version;
  v1::ListHostsResponse response;
  PageFill page(*page_size);
  // Visits hosts after the page token only until the page is full.
  deps_.registry->VisitHosts(absl::Now(), latest, *after, [&](v1::Host host) {
    if (!labels->Matches(common::LabelsFromProto(host.metadata().labels()))) return true;
    if (!fields->Matches(host)) return true;
    if (!page.Add(host.ByteSizeLong())) {
      response.set_next_page_token(
          MakePageToken(query, response.hosts(response.hosts_size() - 1).metadata().name()));
      return false;
    }
    *response.add_hosts() = std::move(host);
    return true;
  });
  return response;
}

absl::StatusOr<v1::Host> FleetApi::GetHost(const v1::GetHostRequest& request) const {
  if (request.name().empty()) return Required("name");
  return deps_.registry->GetHost(request.name(), absl::Now(),
                                 deps_.policies->snapshot()->bundle_version);
}

absl::StatusOr<v1::ListAdaptersResponse> FleetApi::ListAdapters(
    const v1::ListAdaptersRequest& request) const {
  absl::StatusOr<common::LabelSelector> labels = LabelSelectorOf(request.label_selector());
  if (!labels.ok()) return labels.status();
  absl::StatusOr<common::FieldSelector> fields =
      common::ParseFieldSelector(request.field_selector());
  if (!fields.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("field_selector: ", fields.status().message()));
  }
  absl::StatusOr<size_t> page_size = PageSize(request.page_size());
  if (!page_size.ok()) return page_size.status();
  const std::string query = absl::StrCat("adapters\n", request.label_selector(), "\n",
                                         request.field_selector(), "\n", request.include_gone());
  absl::StatusOr<std::string> after = ParsePageToken(request.page_token(), query);
  if (!after.ok()) return after.status();
  // Keys are "host\nadapter"; neither part can contain '\n' (both are validated printable).
  auto key_of = [](const v1::Adapter& a) {
    return std::make_pair(a.host_id(), a.metadata().name());
  };
  std::pair<std::string, std::string> after_key;
  if (!after->empty()) {
    std::vector<std::string> parts = absl::StrSplit(*after, absl::MaxSplits('\n', 1));
    if (parts.size() != 2) return absl::InvalidArgumentError("page_token is malformed");
    after_key = {parts[0], parts[1]};
  }

  v1::ListAdaptersResponse response;
  PageFill page(*page_size);
  for (v1::Adapter& adapter : deps_.registry->ListAdapters(request.include_gone())) {
    if (!after->empty() && key_of(adapter) <= after_key) continue;
    if (!labels->Matches(common::LabelsFromProto(adapter.metadata().labels()))) continue;
    if (!fields->Matches(AttributesOf(adapter))) continue;
    if (!page.Add(adapter.ByteSizeLong())) {
      const v1::Adapter& last = response.adapters(response.adapters_size() - 1);
      response.set_next_page_token(
          MakePageToken(query, absl::StrCat(last.host_id(), "\n", last.metadata().name())));
      break;
    }
    *response.add_adapters() = std::move(adapter);
  }
  return response;
}

absl::StatusOr<v1::Adapter> FleetApi::GetAdapter(const v1::GetAdapterRequest& request) const {
  if (request.host_id().empty()) return Required("host_id");
  if (request.name().empty()) return Required("name");
  return deps_.registry->GetAdapter(request.host_id(), request.name());
}

v1::Policy FleetApi::WithStatus(const v1::Policy& policy, const PolicySnapshot& snapshot,
                                const std::vector<v1::Adapter>& adapters) const {
  v1::Policy out = policy;
  std::map<std::string, v1::PolicyStatus> statuses =
      PolicyStatuses(snapshot, adapters, experiments_, &policy.metadata().name());
  *out.mutable_status() = statuses[policy.metadata().name()];
  return out;
}

void RecordAudit(EventLog& events, const Caller& caller, std::string_view kind,
                 std::string_view action, std::string_view name, std::string_view detail,
                 std::string_view old_version, std::string_view new_version, bool dry_run,
                 const absl::Status& result) {
  events.Record(BuildAuditEvent({.kind = std::string(kind),
                                 .name = std::string(name),
                                 .action = std::string(action),
                                 .actor = caller.actor,
                                 .detail = std::string(detail),
                                 .old_resource_version = std::string(old_version),
                                 .new_resource_version = std::string(new_version),
                                 .dry_run = dry_run,
                                 .result = result}),
                absl::Now());
}

void FleetApi::Audit(const Caller& caller, std::string_view action, std::string_view policy,
                     std::string_view old_version, std::string_view new_version, bool dry_run,
                     const absl::Status& result) {
  RecordAudit(*deps_.events, caller, "Policy", action, policy, "", old_version, new_version,
              dry_run, result);
}

std::vector<v1::Adapter> FleetApi::RegisteredAdapters() const {
  return deps_.registry->ListAdapters(false);
}

absl::StatusOr<v1::ApplyPolicyResponse> FleetApi::ApplyPolicy(const v1::ApplyPolicyRequest& request,
                                                              const Caller& caller,
                                                              std::string_view ended) {
  if (!request.has_policy()) return Required("policy");
  const v1::Policy& input = request.policy();
  const std::string& name = input.metadata().name();
  if (name.empty()) return Required("policy.metadata.name");
  absl::StatusOr<common::Policy> converted = common::PolicyFromProto(input, "server");
  if (!converted.ok()) return converted.status();
  if (input.spec().description().size() > kMaxDescriptionLength) {
    return absl::InvalidArgumentError(absl::StrCat("policy '", name,
                                                   "': spec.description is longer than ",
                                                   kMaxDescriptionLength, " characters"));
  }
  if (absl::Status s =
          ValidateObjectMetadata(absl::StrCat("policy '", name, "'"), input.metadata());
      !s.ok()) {
    return s;
  }
  v1::Policy to_store;
  *to_store.mutable_metadata() = input.metadata();
  *to_store.mutable_spec() = input.spec();
  const std::string& expected = input.metadata().resource_version();
  const std::shared_ptr<const std::vector<v1::Adapter>> snapshot_of_adapters =
      deps_.registry->AdapterSnapshot();
  const std::vector<v1::Adapter>& adapters = *snapshot_of_adapters;
  if (!converted->settings.Empty()) {
    if (absl::Status refused = RefuseSettingsOnObserveOnly(absl::StrCat("policy '", name, "'"),
                                                           converted->selector, adapters);
        !refused.ok()) {
      Audit(caller, "ApplyPolicy", name, "", "", request.dry_run(), refused);
      return refused;
    }
  }

  absl::MutexLock lock(&write_mu_);
  std::shared_ptr<const PolicySnapshot> before = deps_.policies->snapshot();
  auto existing = before->policies.find(name);
  const std::string old_version =
      existing == before->policies.end() ? "" : existing->second.metadata().resource_version();
  const std::vector<common::Policy> after = Replaced(before->valid, name, &*converted);
  const size_t body_bytes = BodyBytesWith(*before, to_store);
  // A probe policy also gives the adapters it decides probe slots (host fields): the change
  // adds the body's growth and the most slot bytes any host gains.
  const auto can_probe = [this](const std::string& host) {
    return deps_.registry->HostHasCapability(host, kProbesCapability);
  };
  HostFieldBytes slots_before;
  AddProbeSlotBytes(slots_before, adapters, before->valid, can_probe);
  HostFieldBytes host_bytes = AssignmentBytesOf(adapters, experiments_, after, ended);
  HostFieldBytes slots_after;
  AddProbeSlotBytes(slots_after, adapters, after, can_probe);
  for (const auto& [host, bytes] : slots_after) host_bytes[host] += bytes;
  if (absl::Status too_big = CheckBundleFits(
          absl::StrCat("policy '", name, "'"), body_bytes, host_bytes,
          static_cast<int64_t>(body_bytes) - static_cast<int64_t>(before->Bundle()->bytes.size()) +
              static_cast<int64_t>(MostProbeSlotBytesAdded(slots_before, slots_after)),
          deps_.max_bundle_bytes);
      !too_big.ok()) {
    Audit(caller, "ApplyPolicy", name, old_version, "", request.dry_run(), too_big);
    return too_big;
  }
  v1::ApplyPolicyResponse response;
  std::vector<const common::Selector*> changed = {&converted->selector};
  if (const common::Selector* old = SelectorOf(*before, name)) changed.push_back(old);
  for (v1::AffectedAdapter& affected :
       AffectedAdapters(adapters, before->valid, after, changed, experiments_, ended)) {
    *response.add_affected_adapters() = std::move(affected);
  }

  if (request.dry_run()) {
    absl::Status precondition = absl::OkStatus();
    if (!expected.empty() && (existing == before->policies.end() || old_version != expected)) {
      precondition = PolicyPreconditionFailed(
          name, existing == before->policies.end() ? nullptr : &old_version, expected);
    }
    Audit(caller, "ApplyPolicy", name, old_version, "", true, precondition);
    if (!precondition.ok()) return precondition;
    v1::Policy would_be = to_store;
    would_be.mutable_metadata()->set_resource_version(old_version);
    if (existing != before->policies.end()) {
      const v1::ObjectMeta& old_meta = existing->second.metadata();
      would_be.mutable_metadata()->set_uid(old_meta.uid());
      *would_be.mutable_metadata()->mutable_create_time() = old_meta.create_time();
      const bool spec_changed =
          existing->second.spec().SerializeAsString() != to_store.spec().SerializeAsString();
      would_be.mutable_metadata()->set_generation(old_meta.generation() + (spec_changed ? 1 : 0));
    } else {
      would_be.mutable_metadata()->set_generation(1);
    }
    *response.mutable_policy() = would_be;
    response.set_created(existing == before->policies.end());
    return response;
  }

  absl::StatusOr<PolicyWriteResult> written = deps_.store->ApplyPolicy(to_store, absl::Now());
  if (!written.ok()) {
    if (IsStoreFailure(written.status())) deps_.metrics->store_write_failures->Increment();
    Audit(caller, "ApplyPolicy", name, old_version, "", false, written.status());
    return written.status();
  }
  deps_.policies->Put(written->policy, written->bundle_version);
  const std::string& new_version = written->policy.metadata().resource_version();
  Audit(caller, "ApplyPolicy", name, old_version, new_version, false, absl::OkStatus());
  if (written->changed) {
    deps_.events->Record(
        PolicyEvent(written->created ? "PolicyCreated" : "PolicyApplied", name,
                    absl::StrCat("policy ", name, " stored (resource version ", new_version,
                                 ", generation ", written->policy.metadata().generation(),
                                 "); agents get it with bundle version ", written->bundle_version,
                                 " or a later one")),
        absl::Now());
    deps_.on_policy_change();
  }
  *response.mutable_policy() = WithStatus(written->policy, *deps_.policies->snapshot(), adapters);
  response.set_created(written->created);
  response.set_bundle_version(written->bundle_version);
  return response;
}

absl::StatusOr<v1::Policy> FleetApi::GetPolicy(const v1::GetPolicyRequest& request) const {
  if (request.name().empty()) return Required("name");
  std::shared_ptr<const PolicySnapshot> snapshot = deps_.policies->snapshot();
  auto it = snapshot->policies.find(request.name());
  if (it == snapshot->policies.end()) {
    return absl::NotFoundError(absl::StrCat("policy ", request.name(), " does not exist"));
  }
  return WithStatus(it->second, *snapshot, *deps_.registry->AdapterSnapshot());
}

absl::StatusOr<v1::ListPoliciesResponse> FleetApi::ListPolicies(
    const v1::ListPoliciesRequest& request) const {
  absl::StatusOr<common::LabelSelector> labels = LabelSelectorOf(request.label_selector());
  if (!labels.ok()) return labels.status();
  absl::StatusOr<size_t> page_size = PageSize(request.page_size());
  if (!page_size.ok()) return page_size.status();
  const std::string query = absl::StrCat("policies\n", request.label_selector());
  absl::StatusOr<std::string> after = ParsePageToken(request.page_token(), query);
  if (!after.ok()) return after.status();

  std::shared_ptr<const PolicySnapshot> snapshot = deps_.policies->snapshot();
  const std::map<std::string, v1::PolicyStatus> statuses =
      PolicyStatuses(*snapshot, *deps_.registry->AdapterSnapshot(), experiments_);
  v1::ListPoliciesResponse response;
  PageFill page(*page_size);
  for (auto it = snapshot->policies.upper_bound(*after); it != snapshot->policies.end(); ++it) {
    if (!labels->Matches(common::LabelsFromProto(it->second.metadata().labels()))) continue;
    v1::Policy policy = it->second;
    *policy.mutable_status() = statuses.at(it->first);
    if (!page.Add(policy.ByteSizeLong())) {
      response.set_next_page_token(
          MakePageToken(query, response.policies(response.policies_size() - 1).metadata().name()));
      break;
    }
    *response.add_policies() = std::move(policy);
  }
  return response;
}

absl::StatusOr<v1::DeletePolicyResponse> FleetApi::DeletePolicy(
    const v1::DeletePolicyRequest& request, const Caller& caller) {
  const std::string& name = request.name();
  if (name.empty()) return Required("name");
  const std::shared_ptr<const std::vector<v1::Adapter>> snapshot_of_adapters =
      deps_.registry->AdapterSnapshot();
  const std::vector<v1::Adapter>& adapters = *snapshot_of_adapters;
  absl::MutexLock lock(&write_mu_);
  std::shared_ptr<const PolicySnapshot> before = deps_.policies->snapshot();
  auto existing = before->policies.find(name);
  if (existing == before->policies.end()) {
    const absl::Status missing =
        absl::NotFoundError(absl::StrCat("policy ", name, " does not exist"));
    Audit(caller, "DeletePolicy", name, "", "", request.dry_run(), missing);
    return missing;
  }
  const std::string old_version = existing->second.metadata().resource_version();
  v1::DeletePolicyResponse response;
  *response.mutable_policy() = existing->second;
  std::vector<const common::Selector*> changed;
  if (const common::Selector* old = SelectorOf(*before, name)) changed.push_back(old);
  for (v1::AffectedAdapter& affected :
       AffectedAdapters(adapters, before->valid, Replaced(before->valid, name, nullptr), changed,
                        experiments_)) {
    *response.add_affected_adapters() = std::move(affected);
  }
  if (request.dry_run()) {
    absl::Status precondition = absl::OkStatus();
    if (!request.resource_version().empty() && request.resource_version() != old_version) {
      precondition = PolicyPreconditionFailed(name, &old_version, request.resource_version());
    }
    Audit(caller, "DeletePolicy", name, old_version, "", true, precondition);
    if (!precondition.ok()) return precondition;
    return response;
  }
  absl::StatusOr<PolicyDeleteResult> deleted =
      deps_.store->DeletePolicy(name, request.resource_version());
  if (!deleted.ok()) {
    if (IsStoreFailure(deleted.status())) deps_.metrics->store_write_failures->Increment();
    Audit(caller, "DeletePolicy", name, old_version, "", false, deleted.status());
    return deleted.status();
  }
  deps_.policies->Remove(name, deleted->bundle_version);
  Audit(caller, "DeletePolicy", name, old_version, "", false, absl::OkStatus());
  deps_.events->Record(
      PolicyEvent("PolicyDeleted", name,
                  absl::StrCat("policy ", name, " deleted; agents drop it with bundle version ",
                               deleted->bundle_version, " or a later one")),
      absl::Now());
  deps_.on_policy_change();
  *response.mutable_policy() = deleted->policy;
  response.set_bundle_version(deleted->bundle_version);
  return response;
}

absl::StatusOr<v1::ExplainAdapterResponse> FleetApi::ExplainAdapter(
    const v1::ExplainAdapterRequest& request) const {
  if (request.host_id().empty()) return Required("host_id");
  if (request.name().empty()) return Required("name");
  absl::StatusOr<v1::Adapter> adapter =
      deps_.registry->GetAdapter(request.host_id(), request.name());
  if (!adapter.ok()) return adapter.status();
  std::shared_ptr<const PolicySnapshot> snapshot = deps_.policies->snapshot();
  absl::StatusOr<v1::Host> host =
      deps_.registry->GetHost(request.host_id(), absl::Now(), snapshot->bundle_version);
  if (!host.ok()) return host.status();
  return Explain(*adapter, *host, *snapshot, experiments_);
}

absl::StatusOr<v1::ListEventsResponse> FleetApi::ListEvents(
    const v1::ListEventsRequest& request) const {
  absl::StatusOr<size_t> page_size = PageSize(request.page_size());
  if (!page_size.ok()) return page_size.status();
  v1::ListEventsRequest filter = request;
  filter.clear_page_size();
  filter.clear_page_token();
  const std::string query = absl::StrCat("events\n", filter.ShortDebugString());
  absl::StatusOr<std::string> after = ParsePageToken(request.page_token(), query);
  if (!after.ok()) return after.status();
  uint64_t after_version = 0;
  if (!after->empty() && !absl::SimpleAtoi(*after, &after_version)) {
    return absl::InvalidArgumentError("page_token is malformed");
  }
  bool more = false;
  v1::ListEventsResponse response;
  PageFill page(*page_size);
  for (v1::Event& event : deps_.events->List(filter, after_version, *page_size, &more)) {
    if (!page.Add(event.ByteSizeLong())) {
      more = true;
      break;
    }
    *response.add_events() = std::move(event);
  }
  if (more && response.events_size() > 0) {
    response.set_next_page_token(MakePageToken(
        query, response.events(response.events_size() - 1).metadata().resource_version()));
  }
  return response;
}

absl::Status FleetApi::BumpBundleVersion() {
  absl::MutexLock lock(&write_mu_);
  absl::StatusOr<uint64_t> version = deps_.store->BumpBundleVersion();
  if (!version.ok()) {
    deps_.metrics->store_write_failures->Increment();
    return version.status();
  }
  deps_.policies->SetVersion(*version);
  deps_.on_policy_change();
  return absl::OkStatus();
}

}  // namespace rxfleet::server
