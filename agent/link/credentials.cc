#include "agent/link/credentials.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rxfleet::agent {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* flag) {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(flag, ": required"));
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in || text.str().find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": cannot read ", path, " (missing, unreadable or not PEM)"));
  }
  return text.str();
}

}  // namespace

absl::StatusOr<common::TlsClientSetup> LinkTlsSetup(const LinkTlsFiles& files) {
  absl::StatusOr<std::string> ca = ReadPem(files.ca_file, "--tls-ca");
  if (!ca.ok()) return ca.status();
  absl::StatusOr<std::string> cert = ReadPem(files.cert_file, "--tls-cert");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem(files.key_file, "--tls-key");
  if (!key.ok()) return key.status();
  common::TlsClientSetup setup;
  setup.ca_pem = *std::move(ca);
  setup.cert_pem = *std::move(cert);
  setup.key_pem = *std::move(key);
  setup.ca_source = absl::StrCat("the fleet CA --tls-ca ", files.ca_file);
  setup.cert_source = absl::StrCat("--tls-cert ", files.cert_file);
  return setup;
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> LinkCredentials(
    const LinkTlsFiles& files) {
  absl::StatusOr<common::TlsClientSetup> setup = LinkTlsSetup(files);
  if (!setup.ok()) return setup.status();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = std::move(setup->ca_pem);
  options.pem_cert_chain = std::move(setup->cert_pem);
  options.pem_private_key = std::move(setup->key_pem);
  return grpc::SslCredentials(options);
}

}  // namespace rxfleet::agent
