#pragma once

// Statistics of experiment reports: means with confidence intervals, Welch's and paired
// t-tests, relative differences by the delta method, always-valid p-values (mSPRT) and the
// sample-ratio-mismatch check. Distribution functions come from Boost.Math (students_t,
// normal, chi_squared); nothing here hand-rolls a distribution.
//
// Conventions: samples are spans of finite doubles in the metric's base unit; `level` is the
// two-sided confidence level in (0, 1), 0.95 unless said otherwise. Functions that need more
// data than they were given return FailedPrecondition with a message that starts with
// "not enough data: " so callers can show it as such; malformed input (NaN, mismatched
// lengths, bad level) is InvalidArgument.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rxfleet::experiments {

/// The confidence level of every interval in reports.
inline constexpr double kConfidenceLevel = 0.95;

/// A closed interval [low, high].
struct Interval {
  double low = 0;
  double high = 0;
  bool Contains(double x) const { return low <= x && x <= high; }
  friend bool operator==(const Interval&, const Interval&) = default;
};

/// Mean of one sample with its t-based confidence interval.
struct MeanEstimate {
  size_t n = 0;          ///< sample size
  double mean = 0;       ///< arithmetic mean; 0 when n == 0
  double sd = 0;         ///< sample standard deviation (divisor n - 1); 0 when n < 2
  double std_error = 0;  ///< sd / sqrt(n); 0 when n < 2
  /// mean +- t(1 - (1 - level) / 2, n - 1) * std_error; absent when n < 2 (one value says
  /// nothing about spread).
  std::optional<Interval> ci;
};

/// Mean, standard deviation and the Student t confidence interval of the mean
/// (e.g. Moore, McCabe & Craig, *Introduction to the Practice of Statistics*, §7.1).
/// n == 0 gives an empty estimate (n = 0, no ci). Errors: InvalidArgument for non-finite
/// values or a level outside (0, 1).
absl::StatusOr<MeanEstimate> EstimateMean(std::span<const double> sample,
                                          double level = kConfidenceLevel);

/// One-sided confidence bounds of a mean: lower = mean - t(level, n - 1) * std_error and
/// upper = mean + t(level, n - 1) * std_error, where `level` is one-sided (0.95 puts 5 % in
/// one tail). nullopt when estimate.n < 2.
std::optional<double> LowerConfidenceBound(const MeanEstimate& estimate,
                                           double level = kConfidenceLevel);
std::optional<double> UpperConfidenceBound(const MeanEstimate& estimate,
                                           double level = kConfidenceLevel);

/// Which test produced a DifferenceEstimate.
enum class TestMethod : uint8_t {
  kWelch,   ///< two independent samples, unequal variances (parallel design)
  kPaired,  ///< within-unit differences (switchback design)
};

/// The relative difference diff / control mean with its delta-method interval.
struct RelativeEstimate {
  double value = 0;      ///< diff / control mean (0.1 = +10 %)
  double std_error = 0;  ///< delta-method standard error
  Interval ci;           ///< value +- the test's t critical value * std_error
};

/// Always-valid inference for the difference by the mixture sequential probability ratio test
/// (mSPRT) with a normal mixture N(0, tau^2) over the effect: Johari, Koomen, Pekelis & Walsh,
/// "Always Valid Inference: Continuous Monitoring of A/B Tests", Operations Research 70(3),
/// 2022 (arXiv:1512.04922), eq. for the normal mSPRT with the variance of the estimate v:
///   Lambda = sqrt(v / (v + tau^2)) * exp(tau^2 diff^2 / (2 v (v + tau^2))),
///   p = min(1, 1 / Lambda),
///   CI = diff +- sqrt(2 v (v + tau^2) / tau^2 * (ln(1 / alpha) + ln((v + tau^2) / v) / 2)).
/// These stay valid however often the report is looked at; v is the plug-in estimate of the
/// t-test (a large-sample normal approximation), so for small samples they are approximate.
struct AlwaysValidEstimate {
  double p_value = 1;           ///< in [0, 1]
  Interval ci;                  ///< at the same level as the fixed-horizon interval
  double mixture_variance = 0;  ///< tau^2 used, in the metric's unit squared
};

