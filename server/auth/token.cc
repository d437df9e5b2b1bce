#include "server/auth/token.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <array>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/string_view_compat.h"

namespace rxfleet::server {

using common::ToAbslView;

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kViewer:
      return "viewer";
    case Role::kOperator:
      return "operator";
    case Role::kAdmin:
      return "admin";
  }
  return "unknown";
}

absl::StatusOr<Role> ParseRole(std::string_view name) {
  for (Role role : {Role::kViewer, Role::kOperator, Role::kAdmin}) {
    if (name == RoleName(role)) return role;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("role '", ToAbslView(name), "' is not one of viewer, operator, admin"));
}

absl::StatusOr<std::string> GenerateToken() {
  std::array<unsigned char, 32> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    return absl::InternalError("the random number generator failed (OpenSSL RAND_bytes)");
  }
  std::string encoded;
  absl::WebSafeBase64Escape(
      absl::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), &encoded);
  OPENSSL_cleanse(bytes.data(), bytes.size());
  return absl::StrCat(ToAbslView(kTokenPrefix), encoded);
}

std::string HashToken(std::string_view token) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  if (EVP_Digest(token.data(), token.size(), digest.data(), &size, EVP_sha256(), nullptr) != 1) {
    return std::string();  // never matches a stored 32-byte hash
  }
  return std::string(reinterpret_cast<const char*>(digest.data()), size);
}

bool HashesEqual(std::string_view a, std::string_view b) {
  if (a.size() != b.size() || a.empty()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

absl::Status ValidateTokenName(std::string_view name) {
  if (name.empty() || name.size() > 64) {
    return absl::InvalidArgumentError("name: a token name has 1 to 64 characters");
  }
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (alnum || (i > 0 && (c == '.' || c == '_' || c == '-'))) continue;
    return absl::InvalidArgumentError(
        absl::StrCat("name: '", ToAbslView(name),
                     "' must be letters, digits, '.', '_' or '-', starting with a letter or "
                     "digit"));
  }
  return absl::OkStatus();
}

}  // namespace rxfleet::server
