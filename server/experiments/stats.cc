#include "server/experiments/stats.h"

#include <algorithm>
#include <boost/math/distributions/chi_squared.hpp>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace rxfleet::experiments {
namespace {

absl::Status CheckLevel(double level) {
  if (!(level > 0 && level < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("confidence level ", level, " must lie strictly between 0 and 1"));
  }
  return absl::OkStatus();
}

absl::Status CheckFinite(std::span<const double> sample, absl::string_view name) {
  for (size_t i = 0; i < sample.size(); ++i) {
    if (!std::isfinite(sample[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, "[", i, "] is not a finite number (", sample[i], ")"));
    }
  }
  return absl::OkStatus();
}

double Mean(std::span<const double> x) {
  if (x.empty()) return 0;
  return std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(x.size());
}

// Sample variance with divisor n - 1 (two-pass for accuracy); 0 for n < 2.
double Variance(std::span<const double> x, double mean) {
  if (x.size() < 2) return 0;
  double sum = 0;
  for (double v : x) sum += (v - mean) * (v - mean);
  return sum / static_cast<double>(x.size() - 1);
}

// Upper quantile t such that P(T_df <= t) = p. df > 0, p in (0, 1).
double StudentQuantile(double df, double p) {
  return boost::math::quantile(boost::math::students_t_distribution<double>(df), p);
}

// Two-sided p-value 2 P(T_df > |t|).
double TwoSidedP(double df, double t) {
  const double tail = boost::math::cdf(
      boost::math::complement(boost::math::students_t_distribution<double>(df), std::fabs(t)));
  return std::min(1.0, 2 * tail);
}

void FillTest(double level, DifferenceEstimate* e) {
  e->t = e->diff / e->std_error;
  const double crit = StudentQuantile(e->df, 1 - (1 - level) / 2);
  e->ci = {e->diff - crit * e->std_error, e->diff + crit * e->std_error};
  e->p_value = TwoSidedP(e->df, e->t);
}

// Delta-method relative difference D / C from the variances of D and C and their covariance.
std::optional<RelativeEstimate> Relative(double d, double c, double var_d, double var_c,
                                         double cov_dc, double df, double level) {
  if (c == 0) return std::nullopt;
  const double variance =
      var_d / (c * c) + d * d * var_c / (c * c * c * c) - 2 * d * cov_dc / (c * c * c);
  // No spread left around the ratio (e.g. two pairs, one of them all zeros, fit d = r c
  // exactly): the data say nothing about its uncertainty, so there is no interval to give.
  if (!(variance > 0)) return std::nullopt;
  RelativeEstimate r;
  r.value = d / c;
  r.std_error = std::sqrt(variance);
  const double crit = StudentQuantile(df, 1 - (1 - level) / 2);
  r.ci = {r.value - crit * r.std_error, r.value + crit * r.std_error};
  return r;
}

void FillAlwaysValid(double level, DifferenceEstimate* e) {
  const double variance = e->std_error * e->std_error;
  double tau = kMixtureRelativeEffect * std::fabs(e->control_mean);
  if (!(tau > 0)) tau = e->std_error;
  absl::StatusOr<AlwaysValidEstimate> av = AlwaysValid(e->diff, variance, tau * tau, level);
  // Inputs are positive and finite here; AlwaysValid cannot fail.
  if (av.ok()) e->always_valid = *av;
}

}  // namespace

absl::StatusOr<MeanEstimate> EstimateMean(std::span<const double> sample, double level) {
  if (absl::Status s = CheckLevel(level); !s.ok()) return s;
  if (absl::Status s = CheckFinite(sample, "sample"); !s.ok()) return s;
  MeanEstimate e;
  e.n = sample.size();
  if (e.n == 0) return e;
  e.mean = Mean(sample);
  if (e.n < 2) return e;
  e.sd = std::sqrt(Variance(sample, e.mean));
  e.std_error = e.sd / std::sqrt(static_cast<double>(e.n));
  const double crit = StudentQuantile(static_cast<double>(e.n - 1), 1 - (1 - level) / 2);
  e.ci = Interval{e.mean - crit * e.std_error, e.mean + crit * e.std_error};
  return e;
}

std::optional<double> LowerConfidenceBound(const MeanEstimate& estimate, double level) {
  if (estimate.n < 2 || !(level > 0 && level < 1)) return std::nullopt;
  return estimate.mean -
         StudentQuantile(static_cast<double>(estimate.n - 1), level) * estimate.std_error;
}

std::optional<double> UpperConfidenceBound(const MeanEstimate& estimate, double level) {
  if (estimate.n < 2 || !(level > 0 && level < 1)) return std::nullopt;
  return estimate.mean +
         StudentQuantile(static_cast<double>(estimate.n - 1), level) * estimate.std_error;
}

