#pragma once

// Operator bearer tokens and roles. A token is 32 random bytes from OpenSSL's CSPRNG
// (RAND_bytes), shown once as "rxf_" + unpadded base64url (47 characters). The server stores
// only its SHA-256 (tokens are high-entropy, so a plain hash is enough: no dictionary to
// search) and compares hashes in constant time (CRYPTO_memcmp).

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rxfleet::server {

/// Operator roles, ordered: each role may do everything the roles below it may.
///   viewer:   read (list/get hosts, adapters, policies, experiments, reports, events)
///   operator: + apply/delete policies, create/stop/promote experiments
///   admin:    + create, list and revoke tokens
enum class Role : int { kViewer = 1, kOperator = 2, kAdmin = 3 };

/// "viewer", "operator", "admin".
std::string_view RoleName(Role role);

/// Parses a role name (exact, lower case). InvalidArgument naming the accepted values.
absl::StatusOr<Role> ParseRole(std::string_view name);

/// Prefix of every token, so a leaked token is recognisable (secret scanners, logs).
inline constexpr std::string_view kTokenPrefix = "rxf_";

/// A new token: kTokenPrefix + base64url(32 random bytes). Internal if the CSPRNG fails.
absl::StatusOr<std::string> GenerateToken();

/// SHA-256 of the token's bytes (32 raw bytes).
std::string HashToken(std::string_view token);

/// Constant-time equality of two hashes (false if their sizes differ).
bool HashesEqual(std::string_view a, std::string_view b);

/// Token names: 1..64 characters of [A-Za-z0-9._-], starting with a letter or digit.
/// InvalidArgument naming the field `name`.
absl::Status ValidateTokenName(std::string_view name);

}  // namespace rxfleet::server
