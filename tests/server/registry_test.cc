// server/registry/registry and policy_set: hosts, adapters, streams, staleness, bundles.
#include "server/registry/registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/proto/time.h"
#include "server/registry/policy_set.h"

namespace rxfleet::server {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1767225600);

v1::Hello MakeHello(const std::string& host, const std::string& board = "pi5") {
  v1::Hello hello;
  hello.set_host_id(host);
  (*hello.mutable_labels())["board"] = board;
  hello.set_agent_version("0.1.0");
  hello.set_metrics_address(host + ":9477");
  hello.add_capabilities("rx_agg.v3");
  return hello;
}

v1::Adapter MakeAdapter(const std::string& id, v1::AdapterState state = v1::ADAPTER_STATE_APPLIED) {
  v1::Adapter adapter;
  adapter.mutable_metadata()->set_name(id);
  adapter.mutable_status()->set_state(state);
  adapter.mutable_status()->set_chip("rtl8922au");
  return adapter;
}

const v1::Condition* FindCondition(const v1::Host& host, const std::string& type) {
  for (const v1::Condition& c : host.status().conditions()) {
    if (c.type() == type) return &c;
  }
  return nullptr;
}

TEST(RegistryTest, ConnectCreatesAHostAndDisconnectKeepsItListed) {
  Registry registry({}, {});
  const uint64_t stream = registry.Connect(MakeHello("h1"), "ipv4:127.0.0.1:5000", kT0);
  absl::StatusOr<v1::Host> host = registry.GetHost("h1", kT0, 1);
  ASSERT_TRUE(host.ok());
  EXPECT_TRUE(host->status().connected());
  EXPECT_EQ(host->status().peer_address(), "ipv4:127.0.0.1:5000");
  EXPECT_EQ(host->metadata().labels().at("board"), "pi5");
  EXPECT_EQ(host->status().metrics_address(), "h1:9477");
  EXPECT_EQ(FindCondition(*host, "Connected")->status(), v1::CONDITION_STATUS_TRUE);

  EXPECT_TRUE(registry.Disconnect("h1", stream, kT0 + absl::Seconds(1)));
  host = registry.GetHost("h1", kT0 + absl::Seconds(2), 1);
  EXPECT_FALSE(host->status().connected());
  EXPECT_FALSE(host->status().stale());
  EXPECT_EQ(registry.ListHosts(kT0, 1).size(), 1u);
  EXPECT_EQ(registry.GetHost("nope", kT0, 1).status().code(), absl::StatusCode::kNotFound);
}

// A page of ListHosts visits only the hosts after its token, and stops when it is full.
TEST(RegistryTest, VisitHostsStartsAfterTheGivenHostAndStopsWhenTold) {
  Registry registry({}, {});
  for (const char* id : {"h1", "h2", "h3", "h4"}) {
    registry.Connect(MakeHello(id), "ipv4:127.0.0.1:5000", kT0);
  }
  std::vector<std::string> seen;
  registry.VisitHosts(kT0, 1, "h1", [&](v1::Host host) {
    seen.push_back(host.metadata().name());
    return seen.size() < 2;
  });
  EXPECT_EQ(seen, (std::vector<std::string>{"h2", "h3"}));
  seen.clear();
  registry.VisitHosts(kT0, 1, "", [&](v1::Host host) {
    seen.push_back(host.metadata().name());
    return true;
  });
  EXPECT_EQ(seen, (std::vector<std::string>{"h1", "h2", "h3", "h4"}));
  seen.clear();
  registry.VisitHosts(kT0, 1, "h4", [&](v1::Host host) {
    seen.push_back(host.metadata().name());
    return true;
  });
  EXPECT_TRUE(seen.empty());
}

