#pragma once

// Size limits of the agent-server link (AgentService.Connect), shared so both ends agree.

namespace rxfleet::common {

/// Largest ServerMessage an agent accepts, in bytes: the agent's gRPC maximum receive message
/// size (agent/link/server_link.cc sets it; also gRPC's default). A host's bundle (every server
/// policy as sent to agents, the host's experiment assignments, the nonce) must fit in it: the
/// server refuses a policy or experiment change that would make any host's bundle larger
/// (docs/SECURITY.md, "Bounds"), since an agent that cannot receive its bundle reconnects in a
/// loop and never converges.
inline constexpr int kMaxServerMessageBytes = 4 << 20;

}  // namespace rxfleet::common
