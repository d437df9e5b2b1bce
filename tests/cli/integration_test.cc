// rxfleetctl as a real process against a real rxfleet-server on loopback, with two real
// rxfleet-agents under rxfleet-emulate (hosts x86-lab: tests/labs/demo.yaml, and pi1:
// tests/labs/rtl8922au-highspeed.yaml). Checks what an operator relies on: get -o json shows
// observed holds, apply changes exactly the selected adapters' registers, describe names the
// deciding policy, stale resource versions exit 4, delete reverts to the default, watch ends
// on SIGINT with exit 0.

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/paths.h"
#include "tests/support/process.h"

namespace rxfleet::cli {
namespace {

using ::rxfleet::testing::BinaryPath;
using ::rxfleet::testing::ChildProcess;
using ::rxfleet::testing::EmulatorPath;
using ::rxfleet::testing::LabPath;
using ::rxfleet::testing::ProcessResult;
using ::rxfleet::testing::ReadJsonFile;
using ::rxfleet::testing::ReadTextFile;
using ::rxfleet::testing::RunProcess;
using ::rxfleet::testing::SourcePath;
using ::rxfleet::testing::Stream;
using ::rxfleet::testing::TempDir;
using ::rxfleet::testing::WriteTextFile;
using ::testing::HasSubstr;

constexpr absl::Duration kConverge = absl::Seconds(60);

class CliIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.path() / "tmp");
    auto server = ChildProcess::Start(
        {BinaryPath("server/rxfleet-server"), "--insecure", "--listen", "127.0.0.1:0", "--db",
         dir_.File("fleet.db"), "--http-listen", "none", "--push-debounce", "0s"},
        Env());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    auto line = server_->WaitForLineContaining(Stream::kStderr, "(port ", absl::Seconds(30));
    ASSERT_TRUE(line.ok()) << line.status();
    const size_t at = line->find("(port ") + 6;
    const std::string port = line->substr(at, line->find_first_not_of("0123456789", at) - at);
    address_ = absl::StrCat("127.0.0.1:", port);

