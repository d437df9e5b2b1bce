#pragma once

// When a callback reactor with at most one write in flight may call Finish: exactly once, only
// while no write is in flight, and (optionally) only after its handler has started it. Both
// AgentService streams and WatchEvents watches use it, so a finish requested during a write
// that then fails (the client cancelled) still finishes: without that, grpc::Server::Shutdown
// waits for the call for ever.
//
// Not thread-safe: the reactor calls it under its own mutex, and calls Finish(status()) with
// that mutex held whenever a method returns true (gRPC never runs reactions inline).

#include <grpcpp/grpcpp.h>

#include <optional>

namespace rxfleet::server {

class FinishGate {
 public:
  /// `started` false: Finish waits for Start() too (a handler still registering the call).
  explicit FinishGate(bool started = true) : started_(started) {}

  /// Asks to finish with `status`; the first request's status wins. True: call Finish now.
  bool Request(const grpc::Status& status) {
    if (!status_.has_value()) status_ = status;
    return Ready();
  }

  /// The handler finished starting the call. True: call Finish now (a request came meanwhile).
  bool Start() {
    started_ = true;
    return Ready();
  }

  /// A write was started.
  void WriteStarted() { writing_ = true; }

  /// The write in flight completed. `ok` false (the transport is gone) requests a finish with
  /// UNAVAILABLE("write failed") unless one was requested already. True: call Finish now.
  bool WriteDone(bool ok) {
    writing_ = false;
    if (!ok && !status_.has_value()) {
      status_ = grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed");
    }
    return Ready();
  }

  /// A finish was requested: start no more writes.
  bool finishing() const { return status_.has_value(); }
  bool writing() const { return writing_; }
  /// The status to finish with; only valid while finishing().
  const grpc::Status& status() const { return *status_; }

 private:
  bool Ready() {
    if (finished_ || !status_.has_value() || !started_ || writing_) return false;
    finished_ = true;
    return true;
  }

  std::optional<grpc::Status> status_;
  bool started_;
  bool writing_ = false;
  bool finished_ = false;
};

}  // namespace rxfleet::server
