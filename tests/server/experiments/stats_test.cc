#include "server/experiments/stats.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace rxfleet::experiments {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Student's sleep data (Cushny & Peebles 1905, analysed by Student 1908; R's `sleep` data
// set): extra hours of sleep of the same 10 patients under two drugs. Reference values were
// worked out from the formulas with 40-digit arithmetic (incomplete beta function for the t
// distribution); they agree with the textbook results of R's t.test (Welch: t = 1.8608,
// df = 17.776, p = 0.07939, CI [-0.2054832, 3.3654832]; paired: t = 4.0621, df = 9,
// p = 0.002833, CI [0.7001142, 2.4598858]).
const std::vector<double> kDrug1 = {0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0};
const std::vector<double> kDrug2 = {1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4};

constexpr double kTight = 1e-9;

TEST(EstimateMeanTest, TDistributionInterval) {
  absl::StatusOr<MeanEstimate> e = EstimateMean(kDrug2);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->n, 10u);
  EXPECT_NEAR(e->mean, 2.33, kTight);
  EXPECT_NEAR(e->sd, 2.002248735796829, kTight);
  ASSERT_TRUE(e->ci.has_value());
  EXPECT_NEAR(e->ci->low, 0.8976775393767051, 1e-7);
  EXPECT_NEAR(e->ci->high, 3.762322460623295, 1e-7);
  // One-sided 95 % bounds use t(0.95, 9) = 1.8331129326562372.
  EXPECT_NEAR(*LowerConfidenceBound(*e), 1.169334035016920, 1e-7);
  EXPECT_NEAR(*UpperConfidenceBound(*e), 3.490665964983080, 1e-7);
}

