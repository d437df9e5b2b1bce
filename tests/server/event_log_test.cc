// server/registry/event_log: versions, folding, retention, filters, watches.
#include "server/registry/event_log.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/proto/time.h"

namespace rxfleet::server {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1767225600);

v1::Event HostEvent(const std::string& host, const std::string& reason,
                    v1::EventType type = v1::EVENT_TYPE_NORMAL, const std::string& message = "") {
  v1::Event event;
  event.set_type(type);
  event.set_reason(reason);
  event.set_message(message.empty() ? reason + " " + host : message);
  event.mutable_involved_object()->set_kind("Host");
  event.mutable_involved_object()->set_name(host);
  event.set_host_id(host);
  return event;
}

std::vector<std::string> Reasons(const std::vector<v1::Event>& events) {
  std::vector<std::string> out;
  for (const v1::Event& e : events) out.push_back(e.reason());
  return out;
}

TEST(EventLogTest, RecordAssignsIncreasingVersionsAndMetadata) {
  EventLog log({}, {}, 41);
  const v1::Event a = log.Record(HostEvent("h1", "Connected"), kT0);
  const v1::Event b = log.Record(HostEvent("h2", "Connected"), kT0);
  EXPECT_EQ(a.metadata().resource_version(), "42");
  EXPECT_EQ(b.metadata().resource_version(), "43");
  EXPECT_EQ(a.metadata().name(), "ev-42");
  EXPECT_EQ(a.source(), "rxfleet-server");
  EXPECT_EQ(a.count(), 1u);
  EXPECT_EQ(common::TimeFromProto(a.first_time()), kT0);
  EXPECT_EQ(log.last_version(), 43u);
}

TEST(EventLogTest, RepeatsFoldWithinTheWindow) {
  EventLogOptions options;
  options.fold_window = absl::Minutes(10);
  EventLog log(options, {}, 0);
  log.Record(HostEvent("h1", "Connected"), kT0);
  log.Record(HostEvent("h2", "Connected"), kT0);
  const v1::Event folded = log.Record(HostEvent("h1", "Connected"), kT0 + absl::Minutes(5));
  EXPECT_EQ(folded.metadata().name(), "ev-1");
  EXPECT_EQ(folded.count(), 2u);
  EXPECT_EQ(folded.metadata().resource_version(), "3");
  EXPECT_EQ(common::TimeFromProto(folded.first_time()), kT0);
  EXPECT_EQ(common::TimeFromProto(folded.last_time()), kT0 + absl::Minutes(5));
  EXPECT_EQ(log.size(), 2u);
  // Beyond the window a repeat is a new event.
  const v1::Event late = log.Record(HostEvent("h1", "Connected"), kT0 + absl::Minutes(16));
  EXPECT_EQ(late.metadata().name(), "ev-4");
  // Audit events never fold.
  v1::Event audit = HostEvent("h1", "PolicyApplied");
  audit.mutable_audit()->set_action("ApplyPolicy");
  log.Record(audit, kT0);
  EXPECT_EQ(log.Record(audit, kT0).count(), 1u);
}

TEST(EventLogTest, RetentionByCountAndAge) {
  EventLogOptions options;
  options.max_events = 3;
  options.max_age = absl::Hours(1);
  EventLog log(options, {}, 0);
  for (int i = 0; i < 5; ++i) {
    log.Record(HostEvent("h" + std::to_string(i), "Connected"), kT0 + absl::Seconds(i));
  }
  bool more = false;
  std::vector<v1::Event> held = log.List({}, 0, 100, &more);
  ASSERT_EQ(held.size(), 3u);
  EXPECT_EQ(held.front().metadata().resource_version(), "3");
  log.Record(HostEvent("late", "Connected"), kT0 + absl::Hours(1) + absl::Milliseconds(3500));
  held = log.List({}, 0, 100, &more);
  ASSERT_EQ(held.size(), 2u);  // versions 5 and 6; 4 is older than an hour
  EXPECT_EQ(held.front().metadata().resource_version(), "5");
}

