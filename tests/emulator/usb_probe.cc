// usb_probe: a small, unmodified libusb program the emulator tests run under rxfleet-emulate.
// It executes the steps given on its command line in order and prints one result line per
// step (stdout, flushed), so tests can assert on what a real libusb client observes.
//
// Selectors (SEL): "B-P" (bus and port path, e.g. 2-2 or 3-1.3) or "vvvv:pppp" (VID:PID).
// Steps:
//   list                          device lines "device bus=2 port=2 devnum=10 vid=0bda
//                                 pid=8912 speed=super", then "list count=N"
//   read SEL ADDR LEN             rtw89 register read  -> "read 0x6000 = 0x80ff2014" | "read
//                                 0x6000 error LIBUSB_ERROR_PIPE"
//   write SEL ADDR LEN VALUE      rtw89 register write -> "write 0x6000 ok" | "... error X"
//   control SEL TYPE REQ VALUE INDEX LEN
//                                 any control transfer (IN when TYPE has bit 7) -> "control
//                                 ok 12 01 ..." | "control error X"
//   claim SEL IFACE               -> "claim 0 ok" | "claim 0 error LIBUSB_ERROR_BUSY"
//   driver SEL IFACE              -> "driver 0 active=1"
//   wait-value SEL ADDR VALUE SECONDS
//                                 re-read every 20 ms until the value matches -> "wait-value
//                                 ok" | "wait-value timeout last=0x..."
//   wait-gone SEL ADDR SECONDS    keep the handle, read every 20 ms until a read fails ->
//                                 "gone LIBUSB_ERROR_NO_DEVICE after=N"
//   hotplug VID PID SECONDS COUNT print hotplug events for VID:PID until COUNT or timeout:
//                                 "arrived bus=2 port=2 speed=super pid=8912" / "left bus=..."
//                                 then "hotplug events=N"
//   sleep SECONDS
//   close SEL                     close a cached handle
// Handles are opened on demand per selector and kept until `close` or exit. Exit code 0, or
// 2 for a malformed step list, 3 if libusb_init fails.

#include <libusb-1.0/libusb.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace {

libusb_context* g_ctx = nullptr;
std::map<std::string, libusb_device_handle*> g_handles;

void Say(const std::string& line) {
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

const char* SpeedName(int speed) {
  switch (speed) {
    case LIBUSB_SPEED_LOW:
      return "low";
    case LIBUSB_SPEED_FULL:
      return "full";
    case LIBUSB_SPEED_HIGH:
      return "high";
    case LIBUSB_SPEED_SUPER:
      return "super";
    case LIBUSB_SPEED_SUPER_PLUS:
      return "super_plus";
    default:
      return "unknown";
  }
}

std::string PortPath(libusb_device* dev) {
  uint8_t ports[8];
  const int n = libusb_get_port_numbers(dev, ports, 8);
  std::string path;
  for (int i = 0; i < n; ++i) {
    if (i > 0) path += ".";
    path += std::to_string(ports[i]);
  }
  return path;
}

std::string Hex4(unsigned v) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04x", v & 0xffff);
  return buf;
}

bool Matches(libusb_device* dev, const std::string& sel) {
  libusb_device_descriptor d;
  if (libusb_get_device_descriptor(dev, &d) != 0) return false;
  if (sel.size() == 9 && sel[4] == ':') {
    return Hex4(d.idVendor) + ":" + Hex4(d.idProduct) == sel;
  }
  return std::to_string(libusb_get_bus_number(dev)) + "-" + PortPath(dev) == sel;
}

// Opens (or returns the cached handle for) a selector. Returns nullptr and sets *error.
libusb_device_handle* Handle(const std::string& sel, int* error) {
  auto it = g_handles.find(sel);
  if (it != g_handles.end()) return it->second;
  libusb_device** list = nullptr;
  const ssize_t n = libusb_get_device_list(g_ctx, &list);
  libusb_device_handle* handle = nullptr;
  *error = LIBUSB_ERROR_NOT_FOUND;
  for (ssize_t i = 0; i < n; ++i) {
    if (!Matches(list[i], sel)) continue;
    *error = libusb_open(list[i], &handle);
    break;
  }
  libusb_free_device_list(list, 1);
  if (handle != nullptr) g_handles[sel] = handle;
  return handle;
}

int ReadRegister(libusb_device_handle* h, unsigned address, int length, unsigned* value) {
  unsigned char data[4] = {0, 0, 0, 0};
  const int r = libusb_control_transfer(h, 0xC0, 0x05, address & 0xffff, (address >> 16) & 0xff,
                                        data, static_cast<uint16_t>(length), 500);
  if (r < 0) return r;
  *value = data[0] | data[1] << 8 | data[2] << 16 | static_cast<unsigned>(data[3]) << 24;
  return 0;
}

