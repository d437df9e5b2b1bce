// The acceptance run of hold auto-tuning on an emulated fleet, with every part real: the
// server, two agents under rxfleet-emulate with eight RTL8922AU each, and rxfleetctl as the
// operator. The hosts' traffic follows SYNTHETIC curves (tests/labs/tuning-*.yaml, labelled as
// such, not measurements), each with its optimum between the extremes:
//   x86 over USB 3 (incumbent 32 µs, the built-in default): throughput peaks at 128 µs;
//   Pi 1 over USB 2 (incumbent 1024 µs): every hold below 512 µs drops half the frames, and
//   512 µs delivers 20 % more than 1024 µs.
// Expected: the tuning proposes 128 µs and 512 µs, drops 32 µs and 128 µs on the Pi 1 by the
// drop guardrail soon after they first ran and never runs them again, stays within its
// window budget and adapter share, and `rxfleetctl tune approve` writes policies that put the
// proposed holds into every adapter's register.

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/proto/time.h"
#include "nlohmann/json.hpp"
#include "rxfleet/v1/fleet_service.grpc.pb.h"
#include "tests/e2e/experiment/emulated_fleet.h"
#include "tests/support/fast_hold_tuning.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"

namespace rxfleet {
namespace {

using ::rxfleet::testing::BinaryPath;
using ::rxfleet::testing::EmulatedHost;
using ::rxfleet::testing::ProcessResult;
using ::rxfleet::testing::ReadJsonFile;
using ::rxfleet::testing::RunProcess;
using ::rxfleet::testing::WaitFor;
using ::rxfleet::testing::WithDeadline;
using ::testing::HasSubstr;

// The tuning is FastHoldTuningYaml (tests/support/fast_hold_tuning.h).
constexpr int kAdaptersPerHost = 8;

class HoldTuningTest : public ::rxfleet::testing::EmulatedFleetTest {
 protected:
  HoldTuningTest()
      : EmulatedFleetTest("rxfleet-hold-tuning", [] {
          std::vector<EmulatedHost> hosts(2);
          hosts[0] = {"x86-1", "tuning-x86-usb3", "x86", nullptr, ""};
          hosts[1] = {"pi1-1", "tuning-pi1-usb2", "pi1", nullptr, ""};
          return hosts;
        }()) {}

  ProcessResult Ctl(std::vector<std::string> args) {
    std::vector<std::string> argv = {BinaryPath("cli/rxfleetctl"), "--insecure", "--server",
                                     address_};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv, absl::Seconds(30));
  }

  // Every adapter of the host `label_selector` matches observes `hold_us`.
  bool AllObserve(const std::string& label_selector, uint32_t hold_us) {
    return EmulatedFleetTest::AllObserve(label_selector, kAdaptersPerHost, hold_us);
  }

  // How many of the host's adapters observe a hold other than `incumbent_us` now.
  size_t OffIncumbent(const std::string& label_selector, uint32_t incumbent_us) {
    size_t off = 0;
    for (const v1::Adapter& a : Adapters(label_selector)) {
      if (a.status().has_observed() && a.status().observed().decoded().hold_us() != incumbent_us) {
        ++off;
      }
    }
    return off;
  }

  std::optional<v1::HoldTuning> GetTuning() {
    v1::GetHoldTuningRequest request;
    request.set_name("hold-e2e");
    v1::HoldTuning tuning;
    grpc::ClientContext context;
    if (!fleet_->GetHoldTuning(WithDeadline(&context), request, &tuning).ok()) {
      return std::nullopt;
    }
    return tuning;
  }

