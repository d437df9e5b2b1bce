// The plan of policy probe slots (server/registry/probe_slots.h): runs against one iperf3
// server never overlap (checked by simulating every run over a common period), servers are
// independent, numbers are sticky across joins and leaves, adapters whose probe no server
// policy decides get no slot, and an overcommitted group wraps and is noted once per change.

#include "server/registry/probe_slots.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/experiment/experiment.h"
#include "common/probe/probe_spec.h"

namespace rxfleet::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

common::Policy ProbePolicy(std::string name, std::string server, absl::Duration duration,
                           absl::Duration interval, int priority = 0) {
  common::Policy policy;
  policy.name = std::move(name);
  policy.priority = priority;
  common::ProbeSpec probe;
  probe.server_host = std::move(server);
  probe.duration = duration;
  probe.interval = interval;
  policy.probe = probe;
  return policy;
}

common::AdapterAttributes Adapter(std::string host, std::string id,
                                  common::UsbSpeed speed = common::UsbSpeed::kSuper,
                                  std::map<std::string, std::string> labels = {}) {
  common::AdapterAttributes a;
  a.host = std::move(host);
  a.adapter_id = std::move(id);
  a.chip = "rtl8922au";
  a.family = "rtw89";
  a.vid = 0x0bda;
  a.pid = 0x8912;
  a.usb_speed = speed;
  a.host_labels = std::move(labels);
  return a;
}

// host/adapter -> offset of every slot of the plan for `hosts`.
std::map<std::string, absl::Duration> Offsets(const ProbeSlotPlan& plan,
                                              const std::vector<std::string>& hosts) {
  std::map<std::string, absl::Duration> out;
  for (const std::string& host : hosts) {
    for (const ProbeSlotEntry& slot : plan.HostSlots(host)) {
      out[host + "/" + slot.adapter_id] = slot.offset;
    }
  }
  return out;
}

struct Run {
  absl::Duration start;
  absl::Duration duration;
  std::string who;
};

// Every run of the given (offset, duration, interval) in [0, horizon), sorted; EXPECTs that
// consecutive runs leave at least kProbeSlotMargin between them (so none overlap).
void ExpectNoOverlap(
    const std::vector<std::tuple<std::string, absl::Duration, absl::Duration, absl::Duration>>&
        probes,
    absl::Duration horizon) {
  std::vector<Run> runs;
  for (const auto& [who, offset, duration, interval] : probes) {
    ASSERT_GE(offset, absl::ZeroDuration()) << who;
    ASSERT_LT(offset, interval) << who;
    for (absl::Duration t = offset; t < horizon; t += interval) runs.push_back({t, duration, who});
  }
  std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) { return a.start < b.start; });
  ASSERT_GE(runs.size(), probes.size());
  for (size_t i = 1; i < runs.size(); ++i) {
    EXPECT_GE(runs[i].start - (runs[i - 1].start + runs[i - 1].duration),
              experiments::kProbeSlotMargin)
        << runs[i - 1].who << " at " << runs[i - 1].start << " and " << runs[i].who << " at "
        << runs[i].start;
  }
}

TEST(ProbeSlotPlanTest, AdaptersOfOneServerAcrossHostsNeverOverlap) {
  // 10 s probes every 2 min: slots of 12 s, 10 of them fit.
  const std::vector<common::Policy> policies = {
      ProbePolicy("iperf", "10.0.0.5", absl::Seconds(10), absl::Minutes(2))};
  std::vector<common::AdapterAttributes> adapters;
  std::vector<std::string> hosts;
  for (int h = 0; h < 3; ++h) {
    hosts.push_back("host-" + std::to_string(h));
    for (int a = 0; a < 3; ++a)
      adapters.push_back(Adapter(hosts.back(), "port-" + std::to_string(a)));
  }
  ProbeSlotPlan plan;
  plan.Reset(policies, adapters);
  std::vector<std::tuple<std::string, absl::Duration, absl::Duration, absl::Duration>> probes;
  for (const std::string& host : hosts) {
    const std::vector<ProbeSlotEntry> slots = plan.HostSlots(host);
    ASSERT_THAT(slots, SizeIs(3)) << host;
    for (const ProbeSlotEntry& slot : slots) {
      EXPECT_EQ(slot.policy, "iperf");
      probes.emplace_back(host + "/" + slot.adapter_id, slot.offset, absl::Seconds(10),
                          absl::Minutes(2));
    }
  }
  ExpectNoOverlap(probes, absl::Hours(1));
  // Numbers in (host, adapter) order: host-0/port-0 first, host-2/port-2 ninth.
  EXPECT_EQ(plan.HostSlots("host-0")[0].offset, absl::Seconds(1));
  EXPECT_EQ(plan.HostSlots("host-2")[2].offset, absl::Seconds(8 * 12 + 1));
  ASSERT_THAT(plan.Groups(), SizeIs(1));
  EXPECT_EQ(plan.Groups()[0].server, "10.0.0.5:5201");
  EXPECT_EQ(plan.Groups()[0].slot_length, absl::Seconds(12));
  EXPECT_EQ(plan.Groups()[0].cycle, absl::Minutes(2));
  EXPECT_EQ(plan.Groups()[0].slots, 9u);
  EXPECT_FALSE(plan.Groups()[0].overcommitted());
  EXPECT_THAT(plan.TakeNotes(), IsEmpty());
}

