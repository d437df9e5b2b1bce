#include "server/api/bundle_message.h"

#include <algorithm>

#include "absl/random/random.h"
#include "absl/strings/str_format.h"

namespace rxfleet::server {
namespace {

// Wire-format tags (field_number << 3 | wire type 2 = length-delimited).
constexpr uint8_t kServerMessageBundleTag = (1 << 3) | 2;  // ServerMessage.bundle = 1
constexpr uint8_t kPolicyBundleNonceTag = (2 << 3) | 2;    // PolicyBundle.nonce = 2

size_t PutVarint(uint64_t value, uint8_t* out) {
  size_t n = 0;
  while (value >= 0x80) {
    out[n++] = static_cast<uint8_t>(value | 0x80);
    value >>= 7;
  }
  out[n++] = static_cast<uint8_t>(value);
  return n;
}

void ReleaseBody(void* user_data) {
  delete static_cast<std::shared_ptr<const BundleBody>*>(user_data);
}

grpc::Slice MakeBodySlice(std::shared_ptr<const BundleBody> body) {
  auto* owner = new std::shared_ptr<const BundleBody>(std::move(body));
  // gRPC never writes through the pointer of a slice it sends.
  void* data = const_cast<char*>((*owner)->bytes.data());
  return grpc::Slice(data, (*owner)->bytes.size(), &ReleaseBody, owner);
}

}  // namespace

SharedBundle::SharedBundle(std::shared_ptr<const BundleBody> body, absl::Time published)
    : version_(body->version),
      published_(published),
      body_size_(body->bytes.size()),
      body_(MakeBodySlice(std::move(body))) {}

grpc::ByteBuffer SharedBundle::Message(std::string_view nonce, std::string_view host_fields) const {
  nonce = nonce.substr(0, 64);
  uint8_t nonce_field[2 + 10 + 64];
  size_t nonce_size = 0;
  nonce_field[nonce_size++] = kPolicyBundleNonceTag;
  nonce_size += PutVarint(nonce.size(), nonce_field + nonce_size);
  std::copy(nonce.begin(), nonce.end(), nonce_field + nonce_size);
  nonce_size += nonce.size();

  uint8_t header[1 + 10];
  size_t header_size = 0;
  header[header_size++] = kServerMessageBundleTag;
  header_size += PutVarint(body_size_ + host_fields.size() + nonce_size, header + header_size);

  if (host_fields.empty()) {
    const grpc::Slice slices[] = {grpc::Slice(header, header_size), body_,
                                  grpc::Slice(nonce_field, nonce_size)};
    return grpc::ByteBuffer(slices, 3);
  }
  const grpc::Slice slices[] = {grpc::Slice(header, header_size), body_,
                                grpc::Slice(host_fields.data(), host_fields.size()),
                                grpc::Slice(nonce_field, nonce_size)};
  return grpc::ByteBuffer(slices, 4);
}

size_t RepeatedEntryBytes(size_t message_bytes) {
  uint8_t length[10];
  return 1 + PutVarint(message_bytes, length) + message_bytes;
}

size_t BundleMessageBytes(size_t body_bytes, size_t host_field_bytes) {
  const size_t nonce_field = RepeatedEntryBytes(64);
  const size_t bundle = body_bytes + host_field_bytes + nonce_field;
  return RepeatedEntryBytes(bundle);
}

std::string NewNonce() {
  thread_local absl::BitGen gen;
  return absl::StrFormat("%016x", absl::Uniform<uint64_t>(gen));
}

}  // namespace rxfleet::server