  std::vector<v1::Event> Events() {
    v1::ListEventsRequest request;
    request.set_involved_object_kind("HoldTuning");
    request.set_page_size(1000);
    v1::ListEventsResponse response;
    grpc::ClientContext context;
    if (!fleet_->ListEvents(WithDeadline(&context), request, &response).ok()) return {};
    return {response.events().begin(), response.events().end()};
  }
};

const v1::HoldTuningSegment* FindSegment(const v1::HoldTuning& tuning, const std::string& board) {
  for (const v1::HoldTuningSegment& segment : tuning.status().segments()) {
    auto it = segment.segment().find("board");
    if (it != segment.segment().end() && it->second == board) return &segment;
  }
  return nullptr;
}

TEST_F(HoldTuningTest, ProposesTheSyntheticOptimumPerSegmentAndApproveWritesTheRegisters) {
  // Sixteen adapters at the built-in default: 32 µs at SuperSpeed, 1024 µs at high-speed.
  ASSERT_TRUE(WaitFor([&] { return AllObserve("board=x86", 32) && AllObserve("board=pi1", 1024); },
                      absl::Seconds(90)))
      << Logs();

  const std::string file = dir_.File("hold-e2e.yaml");
  std::ofstream(file) << ::rxfleet::testing::FastHoldTuningYaml("hold-e2e");
  ProcessResult created = Ctl({"tune", "create", "-f", file});
  ASSERT_EQ(created.exit_code, 0) << created.stderr_text << created.stdout_text;
  EXPECT_THAT(created.stdout_text, HasSubstr("hold-e2e"));
  const absl::Time start = absl::Now();

  // While it explores, at most half of each segment runs a challenger at once.
  size_t most_off_x86 = 0;
  size_t most_off_pi1 = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        most_off_x86 = std::max(most_off_x86, OffIncumbent("board=x86", 32));
        most_off_pi1 = std::max(most_off_pi1, OffIncumbent("board=pi1", 1024));
        std::optional<v1::HoldTuning> t = GetTuning();
        if (!t.has_value() || t->status().segments_size() != 2) return false;
        for (const v1::HoldTuningSegment& s : t->status().segments()) {
          if (s.phase() == "exploring") return false;
        }
        return true;
      },
      absl::Seconds(300)))
      << GetTuning().value_or(v1::HoldTuning{}).DebugString() << Logs();
  EXPECT_LE(most_off_x86, kAdaptersPerHost / 2);
  EXPECT_LE(most_off_pi1, kAdaptersPerHost / 2);

  const v1::HoldTuning proposed = *GetTuning();
  const v1::HoldTuningSegment* x86 = FindSegment(proposed, "x86");
  const v1::HoldTuningSegment* pi1 = FindSegment(proposed, "pi1");
  ASSERT_NE(x86, nullptr);
  ASSERT_NE(pi1, nullptr);
  ASSERT_EQ(x86->phase(), "proposed") << x86->message() << "\n" << x86->evidence_text();
  ASSERT_EQ(pi1->phase(), "proposed") << pi1->message() << "\n" << pi1->evidence_text();
  EXPECT_EQ(x86->proposal().hold_us(), 128u) << x86->evidence_text();
  EXPECT_EQ(pi1->proposal().hold_us(), 512u) << pi1->evidence_text();
  // Within its budget of windows on challengers.
  for (const v1::HoldTuningSegment* s : {x86, pi1}) {
    EXPECT_GT(s->committed_windows(), 0u);
    EXPECT_LE(s->committed_windows(), 240u);
  }
  // The drop guardrail ruled out every hold below 512 µs on the Pi 1, within the detection
  // time of its rule (minAdaptersPerArm adapters with minWindowsPerArm valid windows: a few
  // switchback blocks), and those holds never ran again.
  std::map<uint32_t, absl::Time> dropped;
  for (const v1::HoldTuningCandidate& c : pi1->candidates()) {
    if (c.hold_us() < 512) {
      EXPECT_EQ(c.status(), "guardrail") << c.hold_us() << " " << c.message();
      dropped[c.hold_us()] = common::TimeFromProto(c.change_time());
    }
  }
  ASSERT_EQ(dropped.size(), 2u);
  for (const auto& [hold, when] : dropped) {
    EXPECT_LT(when - start, absl::Seconds(90)) << hold;
  }

  // The operator reads the proposal with its evidence.
  ProcessResult described = Ctl({"tune", "describe", "hold-e2e"});
  ASSERT_EQ(described.exit_code, 0) << described.stderr_text;
  std::cout << described.stdout_text << std::endl;  // what an operator reads, in the test log
  EXPECT_THAT(described.stdout_text, HasSubstr("proposed"));
  EXPECT_THAT(described.stdout_text, HasSubstr("guardrail"));

  // Nothing is written before approval: the adapters run their policies (the defaults).
  EXPECT_TRUE(WaitFor([&] { return AllObserve("board=x86", 32) && AllObserve("board=pi1", 1024); },
                      absl::Seconds(20)))
      << Logs();

  ProcessResult approved = Ctl({"tune", "approve", "hold-e2e"});
  ASSERT_EQ(approved.exit_code, 0) << approved.stderr_text << approved.stdout_text;
  EXPECT_TRUE(WaitFor([&] { return AllObserve("board=x86", 128) && AllObserve("board=pi1", 512); },
                      absl::Seconds(30)))
      << Logs();
  const v1::HoldTuning adopted = *GetTuning();
  EXPECT_EQ(FindSegment(adopted, "x86")->phase(), "rechecking");
  EXPECT_EQ(FindSegment(adopted, "x86")->incumbent_hold_us(), 128u);
  EXPECT_EQ(FindSegment(adopted, "pi1")->incumbent_hold_us(), 512u);

  // The approval went through the audited policy path.
  v1::ListEventsRequest audit;
  audit.set_audit(true);
  audit.set_page_size(1000);
  v1::ListEventsResponse audited;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(fleet_->ListEvents(WithDeadline(&context), audit, &audited).ok());
  }
  int policy_writes = 0;
  bool approval = false;
  for (const v1::Event& e : audited.events()) {
    if (e.involved_object().kind() == "Policy" &&
        e.reason().find("ApplyPolicy") != std::string::npos) {
      ++policy_writes;
    }
    if (e.involved_object().kind() == "HoldTuning" &&
        e.reason().find("ApproveHoldTuning") != std::string::npos) {
      approval = true;
    }
  }
  EXPECT_EQ(policy_writes, 2);
  EXPECT_TRUE(approval);

  // The emulated registers agree with what the agents reported.
  for (EmulatedHost& host : hosts_) {
    host.process->Terminate(absl::Seconds(15));
    host.process.reset();
    absl::StatusOr<nlohmann::json> state = ReadJsonFile(host.state_file);
    ASSERT_TRUE(state.ok()) << state.status();
    ASSERT_EQ(state->at("devices").size(), static_cast<size_t>(kAdaptersPerHost)) << host.id;
    for (const nlohmann::json& device : state->at("devices")) {
      EXPECT_EQ(device.at("hold_us").get<int64_t>(), host.board == "pi1" ? 512 : 128)
          << host.id << " " << device.at("name");
    }
  }
}

}  // namespace
}  // namespace rxfleet
