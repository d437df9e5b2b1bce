#include "agent/status/status_server.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "grpcpp/grpcpp.h"
#include "rxfleet/v1/local_status.grpc.pb.h"

namespace rxfleet::agent {
namespace {

constexpr size_t kMaxSocketPath = sizeof(sockaddr_un{}.sun_path) - 1;

std::string Errno(int error) { return std::strerror(error); }

absl::Status ErrnoStatus(int error, std::string message) {
  absl::StrAppend(&message, ": ", Errno(error));
  if (error == EACCES || error == EPERM || error == EROFS) {
    return absl::PermissionDeniedError(message);
  }
  return absl::InternalError(message);
}

// True if something accepts connections on the socket at `path`.
bool SomeoneListens(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  const bool connected = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return connected;
}

absl::Status PrepareSocketPath(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("status socket path is empty");
  if (path.size() > kMaxSocketPath) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "status socket path %s is %d bytes long; a Unix socket path holds at most %d", path,
        path.size(), kMaxSocketPath));
  }
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
      // Create missing parents with 0755: the socket's own mode (0660) controls access.
      std::filesystem::create_directories(dir, ec);
      if (ec) {
        return ErrnoStatus(ec.value(), absl::StrCat("cannot create directory ", dir.string()));
      }
      ::chmod(dir.c_str(), 0755);
    }
  }
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " exists and is not a socket; not replacing it"));
    }
    if (SomeoneListens(path)) {
      return absl::FailedPreconditionError(
          absl::StrCat("another process (a running agent?) serves on ", path));
    }
    if (::unlink(path.c_str()) != 0) {
      return ErrnoStatus(errno, absl::StrCat("cannot remove stale socket ", path));
    }
  } else if (errno != ENOENT) {
    return ErrnoStatus(errno, absl::StrCat("cannot inspect ", path));
  }
  return absl::OkStatus();
}

}  // namespace

class StatusServer::Service final : public v1::LocalStatusService::CallbackService {
 public:
  explicit Service(StatusProvider provider) : provider_(std::move(provider)) {}

  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const v1::GetStatusRequest* request,
                                      v1::GetStatusResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    *response = provider_(*request);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  StatusProvider provider_;
};

StatusServer::StatusServer(std::string socket_path, std::unique_ptr<Service> service,
                           std::unique_ptr<grpc::Server> server)
    : socket_path_(std::move(socket_path)),
      service_(std::move(service)),
      server_(std::move(server)) {}

absl::StatusOr<std::unique_ptr<StatusServer>> StatusServer::Start(const std::string& socket_path,
                                                                  StatusProvider provider) {
  if (absl::Status prepared = PrepareSocketPath(socket_path); !prepared.ok()) return prepared;
  auto service = std::make_unique<Service>(std::move(provider));
  grpc::ServerBuilder builder;
  int bound = 0;
  builder.AddListeningPort(absl::StrCat("unix:", socket_path), grpc::InsecureServerCredentials(),
                           &bound);
  builder.RegisterService(service.get());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound == 0) {
    if (server != nullptr) server->Shutdown();
    return absl::UnavailableError(absl::StrCat("cannot serve gRPC on unix:", socket_path));
  }
  if (::chmod(socket_path.c_str(), 0660) != 0) {
    const int error = errno;
    server->Shutdown();
    ::unlink(socket_path.c_str());
    return ErrnoStatus(error, absl::StrCat("cannot set mode 0660 on ", socket_path));
  }
  return std::unique_ptr<StatusServer>(
      new StatusServer(socket_path, std::move(service), std::move(server)));
}

StatusServer::~StatusServer() {
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server_->Wait();
  ::unlink(socket_path_.c_str());
}

}  // namespace rxfleet::agent
