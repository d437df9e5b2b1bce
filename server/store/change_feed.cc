#include "server/store/change_feed.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/log.h"
#include "server/store/postgres_util.h"
#include "server/store/pq.h"

namespace rxfleet::server {
namespace {

constexpr absl::Duration kFirstReconnectDelay = absl::Milliseconds(100);

absl::Duration Jittered(absl::BitGen& random, absl::Duration d) {
  return d * absl::Uniform(random, 0.75, 1.25);
}

int64_t ReadRevision(pq::Connection& conn) {
  pq::Result row = conn.Exec("SELECT value FROM meta WHERE key = 'revision'");
  if (row.rows() != 1) throw pq::Error("XX001", "meta key 'revision' is missing");
  return row.Int(0, 0);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChangeFeed>> ChangeFeed::Start(const ChangeFeedOptions& options,
                                                              Callback callback) {
  if (options.poll_interval <= absl::ZeroDuration() || options.poll_interval > absl::Minutes(1)) {
    return absl::InvalidArgumentError("change feed poll interval must be in (0, 1 min]");
  }
  if (options.max_reconnect_delay < kFirstReconnectDelay ||
      options.max_reconnect_delay > absl::Minutes(1)) {
    return absl::InvalidArgumentError("change feed reconnect delay must be in [100 ms, 1 min]");
  }
  if (callback == nullptr) return absl::InvalidArgumentError("change feed needs a callback");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::InternalError(absl::StrCat("change feed: pipe: ", std::strerror(errno)));
  }
  std::unique_ptr<ChangeFeed> feed(new ChangeFeed(options, std::move(callback), fds[0], fds[1]));
  {
    absl::MutexLock lock(&feed->stop_mu_);
    feed->thread_ = std::thread([f = feed.get()] { f->Loop(); });
  }
  return feed;
}

ChangeFeed::ChangeFeed(const ChangeFeedOptions& options, Callback callback, int wake_read,
                       int wake_write)
    : options_(options),
      callback_(std::move(callback)),
      wake_read_(wake_read),
      wake_write_(wake_write) {}

ChangeFeed::~ChangeFeed() {
  Stop();
  close(wake_read_);
  close(wake_write_);
}

void ChangeFeed::Stop() {
  stopping_.store(true);
  const char byte = 1;
  (void)!write(wake_write_, &byte, 1);
  absl::MutexLock lock(&stop_mu_);
  if (thread_.joinable()) thread_.join();
}

bool ChangeFeed::Wait(int fd, absl::Duration timeout) {
  if (stopping_.load()) return false;
  std::vector<pollfd> fds = {{wake_read_, POLLIN, 0}};
  if (fd >= 0) fds.push_back({fd, POLLIN, 0});
  const int ms = static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(timeout), 0,
                                                      absl::ToInt64Milliseconds(absl::Minutes(2))));
  // EINTR and timeouts both just return: the caller reads the revision either way.
  (void)poll(fds.data(), fds.size(), ms);
  return !stopping_.load();
}

void ChangeFeed::Loop() {
  absl::BitGen random;
  std::unique_ptr<pq::Connection> conn;
  absl::Duration reconnect_delay = kFirstReconnectDelay;
  bool failing = false;  // a failure was logged and nothing has worked since
  bool resync = true;
  int64_t last = -1;
  while (!stopping_.load()) {
    if (conn == nullptr) {
      try {
        conn = pq::Connection::Open(options_.conninfo, options_.connect_timeout);
        conn->Exec(absl::StrCat("LISTEN ", postgres::kRevisionChannel));
      } catch (const pq::Error& e) {
        conn.reset();
        if (!failing) {
          Log(LogLevel::kWarning,
              absl::StrCat("configuration change feed (", pq::DescribeConninfo(options_.conninfo),
                           ") cannot listen: ", e.what(), "; retrying"));
          failing = true;
        }
        if (!Wait(-1, Jittered(random, reconnect_delay))) break;
        reconnect_delay = std::min(reconnect_delay * 2, options_.max_reconnect_delay);
        continue;
      }
      if (failing) {
        Log(LogLevel::kInfo, absl::StrCat("configuration change feed (", conn->name(),
                                          ") listening again; reloading the configuration"));
        failing = false;
      }
      reconnect_delay = kFirstReconnectDelay;
      connects_.fetch_add(1);
      connected_.store(true);
      resync = true;
    }
    try {
      const int64_t revision = ReadRevision(*conn);
      if (resync || revision != last) {
        // The listener logs its own failures; without an OK it is asked again after the wait.
        if (callback_(static_cast<uint64_t>(revision), resync).ok()) {
          last = revision;
          resync = false;
        }
      }
      // Notifications may have been read off the socket during the SELECT: look before waiting.
      bool woken = false;
      absl::Time deadline = absl::Now() + Jittered(random, options_.poll_interval);
      while (!woken) {
        for (const std::string& payload : conn->TakeNotifications()) {
          notifications_.fetch_add(1);
          int64_t announced = 0;
          // A payload that does not parse still wakes: the revision row is the truth.
          if (!absl::SimpleAtoi(payload, &announced) || announced != last) woken = true;
        }
        const absl::Duration left = deadline - absl::Now();
        if (woken || left <= absl::ZeroDuration()) break;
        if (!Wait(conn->socket(), left)) break;
      }
    } catch (const pq::Error& e) {
      connected_.store(false);
      Log(LogLevel::kWarning, absl::StrCat("configuration change feed (", conn->name(),
                                           ") lost: ", e.what(), "; reconnecting"));
      failing = true;
      conn.reset();
    }
  }
  connected_.store(false);
}

}  // namespace rxfleet::server