    x86_ = StartAgent("x86-lab", "board=x86", LabPath("demo"));
    pi1_ = StartAgent("pi1", "board=pi1", LabPath("rtl8922au-highspeed"));
    ASSERT_NE(x86_, nullptr);
    ASSERT_NE(pi1_, nullptr);
  }

  void TearDown() override {
    for (auto* child : {&pi1_, &x86_, &server_}) {
      if (*child != nullptr) (*child)->Terminate(absl::Seconds(10));
    }
  }

  std::vector<std::string> Env() const {
    return {"TMPDIR=" + dir_.File("tmp"), "HOME=" + dir_.File("home"),
            "RXFLEET_SERVER=", "RXFLEET_TOKEN="};
  }

  std::unique_ptr<ChildProcess> StartAgent(const std::string& host, const std::string& label,
                                           const std::string& lab) {
    std::filesystem::create_directories(dir_.path() / host);
    auto child = ChildProcess::Start({EmulatorPath(),
                                      "--lab",
                                      lab,
                                      "--state-out",
                                      dir_.File(host + "/state.json"),
                                      "--timeout",
                                      "300",
                                      "--",
                                      BinaryPath("agent/rxfleet-agent"),
                                      "--standalone",
                                      "--server",
                                      address_,
                                      "--insecure",
                                      "--host-id",
                                      host,
                                      "--label",
                                      label,
                                      "--reconcile-period",
                                      "200ms",
                                      "--metrics-address",
                                      "none",
                                      "--status-socket",
                                      dir_.File(host + "/agent.sock"),
                                      "--state-dir",
                                      dir_.File(host + "/state")},
                                     Env());
    EXPECT_TRUE(child.ok()) << child.status();
    return child.ok() ? *std::move(child) : nullptr;
  }

  // Runs rxfleetctl against the test server.
  ProcessResult Ctl(std::vector<std::string> args, const std::string& server = "") {
    std::vector<std::string> argv = {BinaryPath("cli/rxfleetctl"), "--insecure", "--server",
                                     server.empty() ? address_ : server};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv, absl::Seconds(30), Env());
  }

  // `get adapters -o json` as "host/adapter" -> adapter JSON.
  std::map<std::string, nlohmann::json> Adapters() {
    ProcessResult r = Ctl({"get", "adapters", "-o", "json"});
    EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
    std::map<std::string, nlohmann::json> out;
    nlohmann::json doc = nlohmann::json::parse(r.stdout_text, nullptr, false);
    if (doc.is_discarded()) {
      ADD_FAILURE() << "not JSON: " << r.stdout_text;
      return out;
    }
    for (const auto& a : doc.at("adapters")) {
      out[a.at("hostId").get<std::string>() + "/" +
          a.at("metadata").at("name").get<std::string>()] = a;
    }
    return out;
  }

  static int ObservedHold(const nlohmann::json& adapter) {
    const nlohmann::json* decoded = nullptr;
    if (adapter.contains("status") && adapter["status"].contains("observed") &&
        adapter["status"]["observed"].contains("decoded")) {
      decoded = &adapter["status"]["observed"]["decoded"];
    }
    if (decoded == nullptr) return -1;
    return decoded->value("holdUs", 0);
  }

  static std::string Applies(const nlohmann::json& adapter) {
    if (!adapter.contains("status") || !adapter["status"].contains("counters")) return "0";
    return adapter["status"]["counters"].value("appliesTotal", "0");
  }

  // Polls `get adapters -o json` until `done` holds (a condition with a deadline).
  std::map<std::string, nlohmann::json> WaitForAdapters(
      const std::function<bool(const std::map<std::string, nlohmann::json>&)>& done) {
    const absl::Time deadline = absl::Now() + kConverge;
    std::map<std::string, nlohmann::json> adapters;
    while (absl::Now() < deadline) {
      adapters = Adapters();
      if (done(adapters)) return adapters;
      absl::SleepFor(absl::Milliseconds(200));
    }
    ADD_FAILURE() << "adapters did not converge; last:\n"
                  << nlohmann::json(adapters).dump(2) << "\nx86 agent:\n"
                  << x86_->Text(Stream::kStderr) << "\npi1 agent:\n"
                  << pi1_->Text(Stream::kStderr);
    return adapters;
  }

  std::string PolicyWith(const std::string& extra_metadata, int priority) {
    auto text = ReadTextFile(SourcePath("tests/fixtures/cli/policies/integration-pi1-hold.yaml"));
    EXPECT_TRUE(text.ok());
    std::string doc = absl::StrReplaceAll(
        *text, {{"  name: pi1-hold\n", absl::StrCat("  name: pi1-hold\n", extra_metadata)},
                {"priority: 100", absl::StrCat("priority: ", priority)}});
    const std::string path = dir_.File(absl::StrCat("policy-", priority, ".yaml"));
    EXPECT_TRUE(WriteTextFile(path, doc).ok());
    return path;
  }

  TempDir dir_{"rxfleetctl-it"};
  std::string address_;
  std::unique_ptr<ChildProcess> server_, x86_, pi1_;
};