TEST(ProbeSlotPlanTest, MixedDurationsAndIntervalsOnOneServerNeverOverlap) {
  // Two policies against one server: 5 s every 1 min (USB 3) and 20 s every 3 min (USB 2).
  // L = 20 s + 2 s, C = gcd(1 min, 3 min) = 1 min: two slots fit.
  common::Policy fast = ProbePolicy("fast", "iperf.lab", absl::Seconds(5), absl::Minutes(1));
  fast.selector.usb_speeds = {common::UsbSpeed::kSuper};
  common::Policy slow = ProbePolicy("slow", "iperf.lab", absl::Seconds(20), absl::Minutes(3));
  slow.selector.usb_speeds = {common::UsbSpeed::kHigh};
  ProbeSlotPlan plan;
  plan.Reset({fast, slow}, {Adapter("a", "port-1", common::UsbSpeed::kSuper),
                            Adapter("b", "port-1", common::UsbSpeed::kHigh)});
  ASSERT_THAT(plan.Groups(), SizeIs(1));
  EXPECT_EQ(plan.Groups()[0].slot_length, absl::Seconds(22));
  EXPECT_EQ(plan.Groups()[0].cycle, absl::Minutes(1));
  ASSERT_THAT(plan.HostSlots("a"), SizeIs(1));
  ASSERT_THAT(plan.HostSlots("b"), SizeIs(1));
  EXPECT_EQ(plan.HostSlots("a")[0].policy, "fast");
  EXPECT_EQ(plan.HostSlots("b")[0].policy, "slow");
  ExpectNoOverlap({{"a", plan.HostSlots("a")[0].offset, absl::Seconds(5), absl::Minutes(1)},
                   {"b", plan.HostSlots("b")[0].offset, absl::Seconds(20), absl::Minutes(3)}},
                  absl::Hours(1));
}

TEST(ProbeSlotPlanTest, DifferentServersAreIndependent) {
  common::Policy lab1 = ProbePolicy("lab1", "10.0.0.1", absl::Seconds(10), absl::Minutes(1));
  lab1.selector.match_labels = {{"site", "one"}};
  common::Policy lab2 = ProbePolicy("lab2", "10.0.0.2", absl::Seconds(10), absl::Minutes(1));
  lab2.selector.match_labels = {{"site", "two"}};
  ProbeSlotPlan plan;
  plan.Reset({lab1, lab2}, {Adapter("a", "port-1", common::UsbSpeed::kSuper, {{"site", "one"}}),
                            Adapter("a", "port-2", common::UsbSpeed::kSuper, {{"site", "one"}}),
                            Adapter("b", "port-1", common::UsbSpeed::kSuper, {{"site", "two"}})});
  EXPECT_THAT(plan.HostSlots("a"),
              ElementsAre(ProbeSlotEntry{"port-1", "lab1", absl::Seconds(1)},
                          ProbeSlotEntry{"port-2", "lab1", absl::Seconds(13)}));
  // First of its own server: the first slot, although host a holds two of the other's.
  EXPECT_THAT(plan.HostSlots("b"), ElementsAre(ProbeSlotEntry{"port-1", "lab2", absl::Seconds(1)}));
  EXPECT_THAT(plan.Groups(), SizeIs(2));
}

