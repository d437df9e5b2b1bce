#include "agent/usb/register_io.h"

namespace rxfleet::agent {

RegisterIo::~RegisterIo() = default;

}  // namespace rxfleet::agent