TEST(EventLogTest, ListFiltersAndPages) {
  EventLog log({}, {}, 0);
  log.Record(HostEvent("h1", "Connected"), kT0);
  log.Record(HostEvent("h1", "BundleNacked", v1::EVENT_TYPE_WARNING), kT0 + absl::Seconds(1));
  log.Record(HostEvent("h2", "Connected"), kT0 + absl::Seconds(2));
  v1::Event audit = HostEvent("h1", "PolicyApplied");
  audit.mutable_audit()->set_action("ApplyPolicy");
  log.Record(audit, kT0 + absl::Seconds(3));

  bool more = false;
  v1::ListEventsRequest filter;
  EXPECT_THAT(Reasons(log.List(filter, 0, 100, &more)),
              ::testing::ElementsAre("Connected", "BundleNacked", "Connected"));
  filter.set_host_id("h1");
  EXPECT_THAT(Reasons(log.List(filter, 0, 100, &more)),
              ::testing::ElementsAre("Connected", "BundleNacked"));
  filter.set_type(v1::EVENT_TYPE_WARNING);
  EXPECT_THAT(Reasons(log.List(filter, 0, 100, &more)), ::testing::ElementsAre("BundleNacked"));
  v1::ListEventsRequest audits;
  audits.set_audit(true);
  EXPECT_THAT(Reasons(log.List(audits, 0, 100, &more)), ::testing::ElementsAre("PolicyApplied"));
  v1::ListEventsRequest since;
  *since.mutable_since_time() = common::TimeToProto(kT0 + absl::Seconds(2));
  EXPECT_EQ(log.List(since, 0, 100, &more).size(), 1u);

  // Paging: limit 2 then continue after the last version.
  std::vector<v1::Event> page = log.List({}, 0, 2, &more);
  ASSERT_EQ(page.size(), 2u);
  EXPECT_TRUE(more);
  page = log.List({}, 2, 2, &more);
  ASSERT_EQ(page.size(), 1u);
  EXPECT_FALSE(more);
}

TEST(EventLogTest, WatchReplaysFromAVersionThenStreamsLiveEvents) {
  EventLog log({}, {}, 0);
  log.Record(HostEvent("h1", "Connected"), kT0);
  log.Record(HostEvent("h2", "Connected"), kT0);
  std::vector<std::string> seen;
  absl::StatusOr<uint64_t> id = log.Watch(
      {}, 1, [&](const v1::Event& e) { seen.push_back(e.metadata().resource_version()); });
  ASSERT_TRUE(id.ok());
  EXPECT_THAT(seen, ::testing::ElementsAre("2"));
  log.Record(HostEvent("h3", "Connected"), kT0);
  EXPECT_THAT(seen, ::testing::ElementsAre("2", "3"));
  log.Unwatch(*id);
  log.Record(HostEvent("h4", "Connected"), kT0);
  EXPECT_EQ(seen.size(), 2u);

  // Without a version: only new events; with a filter: only matching ones.
  std::vector<std::string> warnings;
  v1::ListEventsRequest filter;
  filter.set_type(v1::EVENT_TYPE_WARNING);
  ASSERT_TRUE(
      log.Watch(filter, std::nullopt, [&](const v1::Event& e) { warnings.push_back(e.reason()); })
          .ok());
  log.Record(HostEvent("h1", "Connected"), kT0 + absl::Hours(1));
  log.Record(HostEvent("h1", "BundleNacked", v1::EVENT_TYPE_WARNING), kT0 + absl::Hours(1));
  EXPECT_THAT(warnings, ::testing::ElementsAre("BundleNacked"));
}

