#include "server/experiments/assignment.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace rxfleet::experiments {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const absl::Time kStart = absl::FromUnixSeconds(1767225600);  // 2026-01-01 00:00:00 UTC

Experiment Parse(const std::string& spec) {
  absl::StatusOr<Experiment> e = ParseExperiment(
      "apiVersion: rxfleet/v1\nkind: Experiment\nmetadata: {name: hold-test}\nspec:\n" + spec,
      "t.yaml");
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *e : Experiment{};
}

Assigner Make(const Experiment& e) {
  absl::StatusOr<Assigner> a = Assigner::Create(e, kStart);
  EXPECT_TRUE(a.ok()) << a.status();
  return *std::move(a);
}

const char kParallel[] = R"(  arms:
    - {name: control, settings: {hold: 1024us}, weight: 1}
    - {name: short, settings: {hold: 32us}, weight: 3}
  design: parallel
  duration: 24h
  burnIn: 10m
  primaryMetric: rx_throughput_bps
  segments: [usb_speed]
)";

const char kSwitchback[] = R"(  arms:
    - {name: control, settings: {hold: 1024us}, weight: 1}
    - {name: short, settings: {hold: 32us}, weight: 2}
    - {name: mid, settings: {hold: 256us}, weight: 1}
  design: switchback
  duration: 25h
  periodLength: 30m
  burnIn: 5m
  primaryMetric: rx_throughput_bps
  segments: [usb_speed]
)";