TEST(EstimateMeanTest, NotEnoughDataHasNoInterval) {
  absl::StatusOr<MeanEstimate> one = EstimateMean(std::vector<double>{5.0});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->n, 1u);
  EXPECT_EQ(one->mean, 5.0);
  EXPECT_FALSE(one->ci.has_value());
  EXPECT_FALSE(LowerConfidenceBound(*one).has_value());
  absl::StatusOr<MeanEstimate> none = EstimateMean(std::vector<double>{});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->n, 0u);
  EXPECT_FALSE(none->ci.has_value());
  EXPECT_EQ(EstimateMean(std::vector<double>{1, NAN}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EstimateMean(kDrug1, 1.0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(WelchTTestTest, SleepData) {
  absl::StatusOr<DifferenceEstimate> w = WelchTTest(kDrug2, kDrug1);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->method, TestMethod::kWelch);
  EXPECT_EQ(w->n_treatment, 10u);
  EXPECT_EQ(w->n_control, 10u);
  EXPECT_NEAR(w->diff, 1.58, kTight);
  EXPECT_NEAR(w->std_error, 0.8490910172387620, kTight);
  EXPECT_NEAR(w->df, 17.77647351617849, 1e-9);
  EXPECT_NEAR(w->t, 1.860813467486853, 1e-9);
  EXPECT_NEAR(w->p_value, 0.07939414018735814, 1e-6);
  EXPECT_NEAR(w->ci.low, -0.2054832307117110, 1e-6);
  EXPECT_NEAR(w->ci.high, 3.365483230711711, 1e-6);
  // Delta method: Var(D/C) = se_t^2/C^2 + T^2 se_c^2/C^4 with T = 2.33, C = 0.75.
  ASSERT_TRUE(w->relative.has_value());
  EXPECT_NEAR(w->relative->value, 2.106666666666667, kTight);
  EXPECT_NEAR(w->relative->std_error, 2.490828358971086, 1e-9);
  EXPECT_NEAR(w->relative->ci.low, -3.131090152368751, 1e-6);
  EXPECT_NEAR(w->relative->ci.high, 7.344423485702084, 1e-6);
  // Swapping the samples flips the sign and keeps the p-value.
  absl::StatusOr<DifferenceEstimate> back = WelchTTest(kDrug1, kDrug2);
  ASSERT_TRUE(back.ok());
  EXPECT_NEAR(back->diff, -1.58, kTight);
  EXPECT_NEAR(back->p_value, w->p_value, 1e-12);
}

TEST(WelchTTestTest, UnequalSizesAndVariances) {
  // Hand-worked: treatment {10, 12, 14} (mean 12, s^2 = 4), control {1, 2, 3, 4, 5}
  // (mean 3, s^2 = 2.5): se^2 = 4/3 + 0.5 = 11/6; df = (11/6)^2 / ((4/3)^2/2 + 0.5^2/4) =
  // 3.5328467153..., t = 9 / sqrt(11/6) = 6.6469405128...
  absl::StatusOr<DifferenceEstimate> w =
      WelchTTest(std::vector<double>{10, 12, 14}, std::vector<double>{1, 2, 3, 4, 5});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_NEAR(w->diff, 9.0, kTight);
  EXPECT_NEAR(w->std_error * w->std_error, 11.0 / 6.0, kTight);
  EXPECT_NEAR(w->df, (121.0 / 36.0) / (16.0 / 18.0 + 0.25 / 4.0), kTight);
  EXPECT_NEAR(w->df, 3.5328467153284673, 1e-12);
  EXPECT_NEAR(w->t, 6.646940512883968, 1e-12);
  EXPECT_LT(w->p_value, 0.01);
  EXPECT_GT(w->ci.low, 0);
}

TEST(WelchTTestTest, NotEnoughData) {
  absl::Status one = WelchTTest(std::vector<double>{1}, kDrug1).status();
  EXPECT_EQ(one.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(one.message()),
              StartsWith("not enough data: Welch's t-test needs at least 2 units "
                         "per arm, found 1 (treatment) and 10 (control)"));
  absl::Status flat = WelchTTest(std::vector<double>{2, 2, 2}, std::vector<double>{1, 1}).status();
  EXPECT_EQ(flat.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(flat.message(), HasSubstr("same value"));
  // Control mean 0: no relative difference, the rest is defined.
  absl::StatusOr<DifferenceEstimate> zero =
      WelchTTest(std::vector<double>{1, 2, 3}, std::vector<double>{-1, 0, 1});
  ASSERT_TRUE(zero.ok());
  EXPECT_FALSE(zero->relative.has_value());
}

TEST(PairedTTestTest, SleepData) {
  absl::StatusOr<DifferenceEstimate> p = PairedTTest(kDrug2, kDrug1);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->method, TestMethod::kPaired);
  EXPECT_EQ(p->n_treatment, 10u);
  EXPECT_NEAR(p->diff, 1.58, kTight);
  EXPECT_NEAR(p->std_error, 0.3889587238883952, kTight);
  EXPECT_NEAR(p->df, 9.0, 0);
  EXPECT_NEAR(p->t, 4.062127683382036, 1e-9);
  EXPECT_NEAR(p->p_value, 0.002832890197384273, 1e-6);
  EXPECT_NEAR(p->ci.low, 0.7001142367230172, 1e-6);
  EXPECT_NEAR(p->ci.high, 2.459885763276983, 1e-6);
  // Delta method with the covariance of (d_i, control_i).
  ASSERT_TRUE(p->relative.has_value());
  EXPECT_NEAR(p->relative->value, 2.106666666666667, kTight);
  EXPECT_NEAR(p->relative->std_error, 1.748707526323378, 1e-9);
  EXPECT_NEAR(p->relative->ci.low, -1.849184589644894, 1e-6);
  EXPECT_NEAR(p->relative->ci.high, 6.062517922978228, 1e-6);
  // The paired test is far more sensitive than Welch's on the same data: the between-patient
  // spread cancels out.
  EXPECT_LT(p->p_value, WelchTTest(kDrug2, kDrug1)->p_value);
}

TEST(PairedTTestTest, ByHand) {
  // d = {1, 2, 3}: mean 2, sd 1, se = 1/sqrt(3), t = 2 sqrt(3), df = 2.
  absl::StatusOr<DifferenceEstimate> p =
      PairedTTest(std::vector<double>{11, 22, 33}, std::vector<double>{10, 20, 30});
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->diff, 2.0, kTight);
  EXPECT_NEAR(p->std_error, 1 / std::sqrt(3.0), kTight);
  EXPECT_NEAR(p->t, 2 * std::sqrt(3.0), kTight);
  EXPECT_EQ(p->df, 2.0);
  // t(0.975, 2) = 4.302652729749464 (4.303 in every t table).
  EXPECT_NEAR(p->ci.high - p->diff, 4.302652729749464 / std::sqrt(3.0), 1e-9);
}

TEST(PairedTTestTest, NoRelativeIntervalWhenTheRatioFitsExactly) {
  // The demo's drop ratios: one pair shows 3.8 % -> 85.7 %, the other 0 -> 0. The absolute
  // difference has a (wide) interval; the ratio d / c fits both pairs exactly, so the delta
  // method has no variance and must not claim a zero-width relative interval.
  absl::StatusOr<DifferenceEstimate> p =
      PairedTTest(std::vector<double>{0.857, 0.0}, std::vector<double>{0.038, 0.0});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_GT(p->ci.high - p->ci.low, 0);
  EXPECT_FALSE(p->relative.has_value());
}

TEST(PairedTTestTest, Errors) {
  EXPECT_EQ(PairedTTest(std::vector<double>{1, 2}, std::vector<double>{1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status one = PairedTTest(std::vector<double>{1}, std::vector<double>{0}).status();
  EXPECT_EQ(one.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(one.message()),
              StartsWith("not enough data: the paired t-test needs at least 2"));
  absl::Status same =
      PairedTTest(std::vector<double>{2, 3, 4}, std::vector<double>{1, 2, 3}).status();
  EXPECT_EQ(same.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(same.message(), HasSubstr("same difference"));
}

TEST(AlwaysValidTest, MsprtByFormula) {
  // v = 0.25, tau^2 = 1, diff = 1.5: Lambda = sqrt(0.2) exp(2.25 / 0.625) = 16.367...,
  // p = 0.061097700790483; half-width = sqrt(2.5 (ln 20 + ln(5) / 2)) = 3.0411949969445 - 1.5.
  absl::StatusOr<AlwaysValidEstimate> a = AlwaysValid(1.5, 0.25, 1.0);
  ASSERT_TRUE(a.ok());
  EXPECT_NEAR(a->p_value, 0.06109770079048308, 1e-12);
  EXPECT_NEAR(a->ci.low, -0.04119499694454651, 1e-12);
  EXPECT_NEAR(a->ci.high, 3.041194996944547, 1e-12);
  // A small effect: Lambda < 1, p capped at 1.
  EXPECT_EQ(AlwaysValid(0.2, 0.25, 1.0)->p_value, 1.0);
  EXPECT_EQ(AlwaysValid(1, 0, 1).status().code(), absl::StatusCode::kInvalidArgument);
  // Always-valid intervals are wider than fixed-horizon ones on the same data.
  absl::StatusOr<DifferenceEstimate> p = PairedTTest(kDrug2, kDrug1);
  ASSERT_TRUE(p.ok());
  EXPECT_LT(p->always_valid.ci.low, p->ci.low);
  EXPECT_GT(p->always_valid.ci.high, p->ci.high);
  EXPECT_GE(p->always_valid.p_value, p->p_value);
  EXPECT_NEAR(p->always_valid.mixture_variance, std::pow(0.1 * 0.75, 2), kTight);
}

TEST(SampleRatioTest, ChiSquare) {
  // 5000 vs 5200 with equal weights: chi^2 = 3.92156862745098, p = 0.04767038065616145.
  const std::vector<double> equal = {1, 1};
  absl::StatusOr<double> p = SampleRatioMismatchPValue(std::vector<uint64_t>{5000, 5200}, equal);
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(*p, 0.04767038065616145, 1e-9);
  EXPECT_NEAR(*SampleRatioMismatchPValue(std::vector<uint64_t>{821, 1179}, equal),
              1.193469714398597e-15, 1e-20);
  EXPECT_NEAR(*SampleRatioMismatchPValue(std::vector<uint64_t>{50, 50}, equal), 1.0, kTight);
  // Three arms weighted 1:1:2: chi^2 = 2.2 with 2 df, p = exp(-1.1).
  EXPECT_NEAR(*SampleRatioMismatchPValue(std::vector<uint64_t>{230, 260, 510},
                                         std::vector<double>{1, 1, 2}),
              0.3328710836980796, 1e-12);
  EXPECT_EQ(SampleRatioMismatchPValue(std::vector<uint64_t>{3, 2}, equal).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(SampleRatioMismatchPValue(std::vector<uint64_t>{30, 20}, std::vector<double>{1, 0})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rxfleet::experiments
