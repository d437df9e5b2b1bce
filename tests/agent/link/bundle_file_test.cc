// agent/link/bundle_file: atomic persistence of the last good bundle and its conversion.
#include "agent/link/bundle_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/proto/time.h"
#include "tests/support/paths.h"

namespace rxfleet::agent {
namespace {

using ::rxfleet::testing::TempDir;
using ::testing::HasSubstr;

v1::PolicyBundle MakeBundle(uint64_t version, uint32_t hold_us) {
  v1::PolicyBundle bundle;
  bundle.set_version(version);
  bundle.set_nonce("abc");
  v1::Policy* policy = bundle.add_policies();
  policy->mutable_metadata()->set_name("usb3-short");
  policy->mutable_spec()->set_priority(10);
  policy->mutable_spec()->mutable_selector()->add_usb_speeds(v1::USB_SPEED_SUPER);
  policy->mutable_spec()->mutable_settings()->set_hold_us(hold_us);
  return bundle;
}

TEST(BundleFileTest, WriteThenReadRoundTrips) {
  TempDir dir;
  const std::string path = dir.File("state/agent/bundle.pb");  // directories are created
  ASSERT_TRUE(WriteBundleFile(path, MakeBundle(3, 32), "pi1").ok());
  absl::StatusOr<v1::PersistedBundle> read = ReadBundleFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->host_id(), "pi1");
  EXPECT_EQ(read->bundle().version(), 3u);
  EXPECT_EQ(read->bundle().policies(0).spec().settings().hold_us(), 32u);
  // Replacing keeps one file, no temporary left behind, private mode.
  ASSERT_TRUE(WriteBundleFile(path, MakeBundle(4, 64), "pi1").ok());
  EXPECT_EQ(ReadBundleFile(path)->bundle().version(), 4u);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(BundleFileTest, MissingAndForeignFiles) {
  TempDir dir;
  EXPECT_EQ(ReadBundleFile(dir.File("none.pb")).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(
      rxfleet::testing::WriteTextFile(dir.File("junk.pb"), "\xff\xff\xff not a proto").ok());
  EXPECT_EQ(ReadBundleFile(dir.File("junk.pb")).status().code(), absl::StatusCode::kDataLoss);
}

// A FIFO at the bundle path hung start-up (SIGTERM ignored); a huge file took 630 MB.
TEST(BundleFileTest, FifoDirectoryAndHugeFilesAreRefusedWithoutBlocking) {
  TempDir dir;
  ASSERT_EQ(::mkfifo(dir.File("fifo.pb").c_str(), 0600), 0);
  absl::Status fifo = ReadBundleFile(dir.File("fifo.pb")).status();
  EXPECT_EQ(fifo.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(fifo.message(), HasSubstr("not a regular file"));
  std::filesystem::create_directory(dir.File("dir.pb"));
  EXPECT_EQ(ReadBundleFile(dir.File("dir.pb")).status().code(),
            absl::StatusCode::kFailedPrecondition);
  const std::string huge = dir.File("huge.pb");
  {
    std::ofstream out(huge, std::ios::binary);
    out.seekp(static_cast<std::streamoff>(kMaxBundleFileBytes));
    out.put('x');
  }
  absl::Status big = ReadBundleFile(huge).status();
  EXPECT_EQ(big.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(big.message(), HasSubstr("bytes, more than"));
}

TEST(BundleFileTest, AnUnreadableFileNamesTheOsReason) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files whatever their mode";
  TempDir dir;
  ASSERT_TRUE(rxfleet::testing::WriteTextFile(dir.File("b.pb"), "x").ok());
  ASSERT_EQ(::chmod(dir.File("b.pb").c_str(), 0), 0);
  absl::Status status = ReadBundleFile(dir.File("b.pb")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(status.message(), HasSubstr("Permission denied"));
}

TEST(BundleFileTest, OwnerComesFromTheRecordedHostId) {
  v1::PersistedBundle persisted;
  *persisted.mutable_bundle() = MakeBundle(3, 32);
  EXPECT_EQ(OwnerOfPersistedBundle(persisted, "pi1"), PersistedBundleOwner::kUnrecorded);
  persisted.set_host_id("pi1");
  EXPECT_EQ(OwnerOfPersistedBundle(persisted, "pi1"), PersistedBundleOwner::kThisHost);
  EXPECT_EQ(OwnerOfPersistedBundle(persisted, "pi2"), PersistedBundleOwner::kOtherHost);
}

// A file of an agent from before host ids were recorded is a bare PolicyBundle: it still
// reads, with no host id.
TEST(BundleFileTest, BareBundleOfAnOlderAgentReadsWithoutHostId) {
  TempDir dir;
  ASSERT_TRUE(
      rxfleet::testing::WriteTextFile(dir.File("bundle.pb"), MakeBundle(7, 64).SerializeAsString())
          .ok());
  absl::StatusOr<v1::PersistedBundle> read = ReadBundleFile(dir.File("bundle.pb"));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->host_id(), "");
  EXPECT_EQ(read->bundle().version(), 7u);
  EXPECT_EQ(read->bundle().policies(0).spec().settings().hold_us(), 64u);
  EXPECT_EQ(OwnerOfPersistedBundle(*read, "pi1"), PersistedBundleOwner::kUnrecorded);
}

TEST(BundleFileTest, FailedWritesLeaveNoTemporaryFile) {
  TempDir dir;
  // The state "directory" is a regular file.
  ASSERT_TRUE(rxfleet::testing::WriteTextFile(dir.File("file"), "x").ok());
  const absl::Status no_dir = WriteBundleFile(dir.File("file/bundle.pb"), MakeBundle(3, 32), "pi1");
  EXPECT_FALSE(no_dir.ok());
  EXPECT_THAT(no_dir.message(), HasSubstr(dir.File("file")));

  // The rename fails (the target is a non-empty directory): the temporary file is removed.
  const std::string path = dir.File("bundle.pb");
  std::filesystem::create_directories(path + "/occupied");
  const absl::Status blocked = WriteBundleFile(path, MakeBundle(3, 32), "pi1");
  EXPECT_FALSE(blocked.ok());
  EXPECT_THAT(blocked.message(), HasSubstr("rename"));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(BundleFileTest, ConversionValidatesEveryPolicy) {
  absl::StatusOr<ServerBundle> good = ServerBundleFromProto(MakeBundle(7, 32));
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->version, 7u);
  ASSERT_EQ(good->policies.size(), 1u);
  EXPECT_EQ(good->policies[0].name, "usb3-short");
  EXPECT_EQ(good->policies[0].source, "bundle 7");

  absl::StatusOr<ServerBundle> bad = ServerBundleFromProto(MakeBundle(8, 9000));
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("policy 'usb3-short'"));
  EXPECT_THAT(bad.status().message(), HasSubstr("9000"));
}

TEST(BundleFileTest, ConversionCarriesTheAssignmentsWindowFields) {
  v1::PolicyBundle bundle = MakeBundle(9, 32);
  v1::ExperimentAssignment* a = bundle.add_assignments();
  a->set_adapter_id("port-2-2");
  a->set_experiment("hold-ab");
  a->set_experiment_generation(4);
  a->set_arm("short");
  a->mutable_settings()->set_hold_us(32);
  a->set_priority(500);
  a->set_period_index(6);
  *a->mutable_period_start_time() = common::TimeToProto(absl::FromUnixSeconds(1000));
  *a->mutable_period_end_time() = common::TimeToProto(absl::FromUnixSeconds(1600));
  *a->mutable_window_length() = common::DurationToProto(absl::Seconds(60));
  *a->mutable_burn_in() = common::DurationToProto(absl::Seconds(120));
  absl::StatusOr<ServerBundle> converted = ServerBundleFromProto(bundle);
  ASSERT_TRUE(converted.ok()) << converted.status();
  ASSERT_EQ(converted->assignments.size(), 1u);
  const ExperimentAssignment& got = converted->assignments[0];
  EXPECT_EQ(got.experiment_generation, 4);
  EXPECT_EQ(got.period_index, 6u);
  EXPECT_EQ(got.period_start, absl::FromUnixSeconds(1000));
  EXPECT_EQ(got.period_end, absl::FromUnixSeconds(1600));
  EXPECT_EQ(got.window_length, absl::Seconds(60));
  EXPECT_EQ(got.burn_in, absl::Seconds(120));
}

TEST(BundleFileTest, ConversionCarriesProbesAndSlots) {
  v1::PolicyBundle bundle = MakeBundle(10, 32);
  v1::ExperimentAssignment* a = bundle.add_assignments();
  a->set_adapter_id("port-2-2");
  a->set_experiment("hold-ab");
  a->set_arm("short");
  a->mutable_settings()->set_hold_us(32);
  a->mutable_probe()->set_server("10.0.0.5");
  *a->mutable_probe_offset() = common::DurationToProto(absl::Seconds(20));
  v1::ProbeSlot* slot = bundle.add_probe_slots();
  slot->set_adapter_id("port-2-2");
  slot->set_policy("usb3-short");
  *slot->mutable_offset() = common::DurationToProto(absl::Seconds(90));
  absl::StatusOr<ServerBundle> converted = ServerBundleFromProto(bundle);
  ASSERT_TRUE(converted.ok()) << converted.status();
  const ExperimentAssignment& got = converted->assignments[0];
  ASSERT_TRUE(got.probe.has_value());
  EXPECT_EQ(got.probe->server_host, "10.0.0.5");
  EXPECT_EQ(got.probe->duration, absl::Seconds(10));
  EXPECT_EQ(got.probe_offset, absl::Seconds(20));
  ASSERT_EQ(converted->probe_slots.count("port-2-2"), 1u);
  EXPECT_EQ(converted->probe_slots.at("port-2-2").first, "usb3-short");
  EXPECT_EQ(converted->probe_slots.at("port-2-2").second, absl::Seconds(90));
  EXPECT_EQ(got.probe_rounds, 1u);  // unset: every window
  EXPECT_EQ(got.probe_round, 0u);

  a->set_probe_rounds(3);
  a->set_probe_round(2);
  converted = ServerBundleFromProto(bundle);
  ASSERT_TRUE(converted.ok()) << converted.status();
  EXPECT_EQ(converted->assignments[0].probe_rounds, 3u);
  EXPECT_EQ(converted->assignments[0].probe_round, 2u);
  a->set_probe_round(3);
  absl::StatusOr<ServerBundle> no_turn = ServerBundleFromProto(bundle);
  ASSERT_EQ(no_turn.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_turn.status().message(),
              HasSubstr("assignments[0].probe_round 3 must be below probe_rounds 3"));
  a->set_probe_round(0);

  a->mutable_probe()->set_parallel_streams(17);
  absl::StatusOr<ServerBundle> bad = ServerBundleFromProto(bundle);
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("assignments[0].probe"));
}

}  // namespace
}  // namespace rxfleet::agent
