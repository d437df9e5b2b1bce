// Connection settings: precedence flag > environment > config file > default, the config
// file's strict parsing, transport selection and --timeout values.
#include "cli/client/connection.h"

#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/paths.h"

namespace rxfleet::cli {
namespace {

using ::testing::HasSubstr;

class ConnectionTest : public ::testing::Test {
 protected:
  EnvLookup Env() {
    return [this](std::string_view name) -> std::optional<std::string> {
      auto it = env_.find(std::string(name));
      if (it == env_.end()) return std::nullopt;
      return it->second;
    };
  }
  std::string WriteConfig(std::string_view text) {
    const std::string dir = temp_.File(".config/rxfleet");
    std::filesystem::create_directories(dir);
    const std::string path = dir + "/config.yaml";
    EXPECT_TRUE(rxfleet::testing::WriteTextFile(path, text).ok());
    return path;
  }

  rxfleet::testing::TempDir temp_{"rxfleetctl-conn"};
  std::map<std::string, std::string> env_{{"HOME", temp_.path().string()}};
};

TEST_F(ConnectionTest, DefaultsWithoutAnySource) {
  auto settings = ResolveConnection(ConnectionFlags{}, Env());
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_EQ(settings->server, kDefaultServerAddress);
  EXPECT_EQ(settings->server_origin, "default");
  EXPECT_EQ(settings->token, "");
  EXPECT_TRUE(settings->tls);  // TLS with the system roots unless --insecure
  EXPECT_EQ(settings->timeout, absl::Seconds(10));
}

TEST_F(ConnectionTest, FlagBeatsEnvironmentBeatsFile) {
  const std::string path = WriteConfig("server: file:1\ntoken: file-token\ntimeout: 3s\n");
  ConnectionFlags flags;
  auto from_file = ResolveConnection(flags, Env());
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(from_file->server, "file:1");
  EXPECT_EQ(from_file->server_origin, path);
  EXPECT_EQ(from_file->token, "file-token");
  EXPECT_EQ(from_file->timeout, absl::Seconds(3));

  env_["RXFLEET_SERVER"] = "env:2";
  env_["RXFLEET_TOKEN"] = "env-token";
  auto from_env = ResolveConnection(flags, Env());
  ASSERT_TRUE(from_env.ok());
  EXPECT_EQ(from_env->server, "env:2");
  EXPECT_EQ(from_env->server_origin, "RXFLEET_SERVER");
  EXPECT_EQ(from_env->token, "env-token");

  flags.server = "flag:3";
  flags.token = "flag-token";
  flags.timeout = "500ms";
  auto from_flags = ResolveConnection(flags, Env());
  ASSERT_TRUE(from_flags.ok());
  EXPECT_EQ(from_flags->server, "flag:3");
  EXPECT_EQ(from_flags->server_origin, "--server");
  EXPECT_EQ(from_flags->token, "flag-token");
  EXPECT_EQ(from_flags->timeout, absl::Milliseconds(500));
}

TEST_F(ConnectionTest, XdgConfigHomeWins) {
  env_["XDG_CONFIG_HOME"] = "/xdg";
  EXPECT_EQ(DefaultConfigPath(Env()), "/xdg/rxfleet/config.yaml");
  env_.erase("XDG_CONFIG_HOME");
  EXPECT_EQ(DefaultConfigPath(Env()), temp_.path().string() + "/.config/rxfleet/config.yaml");
  env_.clear();
  EXPECT_EQ(DefaultConfigPath(Env()), "");
}

TEST_F(ConnectionTest, ConfigFileIsStrictAndNamesFileAndLine) {
  auto unknown = ParseConfigFile("server: a:1\nserverr: b:2\n", "/etc/x.yaml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("/etc/x.yaml:2:1: unknown key 'serverr'"));
  auto duplicate = ParseConfigFile("token: a\ntoken: b\n", "c.yaml");
  EXPECT_THAT(duplicate.status().message(), HasSubstr("c.yaml:2:1: duplicate key 'token'"));
  auto not_bool = ParseConfigFile("insecure: maybe\n", "c.yaml");
  EXPECT_THAT(not_bool.status().message(), HasSubstr("c.yaml:1:11: 'insecure' must be true"));
  auto bad_timeout = ParseConfigFile("timeout: soon\n", "c.yaml");
  EXPECT_THAT(bad_timeout.status().message(), HasSubstr("c.yaml:1:10: invalid timeout 'soon'"));
  auto malformed = ParseConfigFile("server: [\n", "c.yaml");
  EXPECT_THAT(malformed.status().message(), HasSubstr("c.yaml:"));
  auto empty = ParseConfigFile("", "c.yaml");
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->server.has_value());
}

TEST_F(ConnectionTest, InvalidDefaultConfigFileFailsTheCommand) {
  const std::string path = WriteConfig("tokn: x\n");
  auto settings = ResolveConnection(ConnectionFlags{}, Env());
  ASSERT_FALSE(settings.ok());
  EXPECT_EQ(settings.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(settings.status().message(), HasSubstr(path + ":1:1: unknown key 'tokn'"));
}

TEST_F(ConnectionTest, ExplicitConfigMustExist) {
  ConnectionFlags flags;
  flags.config = temp_.File("missing.yaml");
  auto settings = ResolveConnection(flags, Env());
  ASSERT_FALSE(settings.ok());
  EXPECT_THAT(settings.status().message(), HasSubstr("missing.yaml: cannot be read"));
}

TEST_F(ConnectionTest, TlsFilesFromConfigResolveRelativeToIt) {
  const std::string path = WriteConfig("ca_file: ca.pem\ncert_file: /abs/c.pem\nkey_file: k.pem\n");
  auto settings = ResolveConnection(ConnectionFlags{}, Env());
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_TRUE(settings->tls);
  const std::string dir = std::filesystem::path(path).parent_path().string();
  EXPECT_EQ(settings->ca_file, dir + "/ca.pem");
  EXPECT_EQ(settings->cert_file, "/abs/c.pem");
  EXPECT_EQ(settings->key_file, dir + "/k.pem");
}

TEST_F(ConnectionTest, TransportComesFromOneSourceAsAWhole) {
  WriteConfig("ca_file: /ca.pem\n");
  ConnectionFlags flags;
  flags.insecure = true;  // the flag replaces the file's TLS settings
  auto settings = ResolveConnection(flags, Env());
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_FALSE(settings->tls);
  EXPECT_EQ(settings->ca_file, "");
}

TEST_F(ConnectionTest, ConflictingTransportSettingsAreRejected) {
  ConnectionFlags flags;
  flags.insecure = true;
  flags.ca_file = "/ca.pem";
  auto both = ResolveConnection(flags, Env());
  EXPECT_THAT(both.status().message(), HasSubstr("--insecure (plaintext) cannot be combined"));
  ConnectionFlags cert_only;
  cert_only.cert_file = "/c.pem";
  auto half = ResolveConnection(cert_only, Env());
  EXPECT_THAT(half.status().message(), HasSubstr("--cert-file and --key-file"));
  WriteConfig("insecure: true\nca_file: /ca.pem\n");
  auto file = ResolveConnection(ConnectionFlags{}, Env());
  EXPECT_THAT(file.status().message(), HasSubstr("insecure (plaintext) cannot be combined"));
}

TEST_F(ConnectionTest, RejectsBadServerAndTimeout) {
  ConnectionFlags flags;
  flags.server = "";
  EXPECT_THAT(ResolveConnection(flags, Env()).status().message(),
              HasSubstr("invalid server address"));
  flags.server = "a:1";
  flags.timeout = "-1s";
  EXPECT_THAT(ResolveConnection(flags, Env()).status().message(),
              HasSubstr("--timeout: invalid timeout '-1s'"));
}

TEST(ParseTimeoutTest, DurationsAndPlainSeconds) {
  EXPECT_EQ(*ParseTimeout("10s"), absl::Seconds(10));
  EXPECT_EQ(*ParseTimeout("30"), absl::Seconds(30));
  EXPECT_EQ(*ParseTimeout("1.5"), absl::Milliseconds(1500));
  EXPECT_EQ(*ParseTimeout("2m"), absl::Minutes(2));
  EXPECT_FALSE(ParseTimeout("0").ok());
  EXPECT_FALSE(ParseTimeout("inf").ok());
  EXPECT_FALSE(ParseTimeout("ten").ok());
}

}  // namespace
}  // namespace rxfleet::cli
