#include "common/service_notifier.h"

#include <systemd/sd-daemon.h>

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/string_view_compat.h"

namespace rxfleet::common {

ServiceNotifier::ServiceNotifier(absl::Time now) {
  uint64_t watchdog_usec = 0;
  watchdog_ = sd_watchdog_enabled(0, &watchdog_usec) > 0 && watchdog_usec > 0;
  if (watchdog_) {
    ping_interval_ = absl::Microseconds(static_cast<int64_t>(watchdog_usec / 2));
    next_ping_ = now;
  }
}

void ServiceNotifier::Ready(std::string_view status) {
  status_ = std::string(status);
  sd_notify(
      0, status.empty() ? "READY=1" : absl::StrCat("READY=1\nSTATUS=", ToAbslView(status)).c_str());
}

void ServiceNotifier::SetStatus(std::string_view status) {
  if (status == status_) return;
  status_ = std::string(status);
  sd_notify(0, absl::StrCat("STATUS=", ToAbslView(status)).c_str());
}

void ServiceNotifier::Reloading() { sd_notify(0, "RELOADING=1"); }

void ServiceNotifier::ReloadDone() { sd_notify(0, "READY=1"); }

void ServiceNotifier::Stopping() { sd_notify(0, "STOPPING=1"); }

void ServiceNotifier::PingIfDue(absl::Time now) {
  if (!watchdog_ || now < next_ping_) return;
  sd_notify(0, "WATCHDOG=1");
  next_ping_ = now + ping_interval_;
}

}  // namespace rxfleet::common
