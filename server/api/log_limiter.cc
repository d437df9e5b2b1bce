#include "server/api/log_limiter.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/string_view_compat.h"

namespace rxfleet::server {

LogLimiter::LogLimiter(absl::Duration interval, common::LogSink sink)
    : interval_(interval), sink_(std::move(sink)) {}

bool LogLimiter::Log(common::LogLevel level, std::string_view key, std::string_view message,
                     absl::Time now) {
  uint64_t suppressed = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = slots_.find(key);
    if (it == slots_.end()) it = slots_.emplace(std::string(key), Slot{}).first;
    Slot& slot = it->second;
    if (now - slot.last < interval_) {
      ++slot.suppressed;
      return false;
    }
    slot.last = now;
    suppressed = std::exchange(slot.suppressed, 0);
  }
  const std::string line = suppressed == 0 ? std::string(message)
                                           : absl::StrCat(common::ToAbslView(message), " (",
                                                          suppressed, " similar lines suppressed)");
  if (sink_ != nullptr) {
    sink_(level, line);
  } else {
    common::Log(level, line);
  }
  return true;
}

}  // namespace rxfleet::server
