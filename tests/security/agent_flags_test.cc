// rxfleet-agent's server-link transport flags: TLS files are required with --server unless
// --insecure says otherwise (docs/SECURITY.md).

#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "agent/app/command_line.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rxfleet::agent {
namespace {

using ::testing::HasSubstr;

struct Parsed {
  std::variant<CommandLine, int> result;
  std::string err;
};

Parsed Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "rxfleet-agent");
  std::ostringstream out, err;
  Parsed parsed{ParseCommandLine(static_cast<int>(args.size()), args.data(), out, err), ""};
  parsed.err = err.str();
  return parsed;
}

TEST(AgentFlagsTest, ServerNeedsTlsFilesOrInsecure) {
  Parsed bare = Parse({"--standalone", "--server", "fleet:7443"});
  ASSERT_TRUE(std::holds_alternative<int>(bare.result));
  EXPECT_EQ(std::get<int>(bare.result), kExitUsage);
  EXPECT_THAT(bare.err, HasSubstr("--tls-ca, --tls-cert and --tls-key"));
  EXPECT_THAT(bare.err, HasSubstr("--insecure"));

  Parsed partial = Parse({"--standalone", "--server", "fleet:7443", "--tls-ca", "ca.crt"});
  ASSERT_TRUE(std::holds_alternative<int>(partial.result));

  Parsed insecure = Parse({"--standalone", "--server", "fleet:7443", "--insecure"});
  ASSERT_TRUE(std::holds_alternative<CommandLine>(insecure.result)) << insecure.err;
  EXPECT_FALSE(std::get<CommandLine>(insecure.result).server_tls.has_value());

  Parsed tls = Parse({"--standalone", "--server", "fleet:7443", "--tls-ca", "ca.crt", "--tls-cert",
                      "a.crt", "--tls-key", "a.key"});
  ASSERT_TRUE(std::holds_alternative<CommandLine>(tls.result)) << tls.err;
  const auto& files = std::get<CommandLine>(tls.result).server_tls;
  ASSERT_TRUE(files.has_value());
  EXPECT_EQ(files->ca_file, "ca.crt");
  EXPECT_EQ(files->cert_file, "a.crt");
  EXPECT_EQ(files->key_file, "a.key");
}

TEST(AgentFlagsTest, TransportFlagsNeedAServerAndDoNotMix) {
  Parsed alone = Parse({"--standalone", "--insecure"});
  ASSERT_TRUE(std::holds_alternative<int>(alone.result));
  EXPECT_THAT(alone.err, HasSubstr("only apply with --server"));
  Parsed both = Parse({"--standalone", "--server", "fleet:7443", "--insecure", "--tls-ca", "c"});
  ASSERT_TRUE(std::holds_alternative<int>(both.result));
  EXPECT_THAT(both.err, HasSubstr("cannot be combined"));
}

}  // namespace
}  // namespace rxfleet::agent
