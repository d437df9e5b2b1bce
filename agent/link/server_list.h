#pragma once

// The agent's list of rxfleet-server addresses (`rxfleet-agent --server a:7443,b:7443`) and the
// order the server link tries them in. Pure logic, no I/O: parsing at the command-line boundary,
// rotation inside the link (agent/link/server_link.h).

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace rxfleet::agent {

/// Most entries one --server list takes. A fleet's replicas are a handful of servers; a longer
/// list is more likely a mistake (a pasted host list), and a round over it (see ServerRotation)
/// must stay short enough that the backoff still paces the agent.
inline constexpr size_t kMaxServerAddresses = 16;

/// Parses a --server value: one or more HOST:PORT entries separated by commas, e.g.
/// "fleet-a.example:7443,fleet-b.example:7443,[2001:db8::1]:7443". HOST is a DNS name (which may
/// resolve to several addresses: gRPC's resolver handles those on one channel), an IPv4 address
/// or a bracketed IPv6 address (common::ValidateHostPort); PORT is 1..65535. Spaces around an
/// entry are dropped. Returns the entries in the given order, each as written (trimmed).
/// Errors (InvalidArgument, the message naming the offending entry and its 1-based position):
/// an empty value or entry ("a:1,,b:1", a trailing comma), a malformed entry or port, port 0, the
/// same entry twice (host names compared without case), more than kMaxServerAddresses entries.
absl::StatusOr<std::vector<std::string>> ParseServerAddresses(std::string_view text);

/// Which entry of the server list the link tries next, and whether a whole round of the list
/// has failed (then the link's exponential backoff applies; between the entries of a round it
/// does not grow). Rounds: an attempt that ends without a working stream (a failed connect, a
/// refused or broken stream) counts as a failure of its entry; a stream that worked (the server
/// sent its ServerConfig) starts a new round, its own end being the round's first failure. A
/// round is over after `size()` consecutive failures, i.e. once every entry has failed once in
/// turn. With one entry every failure ends a round, so a single server is paced as before.
/// Not thread-safe (the link's connection thread owns it).
class ServerRotation {
 public:
  /// `count` entries (>= 1), starting at entry `first` (taken modulo `count`; the link draws it
  /// at random so a fleet spreads over the replicas).
  ServerRotation(size_t count, size_t first);

  /// The entry to try now, in [0, size()).
  size_t current() const { return current_; }
  size_t size() const { return count_; }

  /// Records the end of the attempt at current() and moves on to the next entry (wrapping).
  /// `worked`: the stream got as far as the server's config, which starts a new round.
  /// Returns true when this end completes a round of failures: wait with the (growing) backoff
  /// before the next attempt; false: try the next entry after a short pause.
  bool EndAttempt(bool worked);

  /// Failures recorded in the current round so far, in [0, size()).
  size_t failures_in_round() const { return failures_; }

 private:
  size_t count_;
  size_t current_;
  size_t failures_ = 0;
};

}  // namespace rxfleet::agent