TEST(ProbeSlotPlanTest, NumbersAreStickyWhenAdaptersJoinAndLeave) {
  const std::vector<common::Policy> policies = {
      ProbePolicy("iperf", "10.0.0.5", absl::Seconds(10), absl::Minutes(5))};
  ProbeSlotPlan plan;
  plan.Reset(policies, {Adapter("a", "port-1"), Adapter("b", "port-1"), Adapter("c", "port-1")});
  const std::vector<std::string> hosts = {"a", "b", "c", "d"};
  EXPECT_EQ(Offsets(plan, hosts),
            (std::map<std::string, absl::Duration>{{"a/port-1", absl::Seconds(1)},
                                                   {"b/port-1", absl::Seconds(13)},
                                                   {"c/port-1", absl::Seconds(25)}}));
  // b leaves: nobody else moves.
  plan.SetHost("b", {});
  EXPECT_EQ(Offsets(plan, hosts),
            (std::map<std::string, absl::Duration>{{"a/port-1", absl::Seconds(1)},
                                                   {"c/port-1", absl::Seconds(25)}}));
  // d joins and takes the lowest free number (b's); a's second adapter takes the next one.
  plan.SetHost("d", {Adapter("d", "port-9")});
  plan.SetHost("a", {Adapter("a", "port-1"), Adapter("a", "port-2")});
  EXPECT_EQ(Offsets(plan, hosts),
            (std::map<std::string, absl::Duration>{{"a/port-1", absl::Seconds(1)},
                                                   {"a/port-2", absl::Seconds(37)},
                                                   {"c/port-1", absl::Seconds(25)},
                                                   {"d/port-9", absl::Seconds(13)}}));
  // Rebuilding from the whole fleet (a policy change elsewhere), in any order, moves nobody.
  const std::map<std::string, absl::Duration> before = Offsets(plan, hosts);
  plan.Reset(policies, {Adapter("d", "port-9"), Adapter("c", "port-1"), Adapter("a", "port-2"),
                        Adapter("a", "port-1")});
  EXPECT_EQ(Offsets(plan, hosts), before);
  // A longer probe changes L, so every offset of the group moves, numbers stay.
  plan.Reset({ProbePolicy("iperf", "10.0.0.5", absl::Seconds(20), absl::Minutes(5))},
             {Adapter("d", "port-9"), Adapter("c", "port-1"), Adapter("a", "port-2"),
              Adapter("a", "port-1")});
  EXPECT_EQ(Offsets(plan, hosts),
            (std::map<std::string, absl::Duration>{{"a/port-1", absl::Seconds(1)},
                                                   {"a/port-2", absl::Seconds(67)},
                                                   {"c/port-1", absl::Seconds(45)},
                                                   {"d/port-9", absl::Seconds(23)}}));
  // Hosts left out of a rebuild lose their slots.
  plan.Reset(policies, {Adapter("c", "port-1")});
  EXPECT_EQ(Offsets(plan, hosts),
            (std::map<std::string, absl::Duration>{{"c/port-1", absl::Seconds(25)}}));
  ASSERT_THAT(plan.Groups(), SizeIs(1));
  EXPECT_EQ(plan.Groups()[0].members, 1u);
  EXPECT_EQ(plan.Groups()[0].slots, 3u);  // number 2 is still in use
}

TEST(ProbeSlotPlanTest, AdaptersWhoseProbeNoPolicyDecidesGetNoSlot) {
  common::Policy usb3 = ProbePolicy("usb3-probe", "10.0.0.5", absl::Seconds(10), absl::Hours(1));
  usb3.selector.usb_speeds = {common::UsbSpeed::kSuper};
  // Outranks usb3-probe on every adapter but sets no probe: it does not decide probes.
  common::Policy hold;
  hold.name = "hold-only";
  hold.priority = 100;
  hold.settings.hold_us = 1024;
  // Outranks usb3-probe on host b: decides b's probe, against another server.
  common::Policy lab = ProbePolicy("lab", "10.0.0.9", absl::Seconds(10), absl::Hours(1), 10);
  lab.selector.match_labels = {{"site", "lab"}};
  ProbeSlotPlan plan;
  plan.Reset({hold, lab, usb3},
             {Adapter("a", "port-1", common::UsbSpeed::kSuper),
              Adapter("a", "port-2", common::UsbSpeed::kHigh),
              Adapter("b", "port-1", common::UsbSpeed::kSuper, {{"site", "lab"}})});
  EXPECT_THAT(plan.HostSlots("a"),
              ElementsAre(ProbeSlotEntry{"port-1", "usb3-probe", absl::Seconds(1)}));
  EXPECT_THAT(plan.HostSlots("b"), ElementsAre(ProbeSlotEntry{"port-1", "lab", absl::Seconds(1)}));
  EXPECT_THAT(plan.probe_policies(), SizeIs(2));

  // Without probe policies nobody has a slot.
  plan.Reset({hold}, {Adapter("a", "port-1"), Adapter("b", "port-1")});
  EXPECT_THAT(plan.HostSlots("a"), IsEmpty());
  EXPECT_THAT(plan.HostSlots("b"), IsEmpty());
  EXPECT_THAT(plan.Groups(), IsEmpty());
}

