#pragma once

// The one builder of audit events: every change an operator asks for (policies, experiments,
// tokens, from FleetService or from the local `rxfleet-server tokens` command) is recorded as
// an event with an AuditRecord, shown by `rxfleetctl get events --audit`.

#include <string>

#include "absl/status/status.h"
#include "rxfleet/v1/event.pb.h"

namespace rxfleet::server {

/// What an audit event says.
struct AuditEntry {
  std::string kind;    ///< involved object kind: "Policy", "Experiment", "Token"
  std::string name;    ///< involved object name
  std::string action;  ///< the RPC or command: "ApplyPolicy", "CreateToken"
  std::string actor;   ///< "token:<name>", "local administrator (OS user root)", ...
  std::string detail;  ///< appended to the object in the message, e.g. " arm b"; may be empty
  std::string old_resource_version;
  std::string new_resource_version;
  bool dry_run = false;
  absl::Status result;
};

/// The event: type NORMAL when `result` is OK, WARNING otherwise; reason = action; message
/// "<action> <kind in lower case> <name><detail>[ (dry run)]: <CODE>[ <error message>]", e.g.
/// "RevokeToken token ci: OK"; involved object kind/name; the AuditRecord with actor, action,
/// resource versions, dry_run and the result code name.
v1::Event BuildAuditEvent(const AuditEntry& entry);

}  // namespace rxfleet::server