absl::StatusOr<DifferenceEstimate> WelchTTest(std::span<const double> treatment,
                                              std::span<const double> control, double level) {
  if (absl::Status s = CheckLevel(level); !s.ok()) return s;
  if (absl::Status s = CheckFinite(treatment, "treatment"); !s.ok()) return s;
  if (absl::Status s = CheckFinite(control, "control"); !s.ok()) return s;
  if (treatment.size() < 2 || control.size() < 2) {
    return absl::FailedPreconditionError(
        absl::StrCat("not enough data: Welch's t-test needs at least 2 units per arm, found ",
                     treatment.size(), " (treatment) and ", control.size(), " (control)"));
  }
  DifferenceEstimate e;
  e.method = TestMethod::kWelch;
  e.n_treatment = treatment.size();
  e.n_control = control.size();
  e.treatment_mean = Mean(treatment);
  e.control_mean = Mean(control);
  const double n1 = static_cast<double>(e.n_treatment);
  const double n2 = static_cast<double>(e.n_control);
  const double v1 = Variance(treatment, e.treatment_mean) / n1;  // squared standard errors
  const double v2 = Variance(control, e.control_mean) / n2;
  if (v1 + v2 <= 0) {
    return absl::FailedPreconditionError(
        "not enough data: every unit of both arms has the same value, so the t statistic is "
        "undefined");
  }
  e.diff = e.treatment_mean - e.control_mean;
  e.std_error = std::sqrt(v1 + v2);
  e.df = (v1 + v2) * (v1 + v2) / (v1 * v1 / (n1 - 1) + v2 * v2 / (n2 - 1));
  FillTest(level, &e);
  // D = T - C, so Var(D) = v1 + v2 and Cov(D, C) = -v2.
  e.relative = Relative(e.diff, e.control_mean, v1 + v2, v2, -v2, e.df, level);
  FillAlwaysValid(level, &e);
  return e;
}

absl::StatusOr<DifferenceEstimate> PairedTTest(std::span<const double> treatment,
                                               std::span<const double> control, double level) {
  if (absl::Status s = CheckLevel(level); !s.ok()) return s;
  if (treatment.size() != control.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("paired samples differ in length: ", treatment.size(), " treatment values, ",
                     control.size(), " control values"));
  }
  if (absl::Status s = CheckFinite(treatment, "treatment"); !s.ok()) return s;
  if (absl::Status s = CheckFinite(control, "control"); !s.ok()) return s;
  const size_t n = treatment.size();
  if (n < 2) {
    return absl::FailedPreconditionError(absl::StrCat(
        "not enough data: the paired t-test needs at least 2 units measured under both arms, "
        "found ",
        n));
  }
  std::vector<double> d(n);
  for (size_t i = 0; i < n; ++i) d[i] = treatment[i] - control[i];
  DifferenceEstimate e;
  e.method = TestMethod::kPaired;
  e.n_treatment = e.n_control = n;
  e.treatment_mean = Mean(treatment);
  e.control_mean = Mean(control);
  e.diff = Mean(d);
  const double nn = static_cast<double>(n);
  const double var_d = Variance(d, e.diff);
  if (var_d <= 0) {
    return absl::FailedPreconditionError(
        "not enough data: every unit shows the same difference, so the t statistic is undefined");
  }
  e.std_error = std::sqrt(var_d / nn);
  e.df = nn - 1;
  FillTest(level, &e);
  const double var_c = Variance(control, e.control_mean);
  double cov = 0;
  for (size_t i = 0; i < n; ++i) cov += (d[i] - e.diff) * (control[i] - e.control_mean);
  cov /= nn - 1;
  e.relative = Relative(e.diff, e.control_mean, var_d / nn, var_c / nn, cov / nn, e.df, level);
  FillAlwaysValid(level, &e);
  return e;
}

absl::StatusOr<AlwaysValidEstimate> AlwaysValid(double diff, double variance,
                                                double mixture_variance, double level) {
  if (absl::Status s = CheckLevel(level); !s.ok()) return s;
  if (!std::isfinite(diff) || !std::isfinite(variance) || !std::isfinite(mixture_variance) ||
      variance <= 0 || mixture_variance <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("mSPRT needs a finite difference and positive finite variances (diff ", diff,
                     ", variance ", variance, ", mixture variance ", mixture_variance, ")"));
  }
  const double v = variance;
  const double tau2 = mixture_variance;
  // log Lambda, evaluated in logs so large effects do not overflow.
  const double log_lambda =
      0.5 * std::log(v / (v + tau2)) + tau2 * diff * diff / (2 * v * (v + tau2));
  AlwaysValidEstimate a;
  a.mixture_variance = tau2;
  a.p_value = std::min(1.0, std::exp(-log_lambda));
  const double alpha = 1 - level;
  const double half_width =
      std::sqrt(2 * v * (v + tau2) / tau2 * (std::log(1 / alpha) + 0.5 * std::log((v + tau2) / v)));
  a.ci = {diff - half_width, diff + half_width};
  return a;
}

absl::StatusOr<double> SampleRatioMismatchPValue(std::span<const uint64_t> counts,
                                                 std::span<const double> shares) {
  if (counts.size() != shares.size() || counts.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("sample ratio check needs matching counts and shares for at least 2 arms "
                     "(found ",
                     counts.size(), " counts, ", shares.size(), " shares)"));
  }
  double share_total = 0;
  for (double s : shares) {
    if (!(s > 0) || !std::isfinite(s)) {
      return absl::InvalidArgumentError(absl::StrCat("share ", s, " must be positive"));
    }
    share_total += s;
  }
  const double total =
      static_cast<double>(std::accumulate(counts.begin(), counts.end(), uint64_t{0}));
  if (total < 5.0 * static_cast<double>(counts.size())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "not enough data: the sample ratio check needs at least 5 units per arm on average, "
        "found ",
        total, " in ", counts.size(), " arms"));
  }
  double chi2 = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double expected = total * shares[i] / share_total;
    const double delta = static_cast<double>(counts[i]) - expected;
    chi2 += delta * delta / expected;
  }
  const boost::math::chi_squared_distribution<double> dist(static_cast<double>(counts.size() - 1));
  return boost::math::cdf(boost::math::complement(dist, chi2));
}

}  // namespace rxfleet::experiments