/// A difference between a treatment and the control: estimate, interval and test.
struct DifferenceEstimate {
  TestMethod method = TestMethod::kWelch;
  size_t n_treatment = 0;  ///< units in the treatment sample (pairs for kPaired)
  size_t n_control = 0;    ///< units in the control sample (pairs for kPaired)
  double treatment_mean = 0;
  double control_mean = 0;
  double diff = 0;       ///< treatment mean - control mean (kPaired: mean of differences)
  double std_error = 0;  ///< standard error of diff, > 0
  double df = 0;         ///< degrees of freedom of the t reference distribution
  double t = 0;          ///< diff / std_error
  Interval ci;           ///< diff +- t(1 - (1 - level) / 2, df) * std_error
  double p_value = 1;    ///< two-sided, 2 * P(T_df > |t|), in [0, 1]
  /// Absent when the control mean is 0 (a relative change is undefined) or when the delta
  /// method leaves no variance (the units fit diff = r * control exactly, e.g. two pairs one
  /// of which is all zeros), where a zero-width interval would be false precision.
  std::optional<RelativeEstimate> relative;
  AlwaysValidEstimate always_valid;
};

/// Relative size of the effect the always-valid test is tuned for: tau = this fraction of the
/// control mean (tau = the standard error of diff when the control mean is 0). The choice
/// affects power only, not validity.
inline constexpr double kMixtureRelativeEffect = 0.1;

/// Welch's t-test of two independent samples with unequal variances (B. L. Welch, "The
/// generalization of Student's problem when several different population variances are
/// involved", Biometrika 34, 1947) with the Welch–Satterthwaite degrees of freedom
/// (F. E. Satterthwaite, Biometrics Bulletin 2(6), 1946):
///   se^2 = s1^2/n1 + s2^2/n2,  df = se^4 / ((s1^2/n1)^2/(n1-1) + (s2^2/n2)^2/(n2-1)).
/// The relative difference uses the delta method for a ratio of independent means
/// (Casella & Berger, *Statistical Inference*, 2nd ed., §5.5.4; Deng, Knoblich & Lu,
/// "Applying the Delta Method in Metric Analytics", KDD 2018):
///   Var(diff / c) ~ se_t^2 / c^2 + t^2 se_c^2 / c^4  (t, c: treatment and control means),
/// with the same t critical value and df as the difference.
/// Errors: FailedPrecondition "not enough data: ..." when either sample has fewer than 2
/// values or both have zero variance (the t statistic is undefined); InvalidArgument for
/// non-finite values or a level outside (0, 1).
absl::StatusOr<DifferenceEstimate> WelchTTest(std::span<const double> treatment,
                                              std::span<const double> control,
                                              double level = kConfidenceLevel);

/// Paired t-test (Student, "The probable error of a mean", Biometrika 6, 1908) on the
/// differences d_i = treatment_i - control_i of units measured under both conditions:
///   diff = mean(d), se = sd(d) / sqrt(n), df = n - 1.
/// The relative difference mean(d) / mean(control) uses the delta method with the sample
/// covariance of (d_i, control_i) (same references as WelchTTest):
///   Var ~ Var(d)/c^2 + D^2 Var(c)/c^4 - 2 D Cov(d, c)/c^3, each divided by n.
/// Errors: InvalidArgument when the spans differ in length, for non-finite values or a bad
/// level; FailedPrecondition "not enough data: ..." for fewer than 2 pairs or differences
/// that are all equal (zero variance).
absl::StatusOr<DifferenceEstimate> PairedTTest(std::span<const double> treatment,
                                               std::span<const double> control,
                                               double level = kConfidenceLevel);

/// The mSPRT quantities of AlwaysValidEstimate for an estimate `diff` whose variance is
/// `variance` (> 0) with mixture variance `mixture_variance` (> 0) at two-sided `level`.
/// Errors: InvalidArgument for non-positive or non-finite variances or a bad level.
absl::StatusOr<AlwaysValidEstimate> AlwaysValid(double diff, double variance,
                                                double mixture_variance,
                                                double level = kConfidenceLevel);

/// Sample ratio mismatch check: Pearson's chi-square goodness-of-fit test of observed counts
/// against the expected shares (Fabijan et al., "Diagnosing Sample Ratio Mismatch in Online
/// Controlled Experiments", KDD 2019). Returns the p-value (chi-square with k - 1 degrees of
/// freedom); a tiny p-value (< 0.001) means the assignment or the data collection is broken.
/// Errors: InvalidArgument when the spans differ in length, have fewer than 2 entries, or a
/// share is not positive; FailedPrecondition "not enough data: ..." when the total count is
/// below 5 per category on average.
absl::StatusOr<double> SampleRatioMismatchPValue(std::span<const uint64_t> counts,
                                                 std::span<const double> shares);

}  // namespace rxfleet::experiments
