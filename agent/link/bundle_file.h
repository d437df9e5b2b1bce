#pragma once

// The agent's last good bundle on disk (<state-dir>/bundle.pb): the PolicyBundle as the server
// sent it and the host id it was received for (rxfleet.v1.PersistedBundle), written atomically
// so a crash or power cut leaves either the old or the new file, never a torn one.

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/reconcile/policy_set.h"
#include "common/link_limits.h"
#include "rxfleet/v1/agent_service.pb.h"
#include "rxfleet/v1/agent_state.pb.h"

namespace rxfleet::agent {

/// File name of the persisted bundle inside the state directory.
inline constexpr char kBundleFileName[] = "bundle.pb";

/// Writes `bundle`, received for `host_id`, to `path` atomically: a temporary file in the same
/// directory (mode 0600), write, fsync, rename over `path`, fsync of the directory. Creates the
/// directory (0750) if missing. Errors: Internal/PermissionDenied/ResourceExhausted naming the
/// path and errno text; on error `path` is unchanged and no temporary file is left.
absl::Status WriteBundleFile(const std::string& path, const v1::PolicyBundle& bundle,
                             const std::string& host_id);

/// Largest persisted bundle file read back (bytes): the largest message the agent accepts from
/// the server (common::kMaxServerMessageBytes) plus its host id.
inline constexpr size_t kMaxBundleFileBytes =
    static_cast<size_t>(common::kMaxServerMessageBytes) + 4096;

/// Reads a file written by WriteBundleFile, or by an agent from before host ids were recorded
/// (a bare PolicyBundle: host_id comes back empty). Opened non-blocking. NotFound if the file
/// does not exist; PermissionDenied (or Internal) naming the OS reason if it cannot be opened;
/// FailedPrecondition if it is not a regular file (a FIFO, a directory); DataLoss if it is
/// larger than kMaxBundleFileBytes or not a persisted bundle (e.g. written by something else).
absl::StatusOr<v1::PersistedBundle> ReadBundleFile(const std::string& path);

/// Whose a persisted bundle is, compared with the host id of the agent reading it.
enum class PersistedBundleOwner : uint8_t {
  kThisHost,    ///< host_id equals the agent's: apply it
  kUnrecorded,  ///< host_id empty (written by an agent before host ids were recorded): applied
                ///< as this host's, and rewritten with the host id at the next server bundle
  kOtherHost,   ///< host_id names another host (a --state-dir copied or shared between
                ///< hosts, a cloned SD card): never applied
};

/// The owner of `persisted` for an agent with `host_id`.
PersistedBundleOwner OwnerOfPersistedBundle(const v1::PersistedBundle& persisted,
                                            std::string_view host_id);

/// Converts a received bundle into the agent's value, checking each policy with the same rules
/// as the local policy files (common/proto PolicyFromProto). InvalidArgument naming the policy
/// or assignment otherwise, e.g. "policy 'too-long': spec.settings: hold 9000us is out of range
/// 0..8160us". Version and layout checks are the Agent's (ValidateServerBundle).
absl::StatusOr<ServerBundle> ServerBundleFromProto(const v1::PolicyBundle& bundle);

}  // namespace rxfleet::agent
