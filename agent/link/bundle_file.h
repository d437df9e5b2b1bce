#pragma once

// The agent's last good bundle on disk (<state-dir>/bundle.pb): the PolicyBundle exactly as the
// server sent it, written atomically so a crash or power cut leaves either the old or the new
// file, never a torn one.

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/reconcile/policy_set.h"
#include "rxfleet/v1/agent_service.pb.h"

namespace rxfleet::agent {

/// File name of the persisted bundle inside the state directory.
inline constexpr char kBundleFileName[] = "bundle.pb";

/// Writes `bundle` to `path` atomically: a temporary file in the same directory (mode 0600),
/// write, fsync, rename over `path`, fsync of the directory. Creates the directory (0750) if
/// missing. Errors: Internal/PermissionDenied/ResourceExhausted naming the path and errno text;
/// on error `path` is unchanged and no temporary file is left.
absl::Status WriteBundleFile(const std::string& path, const v1::PolicyBundle& bundle);

/// Reads a bundle written by WriteBundleFile. NotFound if the file does not exist;
/// DataLoss if it does not parse (e.g. written by something else).
absl::StatusOr<v1::PolicyBundle> ReadBundleFile(const std::string& path);

/// Converts a received bundle into the agent's value, checking each policy with the same rules
/// as the local policy files (common/proto PolicyFromProto). InvalidArgument naming the policy
/// or assignment otherwise, e.g. "policy 'too-long': spec.settings: hold 9000us is out of range
/// 0..8160us". Version and layout checks are the Agent's (ValidateServerBundle).
absl::StatusOr<ServerBundle> ServerBundleFromProto(const v1::PolicyBundle& bundle);

}  // namespace rxfleet::agent
