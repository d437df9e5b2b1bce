#include "agent/link/bundle_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/proto/convert.h"
#include "common/proto/probe.h"
#include "common/proto/time.h"
#include "common/regular_file.h"

namespace rxfleet::agent {
namespace {

absl::Status ErrnoStatus(int error, const std::string& what) {
  const std::string message = absl::StrCat(what, ": ", std::strerror(error));
  switch (error) {
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(message);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

// Writes all of `data` to `fd`, retrying short writes and EINTR.
bool WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

absl::Status WriteBundleFile(const std::string& path, const v1::PolicyBundle& bundle,
                             const std::string& host_id) {
  const std::filesystem::path target(path);
  const std::filesystem::path dir =
      target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  std::error_code ec;
  if (std::filesystem::create_directories(dir, ec)) {
    std::filesystem::permissions(dir, std::filesystem::perms(0750),
                                 std::filesystem::perm_options::replace, ec);
  } else if (ec) {
    return ErrnoStatus(ec.value(), absl::StrCat("cannot create ", dir.string()));
  }
  v1::PersistedBundle persisted;
  persisted.set_host_id(host_id);
  *persisted.mutable_bundle() = bundle;
  std::string data;
  if (!persisted.SerializeToString(&data)) {
    return absl::InternalError("cannot serialise the bundle");
  }
  const std::string temp = absl::StrCat(path, ".tmp");
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot create ", temp));
  if (!WriteAll(fd, data) || ::fsync(fd) != 0) {
    const int error = errno;
    ::close(fd);
    ::unlink(temp.c_str());
    return ErrnoStatus(error, absl::StrCat("cannot write ", temp));
  }
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    return ErrnoStatus(error, absl::StrCat("cannot write ", temp));
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    return ErrnoStatus(error, absl::StrCat("cannot rename ", temp, " to ", path));
  }
  // The rename is durable only once the directory entry is on disk.
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot open ", dir.string()));
  const bool synced = ::fsync(dir_fd) == 0;
  const int error = errno;
  ::close(dir_fd);
  if (!synced) return ErrnoStatus(error, absl::StrCat("cannot sync ", dir.string()));
  return absl::OkStatus();
}

absl::StatusOr<v1::PersistedBundle> ReadBundleFile(const std::string& path) {
  // Non-blocking, regular files only, size capped (a FIFO at the path hung start-up with
  // SIGTERM ignored; a huge file took all memory).
  absl::StatusOr<std::string> read = common::ReadRegularFile(path, kMaxBundleFileBytes);
  if (!read.ok()) {
    switch (read.status().code()) {
      case absl::StatusCode::kNotFound:
        return absl::NotFoundError(absl::StrCat("no persisted bundle at ", path));
      case absl::StatusCode::kFailedPrecondition:
        return absl::FailedPreconditionError(absl::StrCat(
            path, " is not a regular file; remove it so the agent can persist bundles"));
      case absl::StatusCode::kOutOfRange:
        return absl::DataLossError(
            absl::StrCat(read.status().message(), " a persisted bundle can have; ignoring it"));
      default:
        return read.status();
    }
  }
  const std::string& bytes = *read;
  v1::PersistedBundle persisted;
  if (persisted.ParseFromString(bytes) && persisted.has_bundle()) return persisted;
  // Written before host ids were recorded: a bare PolicyBundle.
  persisted.Clear();
  if (!persisted.mutable_bundle()->ParseFromString(bytes)) {
    return absl::DataLossError(absl::StrCat(path, " is not a persisted bundle"));
  }
  return persisted;
}

PersistedBundleOwner OwnerOfPersistedBundle(const v1::PersistedBundle& persisted,
                                            std::string_view host_id) {
  if (persisted.host_id().empty()) return PersistedBundleOwner::kUnrecorded;
  return persisted.host_id() == host_id ? PersistedBundleOwner::kThisHost
                                        : PersistedBundleOwner::kOtherHost;
}

absl::StatusOr<ServerBundle> ServerBundleFromProto(const v1::PolicyBundle& bundle) {
  ServerBundle out;
  out.version = bundle.version();
  const std::string source = absl::StrCat("bundle ", bundle.version());
  for (const v1::Policy& policy : bundle.policies()) {
    absl::StatusOr<common::Policy> converted = common::PolicyFromProto(policy, source);
    if (!converted.ok()) return converted.status();
    out.policies.push_back(*std::move(converted));
  }
  for (int i = 0; i < bundle.assignments_size(); ++i) {
    const v1::ExperimentAssignment& a = bundle.assignments(i);
    ExperimentAssignment assignment;
    assignment.adapter_id = a.adapter_id();
    assignment.experiment = a.experiment();
    assignment.arm = a.arm();
    assignment.settings = common::RxAggSettingsFromProto(a.settings());
    assignment.priority = a.priority();
    assignment.period_index = a.period_index();
    if (a.has_period_end_time()) {
      assignment.period_end = common::TimeFromProto(a.period_end_time());
    }
    if (a.has_period_start_time()) {
      assignment.period_start = common::TimeFromProto(a.period_start_time());
    }
    assignment.experiment_generation = a.experiment_generation();
    assignment.window_length = common::DurationFromProto(a.window_length());
    assignment.burn_in = common::DurationFromProto(a.burn_in());
    if (a.has_probe()) {
      absl::StatusOr<common::ProbeSpec> probe =
          common::ProbeSpecFromProto(a.probe(), absl::StrCat("assignments[", i, "].probe"));
      if (!probe.ok()) return probe.status();
      assignment.probe = *std::move(probe);
      assignment.probe_offset = common::DurationFromProto(a.probe_offset());
      if (assignment.probe_offset < absl::ZeroDuration()) {
        return absl::InvalidArgumentError(
            absl::StrCat("assignments[", i, "].probe_offset must not be negative"));
      }
      assignment.probe_rounds = std::max<uint32_t>(1, a.probe_rounds());
      assignment.probe_round = a.probe_round();
      if (assignment.probe_round >= assignment.probe_rounds) {
        return absl::InvalidArgumentError(
            absl::StrCat("assignments[", i, "].probe_round ", a.probe_round(),
                         " must be below probe_rounds ", assignment.probe_rounds));
      }
    }
    out.assignments.push_back(std::move(assignment));
  }
  for (const v1::ProbeSlot& slot : bundle.probe_slots()) {
    const absl::Duration offset = common::DurationFromProto(slot.offset());
    if (slot.adapter_id().empty() || offset < absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat("probe slot '", slot.adapter_id(),
                                                     "': needs an adapter id and an offset >= 0"));
    }
    out.probe_slots[slot.adapter_id()] = {slot.policy(), offset};
  }
  return out;
}

}  // namespace rxfleet::agent
