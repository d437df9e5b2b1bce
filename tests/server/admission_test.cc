// Admission control of agent streams (server/api/admission.h) and the retry hint format
// (common/retry_after.h), on an injected clock.
#include "server/api/admission.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "common/retry_after.h"

namespace rxfleet::server {
namespace {

using ::testing::HasSubstr;

const absl::Time kStart = absl::FromUnixSeconds(1'000'000);

AdmissionOptions Options(double rate, size_t burst, size_t max_streams) {
  AdmissionOptions options;
  options.accept_rate = rate;
  options.accept_burst = burst;
  options.max_streams = max_streams;
  return options;
}

TEST(AdmissionTest, AcceptsTheBurstThenTheRate) {
  Admission admission(Options(10, 5, 1000), kStart);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(admission.TryAdmit(kStart).admitted) << i;
  const AdmissionDecision refused = admission.TryAdmit(kStart);
  EXPECT_FALSE(refused.admitted);
  EXPECT_EQ(refused.reason, kRefusedAcceptRate);
  EXPECT_THAT(refused.message, HasSubstr("--agent-accept-rate"));
  EXPECT_THAT(refused.message, HasSubstr("10 per second"));
  // One token every 100 ms.
  EXPECT_FALSE(admission.TryAdmit(kStart + absl::Milliseconds(50)).admitted);
  EXPECT_TRUE(admission.TryAdmit(kStart + absl::Milliseconds(101)).admitted);
  EXPECT_FALSE(admission.TryAdmit(kStart + absl::Milliseconds(150)).admitted);
  // A long pause refills up to the burst, not beyond.
  const absl::Time later = kStart + absl::Hours(1);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(admission.TryAdmit(later).admitted) << i;
  EXPECT_FALSE(admission.TryAdmit(later).admitted);
  EXPECT_EQ(admission.streams(), 11u);
}

TEST(AdmissionTest, RefusedClientsAreSpreadOverTheTimeTheirTokensTake) {
  Admission admission(Options(100, 1, 100000), kStart);
  ASSERT_TRUE(admission.TryAdmit(kStart).admitted);
  std::vector<absl::Duration> hints;
  for (int i = 0; i < 1000; ++i) {
    const AdmissionDecision refused = admission.TryAdmit(kStart);
    ASSERT_FALSE(refused.admitted);
    hints.push_back(refused.retry_after);
  }
  // The k-th refused client is told to come back when the k-th token is earned (10 ms each),
  // within one token's time of jitter.
  for (int k = 0; k < 1000; ++k) {
    EXPECT_GE(hints[k], absl::Milliseconds(10) * k) << k;
    EXPECT_LE(hints[k], absl::Milliseconds(10) * (k + 2)) << k;
  }
  EXPECT_GE(hints.back(), absl::Seconds(9));
}

TEST(AdmissionTest, HintsNeverExceedTheMaximum) {
  AdmissionOptions options = Options(1, 1, 100000);
  options.max_retry_after = absl::Seconds(30);
  Admission admission(options, kStart);
  ASSERT_TRUE(admission.TryAdmit(kStart).admitted);
  for (int i = 0; i < 200; ++i) {
    const AdmissionDecision refused = admission.TryAdmit(kStart);
    ASSERT_FALSE(refused.admitted);
    EXPECT_GT(refused.retry_after, absl::ZeroDuration());
    EXPECT_LE(refused.retry_after, absl::Seconds(30)) << i;
  }
}

TEST(AdmissionTest, TheCapCountsOpenStreamsAndGivesALongerHint) {
  Admission admission(Options(1000, 1000, 3), kStart);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(admission.TryAdmit(kStart).admitted);
  const AdmissionDecision refused = admission.TryAdmit(kStart);
  EXPECT_FALSE(refused.admitted);
  EXPECT_EQ(refused.reason, kRefusedMaxStreams);
  EXPECT_THAT(refused.message, HasSubstr("maximum of 3 agent streams (--max-agent-streams)"));
  EXPECT_GE(refused.retry_after, admission.options().cap_retry_after);
  EXPECT_LE(refused.retry_after, admission.options().cap_retry_after * 2);
  admission.Release();
  EXPECT_EQ(admission.streams(), 2u);
  EXPECT_TRUE(admission.TryAdmit(kStart).admitted);
  // Extra releases do not make room beyond the cap.
  for (int i = 0; i < 10; ++i) admission.Release();
  EXPECT_EQ(admission.streams(), 0u);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(admission.TryAdmit(kStart).admitted);
  EXPECT_FALSE(admission.TryAdmit(kStart).admitted);
}

TEST(AdmissionTest, TimeGoingBackwardsEarnsNoTokens) {
  Admission admission(Options(10, 1, 100), kStart);
  ASSERT_TRUE(admission.TryAdmit(kStart).admitted);
  EXPECT_FALSE(admission.TryAdmit(kStart - absl::Hours(1)).admitted);
  EXPECT_FALSE(admission.TryAdmit(kStart + absl::Milliseconds(50)).admitted);
  EXPECT_TRUE(admission.TryAdmit(kStart + absl::Milliseconds(100)).admitted);
}

TEST(AdmissionTest, ValidatesOptions) {
  EXPECT_TRUE(ValidateAdmissionOptions(AdmissionOptions{}).ok());
  EXPECT_THAT(ValidateAdmissionOptions(Options(0, 1, 1)).message(), HasSubstr("agent-accept-rate"));
  EXPECT_THAT(ValidateAdmissionOptions(Options(1, 0, 1)).message(),
              HasSubstr("agent-accept-burst"));
  EXPECT_THAT(ValidateAdmissionOptions(Options(1, 1, 0)).message(), HasSubstr("max-agent-streams"));
  // Regression: a rate of 0.001/s was accepted and gave 1 ms hints (the slot was clamped to the
  // 5 min maximum minus a 1000 s token, i.e. the past).
  EXPECT_THAT(ValidateAdmissionOptions(Options(0.001, 1, 1)).message(),
              HasSubstr("at least one stream per 5m"));
  EXPECT_TRUE(ValidateAdmissionOptions(Options(1.0 / 300, 1, 1)).ok());
}

TEST(AdmissionTest, TheSlowestRateStillHintsAtItsToken) {
  AdmissionOptions options = Options(0.01, 1, 10);  // one stream per 100 s
  Admission admission(options, kStart);
  ASSERT_TRUE(admission.TryAdmit(kStart).admitted);
  const AdmissionDecision refused = admission.TryAdmit(kStart);
  ASSERT_FALSE(refused.admitted);
  EXPECT_GE(refused.retry_after, absl::Seconds(100));
  EXPECT_LE(refused.retry_after, options.max_retry_after);
}

TEST(RetryAfterTest, FormatsAndParsesBoundedMilliseconds) {
  EXPECT_EQ(common::FormatRetryAfter(absl::Milliseconds(1500)), "1500");
  EXPECT_EQ(common::FormatRetryAfter(absl::Microseconds(1)), "1");
  EXPECT_EQ(common::FormatRetryAfter(absl::ZeroDuration()), "1");
  EXPECT_EQ(common::FormatRetryAfter(absl::Hours(2)), "300000");
  EXPECT_EQ(*common::ParseRetryAfter("1500"), absl::Milliseconds(1500));
  EXPECT_EQ(*common::ParseRetryAfter("0"), absl::ZeroDuration());
  EXPECT_EQ(*common::ParseRetryAfter("9999999999"), common::kMaxRetryAfter);
  for (const char* bad : {"", "-5", "1.5", " 10", "10ms", "12345678901", "0x10"}) {
    EXPECT_FALSE(common::ParseRetryAfter(bad).ok()) << bad;
  }
  EXPECT_THAT(common::ParseRetryAfter(std::string(100, 'x')).status().message(), HasSubstr("...'"));
}

}  // namespace
}  // namespace rxfleet::server
