// libFuzzer target: what rxfleet-server does with a decoded AgentMessage (the body of
// AgentStream::Handle in server/api/agent_service.cc, without the gRPC stream): parse the
// bytes, validate each kind at the boundary (server/api/validation.h) and apply what passes to
// a real Registry, then read the registry back the way the API and /sd/agents do. The input is
// one serialized AgentMessage, handled as the first message of a stream (which must be a
// Hello) and again after a fixed valid Hello. Invalid input must be refused with a status;
// nothing may crash, leak or grow without bound.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "rxfleet/v1/agent_service.pb.h"
#include "server/api/validation.h"
#include "server/http/http_server.h"
#include "server/registry/registry.h"

namespace {

using rxfleet::server::Registry;

// Returns the stream id after a Hello, else `stream`.
uint64_t Handle(Registry& registry, const rxfleet::v1::AgentMessage& message, std::string& host_id,
                uint64_t stream, absl::Time now) {
  namespace v1 = rxfleet::v1;
  namespace server = rxfleet::server;
  if (stream == 0) {
    if (message.kind_case() != v1::AgentMessage::kHello) return 0;
    if (!server::ValidateHello(message.hello()).ok()) return 0;
    host_id = message.hello().host_id();
    return registry.Connect(message.hello(), "ipv4:127.0.0.1:1", now);
  }
  switch (message.kind_case()) {
    case v1::AgentMessage::kInventory:
      if (server::ValidateAdapters(message.inventory().adapters()).ok()) {
        registry.ReplaceAdapters(
            host_id, stream,
            {message.inventory().adapters().begin(), message.inventory().adapters().end()}, now);
      }
      break;
    case v1::AgentMessage::kAdapterUpdate: {
      const v1::AdapterUpdate& update = message.adapter_update();
      if (server::ValidateAdapterUpdate(update).ok()) {
        registry.UpdateAdapters(
            host_id, stream, {update.adapters().begin(), update.adapters().end()},
            {update.removed_adapter_ids().begin(), update.removed_adapter_ids().end()}, now);
      }
      break;
    }
    case v1::AgentMessage::kAck:
      registry.RecordAck(host_id, stream, message.ack().version(), now);
      break;
    case v1::AgentMessage::kNack: {
      v1::NackRecord record;
      record.set_version(message.nack().version());
      record.set_nonce(message.nack().nonce());
      record.set_error_detail(
          message.nack().error_detail().substr(0, server::kMaxNackDetailLength));
      registry.RecordNack(host_id, stream, record, now);
      break;
    }
    default:
      registry.Touch(host_id, stream, now);
      break;
  }
  return stream;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rxfleet::v1::AgentMessage message;
  if (!message.ParseFromArray(data, static_cast<int>(size))) return 0;
  const absl::Time now = absl::FromUnixSeconds(1767225600);
  Registry registry({}, {});

  // As the first message of a stream.
  std::string host_id;
  const uint64_t first = Handle(registry, message, host_id, 0, now);
  if (first != 0) Handle(registry, message, host_id, first, now);

  // After a valid Hello.
  rxfleet::v1::AgentMessage hello;
  hello.mutable_hello()->set_host_id("fuzz-host");
  hello.mutable_hello()->set_metrics_address("127.0.0.1:9477");
  std::string fixed_host;
  const uint64_t stream = Handle(registry, hello, fixed_host, 0, now);
  Handle(registry, message, fixed_host, stream, now);

  (void)registry.ListHosts(now, 1);
  (void)registry.ListAdapters(true);
  (void)rxfleet::server::ServiceDiscoveryJson(registry.MetricsTargets(now));
  return 0;
}
