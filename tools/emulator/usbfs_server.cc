#include "tools/emulator/usbfs_server.h"

// clang-format off
#include <sys/ioctl.h>
#include <linux/usbdevice_fs.h>
// clang-format on

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <deque>

#include "absl/strings/str_cat.h"
#include "umockdev.h"

namespace rxfleet::emulator {
namespace {

constexpr char kClientKey[] = "rxfleet-usbfs-client";

// Linux enum usb_device_speed (ch9.h), returned by USBDEVFS_GET_SPEED.
int KernelSpeed(double mbps) {
  if (mbps >= 10000) return 6;  // USB_SPEED_SUPER_PLUS
  if (mbps >= 5000) return 5;   // USB_SPEED_SUPER
  if (mbps >= 480) return 3;    // USB_SPEED_HIGH
  if (mbps >= 12) return 2;     // USB_SPEED_FULL
  return 1;                     // USB_SPEED_LOW
}

// A submitted URB held until the client reaps it.
struct HeldUrb {
  UMockdevIoctlData* urb = nullptr;  // owned reference
  bool control = false;
  bool in = false;
  int status = 0;
  std::vector<uint8_t> in_data;
  int out_length = 0;  // actual_length for completed OUT data stages
};

// Per open file (one umockdev client connection). Touched only on the ioctl worker thread.
struct ClientState {
  bool bound = false;
  int device = -1;
  uint64_t incarnation = 0;
  std::deque<HeldUrb> ready;  // completed, waiting to be reaped
  std::vector<HeldUrb> held;  // never completing on their own
  std::set<int> claimed;
  std::set<int> detached;

