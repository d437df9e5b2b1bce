#pragma once

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "server/registry/policy_set.h"

namespace rxfleet::server {

/// A bundle body wrapped once, per bundle version, into a reference-counted gRPC slice, from
/// which every stream builds its ServerMessage without copying or re-serialising the policies:
///
///   ServerMessage{bundle = PolicyBundle{<shared body>, <host's fields>, nonce}}
///
/// is encoded as three or four slices: the ServerMessage field-1 header (tag and length, a
/// few bytes), the shared body, the host's own fields (its experiment assignments, repeated
/// field 4, and its probe slots, repeated field 6, when it has any) and the PolicyBundle
/// field-2 nonce (tag, length, bytes). Protobuf parsers
/// accept fields in any order, so the nonce after the body decodes as PolicyBundle.nonce.
/// Immutable and thread-safe.
class SharedBundle {
 public:
  /// `published`: when the bundle was published to the streams (for push-to-ACK latency).
  SharedBundle(std::shared_ptr<const BundleBody> body, absl::Time published);

  uint64_t version() const { return version_; }
  absl::Time published() const { return published_; }
  size_t body_size() const { return body_size_; }

  /// The serialised ServerMessage carrying this bundle with `nonce` (<= 64 bytes) and the
  /// host's own fields `host_fields`: serialised PolicyBundle fields (the host's experiment
  /// assignments, field 4, and probe slots, field 6), placed between the shared body and the
  /// nonce; may be empty.
  grpc::ByteBuffer Message(std::string_view nonce, std::string_view host_fields = {}) const;

 private:
  const uint64_t version_;
  const absl::Time published_;
  const size_t body_size_;
  grpc::Slice body_;  // keeps the BundleBody alive through its destroy callback
};

/// Bytes of one entry of a repeated message field numbered 1..15 (PolicyBundle.policies,
/// .assignments, .probe_slots) holding a message of `message_bytes`: tag, length and the message.
size_t RepeatedEntryBytes(size_t message_bytes);

/// Bytes of SharedBundle::Message() for a body of `body_bytes` and host fields of
/// `host_field_bytes`, with the longest nonce (64 bytes): what an agent must be able to receive.
size_t BundleMessageBytes(size_t body_bytes, size_t host_field_bytes);

/// A fresh random nonce: 16 lower-case hex digits (64 random bits). Thread-safe.
std::string NewNonce();

}  // namespace rxfleet::server