TEST(StableHashTest, KnownVectors) {
  // FNV-1a 64 test vectors (Fowler/Noll/Vo reference test suite).
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ULL);
  // SplitMix64 from state 0 (reference implementation by Vigna).
  SplitMix64 rng(0);
  EXPECT_EQ(rng.Next(), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(rng.Next(), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(rng.Next(), 0x06c45d188009454fULL);
  EXPECT_EQ(AdapterKey("pi-7", "port-1-2"), "pi-7/port-1-2");
}

TEST(SplitMix64Test, BelowIsUniform) {
  SplitMix64 rng(42);
  std::vector<int> counts(3, 0);
  for (int i = 0; i < 30000; ++i) ++counts[rng.Below(3)];
  for (int c : counts) EXPECT_NEAR(c, 10000, 300);
  EXPECT_EQ(rng.Below(1), 0u);
}

TEST(ParallelTest, StableAcrossCallsInstancesAndTime) {
  const Experiment e = Parse(kParallel);
  const Assigner a = Make(e);
  const Assigner b = Make(e);
  for (int i = 0; i < 200; ++i) {
    const std::string key = AdapterKey(absl::StrCat("host-", i), "port-1");
    const size_t arm = a.ScheduledArm(key, 0);
    EXPECT_EQ(b.ScheduledArm(key, 0), arm);
    for (absl::Duration offset : {absl::ZeroDuration(), absl::Hours(5), absl::Hours(23)}) {
      absl::StatusOr<Assignment> x = a.Assign(key, {"super"}, kStart + offset, {});
      ASSERT_TRUE(x.ok()) << x.status();
      EXPECT_EQ(x->arm_index, arm);
      EXPECT_EQ(x->period_index, 0u);
      EXPECT_EQ(x->period_start, kStart);
      EXPECT_EQ(x->period_end, kStart + absl::Hours(24));
    }
  }
}

// Pins the mapping itself, so a change of hash, input layout or weight mapping (which would
// silently reassign a running fleet after an upgrade) fails here.
TEST(ParallelTest, GoldenAssignments) {
  const Assigner a = Make(Parse(kParallel));
  std::vector<std::string> arms;
  for (int i = 0; i < 12; ++i) {
    arms.push_back(a.experiment().arms[a.ScheduledArm(AdapterKey("h", absl::StrCat(i)), 0)].name);
  }
  // Worked out independently from the documented algorithm (FNV-1a 64 + fmix64 of
  // "parallel\0hold-test\0" "0\0h/<i>", mod 4, weights control 1 : short 3).
  EXPECT_THAT(arms, ElementsAre("short", "short", "short", "short", "short", "short", "short",
                                "short", "short", "short", "short", "control"));
}

TEST(SwitchbackTest, GoldenSchedule) {
  const Assigner a = Make(Parse(kSwitchback));
  std::vector<std::string> arms;
  for (uint32_t k = 0; k < 12; ++k)
    arms.push_back(a.experiment().arms[a.ScheduledArm("h/1", k)].name);
  // Worked out independently: per block, Fisher-Yates over {control, short, short, mid} with
  // SplitMix64 seeded by the stable hash of "switchback\0hold-test\0" "0\0h/1\0<block>".
  EXPECT_THAT(arms, ElementsAre("short", "short", "mid", "control", "short", "control", "mid",
                                "short", "mid", "control", "short", "short"));
}

TEST(ParallelTest, WeightsRespectedOver10000Adapters) {
  const Assigner a = Make(Parse(kParallel));  // control 1 : short 3
  int short_count = 0;
  for (int i = 0; i < 10000; ++i) {
    short_count +=
        a.ScheduledArm(AdapterKey(absl::StrCat("host-", i / 4), absl::StrCat(i % 4)), 0) == 1;
  }
  // Expected 7500; the binomial sd is 43, so +-200 is a tolerance of ~4.6 sd.
  EXPECT_NEAR(short_count, 7500, 200);
}

TEST(ParallelTest, NameAndSeedChangeTheAssignment) {
  Experiment e = Parse(kParallel);
  const Assigner a = Make(e);
  e.name = "hold-other";
  const Assigner b = Make(e);
  e.name = "hold-test";
  e.seed = 7;
  const Assigner c = Make(e);
  int differ_b = 0, differ_c = 0;
  for (int i = 0; i < 1000; ++i) {
    const std::string key = absl::StrCat("h/", i);
    differ_b += a.ScheduledArm(key, 0) != b.ScheduledArm(key, 0);
    differ_c += a.ScheduledArm(key, 0) != c.ScheduledArm(key, 0);
  }
  // Independent 1:3 assignments differ with probability 2 * 0.25 * 0.75 = 0.375.
  EXPECT_NEAR(differ_b, 375, 60);
  EXPECT_NEAR(differ_c, 375, 60);
}

TEST(ParallelTest, BurnInAndRange) {
  const Assigner a = Make(Parse(kParallel));
  EXPECT_TRUE(a.Assign("h/1", {"super"}, kStart, {})->in_burn_in);
  EXPECT_TRUE(a.Assign("h/1", {"super"}, kStart + absl::Minutes(10) - absl::Nanoseconds(1), {})
                  ->in_burn_in);
  EXPECT_FALSE(a.Assign("h/1", {"super"}, kStart + absl::Minutes(10), {})->in_burn_in);
  EXPECT_EQ(a.Assign("h/1", {"super"}, kStart - absl::Seconds(1), {}).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(a.Assign("h/1", {"super"}, kStart + absl::Hours(24), {}).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_THAT(a.Assign("h/1", {}, kStart, {}).status().message(),
              HasSubstr("has 0 segment values; experiment 'hold-test' has 1 segment keys"));
}

TEST(SwitchbackTest, EveryBlockIsBalanced) {
  const Assigner a = Make(Parse(kSwitchback));  // weights 1:2:1, block of 4 periods
  ASSERT_EQ(a.PeriodCount(), 50u);              // 25h / 30m
  std::set<std::vector<size_t>> orders;
  for (int i = 0; i < 300; ++i) {
    const std::string key = AdapterKey(absl::StrCat("host-", i), "port-1");
    for (uint32_t block = 0; block < 12; ++block) {
      std::vector<size_t> order;
      std::vector<int> count(3, 0);
      for (uint32_t k = block * 4; k < block * 4 + 4; ++k) {
        const size_t arm = a.ScheduledArm(key, k);
        ++count[arm];
        order.push_back(arm);
        EXPECT_EQ(a.ScheduledArm(key, k), arm) << "not stable";
      }
      EXPECT_THAT(count, ElementsAre(1, 2, 1)) << key << " block " << block;
      orders.insert(order);
    }
  }
  // The order is randomised: all 4!/2! = 12 arrangements of {control, short, short, mid} occur.
  EXPECT_EQ(orders.size(), 12u);
}

TEST(SwitchbackTest, PeriodAndBurnInBoundaries) {
  const Assigner a = Make(Parse(kSwitchback));
  const std::vector<std::string> segment = {"super"};
  auto at = [&](absl::Duration offset) {
    absl::StatusOr<Assignment> x = a.Assign("h/1", segment, kStart + offset, {});
    EXPECT_TRUE(x.ok()) << x.status();
    return *x;
  };
  EXPECT_EQ(at(absl::ZeroDuration()).period_index, 0u);
  EXPECT_TRUE(at(absl::ZeroDuration()).in_burn_in);
  EXPECT_TRUE(at(absl::Minutes(5) - absl::Nanoseconds(1)).in_burn_in);
  EXPECT_FALSE(at(absl::Minutes(5)).in_burn_in);
  EXPECT_EQ(at(absl::Minutes(30) - absl::Nanoseconds(1)).period_index, 0u);
  EXPECT_FALSE(at(absl::Minutes(30) - absl::Nanoseconds(1)).in_burn_in);
  const Assignment p1 = at(absl::Minutes(30));
  EXPECT_EQ(p1.period_index, 1u);
  EXPECT_TRUE(p1.in_burn_in);
  EXPECT_EQ(p1.period_start, kStart + absl::Minutes(30));
  EXPECT_EQ(p1.period_end, kStart + absl::Minutes(60));
  EXPECT_EQ(p1.burn_in_end, kStart + absl::Minutes(35));
  EXPECT_EQ(p1.arm_index, a.ScheduledArm("h/1", 1));
  EXPECT_EQ(p1.arm, a.experiment().arms[p1.arm_index].name);
  const Assignment last = at(absl::Hours(25) - absl::Nanoseconds(1));
  EXPECT_EQ(last.period_index, 49u);
  EXPECT_EQ(last.period_end, kStart + absl::Hours(25));
  EXPECT_EQ(a.PeriodIndexAt(kStart + absl::Hours(25)).status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST(SwitchbackTest, LastPartialPeriodIsClamped) {
  Experiment e = Parse(kSwitchback);
  e.duration = absl::Hours(2) + absl::Minutes(10);
  const Assigner a = Make(e);
  EXPECT_EQ(a.PeriodCount(), 5u);
  EXPECT_EQ(a.PeriodEnd(4), kStart + absl::Hours(2) + absl::Minutes(10));
}

TEST(StoppedArmTest, SendsOnlyThatSegmentToControl) {
  const Assigner a = Make(Parse(kSwitchback));
  const std::vector<StoppedArm> stopped = {
      {"short", {"high"}, "GuardrailTripped", "rx_drop_ratio", kStart}};
  int redirected = 0, kept = 0;
  for (uint32_t k = 0; k < 8; ++k) {
    const absl::Time t = kStart + absl::Minutes(30) * k + absl::Minutes(10);
    const Assignment usb2 = *a.Assign("h/1", {"high"}, t, stopped);
    const Assignment usb3 = *a.Assign("h/1", {"super"}, t, stopped);
    EXPECT_EQ(usb2.scheduled_arm_index, usb3.scheduled_arm_index);
    if (usb2.scheduled_arm_index == 1) {
      EXPECT_TRUE(usb2.sent_to_control);
      EXPECT_EQ(usb2.arm, "control");
      EXPECT_FALSE(usb3.sent_to_control);
      EXPECT_EQ(usb3.arm, "short");
      ++redirected;
    } else {
      EXPECT_FALSE(usb2.sent_to_control);
      EXPECT_EQ(usb2.arm_index, usb2.scheduled_arm_index);
      ++kept;
    }
  }
  EXPECT_EQ(redirected, 4);  // two blocks of four periods, short twice per block
  EXPECT_EQ(kept, 4);
  // A stop for every segment (empty segment) applies everywhere; control is never redirected.
  const std::vector<StoppedArm> everywhere = {{"mid", {}, "StoppedByUser", "", kStart},
                                              {"control", {}, "StoppedByUser", "", kStart}};
  for (uint32_t k = 0; k < 8; ++k) {
    const Assignment x = *a.Assign("h/2", {"super"}, kStart + absl::Minutes(30) * k, everywhere);
    EXPECT_NE(x.arm, "mid");
    if (x.scheduled_arm_index == 0) {
      EXPECT_FALSE(x.sent_to_control);
    }
  }
}

TEST(AssignAdapterTest, SelectorAndSegments) {
  Experiment e = Parse(kParallel);
  e.selector.usb_speeds = {common::UsbSpeed::kSuper};
  const Assigner a = Make(e);
  common::AdapterAttributes adapter;
  adapter.adapter_id = "port-1";
  adapter.host = "x86-1";
  adapter.chip = "rtl8922au";
  adapter.usb_speed = common::UsbSpeed::kSuper;
  absl::StatusOr<std::optional<Assignment>> x = a.AssignAdapter(adapter, kStart, {});
  ASSERT_TRUE(x.ok()) << x.status();
  ASSERT_TRUE(x->has_value());
  EXPECT_EQ((*x)->arm_index, a.ScheduledArm("x86-1/port-1", 0));
  adapter.usb_speed = common::UsbSpeed::kHigh;
  x = a.AssignAdapter(adapter, kStart, {});
  ASSERT_TRUE(x.ok());
  EXPECT_FALSE(x->has_value());
}

TEST(AssignerTest, RejectsInvalidExperiments) {
  Experiment e = Parse(kParallel);
  e.arms[1].weight = 0;
  EXPECT_EQ(Assigner::Create(e, kStart).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Assigner::Create(Parse(kParallel), absl::InfiniteFuture()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rxfleet::experiments