TEST(RegistryTest, HostsGoStaleAfterTheThreshold) {
  RegistryOptions options;
  options.stale_after = absl::Minutes(5);
  Registry registry(options, {});
  const uint64_t stream = registry.Connect(MakeHello("h1"), "peer", kT0);
  registry.Disconnect("h1", stream, kT0);
  EXPECT_FALSE(registry.GetHost("h1", kT0 + absl::Minutes(4), 1)->status().stale());
  EXPECT_TRUE(registry.GetHost("h1", kT0 + absl::Minutes(6), 1)->status().stale());

  // Connected but not ACKing a sent bundle is stale too.
  const uint64_t s2 = registry.Connect(MakeHello("h2"), "peer", kT0);
  registry.RecordSent("h2", s2, 3, kT0);
  registry.Touch("h2", s2, kT0 + absl::Minutes(6));
  EXPECT_TRUE(registry.GetHost("h2", kT0 + absl::Minutes(6), 3)->status().stale());
  registry.RecordAck("h2", s2, 3, kT0 + absl::Minutes(6));
  EXPECT_FALSE(registry.GetHost("h2", kT0 + absl::Minutes(6), 3)->status().stale());
}

TEST(RegistryTest, AReplacedStreamCannotWrite) {
  Registry registry({}, {});
  const uint64_t old_stream = registry.Connect(MakeHello("h1"), "peer-a", kT0);
  const uint64_t new_stream = registry.Connect(MakeHello("h1"), "peer-b", kT0);
  EXPECT_NE(old_stream, new_stream);
  EXPECT_FALSE(registry.RecordAck("h1", old_stream, 5, kT0));
  EXPECT_FALSE(registry.Disconnect("h1", old_stream, kT0));
  EXPECT_FALSE(registry.ReplaceAdapters("h1", old_stream, {MakeAdapter("port-1-1")}, kT0));
  absl::StatusOr<v1::Host> host = registry.GetHost("h1", kT0, 1);
  EXPECT_TRUE(host->status().connected());
  EXPECT_EQ(host->status().peer_address(), "peer-b");
  EXPECT_EQ(host->status().last_acked_version(), 0u);
  EXPECT_TRUE(registry.RecordAck("h1", new_stream, 5, kT0));
}