TEST_F(CliIntegrationTest, OperatorWorkflowAgainstARealFleet) {
  // 1. Both agents report; observed holds follow the built-in default (SuperSpeed 32 µs,
  //    high-speed 1024 µs). Every rtw89 adapter of the lab is waited for: one applied after
  //    this point would look like a write caused by step 3.
  auto before = WaitForAdapters([](const auto& a) {
    return a.count("x86-lab/port-2-2") && a.count("x86-lab/port-2-1") &&
           a.count("x86-lab/port-2-3") && a.count("pi1/port-2-2") &&
           ObservedHold(a.at("x86-lab/port-2-2")) == 32 &&
           ObservedHold(a.at("x86-lab/port-2-1")) == 1024 &&
           ObservedHold(a.at("x86-lab/port-2-3")) == 32 &&
           ObservedHold(a.at("pi1/port-2-2")) == 1024;
  });
  ASSERT_TRUE(before.count("pi1/port-2-2"));

  // The table shows the same, desired/observed.
  ProcessResult table = Ctl({"get", "adapters", "-l", "board=pi1"});
  EXPECT_EQ(table.exit_code, 0) << table.stderr_text;
  EXPECT_THAT(table.stdout_text, HasSubstr("1024\xC2\xB5s/1024\xC2\xB5s"));
  EXPECT_EQ(table.stdout_text.find("x86-lab"), std::string::npos) << table.stdout_text;

  // 2. A watch runs through the changes. It streams only events after it subscribed, so a
  //    policy that selects nothing is written until the watch shows it: from then on the
  //    watch sees every event (a watch started just before `apply` could miss its events).
  auto watch = ChildProcess::Start(
      {BinaryPath("cli/rxfleetctl"), "--insecure", "--server", address_, "watch", "-o", "json"},
      Env());
  ASSERT_TRUE(watch.ok()) << watch.status();
  const std::string probe = dir_.File("watch-probe.yaml");
  ASSERT_TRUE(WriteTextFile(probe,
                            "apiVersion: rxfleet/v1\nkind: RxAggPolicy\nmetadata:\n  name: "
                            "watch-probe\nspec:\n  selector:\n    matchLabels: {board: none}\n"
                            "  settings:\n    hold: 1024us\n")
                  .ok());
  bool watching = false;
  for (int attempt = 0; attempt < 30 && !watching; ++attempt) {
    ProcessResult probed = Ctl({"apply", "-f", probe});
    ASSERT_EQ(probed.exit_code, 0) << probed.stderr_text;
    ProcessResult removed = Ctl({"delete", "policy", "watch-probe"});
    ASSERT_EQ(removed.exit_code, 0) << removed.stderr_text;
    watching =
        (*watch)->WaitForLineContaining(Stream::kStdout, "watch-probe", absl::Seconds(1)).ok();
  }
  ASSERT_TRUE(watching) << "the watch never streamed";

  // 3. apply changes exactly the selected adapter.
  ProcessResult applied = Ctl({"apply", "-f", PolicyWith("", 100)});
  ASSERT_EQ(applied.exit_code, 0) << applied.stderr_text;
  EXPECT_THAT(applied.stdout_text, HasSubstr("policy/pi1-hold created: 1 adapter affected"));
  EXPECT_THAT(applied.stdout_text, HasSubstr("pi1    port-2-2"));
  auto after = WaitForAdapters([](const auto& a) {
    return a.count("pi1/port-2-2") && ObservedHold(a.at("pi1/port-2-2")) == 64;
  });
  for (const auto& [id, adapter] : before) {
    if (id.rfind("x86-lab/", 0) != 0) continue;
    ASSERT_TRUE(after.count(id)) << id;
    EXPECT_EQ(ObservedHold(after.at(id)), ObservedHold(adapter)) << id;
    EXPECT_EQ(Applies(after.at(id)), Applies(adapter)) << id << ": no new register writes";
  }

  // 4. The server recorded the change as an event of the adapter (watch sees it), describe
  // shows it and names the policy in the provenance; --local status agrees.
  const std::string hold_change = "1024\xC2\xB5s -> 64\xC2\xB5s";
  auto change_seen =
      (*watch)->WaitForLineContaining(Stream::kStdout, hold_change, absl::Seconds(30));
  EXPECT_TRUE(change_seen.ok()) << change_seen.status();
  ProcessResult described = Ctl({"describe", "adapter", "pi1/port-2-2"});
  EXPECT_EQ(described.exit_code, 0) << described.stderr_text;
  EXPECT_THAT(described.stdout_text, HasSubstr("server policy pi1-hold (priority 100"));
  EXPECT_THAT(described.stdout_text, HasSubstr("0x6000 = 0x80FF0214"));
  EXPECT_THAT(described.stdout_text, HasSubstr(hold_change));
  ProcessResult local = RunProcess({BinaryPath("cli/rxfleetctl"), "--local", "--local-socket",
                                    dir_.File("pi1/agent.sock"), "status"},
                                   absl::Seconds(30), Env());
  EXPECT_EQ(local.exit_code, 0) << local.stderr_text;
  EXPECT_THAT(local.stdout_text, HasSubstr("64\xC2\xB5s/64\xC2\xB5s"));
  EXPECT_THAT(local.stdout_text, HasSubstr("pi1-hold"));

  // 5. A write with a stale resource version is a conflict: exit 4.
  ProcessResult got = Ctl({"get", "policy", "pi1-hold", "-o", "json"});
  ASSERT_EQ(got.exit_code, 0) << got.stderr_text;
  const std::string first_version =
      nlohmann::json::parse(got.stdout_text)["metadata"]["resourceVersion"];
  ProcessResult updated =
      Ctl({"apply", "-f", PolicyWith("  resourceVersion: \"" + first_version + "\"\n", 101)});
  ASSERT_EQ(updated.exit_code, 0) << updated.stderr_text;
  EXPECT_THAT(updated.stdout_text, HasSubstr("policy/pi1-hold configured"));
  ProcessResult stale =
      Ctl({"apply", "-f", PolicyWith("  resourceVersion: \"" + first_version + "\"\n", 102)});
  EXPECT_EQ(stale.exit_code, 4) << stale.stdout_text << stale.stderr_text;
  EXPECT_THAT(stale.stderr_text, HasSubstr("error: policy/pi1-hold"));

  // 6. The watch saw the policy, and SIGINT ends it with exit 0.
  auto seen = (*watch)->WaitForLineContaining(Stream::kStdout, "pi1-hold", absl::Seconds(30));
  EXPECT_TRUE(seen.ok()) << seen.status();
  EXPECT_TRUE((*watch)->Signal(SIGINT));
  auto watch_exit = (*watch)->Wait(absl::Seconds(10));
  ASSERT_TRUE(watch_exit.ok()) << watch_exit.status();
  EXPECT_EQ(*watch_exit, 0) << (*watch)->Text(Stream::kStderr);

  // 7. delete reverts to the built-in default; the policy is gone (exit 3).
  ProcessResult deleted = Ctl({"delete", "policy", "pi1-hold"});
  EXPECT_EQ(deleted.exit_code, 0) << deleted.stderr_text;
  EXPECT_THAT(deleted.stdout_text, HasSubstr("policy/pi1-hold deleted: 1 adapter affected"));
  auto reverted = WaitForAdapters([](const auto& a) {
    return a.count("pi1/port-2-2") && ObservedHold(a.at("pi1/port-2-2")) == 1024;
  });
  EXPECT_EQ(reverted.at("pi1/port-2-2")["status"]["desired"]["provenance"]["hold_us"]["source"],
            "SETTING_SOURCE_BUILT_IN_DEFAULT");
  EXPECT_EQ(Ctl({"get", "policy", "pi1-hold"}).exit_code, 3);

  // 8. The emulated registers: pi1's adapter was written 64 µs then 1024 µs again; no x86-lab
  //    adapter ever got a 64 µs hold.
  pi1_->Terminate(absl::Seconds(10));
  x86_->Terminate(absl::Seconds(10));
  auto pi1_state = ReadJsonFile(dir_.File("pi1/state.json"));
  ASSERT_TRUE(pi1_state.ok()) << pi1_state.status();
  // Only the two values this test asked for were written: 64 µs, later 1024 µs again.
  std::vector<std::string> pi1_writes;
  for (const auto& t : (*pi1_state)["devices"][0]["transfers"]) {
    if (t["direction"] == "out" && t["address"] == "0x6000") pi1_writes.push_back(t["value"]);
  }
  const auto short_hold = std::find(pi1_writes.begin(), pi1_writes.end(), "0x80ff0214");
  ASSERT_NE(short_hold, pi1_writes.end()) << ::testing::PrintToString(pi1_writes);
  EXPECT_NE(std::find(short_hold, pi1_writes.end(), "0x80ff2014"), pi1_writes.end());
  EXPECT_EQ(pi1_writes.back(), "0x80ff2014");
  for (const auto& value : pi1_writes) {
    EXPECT_TRUE(value == "0x80ff0214" || value == "0x80ff2014") << value;
  }
  auto x86_state = ReadJsonFile(dir_.File("x86-lab/state.json"));
  ASSERT_TRUE(x86_state.ok()) << x86_state.status();
  for (const auto& device : (*x86_state)["devices"]) {
    for (const auto& t : device["transfers"]) {
      if (t["direction"] != "out" || !t["value"].is_string()) continue;
      uint32_t word = 0;
      ASSERT_TRUE(absl::SimpleHexAtoi(t["value"].get<std::string>(), &word));
      EXPECT_NE((word >> 8) & 0xFF, 2u) << device["name"] << " got a 64 us hold";
    }
  }
}

TEST(CliBinaryTest, UnreachableServerFailsWithinTheTimeout) {
  const absl::Time start = absl::Now();
  ProcessResult r = RunProcess({BinaryPath("cli/rxfleetctl"), "--insecure", "--server",
                                "127.0.0.1:1", "get", "hosts", "--timeout", "2s"},
                               absl::Seconds(30), {"HOME=/nonexistent-rxfleet-home"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_THAT(r.stderr_text, HasSubstr("error: cannot reach rxfleet-server at 127.0.0.1:1"));
}

TEST(CliBinaryTest, UsageErrorExitsTwo) {
  ProcessResult r =
      RunProcess({BinaryPath("cli/rxfleetctl"), "get", "adapters", "--bogus"}, absl::Seconds(30));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.stderr_text, HasSubstr("error: "));
}

}  // namespace
}  // namespace rxfleet::cli