std::string HexValue(unsigned value, int length) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%0*x", 2 * length, value);
  return buf;
}

int HotplugCallback(libusb_context*, libusb_device* dev, libusb_hotplug_event event, void* user) {
  libusb_device_descriptor d;
  libusb_get_device_descriptor(dev, &d);
  const bool arrived = event == LIBUSB_HOTPLUG_EVENT_DEVICE_ARRIVED;
  Say(std::string(arrived ? "arrived" : "left") +
      " bus=" + std::to_string(libusb_get_bus_number(dev)) + " port=" + PortPath(dev) +
      " speed=" + SpeedName(libusb_get_device_speed(dev)) + " pid=" + Hex4(d.idProduct));
  ++*static_cast<int*>(user);
  return 0;
}

unsigned long Number(const std::string& text) { return std::strtoul(text.c_str(), nullptr, 0); }

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (libusb_init(&g_ctx) != 0) {
    Say("libusb_init failed");
    return 3;
  }
  size_t i = 0;
  auto need = [&](size_t n) {
    if (i + n > args.size()) {
      Say("malformed step list at " + args[i - 1]);
      std::exit(2);
    }
  };
  while (i < args.size()) {
    const std::string step = args[i++];
    int error = 0;
    if (step == "list") {
      libusb_device** list = nullptr;
      const ssize_t n = libusb_get_device_list(g_ctx, &list);
      for (ssize_t k = 0; k < n; ++k) {
        libusb_device_descriptor d;
        libusb_get_device_descriptor(list[k], &d);
        Say("device bus=" + std::to_string(libusb_get_bus_number(list[k])) + " port=" +
            PortPath(list[k]) + " devnum=" + std::to_string(libusb_get_device_address(list[k])) +
            " vid=" + Hex4(d.idVendor) + " pid=" + Hex4(d.idProduct) +
            " speed=" + SpeedName(libusb_get_device_speed(list[k])));
      }
      Say("list count=" + std::to_string(n < 0 ? 0 : n));
      libusb_free_device_list(list, 1);
    } else if (step == "read") {
      need(3);
      const std::string sel = args[i];
      const unsigned address = static_cast<unsigned>(Number(args[i + 1]));
      const int length = static_cast<int>(Number(args[i + 2]));
      i += 3;
      libusb_device_handle* h = Handle(sel, &error);
      unsigned value = 0;
      if (h != nullptr) error = ReadRegister(h, address, length, &value);
      Say("read " + HexValue(address, 0) +
          (error == 0 ? " = " + HexValue(value, length)
                      : std::string(" error ") + libusb_error_name(error)));
    } else if (step == "write") {
      need(4);
      const std::string sel = args[i];
      const unsigned address = static_cast<unsigned>(Number(args[i + 1]));
      const int length = static_cast<int>(Number(args[i + 2]));
      const unsigned value = static_cast<unsigned>(Number(args[i + 3]));
      i += 4;
      libusb_device_handle* h = Handle(sel, &error);
      if (h != nullptr) {
        unsigned char data[4] = {
            static_cast<unsigned char>(value), static_cast<unsigned char>(value >> 8),
            static_cast<unsigned char>(value >> 16), static_cast<unsigned char>(value >> 24)};
        const int r =
            libusb_control_transfer(h, 0x40, 0x05, address & 0xffff, (address >> 16) & 0xff, data,
                                    static_cast<uint16_t>(length), 500);
        error = r < 0 ? r : 0;
      }
      Say("write " + HexValue(address, 0) +
          (error == 0 ? " ok" : std::string(" error ") + libusb_error_name(error)));
    } else if (step == "control") {
      need(6);
      const std::string sel = args[i];
      const auto type = static_cast<uint8_t>(Number(args[i + 1]));
      const auto request = static_cast<uint8_t>(Number(args[i + 2]));
      const auto value = static_cast<uint16_t>(Number(args[i + 3]));
      const auto index = static_cast<uint16_t>(Number(args[i + 4]));
      const auto length = static_cast<uint16_t>(Number(args[i + 5]));
      i += 6;
      std::vector<unsigned char> data(length, 0);
      libusb_device_handle* h = Handle(sel, &error);
      int r = error;
      if (h != nullptr) {
        r = libusb_control_transfer(h, type, request, value, index, data.data(), length, 500);
      }
      if (r < 0) {
        Say(std::string("control error ") + libusb_error_name(r));
      } else {
        std::string line = "control ok";
        for (int k = 0; k < r && (type & 0x80); ++k) {
          char buf[4];
          std::snprintf(buf, sizeof(buf), " %02x", data[static_cast<size_t>(k)]);
          line += buf;
        }
        Say(line);
      }
    } else if (step == "claim" || step == "driver") {
      need(2);
      const std::string sel = args[i];
      const int iface = static_cast<int>(Number(args[i + 1]));
      i += 2;
      libusb_device_handle* h = Handle(sel, &error);
      if (step == "claim") {
        if (h != nullptr) error = libusb_claim_interface(h, iface);
        Say("claim " + std::to_string(iface) +
            (error == 0 ? " ok" : std::string(" error ") + libusb_error_name(error)));
      } else {
        const int active = h != nullptr ? libusb_kernel_driver_active(h, iface) : error;
        Say("driver " + std::to_string(iface) + " active=" +
            (active < 0 ? std::string(libusb_error_name(active)) : std::to_string(active)));
      }
    } else if (step == "wait-value") {
      need(4);
      const std::string sel = args[i];
      const unsigned address = static_cast<unsigned>(Number(args[i + 1]));
      const unsigned want = static_cast<unsigned>(Number(args[i + 2]));
      const double seconds = std::strtod(args[i + 3].c_str(), nullptr);
      i += 4;
      const auto deadline = std::chrono::steady_clock::now() +
                            std::chrono::milliseconds(static_cast<int>(seconds * 1000));
      unsigned value = 0;
      bool ok = false;
      while (std::chrono::steady_clock::now() < deadline) {
        libusb_device_handle* h = Handle(sel, &error);
        if (h != nullptr && ReadRegister(h, address, 4, &value) == 0 && value == want) {
          ok = true;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      Say(ok ? "wait-value ok" : "wait-value timeout last=" + HexValue(value, 4));
    } else if (step == "wait-gone") {
      need(3);
      const std::string sel = args[i];
      const unsigned address = static_cast<unsigned>(Number(args[i + 1]));
      const double seconds = std::strtod(args[i + 2].c_str(), nullptr);
      i += 3;
      const auto deadline = std::chrono::steady_clock::now() +
                            std::chrono::milliseconds(static_cast<int>(seconds * 1000));
      libusb_device_handle* h = Handle(sel, &error);
      int ok_reads = 0;
      int r = error;
      while (h != nullptr && std::chrono::steady_clock::now() < deadline) {
        unsigned value = 0;
        r = ReadRegister(h, address, 4, &value);
        if (r != 0) break;
        ++ok_reads;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      Say(std::string("gone ") + (r == 0 ? "none" : libusb_error_name(r)) +
          " after=" + std::to_string(ok_reads));
    } else if (step == "hotplug") {
      need(4);
      const int vid = static_cast<int>(Number("0x" + args[i]));
      const int pid = static_cast<int>(Number("0x" + args[i + 1]));
      const double seconds = std::strtod(args[i + 2].c_str(), nullptr);
      const int count = static_cast<int>(Number(args[i + 3]));
      i += 4;
      int events = 0;
      libusb_hotplug_callback_handle cb;
      const int r = libusb_hotplug_register_callback(
          g_ctx,
          static_cast<libusb_hotplug_event>(LIBUSB_HOTPLUG_EVENT_DEVICE_ARRIVED |
                                            LIBUSB_HOTPLUG_EVENT_DEVICE_LEFT),
          LIBUSB_HOTPLUG_NO_FLAGS, vid, pid, LIBUSB_HOTPLUG_MATCH_ANY, &HotplugCallback, &events,
          &cb);
      if (r != 0) {
        Say(std::string("hotplug error ") + libusb_error_name(r));
        continue;
      }
      const auto deadline = std::chrono::steady_clock::now() +
                            std::chrono::milliseconds(static_cast<int>(seconds * 1000));
      while (events < count && std::chrono::steady_clock::now() < deadline) {
        timeval tv{0, 50000};
        libusb_handle_events_timeout_completed(g_ctx, &tv, nullptr);
      }
      libusb_hotplug_deregister_callback(g_ctx, cb);
      Say("hotplug events=" + std::to_string(events));
    } else if (step == "sleep") {
      need(1);
      const double seconds = std::strtod(args[i++].c_str(), nullptr);
      std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(seconds * 1000)));
    } else if (step == "close") {
      need(1);
      auto it = g_handles.find(args[i++]);
      if (it != g_handles.end()) {
        libusb_close(it->second);
        g_handles.erase(it);
      }
      Say("closed");
    } else {
      Say("unknown step " + step);
      return 2;
    }
  }
  for (auto& [sel, handle] : g_handles) libusb_close(handle);
  libusb_exit(g_ctx);
  return 0;
}