TEST(RegistryTest, InventoryReplacesAndUpdatesMerge) {
  Registry registry({}, {});
  const uint64_t stream = registry.Connect(MakeHello("h1"), "peer", kT0);
  ASSERT_TRUE(registry.ReplaceAdapters("h1", stream,
                                       {MakeAdapter("port-1-1"), MakeAdapter("port-1-2")}, kT0));
  std::vector<v1::Adapter> adapters = registry.ListAdapters(false);
  ASSERT_EQ(adapters.size(), 2u);
  EXPECT_EQ(adapters[0].host_id(), "h1");
  EXPECT_EQ(adapters[0].metadata().labels().at("board"), "pi5");

  ASSERT_TRUE(registry.UpdateAdapters(
      "h1", stream, {MakeAdapter("port-1-2", v1::ADAPTER_STATE_GONE), MakeAdapter("port-1-3")},
      {"port-1-1"}, kT0 + absl::Seconds(1)));
  EXPECT_EQ(registry.ListAdapters(false).size(), 1u);
  adapters = registry.ListAdapters(true);
  ASSERT_EQ(adapters.size(), 2u);
  EXPECT_EQ(adapters[0].metadata().name(), "port-1-2");
  EXPECT_EQ(registry.GetHost("h1", kT0, 1)->status().adapter_count(), 1u);
  EXPECT_EQ(registry.GetAdapter("h1", "port-1-1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(registry.GetAdapter("h1", "port-1-3").ok());
  EXPECT_EQ(registry.counts().adapters, 1u);

  // A new inventory replaces everything.
  ASSERT_TRUE(registry.ReplaceAdapters("h1", stream, {MakeAdapter("port-2-2")}, kT0));
  adapters = registry.ListAdapters(true);
  ASSERT_EQ(adapters.size(), 1u);
  EXPECT_EQ(adapters[0].metadata().name(), "port-2-2");
}

// The adapter snapshot for policy writes is shared until an adapter changes, and then it is
// rebuilt with the change: never a stale list, never a copy per call in between.
TEST(RegistryTest, AdapterSnapshotIsSharedUntilAnAdapterChanges) {
  Registry registry({}, {});
  const uint64_t s1 = registry.Connect(MakeHello("h1"), "peer", kT0);
  ASSERT_TRUE(registry.ReplaceAdapters("h1", s1, {MakeAdapter("port-1-1")}, kT0));
  const auto names = [](const std::vector<v1::Adapter>& adapters) {
    std::vector<std::string> out;
    for (const v1::Adapter& a : adapters) {
      out.push_back(absl::StrCat(a.host_id(), "/", a.metadata().name(), "/",
                                 a.metadata().labels().at("board")));
    }
    return out;
  };
  std::shared_ptr<const std::vector<v1::Adapter>> first = registry.AdapterSnapshot();
  EXPECT_THAT(names(*first), ::testing::ElementsAre("h1/port-1-1/pi5"));

  // Host status changes keep it.
  ASSERT_TRUE(registry.RecordSent("h1", s1, 2, kT0));
  ASSERT_TRUE(registry.RecordAck("h1", s1, 2, kT0));
  registry.Touch("h1", s1, kT0 + absl::Seconds(1));
  EXPECT_EQ(registry.AdapterSnapshot(), first);

  // Every kind of adapter change gives a new one with the change.
  ASSERT_TRUE(registry.UpdateAdapters("h1", s1, {MakeAdapter("port-1-2")}, {}, kT0));
  std::shared_ptr<const std::vector<v1::Adapter>> updated = registry.AdapterSnapshot();
  EXPECT_NE(updated, first);
  EXPECT_THAT(names(*updated), ::testing::ElementsAre("h1/port-1-1/pi5", "h1/port-1-2/pi5"));
  EXPECT_EQ(registry.AdapterSnapshot(), updated);

  ASSERT_TRUE(registry.UpdateAdapters("h1", s1, {}, {"port-1-1"}, kT0));
  EXPECT_THAT(names(*registry.AdapterSnapshot()), ::testing::ElementsAre("h1/port-1-2/pi5"));

  ASSERT_TRUE(registry.UpdateAdapters("h1", s1, {MakeAdapter("port-1-2", v1::ADAPTER_STATE_GONE)},
                                      {}, kT0));
  EXPECT_THAT(names(*registry.AdapterSnapshot()), ::testing::IsEmpty());

  ASSERT_TRUE(registry.ReplaceAdapters("h1", s1, {MakeAdapter("port-2-1")}, kT0));
  EXPECT_THAT(names(*registry.AdapterSnapshot()), ::testing::ElementsAre("h1/port-2-1/pi5"));

  // New host labels reach the adapters' copies.
  const uint64_t s2 = registry.Connect(MakeHello("h1", "pi4"), "peer", kT0);
  EXPECT_THAT(names(*registry.AdapterSnapshot()), ::testing::ElementsAre("h1/port-2-1/pi4"));

  // Another replica's rows.
  HostRecord remote;
  remote.host.mutable_metadata()->set_name("h2");
  (*remote.host.mutable_metadata()->mutable_labels())["board"] = "pi1";
  remote.adapters_changed = true;
  v1::Adapter adapter = MakeAdapter("port-9");
  adapter.set_host_id("h2");
  (*adapter.mutable_metadata()->mutable_labels())["board"] = "pi1";
  remote.adapters = {adapter};
  remote.session_replica = "b:7443";
  EXPECT_EQ(registry.ApplyRemote({remote}), 1u);
  EXPECT_THAT(names(*registry.AdapterSnapshot()),
              ::testing::ElementsAre("h1/port-2-1/pi4", "h2/port-9/pi1"));
  EXPECT_TRUE(registry.Disconnect("h1", s2, kT0));
}

TEST(RegistryTest, AckClearsAnOlderNackAndDrivesInSync) {
  Registry registry({}, {});
  const uint64_t stream = registry.Connect(MakeHello("h1"), "peer", kT0);
  v1::NackRecord nack;
  nack.set_version(4);
  nack.set_error_detail("policy 'x': hold 9000us is out of range");
  ASSERT_TRUE(registry.RecordNack("h1", stream, nack, kT0));
  absl::StatusOr<v1::Host> host = registry.GetHost("h1", kT0, 4);
  EXPECT_EQ(host->status().last_nack().version(), 4u);
  const v1::Condition* in_sync = FindCondition(*host, "InSync");
  EXPECT_EQ(in_sync->status(), v1::CONDITION_STATUS_FALSE);
  EXPECT_EQ(in_sync->reason(), "BundleNacked");
  EXPECT_THAT(in_sync->message(), ::testing::HasSubstr("9000us"));

  ASSERT_TRUE(registry.RecordAck("h1", stream, 5, kT0));
  host = registry.GetHost("h1", kT0, 5);
  EXPECT_FALSE(host->status().has_last_nack());
  EXPECT_EQ(FindCondition(*host, "InSync")->status(), v1::CONDITION_STATUS_TRUE);
}

// With a replica id, a new stream's host is saved with a session to open; once the store
// opened it, later saves carry its epoch; a reconnect asks for a new one.
TEST(RegistryTest, RecordsCarryTheAgentSessionOfThisServer) {
  Registry registry({}, {});
  registry.SetReplicaId("a:7443");
  uint64_t stream = registry.Connect(MakeHello("h1"), "peer", kT0);
  EXPECT_EQ(registry.GetHost("h1", kT0, 1)->status().replica(), "a:7443");
  std::vector<HostRecord> dirty = registry.TakeDirty();
  ASSERT_EQ(dirty.size(), 1u);
  EXPECT_EQ(dirty[0].session_replica, "a:7443");
  EXPECT_TRUE(dirty[0].open_session);
  // A failed save: the session is still to be opened.
  registry.ReturnDirty(dirty);
  dirty = registry.TakeDirty();
  ASSERT_EQ(dirty.size(), 1u);
  EXPECT_TRUE(dirty[0].open_session);
  registry.SessionsSaved({{{"h1", 7}}, {}});

  ASSERT_TRUE(registry.RecordAck("h1", stream, 3, kT0));
  dirty = registry.TakeDirty();
  ASSERT_EQ(dirty.size(), 1u);
  EXPECT_FALSE(dirty[0].open_session);
  EXPECT_EQ(dirty[0].session_epoch, 7u);

  ASSERT_TRUE(registry.Disconnect("h1", stream, kT0));
  stream = registry.Connect(MakeHello("h1"), "peer", kT0);
  dirty = registry.TakeDirty();
  ASSERT_EQ(dirty.size(), 1u);
  EXPECT_TRUE(dirty[0].open_session) << "a reconnect opens a new session";

  // Without a replica id: no sessions (records are written as they are).
  Registry plain({}, {});
  plain.Connect(MakeHello("h2"), "peer", kT0);
  dirty = plain.TakeDirty();
  ASSERT_EQ(dirty.size(), 1u);
  EXPECT_TRUE(dirty[0].session_replica.empty());
  EXPECT_EQ(plain.GetHost("h2", kT0, 1)->status().replica(), "");
}

// Hosts other replicas hold are listed as they saved them, never saved back; a host this
// server holds (stream open here, or its stored session is this server's) keeps its own entry.
TEST(RegistryTest, RemoteHostsAreListedButNeverSavedAndLocalOnesWin) {
  Registry registry({}, {});
  registry.SetReplicaId("a:7443");
  const uint64_t stream = registry.Connect(MakeHello("h1"), "peer", kT0);
  registry.ReplaceAdapters("h1", stream, {MakeAdapter("port-1")}, kT0);
  registry.SessionsSaved({{{"h1", 1}}, {}});
  ASSERT_EQ(registry.TakeDirty().size(), 1u);

  const auto remote = [](const std::string& id, const std::string& replica, bool with_adapters) {
    HostRecord r;
    r.host.mutable_metadata()->set_name(id);
    r.host.mutable_status()->set_connected(true);
    r.host.mutable_status()->set_replica(replica);
    *r.host.mutable_status()->mutable_last_seen_time() = common::TimeToProto(kT0);
    (*r.host.mutable_metadata()->mutable_labels())["board"] = "pi4";
    r.adapters_changed = with_adapters;
    if (with_adapters) r.adapters = {MakeAdapter("port-9")};
    r.session_replica = replica;
    r.session_epoch = 3;
    return r;
  };
  // h1 streams here: B's (older) record of it changes nothing; h2 is B's.
  EXPECT_EQ(registry.ApplyRemote({remote("h1", "b:7443", true), remote("h2", "b:7443", true)}), 1u);
  EXPECT_EQ(registry.GetHost("h1", kT0, 1)->status().replica(), "a:7443");
  EXPECT_EQ(registry.GetAdapter("h1", "port-1").status().code(), absl::StatusCode::kOk);
  absl::StatusOr<v1::Host> h2 = registry.GetHost("h2", kT0, 1);
  ASSERT_TRUE(h2.ok());
  EXPECT_EQ(h2->status().replica(), "b:7443");
  EXPECT_TRUE(h2->status().connected());
  EXPECT_EQ(h2->status().adapter_count(), 1u);
  EXPECT_EQ(registry.ListAdapters(false).size(), 2u);
  EXPECT_TRUE(registry.TakeDirty().empty()) << "a remote host is never saved by this server";
  // A host-only record keeps the adapters the entry has.
  EXPECT_EQ(registry.ApplyRemote({remote("h2", "b:7443", false)}), 1u);
  EXPECT_EQ(registry.HostAdapters("h2").size(), 1u);
  // The writes of a stream this server does not hold are ignored for a remote host.
  EXPECT_FALSE(registry.Touch("h2", 0, kT0));

  // h1's agent moves to B: once its stream here ended, B's record replaces the entry, and
  // this server's pending disconnect is dropped (the store would refuse it anyway).
  ASSERT_TRUE(registry.Disconnect("h1", stream, kT0 + absl::Seconds(1)));
  EXPECT_EQ(registry.ApplyRemote({remote("h1", "a:7443", true)}), 0u)
      << "a record under this server's own session is this server's";
  EXPECT_EQ(registry.ApplyRemote({remote("h1", "b:7443", true)}), 1u);
  EXPECT_EQ(registry.GetHost("h1", kT0, 1)->status().replica(), "b:7443");
  EXPECT_TRUE(registry.TakeDirty().empty());

  // The agent comes back: its entry is this server's again, with a new session.
  registry.Connect(MakeHello("h1"), "peer", kT0 + absl::Seconds(2));
  std::vector<HostRecord> dirty = registry.TakeDirty();
  ASSERT_EQ(dirty.size(), 1u);
  EXPECT_TRUE(dirty[0].open_session);
  EXPECT_EQ(dirty[0].session_replica, "a:7443");
  EXPECT_EQ(registry.ApplyRemote({remote("h1", "b:7443", true)}), 0u);
  EXPECT_EQ(registry.GetHost("h1", kT0, 1)->status().replica(), "a:7443");
}

TEST(RegistryTest, DirtyHostsRoundTripThroughTheStoreFormat) {
  Registry registry({}, {});
  const uint64_t stream = registry.Connect(MakeHello("h1"), "peer", kT0);
  registry.ReplaceAdapters("h1", stream, {MakeAdapter("port-1-1")}, kT0);
  registry.RecordAck("h1", stream, 3, kT0);
  std::vector<HostRecord> dirty = registry.TakeDirty();
  ASSERT_EQ(dirty.size(), 1u);
  EXPECT_TRUE(registry.TakeDirty().empty());
  registry.ReturnDirty(dirty);
  EXPECT_EQ(registry.TakeDirty().size(), 1u);

  // An ACK alone changes the host, not its adapters: the store keeps the stored adapters.
  ASSERT_TRUE(registry.RecordAck("h1", stream, 4, kT0));
  std::vector<HostRecord> ack_only = registry.TakeDirty();
  ASSERT_EQ(ack_only.size(), 1u);
  EXPECT_FALSE(ack_only[0].adapters_changed);
  EXPECT_TRUE(ack_only[0].adapters.empty());
  EXPECT_EQ(ack_only[0].host.status().last_acked_version(), 4u);
  ASSERT_TRUE(dirty[0].adapters_changed);

  // A restarted server loads the records: hosts start disconnected, keep ACK and adapters.
  Registry reloaded({}, dirty);
  absl::StatusOr<v1::Host> host = reloaded.GetHost("h1", kT0, 3);
  ASSERT_TRUE(host.ok());
  EXPECT_FALSE(host->status().connected());
  EXPECT_EQ(host->status().last_acked_version(), 3u);
  EXPECT_EQ(reloaded.ListAdapters(false).size(), 1u);
  // Writes from a stream that does not exist in this process are ignored.
  EXPECT_FALSE(reloaded.RecordAck("h1", stream, 9, kT0));
}

TEST(RegistryTest, MetricsTargetsListAgentsWithAnAddress) {
  Registry registry({}, {});
  registry.Connect(MakeHello("h1", "pi1"), "peer", kT0);
  v1::Hello quiet = MakeHello("h2");
  quiet.clear_metrics_address();
  registry.Connect(quiet, "peer", kT0);
  std::vector<Registry::MetricsTarget> targets = registry.MetricsTargets(kT0);
  ASSERT_EQ(targets.size(), 1u);
  EXPECT_EQ(targets[0].host_id, "h1");
  EXPECT_EQ(targets[0].address, "h1:9477");
  EXPECT_EQ(targets[0].labels.at("board"), "pi1");
  EXPECT_TRUE(targets[0].connected);
}

v1::Policy StoredPolicy(const std::string& name, uint32_t hold_us) {
  v1::Policy policy;
  policy.mutable_metadata()->set_name(name);
  policy.mutable_metadata()->set_resource_version("1");
  policy.mutable_spec()->mutable_settings()->set_hold_us(hold_us);
  return policy;
}

TEST(PolicySetTest, BundleIsSerialisedOncePerVersion) {
  PolicySet set({StoredPolicy("a", 32)}, 5);
  std::shared_ptr<const PolicySnapshot> snapshot = set.snapshot();
  std::shared_ptr<const BundleBody> body = snapshot->Bundle();
  EXPECT_EQ(body, snapshot->Bundle());  // the same bytes for every stream
  EXPECT_EQ(body->version, 5u);
  v1::PolicyBundle bundle;
  ASSERT_TRUE(bundle.ParseFromString(body->bytes));
  EXPECT_EQ(bundle.version(), 5u);
  ASSERT_EQ(bundle.policies_size(), 1);
  EXPECT_TRUE(bundle.nonce().empty());
  EXPECT_TRUE(bundle.has_create_time());

  set.Put(StoredPolicy("b", 64), 6);
  EXPECT_EQ(set.snapshot()->Bundle()->version, 6u);
  EXPECT_EQ(set.snapshot()->Bundle()->policy_count, 2u);
  // The old snapshot is unchanged.
  EXPECT_EQ(snapshot->policies.size(), 1u);
  set.Remove("a", 7);
  EXPECT_EQ(set.snapshot()->policies.size(), 1u);
  // Versions never go backwards.
  set.Put(StoredPolicy("c", 32), 6);
  EXPECT_EQ(set.snapshot()->bundle_version, 7u);
  EXPECT_EQ(set.snapshot()->policies.count("c"), 0u);
}

TEST(PolicySetTest, InvalidStoredPoliciesAreKeptAndReported) {
  PolicySet set({StoredPolicy("good", 32), StoredPolicy("bad", 9000)}, 2);
  std::shared_ptr<const PolicySnapshot> snapshot = set.snapshot();
  ASSERT_EQ(snapshot->valid.size(), 1u);
  EXPECT_EQ(snapshot->valid[0].name, "good");
  ASSERT_EQ(snapshot->invalid.count("bad"), 1u);
  EXPECT_THAT(snapshot->invalid.at("bad"), ::testing::HasSubstr("8160"));
  EXPECT_EQ(snapshot->Bundle()->policy_count, 2u);
}

// What agents report becomes adapter events: applies with the hold change, drift repairs,
// failures, state changes and NACKs naming the adapter, about kind `Adapter` on its host.
v1::Adapter Reported(const std::string& id, v1::AdapterState state, uint32_t observed_hold,
                     uint64_t applies, uint64_t repairs, uint64_t failures) {
  v1::Adapter adapter = MakeAdapter(id, state);
  v1::ObservedRxAgg* observed = adapter.mutable_status()->mutable_observed();
  observed->add_registers();
  observed->mutable_decoded()->set_hold_us(observed_hold);
  v1::AdapterCounters* counters = adapter.mutable_status()->mutable_counters();
  counters->set_applies_total(applies);
  counters->set_drift_repairs_total(repairs);
  counters->set_failures_total(failures);
  v1::Provenance provenance;
  provenance.set_source(v1::SETTING_SOURCE_SERVER_POLICY);
  provenance.set_name("usb3-short");
  (*adapter.mutable_status()->mutable_desired()->mutable_provenance())["hold_us"] = provenance;
  return adapter;
}

TEST(AdapterEventsTest, ApplyDriftFailureAndStateChanges) {
  const v1::Adapter before = Reported("port-2-2", v1::ADAPTER_STATE_APPLIED, 1024, 1, 0, 0);
  EXPECT_TRUE(AdapterEvents(nullptr, before).empty());
  EXPECT_TRUE(AdapterEvents(&before, before).empty());

  const v1::Adapter applied = Reported("port-2-2", v1::ADAPTER_STATE_APPLIED, 32, 2, 0, 0);
  std::vector<v1::Event> events = AdapterEvents(&before, applied);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].reason(), "Applied");
  EXPECT_EQ(events[0].type(), v1::EVENT_TYPE_NORMAL);
  EXPECT_EQ(events[0].message(), "hold 1024µs -> 32µs (policy usb3-short)");
  EXPECT_EQ(events[0].involved_object().kind(), "Adapter");
  EXPECT_EQ(events[0].involved_object().name(), "port-2-2");

  const v1::Adapter repaired = Reported("port-2-2", v1::ADAPTER_STATE_APPLIED, 32, 3, 2, 0);
  events = AdapterEvents(&applied, repaired);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].reason(), "Applied");
  EXPECT_EQ(events[1].reason(), "DriftRepaired");
  EXPECT_EQ(events[1].type(), v1::EVENT_TYPE_WARNING);
  EXPECT_THAT(events[1].message(), ::testing::HasSubstr("2 repairs"));

  const v1::Adapter failed = Reported("port-2-2", v1::ADAPTER_STATE_ERROR, 32, 3, 2, 1);
  events = AdapterEvents(&repaired, failed);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].reason(), "ApplyFailed");
  EXPECT_EQ(events[1].reason(), "StateChanged");
  EXPECT_EQ(events[1].message(), "state applied -> error");
  EXPECT_EQ(events[1].type(), v1::EVENT_TYPE_WARNING);

  const v1::Adapter asleep = Reported("port-2-2", v1::ADAPTER_STATE_ASLEEP, 32, 3, 2, 1);
  events = AdapterEvents(&failed, asleep);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].message(), "state error -> asleep");
  EXPECT_EQ(events[0].type(), v1::EVENT_TYPE_NORMAL);

  // The driver re-initialised the chip: the hold moved without an apply.
  const v1::Adapter reset = Reported("port-2-2", v1::ADAPTER_STATE_ASLEEP, 1024, 3, 2, 1);
  events = AdapterEvents(&asleep, reset);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].reason(), "HoldChanged");

  // An agent restart resets its counters: a new baseline, not events.
  const v1::Adapter restarted = Reported("port-2-2", v1::ADAPTER_STATE_ASLEEP, 1024, 0, 0, 0);
  EXPECT_TRUE(AdapterEvents(&reset, restarted).empty());
}

