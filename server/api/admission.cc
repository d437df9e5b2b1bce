#include "server/api/admission.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/retry_after.h"

namespace rxfleet::server {

absl::Status ValidateAdmissionOptions(const AdmissionOptions& options) {
  if (!(options.accept_rate > 0) || !std::isfinite(options.accept_rate)) {
    return absl::InvalidArgumentError("--agent-accept-rate must be a positive number per second");
  }
  if (options.accept_burst < 1) {
    return absl::InvalidArgumentError("--agent-accept-burst must be at least 1");
  }
  if (options.max_streams < 1) {
    return absl::InvalidArgumentError("--max-agent-streams must be at least 1");
  }
  if (options.cap_retry_after <= absl::ZeroDuration() ||
      options.max_retry_after <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("admission retry hints must be positive");
  }
  // A token must be earned within the longest hint, else every hint would be clamped to it
  // and miss the token (it was 1 ms for a rate of 0.001/s).
  if (options.accept_rate * absl::ToDoubleSeconds(options.max_retry_after) < 1.0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--agent-accept-rate ", options.accept_rate, " is too low: at least one stream per ",
        absl::FormatDuration(options.max_retry_after), " (the longest retry hint)"));
  }
  return absl::OkStatus();
}

Admission::Admission(AdmissionOptions options, absl::Time now)
    : options_(options),
      token_time_(absl::Seconds(1) / options.accept_rate),
      tokens_(static_cast<double>(options.accept_burst)),
      last_refill_(now) {}

void Admission::RefillLocked(absl::Time now) {
  if (now <= last_refill_) return;
  tokens_ = std::min(static_cast<double>(options_.accept_burst),
                     tokens_ + absl::ToDoubleSeconds(now - last_refill_) * options_.accept_rate);
  last_refill_ = now;
}

AdmissionDecision Admission::TryAdmit(absl::Time now) {
  AdmissionDecision decision;
  absl::MutexLock lock(&mu_);
  RefillLocked(now);
  now = std::max(now, last_refill_);
  if (streams_ >= options_.max_streams) {
    decision.reason = kRefusedMaxStreams;
    decision.retry_after = std::min(options_.cap_retry_after * absl::Uniform(gen_, 1.0, 2.0),
                                    options_.max_retry_after);
    decision.message =
        absl::StrCat("this server holds its maximum of ", options_.max_streams,
                     " agent streams (--max-agent-streams); retry after ",
                     common::FormatRetryAfter(decision.retry_after), " ms (",
                     common::kRetryAfterMetadataKey.data(), ") or connect to another replica");
    return decision;
  }
  if (tokens_ >= 1.0) {
    tokens_ -= 1.0;
    ++streams_;
    decision.admitted = true;
    return decision;
  }
  // The next token not yet promised: after the one being earned now and after every promise.
  const absl::Time next_token = now + token_time_ * (1.0 - tokens_);
  const absl::Time slot =
      std::min(std::max(next_token, promised_until_), now + options_.max_retry_after - token_time_);
  promised_until_ = slot + token_time_;
  decision.reason = kRefusedAcceptRate;
  decision.retry_after = std::clamp(slot - now + token_time_ * absl::Uniform(gen_, 0.0, 1.0),
                                    absl::Milliseconds(1), options_.max_retry_after);
  decision.message = absl::StrFormat(
      "agent streams are being accepted at most %g per second (--agent-accept-rate) after "
      "a burst of %d (--agent-accept-burst); retry after %s ms (%s)",
      options_.accept_rate, options_.accept_burst, common::FormatRetryAfter(decision.retry_after),
      common::kRetryAfterMetadataKey.data());
  return decision;
}

void Admission::Release() {
  absl::MutexLock lock(&mu_);
  if (streams_ > 0) --streams_;
}

size_t Admission::streams() const {
  absl::MutexLock lock(&mu_);
  return streams_;
}

}  // namespace rxfleet::server
