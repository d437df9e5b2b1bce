#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "rxfleet/v1/host.pb.h"

namespace rxfleet::agent {

/// What uname(2) reports; injectable so label detection is testable.
struct UnameInfo {
  std::string nodename;  ///< host name
  std::string release;   ///< kernel release, e.g. "6.12.25-v8+"
  std::string machine;   ///< "x86_64", "aarch64", "armv6l"
};

/// uname(2) of this machine (empty fields if it fails).
UnameInfo ReadUname();

/// Facts about the machine for status reports (rxfleet.v1.HostInfo). Missing sources leave
/// fields empty/zero; reading never fails.
struct HostFacts {
  std::string hostname;
  std::string kernel_release;
  std::string arch;
  std::string os;             ///< /etc/os-release PRETTY_NAME
  std::string cpu_model;      ///< <procfs>/cpuinfo "model name" (x86) or "Model" (Raspberry Pi)
  uint32_t cpu_count = 0;     ///< online CPUs
  std::string board_model;    ///< <procfs>/device-tree/model, NULs and whitespace trimmed
  uint64_t memory_bytes = 0;  ///< <procfs>/meminfo MemTotal
  std::string boot_id;        ///< <procfs>/sys/kernel/random/boot_id
};

/// Reads HostFacts from `procfs_root` ("/proc"), /etc/os-release and `uname`.
HostFacts ReadHostFacts(const std::string& procfs_root, const UnameInfo& uname);

/// Copies `facts` into `out` (the Hello's and the local status answer's host_info).
void HostFactsToProto(const HostFacts& facts, v1::HostInfo* out);

/// Turns text into a valid label value (common::ValidateLabelValue): characters outside
/// [A-Za-z0-9._-] become '-', runs of '-' collapse, leading/trailing non-alphanumerics are
/// dropped, and the result is cut to 63 characters. "6.12.25-v8+" -> "6.12.25-v8". May return
/// an empty string.
std::string SanitizeLabelValue(std::string_view text);

/// Normalises a device-tree board model to a short board label:
///   "Raspberry Pi Model B Plus Rev 1.2"      -> "pi1" (the first Pi models name no number)
///   "Raspberry Pi 1 Model B Plus Rev 1.2"    -> "pi1"
///   "Raspberry Pi 5 Model B Rev 1.0"         -> "pi5"
///   "Raspberry Pi 400 Rev 1.0"               -> "pi400"
///   "Raspberry Pi Zero 2 W Rev 1.0"          -> "pizero2"; "Raspberry Pi Zero W" -> "pizero"
///   "Raspberry Pi Compute Module 4 Rev 1.0"  -> "cm4"
///   other boards: lower-cased, " Rev x.y" dropped, SanitizeLabelValue ("Radxa ROCK 5B" ->
///   "radxa-rock-5b").
/// nullopt for an empty model (no device tree: x86) or one that sanitises to nothing.
std::optional<std::string> NormalizeBoardModel(std::string_view model);

/// Host labels detected on this machine: `arch` (uname machine), `kernel` (uname release) and,
/// when <procfs_root>/device-tree/model exists, `board` (NormalizeBoardModel). Values are
/// sanitised; a value that sanitises to nothing is left out.
std::map<std::string, std::string> DetectHostLabels(const std::string& procfs_root,
                                                    const UnameInfo& uname);

/// The default host id: the host name, lower-cased, with characters outside [a-z0-9.-] replaced
/// by '-' (cut to 63); "localhost" if the name is empty.
std::string DefaultHostId(const std::string& hostname);

}  // namespace rxfleet::agent