TEST(AdapterEventsTest, RegistryEmitsThemForUpdatesInventoriesAndNacks) {
  std::vector<v1::Event> emitted;
  RegistryOptions options;
  options.on_adapter_event = [&emitted](v1::Event event, absl::Time) {
    emitted.push_back(std::move(event));
  };
  Registry registry(options, {});
  const uint64_t stream = registry.Connect(MakeHello("pi1"), "peer", kT0);
  ASSERT_TRUE(registry.ReplaceAdapters(
      "pi1", stream, {Reported("port-1-1.3", v1::ADAPTER_STATE_APPLIED, 1024, 1, 0, 0)}, kT0));
  EXPECT_TRUE(emitted.empty());  // first sight: nothing to compare with

  ASSERT_TRUE(registry.UpdateAdapters(
      "pi1", stream, {Reported("port-1-1.3", v1::ADAPTER_STATE_APPLIED, 32, 2, 0, 0)}, {}, kT0));
  ASSERT_EQ(emitted.size(), 1u);
  EXPECT_EQ(emitted[0].reason(), "Applied");
  EXPECT_EQ(emitted[0].host_id(), "pi1");
  EXPECT_EQ(emitted[0].involved_object().host_id(), "pi1");

  ASSERT_TRUE(registry.ReplaceAdapters(
      "pi1", stream, {Reported("port-1-1.3", v1::ADAPTER_STATE_APPLIED, 32, 2, 1, 0)}, kT0));
  ASSERT_EQ(emitted.size(), 2u);
  EXPECT_EQ(emitted[1].reason(), "DriftRepaired");

  v1::NackRecord nack;
  nack.set_version(7);
  nack.set_error_detail(
      "policy pi-usb2: buffer_kib 6 is not a multiple of 4 on layout v1 (adapter port-1-1.3)");
  ASSERT_TRUE(registry.RecordNack("pi1", stream, nack, kT0));
  ASSERT_EQ(emitted.size(), 3u);
  EXPECT_EQ(emitted[2].reason(), "BundleNacked");
  EXPECT_EQ(emitted[2].type(), v1::EVENT_TYPE_WARNING);
  EXPECT_EQ(emitted[2].involved_object().kind(), "Adapter");
  EXPECT_EQ(emitted[2].involved_object().name(), "port-1-1.3");
  EXPECT_THAT(emitted[2].message(), ::testing::HasSubstr("host pi1 rejected bundle version 7"));

  // A NACK about another adapter id that merely starts the same is not this adapter's.
  nack.set_error_detail("layout v1 (adapter port-1-1.30)");
  ASSERT_TRUE(registry.RecordNack("pi1", stream, nack, kT0));
  EXPECT_EQ(emitted.size(), 3u);
}

}  // namespace
}  // namespace rxfleet::server