TEST(ProbeSlotPlanTest, AnOvercommittedGroupWrapsAndIsNotedOncePerChange) {
  // 10 s every 1 min: slots of 12 s, exactly 5 fit.
  const std::vector<common::Policy> policies = {
      ProbePolicy("iperf", "10.0.0.5", absl::Seconds(10), absl::Minutes(1))};
  std::vector<common::AdapterAttributes> five;
  for (int i = 0; i < 5; ++i) five.push_back(Adapter("host-" + std::to_string(i), "port-1"));
  ProbeSlotPlan plan;
  plan.Reset(policies, five);
  EXPECT_THAT(plan.TakeNotes(), IsEmpty());
  EXPECT_EQ(plan.HostSlots("host-4")[0].offset, absl::Seconds(49));

  plan.SetHost("host-5", {Adapter("host-5", "port-1")});
  // Number 5 starts at 61 s: wrapped to 1 s, on top of host-0.
  EXPECT_EQ(plan.HostSlots("host-5")[0].offset, absl::Seconds(1));
  ASSERT_THAT(plan.Groups(), SizeIs(1));
  EXPECT_TRUE(plan.Groups()[0].overcommitted());
  std::vector<ProbeSlotNote> notes = plan.TakeNotes();
  ASSERT_THAT(notes, SizeIs(1));
  EXPECT_TRUE(notes[0].overlap);
  EXPECT_THAT(notes[0].message,
              HasSubstr("probe slots against 10.0.0.5:5201 overlap: 6 slots of 12s need 1m12s, "
                        "more than the 1m cycle"));
  // A change that leaves the numbers as they are says nothing more.
  plan.SetHost("host-5", {Adapter("host-5", "port-1")});
  plan.Reset(policies, [&] {
    std::vector<common::AdapterAttributes> all = five;
    all.push_back(Adapter("host-5", "port-1"));
    return all;
  }());
  EXPECT_THAT(plan.TakeNotes(), IsEmpty());
  // One more: one note with the new numbers.
  plan.SetHost("host-6", {Adapter("host-6", "port-1")});
  notes = plan.TakeNotes();
  ASSERT_THAT(notes, SizeIs(1));
  EXPECT_THAT(notes[0].message, HasSubstr("7 slots of 12s need 1m24s"));
  // Back to five: fits again, one note.
  plan.SetHost("host-6", {});
  plan.SetHost("host-5", {});
  notes = plan.TakeNotes();
  ASSERT_THAT(notes, SizeIs(2));
  EXPECT_TRUE(notes[0].overlap);
  EXPECT_FALSE(notes[1].overlap);
  EXPECT_THAT(notes[1].message, HasSubstr("fit again: 5 slots of 12s in the 1m cycle"));
}

TEST(ProbeSlotPlanTest, AtFleetScaleAHostsChangeMovesOnlyThatHost) {
  // 10,000 hosts with 4 adapters each against one server; 10 s probes weekly fit 50,400.
  const std::vector<common::Policy> policies = {
      ProbePolicy("weekly", "10.0.0.5", absl::Seconds(10), absl::Hours(7 * 24))};
  std::vector<common::AdapterAttributes> adapters;
  for (int h = 0; h < 10000; ++h) {
    for (int a = 0; a < 4; ++a) {
      adapters.push_back(Adapter(absl::StrFormat("host-%05d", h), absl::StrCat("port-", a)));
    }
  }
  ProbeSlotPlan plan;
  plan.Reset(policies, adapters);
  ASSERT_THAT(plan.Groups(), SizeIs(1));
  EXPECT_EQ(plan.Groups()[0].slots, 40000u);
  EXPECT_FALSE(plan.Groups()[0].overcommitted());
  const std::vector<ProbeSlotEntry> last = plan.HostSlots("host-09999");
  ASSERT_THAT(last, SizeIs(4));
  EXPECT_EQ(last[3].offset, absl::Seconds(39999 * 12 + 1));
  // Every host re-reports one adapter fewer, then all four again (a reconnect storm): each
  // change is one host's, and in the end every adapter has its number back or a free one.
  for (int h = 0; h < 10000; ++h) {
    const std::string host = absl::StrFormat("host-%05d", h);
    plan.SetHost(host, {Adapter(host, "port-0"), Adapter(host, "port-1"), Adapter(host, "port-2")});
  }
  EXPECT_EQ(plan.Groups()[0].members, 30000u);
  EXPECT_EQ(plan.HostSlots("host-09999"),
            std::vector<ProbeSlotEntry>(last.begin(), last.end() - 1));
  for (int h = 0; h < 10000; ++h) {
    const std::string host = absl::StrFormat("host-%05d", h);
    plan.SetHost(host, {Adapter(host, "port-0"), Adapter(host, "port-1"), Adapter(host, "port-2"),
                        Adapter(host, "port-3")});
  }
  EXPECT_EQ(plan.Groups()[0].members, 40000u);
  EXPECT_EQ(plan.Groups()[0].slots, 40000u);
  EXPECT_EQ(plan.HostSlots("host-09999"), last);
}

}  // namespace
}  // namespace rxfleet::server
