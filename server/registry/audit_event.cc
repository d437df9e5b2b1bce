#include "server/registry/audit_event.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace rxfleet::server {

v1::Event BuildAuditEvent(const AuditEntry& entry) {
  const absl::Status& result = entry.result;
  v1::Event event;
  event.set_type(result.ok() ? v1::EVENT_TYPE_NORMAL : v1::EVENT_TYPE_WARNING);
  event.set_reason(entry.action);
  event.set_message(absl::StrCat(entry.action, " ", absl::AsciiStrToLower(entry.kind), " ",
                                 entry.name, entry.detail, entry.dry_run ? " (dry run)" : "", ": ",
                                 absl::StatusCodeToString(result.code()),
                                 result.ok() ? "" : absl::StrCat(" ", result.message())));
  event.mutable_involved_object()->set_kind(entry.kind);
  event.mutable_involved_object()->set_name(entry.name);
  v1::AuditRecord* audit = event.mutable_audit();
  audit->set_actor(entry.actor);
  audit->set_action(entry.action);
  audit->set_old_resource_version(entry.old_resource_version);
  audit->set_new_resource_version(entry.new_resource_version);
  audit->set_dry_run(entry.dry_run);
  audit->set_result_code(absl::StatusCodeToString(result.code()));
  return event;
}

}  // namespace rxfleet::server