TEST(EventLogTest, WatchFromADroppedVersionIsOutOfRange) {
  EventLogOptions options;
  options.max_events = 2;
  EventLog log(options, {}, 0);
  for (int i = 0; i < 5; ++i) log.Record(HostEvent("h" + std::to_string(i), "Connected"), kT0);
  absl::StatusOr<uint64_t> old = log.Watch({}, 1, [](const v1::Event&) {});
  EXPECT_EQ(old.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(log.Watch({}, 3, [](const v1::Event&) {}).ok());
}

TEST(EventLogTest, LoadedEventsContinueVersionsAndUnsavedTracksChanges) {
  v1::Event stored = HostEvent("h1", "Connected");
  stored.mutable_metadata()->set_name("ev-7");
  stored.mutable_metadata()->set_resource_version("7");
  *stored.mutable_last_time() = common::TimeToProto(absl::Now());
  stored.set_count(1);
  EventLog log({}, {stored}, 9);
  EXPECT_EQ(log.Watch({}, 5, [](const v1::Event&) {}).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(log.TakeUnsaved().empty());
  const v1::Event folded = log.Record(HostEvent("h1", "Connected"), absl::Now());
  EXPECT_EQ(folded.metadata().name(), "ev-7");
  EXPECT_EQ(folded.metadata().resource_version(), "10");
  std::vector<v1::Event> unsaved = log.TakeUnsaved();
  ASSERT_EQ(unsaved.size(), 1u);
  EXPECT_TRUE(log.TakeUnsaved().empty());
  log.ReturnUnsaved(unsaved);
  EXPECT_EQ(log.TakeUnsaved().size(), 1u);
}

// Servers sharing a database: events are numbered by the store. A recorded event is queued
// without a version and only listed and watched once the store hands it back; a repeat folds
// into the queued event, or into a copy of the held one; another server's events arrive the
// same way, in version order.
TEST(EventLogTest, FollowingTheStoreNumbersEventsThereAndWatchesSeeThemInOrder) {
  EventLogOptions options;
  options.follow_store = true;
  EventLog log(options, {}, 10);
  std::vector<std::string> watched;
  ASSERT_TRUE(log.Watch({}, std::nullopt,
                        [&](const v1::Event& e) {
                          watched.push_back(absl::StrCat(e.metadata().resource_version(), " ",
                                                         e.reason(), " x", e.count()));
                        })
                  .ok());
  const v1::Event queued = log.Record(HostEvent("h1", "Connected"), kT0);
  EXPECT_TRUE(queued.metadata().resource_version().empty());
  EXPECT_TRUE(queued.metadata().name().empty());
  EXPECT_EQ(log.Record(HostEvent("h1", "Connected"), kT0 + absl::Seconds(1)).count(), 2u);
  log.Record(HostEvent("h2", "Disconnected"), kT0);
  bool more = false;
  EXPECT_TRUE(log.List({}, 0, 100, &more).empty()) << "not numbered yet";
  EXPECT_THAT(watched, ::testing::IsEmpty());

  // A failed save puts them back; the next one takes them again.
  std::vector<v1::Event> unsaved = log.TakeUnsaved();
  ASSERT_EQ(unsaved.size(), 2u);
  log.ReturnUnsaved(std::move(unsaved));
  unsaved = log.TakeUnsaved();
  ASSERT_EQ(unsaved.size(), 2u);
  EXPECT_TRUE(log.TakeUnsaved().empty());

  // The store numbered them 11 and 13; another server's event got 12.
  const auto numbered = [](v1::Event e, uint64_t version) {
    e.mutable_metadata()->set_resource_version(absl::StrCat(version));
    e.mutable_metadata()->set_name(absl::StrCat("ev-", version));
    return e;
  };
  v1::Event other = HostEvent("h9", "Connected");
  other.set_count(1);
  *other.mutable_last_time() = common::TimeToProto(kT0);
  log.ApplyStored({numbered(unsaved[0], 11), numbered(other, 12), numbered(unsaved[1], 13)}, kT0);
  EXPECT_THAT(watched,
              ::testing::ElementsAre("11 Connected x2", "12 Connected x1", "13 Disconnected x1"));
  EXPECT_EQ(log.last_version(), 13u);
  log.ApplyStored({numbered(other, 12)}, kT0);  // seen already
  EXPECT_EQ(watched.size(), 3u);

  // A repeat of the other server's event folds into a copy of it, keeping its name; the
  // store's new version replaces the held one.
  log.Record(HostEvent("h9", "Connected"), kT0 + absl::Seconds(5));
  unsaved = log.TakeUnsaved();
  ASSERT_EQ(unsaved.size(), 1u);
  EXPECT_EQ(unsaved[0].metadata().name(), "ev-12");
  EXPECT_EQ(unsaved[0].count(), 2u);
  EXPECT_TRUE(unsaved[0].metadata().resource_version().empty());
  v1::Event refolded = unsaved[0];
  refolded.mutable_metadata()->set_resource_version("14");
  log.ApplyStored({refolded}, kT0 + absl::Seconds(5));
  const std::vector<v1::Event> listed = log.List({}, 0, 100, &more);
  ASSERT_EQ(listed.size(), 3u);
  EXPECT_EQ(listed.back().metadata().name(), "ev-12");
  EXPECT_EQ(listed.back().metadata().resource_version(), "14");
  EXPECT_EQ(watched.back(), "14 Connected x2");
}

}  // namespace
}  // namespace rxfleet::server