  ~ClientState() {
    for (HeldUrb& u : ready) g_object_unref(u.urb);
    for (HeldUrb& u : held) g_object_unref(u.urb);
  }
};

void DestroyClientState(gpointer p) { delete static_cast<ClientState*>(p); }

UMockdevIoctlData* Resolve(UMockdevIoctlData* data, size_t offset, size_t length) {
  GError* error = nullptr;
  UMockdevIoctlData* out = umockdev_ioctl_data_resolve(data, offset, length, &error);
  if (error != nullptr) {
    g_error_free(error);
    return nullptr;
  }
  return out;
}

// Releases a resolved child (umockdev returns a new reference; the parent keeps its own).
void Release(UMockdevIoctlData* data) {
  if (data != nullptr) g_object_unref(data);
}

}  // namespace

UsbfsServer::UsbfsServer(UMockdevTestbed* testbed, DeviceRouter* router)
    : testbed_(testbed), router_(router), handler_(umockdev_ioctl_base_new()) {
  g_signal_connect(handler_, "handle-ioctl", G_CALLBACK(&UsbfsServer::OnIoctl), this);
}

UsbfsServer::~UsbfsServer() {
  for (const std::string& devnode : attached_) {
    umockdev_testbed_detach_ioctl(testbed_, devnode.c_str(), nullptr);
  }
  g_signal_handlers_disconnect_by_data(handler_, this);
  g_object_unref(handler_);
}

absl::Status UsbfsServer::Attach(const std::string& devnode) {
  if (attached_.count(devnode)) return absl::OkStatus();
  GError* error = nullptr;
  if (!umockdev_testbed_attach_ioctl(testbed_, devnode.c_str(), handler_, &error)) {
    absl::Status status = absl::InternalError(absl::StrCat(
        "cannot serve ", devnode, ": ", error != nullptr ? error->message : "unknown error"));
    if (error != nullptr) g_error_free(error);
    return status;
  }
  attached_.insert(devnode);
  return absl::OkStatus();
}

int UsbfsServer::OnIoctl(UMockdevIoctlBase*, UMockdevIoctlClient* client, void* self) {
  return static_cast<UsbfsServer*>(self)->HandleIoctl(client) ? TRUE : FALSE;
}

bool UsbfsServer::HandleIoctl(UMockdevIoctlClient* client) {
  auto* state = static_cast<ClientState*>(g_object_get_data(G_OBJECT(client), kClientKey));
  if (state == nullptr) {
    state = new ClientState();
    const char* devnode = umockdev_ioctl_client_get_devnode(client);
    state->bound =
        devnode != nullptr && router_->Resolve(devnode, &state->device, &state->incarnation);
    g_object_set_data_full(G_OBJECT(client), kClientKey, state, &DestroyClientState);
  }
  const unsigned long request = umockdev_ioctl_client_get_request(client);
  UMockdevIoctlData* arg = umockdev_ioctl_client_get_arg(client);
  const bool alive = state->bound && router_->Alive(state->device, state->incarnation);
  auto complete = [client](long result, int err) {
    umockdev_ioctl_client_complete(client, result, err);
    return true;
  };

  switch (request) {
    case USBDEVFS_REAPURB:
    case USBDEVFS_REAPURBNDELAY: {
      if (!alive && !state->held.empty()) {
        // Unplugged: everything still in flight ends with -ESHUTDOWN.
        for (HeldUrb& u : state->held) {
          u.status = -ESHUTDOWN;
          u.in_data.clear();
          state->ready.push_back(u);
        }
        state->held.clear();
      }
      if (state->ready.empty()) return complete(-1, alive ? EAGAIN : ENODEV);
      HeldUrb urb = state->ready.front();
      state->ready.pop_front();
      auto* u = reinterpret_cast<usbdevfs_urb*>(urb.urb->data);
      u->status = urb.status;
      if (urb.status != 0) {
        u->actual_length = 0;
      } else if (urb.in) {
        const size_t offset = urb.control ? 8 : 0;
        const size_t room = u->buffer_length > static_cast<int>(offset)
                                ? static_cast<size_t>(u->buffer_length) - offset
                                : 0;
        const size_t n = std::min(room, urb.in_data.size());
        if (n > 0 && u->buffer != nullptr) {
          std::memcpy(static_cast<uint8_t*>(u->buffer) + offset, urb.in_data.data(), n);
        }
        u->actual_length = static_cast<int>(n);
      } else {
        u->actual_length = urb.out_length;
      }
      UMockdevIoctlData* pointer = Resolve(arg, 0, sizeof(void*));
      if (pointer == nullptr) {
        g_object_unref(urb.urb);
        return complete(-1, EFAULT);
      }
      umockdev_ioctl_data_set_ptr(pointer, 0, urb.urb);
      complete(0, 0);
      Release(pointer);
      g_object_unref(urb.urb);
      return true;
    }

    case USBDEVFS_DISCARDURB: {
      const unsigned long target = *reinterpret_cast<unsigned long*>(arg->data);
      auto it = std::find_if(state->held.begin(), state->held.end(),
                             [target](const HeldUrb& u) { return u.urb->client_addr == target; });
      if (it == state->held.end()) return complete(-1, EINVAL);
      HeldUrb urb = *it;
      state->held.erase(it);
      urb.status = -ENOENT;
      urb.in_data.clear();
      state->ready.push_back(urb);
      return complete(0, 0);
    }

    case USBDEVFS_SUBMITURB: {
      UMockdevIoctlData* urb_data = Resolve(arg, 0, sizeof(usbdevfs_urb));
      if (urb_data == nullptr) return complete(-1, EFAULT);
      auto* u = reinterpret_cast<usbdevfs_urb*>(urb_data->data);
      UMockdevIoctlData* buffer = nullptr;
      if (u->buffer_length > 0 && u->buffer != nullptr) {
        buffer = Resolve(urb_data, offsetof(usbdevfs_urb, buffer),
                         static_cast<size_t>(u->buffer_length));
        if (buffer == nullptr) {
          Release(urb_data);
          return complete(-1, EFAULT);
        }
      }
      HeldUrb held;
      held.urb = urb_data;  // keeps the reference
      held.in = (u->endpoint & 0x80) != 0;
      int submit_errno = 0;
      bool hold_forever = false;
      if (u->type == USBDEVFS_URB_TYPE_CONTROL) {
        held.control = true;
        if (u->buffer_length < 8 || buffer == nullptr) {
          submit_errno = EINVAL;
        } else {
          const uint8_t* b = buffer->data;
          ControlSetup setup;
          setup.request_type = b[0];
          setup.request = b[1];
          setup.value = static_cast<uint16_t>(b[2] | b[3] << 8);
          setup.index = static_cast<uint16_t>(b[4] | b[5] << 8);
          setup.length = static_cast<uint16_t>(b[6] | b[7] << 8);
          held.in = (setup.request_type & 0x80) != 0;
          if (u->buffer_length < 8 + setup.length) {
            submit_errno = EINVAL;
          } else {
            std::vector<uint8_t> out_data;
            if (!held.in) out_data.assign(b + 8, b + 8 + setup.length);
            // A bound client reaches the device model even after an unplug, so the attempt is
            // logged (result no_device) and answered with ENODEV.
            ControlOutcome outcome;
            if (state->bound) {
              outcome = router_->Control(state->device, state->incarnation, setup, out_data);
            } else {
              outcome.submit_errno = ENODEV;
            }
            submit_errno = outcome.submit_errno;
            hold_forever = outcome.pending;
            held.status = outcome.status;
            held.in_data = std::move(outcome.in_data);
            held.out_length = held.in ? 0 : setup.length;
          }
        }
      } else if (!alive) {
        submit_errno = ENODEV;
      } else if (u->type == USBDEVFS_URB_TYPE_BULK || u->type == USBDEVFS_URB_TYPE_INTERRUPT) {
        if (held.in) {
          hold_forever = true;
        } else {
          held.out_length = u->buffer_length;
        }
      } else {
        submit_errno = EINVAL;  // isochronous transfers are not emulated
      }
      Release(buffer);
      if (submit_errno != 0) {
        g_object_unref(urb_data);
        return complete(-1, submit_errno);
      }
      if (hold_forever) {
        state->held.push_back(std::move(held));
      } else {
        state->ready.push_back(std::move(held));
      }
      return complete(0, 0);
    }

    default:
      break;
  }

  if (!alive) return complete(-1, ENODEV);

  switch (request) {
    case USBDEVFS_GET_CAPABILITIES: {
      UMockdevIoctlData* caps = Resolve(arg, 0, sizeof(uint32_t));
      if (caps == nullptr) return complete(-1, EFAULT);
      const uint32_t value = USBDEVFS_CAP_ZERO_PACKET | USBDEVFS_CAP_BULK_CONTINUATION |
                             USBDEVFS_CAP_NO_PACKET_SIZE_LIM | USBDEVFS_CAP_REAP_AFTER_DISCONNECT |
                             USBDEVFS_CAP_BULK_SCATTER_GATHER;
      std::memcpy(caps->data, &value, sizeof(value));
      complete(0, 0);
      Release(caps);
      return true;
    }

    case USBDEVFS_CLAIMINTERFACE:
    case USBDEVFS_RELEASEINTERFACE: {
      UMockdevIoctlData* number = Resolve(arg, 0, sizeof(unsigned int));
      if (number == nullptr) return complete(-1, EFAULT);
      unsigned int n = 0;
      std::memcpy(&n, number->data, sizeof(n));
      Release(number);
      const int i = static_cast<int>(n);
      if (request == USBDEVFS_RELEASEINTERFACE) {
        if (!state->claimed.erase(i)) return complete(-1, EINVAL);
        return complete(0, 0);
      }
      if (!router_->InterfaceDriver(state->device, state->incarnation, i).empty() &&
          !state->detached.count(i)) {
        return complete(-1, EBUSY);
      }
      state->claimed.insert(i);
      return complete(0, 0);
    }

    case USBDEVFS_GETDRIVER: {
      UMockdevIoctlData* gd = Resolve(arg, 0, sizeof(usbdevfs_getdriver));
      if (gd == nullptr) return complete(-1, EFAULT);
      auto* g = reinterpret_cast<usbdevfs_getdriver*>(gd->data);
      const int i = static_cast<int>(g->interface);
      const std::string driver =
          state->detached.count(i) ? ""
                                   : router_->InterfaceDriver(state->device, state->incarnation, i);
      if (driver.empty()) {
        Release(gd);
        return complete(-1, ENODATA);
      }
      std::memset(g->driver, 0, sizeof(g->driver));
      std::strncpy(g->driver, driver.c_str(), sizeof(g->driver) - 1);
      complete(0, 0);
      Release(gd);
      return true;
    }

    case USBDEVFS_IOCTL: {
      UMockdevIoctlData* io = Resolve(arg, 0, sizeof(usbdevfs_ioctl));
      if (io == nullptr) return complete(-1, EFAULT);
      const auto* c = reinterpret_cast<const usbdevfs_ioctl*>(io->data);
      const int i = c->ifno;
      const int code = c->ioctl_code;
      Release(io);
      const bool has_driver =
          !router_->InterfaceDriver(state->device, state->incarnation, i).empty();
      if (code == static_cast<int>(USBDEVFS_DISCONNECT)) {
        if (!has_driver || state->detached.count(i)) return complete(-1, ENODATA);
        state->detached.insert(i);
        return complete(0, 0);
      }
      if (code == static_cast<int>(USBDEVFS_CONNECT)) {
        state->detached.erase(i);
        return complete(0, 0);
      }
      return complete(-1, ENOTTY);
    }

    case USBDEVFS_DISCONNECT_CLAIM: {
      UMockdevIoctlData* dc = Resolve(arg, 0, sizeof(usbdevfs_disconnect_claim));
      if (dc == nullptr) return complete(-1, EFAULT);
      const int i =
          static_cast<int>(reinterpret_cast<const usbdevfs_disconnect_claim*>(dc->data)->interface);
      Release(dc);
      state->detached.insert(i);
      state->claimed.insert(i);
      return complete(0, 0);
    }

    case USBDEVFS_CONNECTINFO: {
      UMockdevIoctlData* ci = Resolve(arg, 0, sizeof(usbdevfs_connectinfo));
      if (ci == nullptr) return complete(-1, EFAULT);
      auto* info = reinterpret_cast<usbdevfs_connectinfo*>(ci->data);
      info->devnum = 0;
      info->slow = router_->Speed(state->device, state->incarnation) < 12 ? 1 : 0;
      complete(0, 0);
      Release(ci);
      return true;
    }

    case USBDEVFS_GET_SPEED:
      return complete(KernelSpeed(router_->Speed(state->device, state->incarnation)), 0);

    case USBDEVFS_SETINTERFACE:
    case USBDEVFS_SETCONFIGURATION:
    case USBDEVFS_CLEAR_HALT:
    case USBDEVFS_RESETEP:
    case USBDEVFS_RESET:
      return complete(0, 0);

    default:
      return complete(-1, ENOTTY);
  }
}

}  // namespace rxfleet::emulator
