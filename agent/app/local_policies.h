#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/policy/policy.h"

namespace rxfleet::agent {

/// Default local policy directory; missing is fine (no local policies).
inline constexpr char kDefaultPolicyDir[] = "/etc/rxfleet/policies.d";

/// The agent's local policy files: files and/or directories (their *.yaml / *.yml, see
/// common::LoadPolicyFiles), loaded as one set and watched for changes by polling metadata.
class LocalPolicyFiles {
 public:
  explicit LocalPolicyFiles(std::vector<std::string> paths);

  /// Loads every path as one set. Errors are common::LoadPolicyFiles' (InvalidArgument with
  /// "FILE:LINE:COLUMN: ..." for malformed or invalid documents, NotFound for a missing file);
  /// the whole set fails so the caller keeps its previous one.
  absl::StatusOr<std::vector<common::Policy>> Load() const;

  /// A cheap summary of the paths' metadata (existence, type, size, mtime of each path and of
  /// each *.yaml / *.yml in a directory). Changes whenever an edit, a rename into place, an added
  /// or a removed file would change what Load returns.
  std::string Fingerprint() const;

  const std::vector<std::string>& paths() const { return paths_; }

 private:
  std::vector<std::string> paths_;
};

}  // namespace rxfleet::agent
