#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>

namespace rxfleet::server {

/// The outbound queue of one stream, with at most one write in flight (gRPC allows one
/// outstanding write per stream). Items are kept per slot, and a slot holds only the newest
/// item: pushing into an occupied slot replaces (coalesces) the older pending item, so a slow
/// receiver costs at most kSlots pending items however many pushes it misses. When a write
/// finishes, the next item comes from the lowest occupied slot (slot 0 first).
///
/// For the agent stream: slot 0 = ServerConfig, slot 1 = PolicyBundle (a newer bundle makes an
/// unsent older one pointless: bundles are the complete state of the world).
///
/// Not thread-safe: the owning stream guards it with its mutex. Typical use:
///   if (auto item = queue.Push(slot, x)) StartWrite(*item);      // from any thread
///   if (auto next = queue.WriteDone()) StartWrite(*next);        // in OnWriteDone
template <typename T, size_t kSlots>
class OutboundQueue {
 public:
  /// Stores `item` in `slot` (< kSlots), replacing a pending item there. If no write is in
  /// flight, takes the next item to write (marking a write in flight) and returns it; the
  /// caller must start that write. Otherwise returns nullopt.
  std::optional<T> Push(size_t slot, T item) {
    if (pending_[slot].has_value()) ++coalesced_;
    pending_[slot] = std::move(item);
    if (in_flight_) return std::nullopt;
    return TakeNext();
  }

  /// Ends the write in flight. Returns the next item to write (a write is in flight again) or
  /// nullopt (idle).
  std::optional<T> WriteDone() {
    in_flight_ = false;
    return TakeNext();
  }

  /// Drops every pending item and forgets the write in flight (the stream is ending).
  void Clear() {
    for (std::optional<T>& item : pending_) item.reset();
    in_flight_ = false;
  }

  /// True while a write is in flight.
  bool in_flight() const { return in_flight_; }
  /// Items waiting behind the write in flight, <= kSlots.
  size_t pending() const {
    size_t n = 0;
    for (const std::optional<T>& item : pending_) n += item.has_value() ? 1 : 0;
    return n;
  }
  /// Pending items replaced by newer ones so far.
  uint64_t coalesced() const { return coalesced_; }

 private:
  std::optional<T> TakeNext() {
    for (std::optional<T>& item : pending_) {
      if (!item.has_value()) continue;
      std::optional<T> next = std::move(item);
      item.reset();
      in_flight_ = true;
      return next;
    }
    return std::nullopt;
  }

  std::array<std::optional<T>, kSlots> pending_;
  bool in_flight_ = false;
  uint64_t coalesced_ = 0;
};

}  // namespace rxfleet::server
