// rxfleet-usbredir-device: serves one emulated USB Wi-Fi adapter of a rxfleet-emulate lab file
// to QEMU's `usb-redir` device over the usbredir protocol (libusbredirparser), so a real
// Linux kernel in a QEMU guest enumerates it. Device behaviour (descriptors per speed, BOS,
// rtw89 vendor register requests, failure modes, the transfer log) is the emulator's
// EmulatedDevice; only the transport differs. See docs/KERNEL-LANE.md.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "tools/emulator/descriptors.h"
#include "tools/emulator/device_model.h"
#include "tools/emulator/lab.h"

extern "C" {
#include <usbredirparser.h>
}

namespace {

using rxfleet::emulator::ControlOutcome;
using rxfleet::emulator::ControlSetup;
using rxfleet::emulator::DeviceConfig;
using rxfleet::emulator::EmulatedDevice;
using rxfleet::emulator::EventKind;
using rxfleet::emulator::Lab;
using rxfleet::emulator::TimelineEvent;

constexpr char kUsage[] =
    "usage: rxfleet-usbredir-device --lab LAB.yaml --listen SOCKET [--device NAME]\n"
    "                               [--timeline EVENTS.yaml] [--control FIFO]\n"
    "                               [--state-out STATE.json] [--verbose]\n"
    "\n"
    "Serves one adapter of a rxfleet-emulate lab to QEMU (-chardev socket,path=SOCKET\n"
    "-device usb-redir,chardev=...) over usbredir. Timeline times count from QEMU's\n"
    "connection; each line written to the control FIFO is one timeline event without `at`,\n"
    "e.g. {event: plug, device: be6500, speed: 5000, bus: 2, port: \"2\"}, applied at once.\n"
    "Exits 0 when QEMU disconnects or on SIGTERM/SIGINT (the state file is written),\n"
    "2 for bad arguments or lab/timeline files, 1 on a socket error.\n";

volatile sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Endpoint table slot of usbredir: OUT endpoints 0..15, IN endpoints 16..31.
int EpIndex(uint8_t address) { return ((address & 0x80) >> 3) | (address & 0x0f); }

class Device {
 public:
  Device(Lab lab, int index, std::vector<TimelineEvent> timeline, std::string state_out,
         bool verbose)
      : lab_(std::move(lab)),
        index_(index),
        device_(lab_.devices[index], lab_.host_class),
        timeline_(std::move(timeline)),
        state_out_(std::move(state_out)),
        verbose_(verbose) {}

  ~Device() {
    if (parser_ != nullptr) usbredirparser_destroy(parser_);
  }

  // Serves one QEMU connection on `fd` until it closes or a signal stops us. `control_fd` may
  // be -1. Returns 0, or 1 on a socket error.
  int Serve(int fd, int control_fd) {
    fd_ = fd;
    start_ = std::chrono::steady_clock::now();
    connected_ = true;
    parser_ = usbredirparser_create();
    parser_->priv = this;
    parser_->log_func = &Device::LogCb;
    parser_->read_func = &Device::ReadCb;
    parser_->write_func = &Device::WriteCb;
    parser_->hello_func = &Device::HelloCb;
    parser_->reset_func = [](void*) {};
    parser_->set_configuration_func = &Device::SetConfigurationCb;
    parser_->get_configuration_func = &Device::GetConfigurationCb;
    parser_->set_alt_setting_func = &Device::SetAltSettingCb;
    parser_->get_alt_setting_func = &Device::GetAltSettingCb;
    parser_->cancel_data_packet_func = &Device::CancelCb;
    parser_->control_packet_func = &Device::ControlCb;
    parser_->bulk_packet_func = &Device::BulkCb;
    parser_->filter_filter_func = [](void*, struct usbredirfilter_rule* rules, int) {
      free(rules);
    };
    uint32_t caps[USB_REDIR_CAPS_SIZE] = {0};
    usbredirparser_caps_set_cap(caps, usb_redir_cap_connect_device_version);
    usbredirparser_caps_set_cap(caps, usb_redir_cap_ep_info_max_packet_size);
    usbredirparser_caps_set_cap(caps, usb_redir_cap_64bits_ids);
    usbredirparser_caps_set_cap(caps, usb_redir_cap_32bits_bulk_length);
    usbredirparser_init(parser_, "rxfleet-usbredir-device", caps, USB_REDIR_CAPS_SIZE,
                        usbredirparser_fl_usb_host);
    Flush();
    std::string control_buffer;
    size_t next_event = 0;
    while (!g_stop && !peer_closed_) {
      const double now = SecondsSince(start_);
      while (next_event < timeline_.size() && timeline_[next_event].at_seconds <= now) {
        Apply(timeline_[next_event++]);
      }
      int timeout_ms = 100;
      if (next_event < timeline_.size()) {
        const double wait = timeline_[next_event].at_seconds - now;
        timeout_ms = std::max(0, std::min(timeout_ms, static_cast<int>(wait * 1000) + 1));
      }
      pollfd fds[2] = {{fd_, POLLIN, 0}, {control_fd, POLLIN, 0}};
      const int n = poll(fds, control_fd >= 0 ? 2 : 1, timeout_ms);
      if (n < 0 && errno != EINTR) {
        std::perror("rxfleet-usbredir-device: poll");
        return 1;
      }
      if (n > 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
        if (usbredirparser_do_read(parser_) == usbredirparser_read_io_error) peer_closed_ = true;
      }
      if (control_fd >= 0 && n > 0 && (fds[1].revents & POLLIN)) {
        char buf[4096];
        const ssize_t got = read(control_fd, buf, sizeof(buf));
        if (got > 0) control_buffer.append(buf, static_cast<size_t>(got));
        size_t nl;
        while ((nl = control_buffer.find('\n')) != std::string::npos) {
          std::string line = control_buffer.substr(0, nl);
          control_buffer.erase(0, nl + 1);
          Command(line);
        }
      }
      Flush();
      if (dirty_ && SecondsSince(start_) - last_state_write_ >= 0.2) WriteState();
    }
    connected_ = false;
    WriteState();
    return 0;
  }

  void WriteState() {
    dirty_ = false;
    last_state_write_ = SecondsSince(start_);
    if (state_out_.empty()) return;
    nlohmann::json state;
    state["lab"] = lab_.path;
    state["host_class"] = rxfleet::emulator::HostClassName(lab_.host_class);
    state["duration_seconds"] = SecondsSince(start_);
    state["qemu_connected"] = connected_;
    state["devices"] = nlohmann::json::array({device_.StateJson()});
    const std::string tmp = state_out_ + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << state.dump(1) << "\n";
    }
    std::rename(tmp.c_str(), state_out_.c_str());
  }

 private:
  static Device* Self(void* priv) { return static_cast<Device*>(priv); }

  void Log(const std::string& message) {
    if (verbose_) std::cerr << "rxfleet-usbredir-device: " << message << "\n";
  }

  static void LogCb(void* priv, int level, const char* msg) {
    if (level <= usbredirparser_warning || Self(priv)->verbose_) {
      std::cerr << "rxfleet-usbredir-device: usbredir: " << msg << "\n";
    }
  }

  static int ReadCb(void* priv, uint8_t* data, int count) {
    Device* d = Self(priv);
    const ssize_t n = recv(d->fd_, data, static_cast<size_t>(count), MSG_DONTWAIT);
    if (n > 0) return static_cast<int>(n);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
    d->peer_closed_ = true;
    return -1;
  }

  static int WriteCb(void* priv, uint8_t* data, int count) {
    Device* d = Self(priv);
    const ssize_t n = send(d->fd_, data, static_cast<size_t>(count), MSG_NOSIGNAL);
    if (n >= 0) return static_cast<int>(n);
    if (errno == EAGAIN || errno == EINTR) return 0;
    d->peer_closed_ = true;
    return -1;
  }

  void Flush() {
    while (!peer_closed_ && usbredirparser_has_data_to_write(parser_) > 0) {
      if (usbredirparser_do_write(parser_) != 0) {
        peer_closed_ = true;
        return;
      }
    }
  }

  static void HelloCb(void* priv, struct usb_redir_hello_header* hello) {
    Device* d = Self(priv);
    d->Log(absl::StrCat("QEMU hello: ", hello->version));
    d->hello_done_ = true;
    if (d->device_.plugged()) d->SendConnect();
  }

  // interface_info and ep_info from the configuration descriptor the guest reads (alternate
  // settings 0), as usbredirhost sends them.
  void SendInterfaceAndEpInfo() {
    const DeviceConfig& config = device_.config();
    const std::vector<uint8_t> conf = rxfleet::emulator::ConfigurationDescriptor(config);
    usb_redir_interface_info_header interfaces{};
    usb_redir_ep_info_header eps{};
    for (int i = 0; i < 32; ++i) eps.type[i] = usb_redir_type_invalid;
    const uint16_t ep0 = config.SuperSpeed() ? 512 : 64;
    eps.type[0] = eps.type[16] = usb_redir_type_control;
    eps.max_packet_size[0] = eps.max_packet_size[16] = ep0;
    int current_interface = -1;
    bool alt0 = false;
    for (size_t pos = 0; pos + 2 <= conf.size() && conf[pos] >= 2; pos += conf[pos]) {
      const uint8_t type = conf[pos + 1];
      if (type == 0x04 && pos + 9 <= conf.size()) {
        current_interface = conf[pos + 2];
        alt0 = conf[pos + 3] == 0;
        if (alt0 && interfaces.interface_count < 32) {
          const uint32_t k = interfaces.interface_count++;
          interfaces.interface[k] = conf[pos + 2];
          interfaces.interface_class[k] = conf[pos + 5];
          interfaces.interface_subclass[k] = conf[pos + 6];
          interfaces.interface_protocol[k] = conf[pos + 7];
        }
      } else if (type == 0x05 && pos + 7 <= conf.size() && alt0) {
        const int idx = EpIndex(conf[pos + 2]);
        eps.type[idx] = conf[pos + 3] & 0x03;
        eps.interval[idx] = conf[pos + 6];
        eps.interface[idx] = static_cast<uint8_t>(current_interface);
        eps.max_packet_size[idx] = static_cast<uint16_t>(conf[pos + 4] | conf[pos + 5] << 8);
      }
    }
    usbredirparser_send_interface_info(parser_, &interfaces);
    usbredirparser_send_ep_info(parser_, &eps);
  }

  void SendConnect() {
    const DeviceConfig& config = device_.config();
    SendInterfaceAndEpInfo();
    usb_redir_device_connect_header connect{};
    if (config.speed_mbps >= 5000) {
      connect.speed = usb_redir_speed_super;
    } else if (config.speed_mbps >= 480) {
      connect.speed = usb_redir_speed_high;
    } else if (config.speed_mbps >= 12) {
      connect.speed = usb_redir_speed_full;
    } else {
      connect.speed = usb_redir_speed_low;
    }
    connect.device_class = config.device_class;
    connect.device_subclass = config.device_subclass;
    connect.device_protocol = config.device_protocol;
    connect.vendor_id = config.vid;
    connect.product_id = config.pid;
    connect.device_version_bcd = config.bcd_device;
    usbredirparser_send_device_connect(parser_, &connect);
    Log(absl::StrFormat("connect %04x:%04x at %s Mbit/s", config.vid, config.pid,
                        rxfleet::emulator::SpeedSysfsText(config.speed_mbps)));
    dirty_ = true;
  }

  static void SetConfigurationCb(void* priv, uint64_t id,
                                 struct usb_redir_set_configuration_header* set) {
    Device* d = Self(priv);
    usb_redir_configuration_status_header status{};
    status.status = set->configuration <= 1 ? usb_redir_success : usb_redir_stall;
    status.configuration = set->configuration <= 1 ? set->configuration : 1;
    d->configuration_ = status.configuration;
    d->SendInterfaceAndEpInfo();
    usbredirparser_send_configuration_status(d->parser_, id, &status);
  }

  static void GetConfigurationCb(void* priv, uint64_t id) {
    Device* d = Self(priv);
    usb_redir_configuration_status_header status{};
    status.status = usb_redir_success;
    status.configuration = d->configuration_;
    usbredirparser_send_configuration_status(d->parser_, id, &status);
  }

  static void SetAltSettingCb(void* priv, uint64_t id,
                              struct usb_redir_set_alt_setting_header* set) {
    Device* d = Self(priv);
    usb_redir_alt_setting_status_header status{};
    status.status = set->alt == 0 ? usb_redir_success : usb_redir_stall;
    status.interface = set->interface;
    status.alt = 0;
    usbredirparser_send_alt_setting_status(d->parser_, id, &status);
  }

  static void GetAltSettingCb(void* priv, uint64_t id,
                              struct usb_redir_get_alt_setting_header* get) {
    Device* d = Self(priv);
    usb_redir_alt_setting_status_header status{};
    status.status = usb_redir_success;
    status.interface = get->interface;
    status.alt = 0;
    usbredirparser_send_alt_setting_status(d->parser_, id, &status);
  }

  // A transfer that never completes on its own (timeout mode, bulk IN) ends when cancelled.
  static void CancelCb(void* priv, uint64_t id) {
    Device* d = Self(priv);
    if (auto it = d->pending_control_.find(id); it != d->pending_control_.end()) {
      usb_redir_control_packet_header h = it->second;
      h.status = usb_redir_cancelled;
      h.length = 0;
      usbredirparser_send_control_packet(d->parser_, id, &h, nullptr, 0);
      d->pending_control_.erase(it);
    }
    if (auto it = d->pending_bulk_.find(id); it != d->pending_bulk_.end()) {
      usb_redir_bulk_packet_header h = it->second;
      h.status = usb_redir_cancelled;
      h.length = 0;
      h.length_high = 0;
      usbredirparser_send_bulk_packet(d->parser_, id, &h, nullptr, 0);
      d->pending_bulk_.erase(it);
    }
  }

  static void ControlCb(void* priv, uint64_t id, struct usb_redir_control_packet_header* h,
                        uint8_t* data, int data_len) {
    Device* d = Self(priv);
    ControlSetup setup;
    setup.request_type = h->requesttype;
    setup.request = h->request;
    setup.value = h->value;
    setup.index = h->index;
    setup.length = h->length;
    std::vector<uint8_t> out_data;
    if (data != nullptr) {
      out_data.assign(data, data + data_len);
      usbredirparser_free_packet_data(d->parser_, data);
    }
    const ControlOutcome outcome = d->device_.HandleControl(d->device_.incarnation(), setup,
                                                            out_data, SecondsSince(d->start_));
    d->dirty_ = true;
    usb_redir_control_packet_header reply = *h;
    if (outcome.pending) {
      d->pending_control_[id] = reply;
      return;
    }
    const bool in = (h->requesttype & 0x80) != 0;
    if (outcome.submit_errno != 0 || outcome.status == -EPROTO) {
      reply.status = usb_redir_ioerror;
      reply.length = 0;
    } else if (outcome.status != 0) {
      reply.status = usb_redir_stall;
      reply.length = 0;
    } else {
      reply.status = usb_redir_success;
      reply.length = in ? static_cast<uint16_t>(outcome.in_data.size()) : h->length;
    }
    if (in && reply.status == usb_redir_success && !outcome.in_data.empty()) {
      std::vector<uint8_t> copy = outcome.in_data;
      usbredirparser_send_control_packet(d->parser_, id, &reply, copy.data(),
                                         static_cast<int>(copy.size()));
    } else {
      usbredirparser_send_control_packet(d->parser_, id, &reply, nullptr, 0);
    }
  }

  // Bulk OUT completes at once; bulk IN never completes (no Wi-Fi traffic on this transport),
  // as in rxfleet-emulate.
  static void BulkCb(void* priv, uint64_t id, struct usb_redir_bulk_packet_header* h, uint8_t* data,
                     int data_len) {
    Device* d = Self(priv);
    (void)data_len;
    if (data != nullptr) usbredirparser_free_packet_data(d->parser_, data);
    if ((h->endpoint & 0x80) != 0) {
      d->pending_bulk_[id] = *h;
      return;
    }
    usb_redir_bulk_packet_header reply = *h;
    reply.status = usb_redir_success;
    usbredirparser_send_bulk_packet(d->parser_, id, &reply, nullptr, 0);
  }

  void Apply(const TimelineEvent& e) {
    const double t = SecondsSince(start_);
    Log(absl::StrFormat("t=%.3f %s", t, rxfleet::emulator::EventKindName(e.kind)));
    dirty_ = true;
    switch (e.kind) {
      case EventKind::kUnplug:
        device_.Unplug();
        pending_control_.clear();
        pending_bulk_.clear();
        if (hello_done_) usbredirparser_send_device_disconnect(parser_);
        break;
      case EventKind::kPlug:
        device_.Plug(e.plug_config, e.keep_registers);
        configuration_ = 0;
        if (hello_done_) SendConnect();
        break;
      case EventKind::kSetRegister:
        device_.SetRegister(e.address, e.value);
        break;
      case EventKind::kSleep:
      case EventKind::kWake:
        device_.SetAsleep(e.kind == EventKind::kSleep);
        break;
      case EventKind::kFailNext:
        device_.FailNext(e.count, e.mode);
        break;
      case EventKind::kAdvanceTraffic:
        device_.AdvanceTraffic(e.seconds);
        break;
    }
    Flush();
  }

  // One control line: a timeline event without `at`, validated against the device's current
  // state (so `plug` after `unplug` is valid and `plug` overrides the current configuration).
  void Command(const std::string& line) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) return;
    Lab current = lab_;
    current.devices[index_].config = device_.config();
    current.devices[index_].plugged = device_.plugged();
    absl::StatusOr<std::vector<TimelineEvent>> events = rxfleet::emulator::ParseTimeline(
        absl::StrCat("- {at: 0, ", StripBraces(line), "}\n"), "control", current);
    if (!events.ok()) {
      std::cerr << "rxfleet-usbredir-device: control: " << events.status().message() << "\n";
      return;
    }
    for (const TimelineEvent& e : *events) {
      if (e.device != index_) {
        std::cerr << "rxfleet-usbredir-device: control: this process serves "
                  << lab_.devices[index_].name << " only\n";
        continue;
      }
      Apply(e);
    }
    WriteState();
  }

  static std::string StripBraces(std::string line) {
    const size_t open = line.find('{');
    const size_t close = line.rfind('}');
    if (open != std::string::npos && close != std::string::npos && close > open) {
      return line.substr(open + 1, close - open - 1);
    }
    return line;
  }

  Lab lab_;
  int index_;
  EmulatedDevice device_;
  std::vector<TimelineEvent> timeline_;
  std::string state_out_;
  bool verbose_;
  usbredirparser* parser_ = nullptr;
  int fd_ = -1;
  bool connected_ = false;
  bool peer_closed_ = false;
  bool hello_done_ = false;
  bool dirty_ = true;
  uint8_t configuration_ = 0;
  double last_state_write_ = -1;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::map<uint64_t, usb_redir_control_packet_header> pending_control_;
  std::map<uint64_t, usb_redir_bulk_packet_header> pending_bulk_;
};

int Usage(const std::string& message) {
  std::cerr << "rxfleet-usbredir-device: " << message << "\n" << kUsage;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string lab_path, device_name, listen_path, timeline_path, control_path, state_out;
  bool verbose = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](std::string& target) {
      if (i + 1 >= argc) return false;
      target = argv[++i];
      return true;
    };
    bool ok = true;
    if (arg == "--lab") {
      ok = value(lab_path);
    } else if (arg == "--device") {
      ok = value(device_name);
    } else if (arg == "--listen") {
      ok = value(listen_path);
    } else if (arg == "--timeline") {
      ok = value(timeline_path);
    } else if (arg == "--control") {
      ok = value(control_path);
    } else if (arg == "--state-out") {
      ok = value(state_out);
    } else if (arg == "--verbose") {
      verbose = true;
    } else if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    } else {
      return Usage("unknown argument " + arg);
    }
    if (!ok) return Usage(arg + " needs a value");
  }
  if (lab_path.empty() || listen_path.empty()) return Usage("--lab and --listen are required");
  absl::StatusOr<Lab> lab = rxfleet::emulator::LoadLab(lab_path);
  if (!lab.ok()) return Usage(std::string(lab.status().message()));
  int index = 0;
  if (!device_name.empty()) {
    index = lab->FindDevice(device_name);
    if (index < 0) return Usage("no device " + device_name + " in " + lab_path);
  } else if (lab->devices.size() != 1) {
    return Usage("the lab has several devices: name one with --device");
  }
  std::vector<TimelineEvent> timeline;
  if (!timeline_path.empty()) {
    absl::StatusOr<std::vector<TimelineEvent>> t =
        rxfleet::emulator::LoadTimeline(timeline_path, *lab);
    if (!t.ok()) return Usage(std::string(t.status().message()));
    for (const TimelineEvent& e : *t) {
      if (e.device == index) timeline.push_back(e);
    }
  }
  int control_fd = -1;
  if (!control_path.empty()) {
    if (mkfifo(control_path.c_str(), 0600) != 0 && errno != EEXIST) {
      std::perror(("rxfleet-usbredir-device: mkfifo " + control_path).c_str());
      return 1;
    }
    // Read-write, so the FIFO never reports end of file between writers.
    control_fd = open(control_path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (control_fd < 0) {
      std::perror(("rxfleet-usbredir-device: open " + control_path).c_str());
      return 1;
    }
  }
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (listen_path.size() >= sizeof(addr.sun_path)) return Usage("--listen path too long");
  std::strcpy(addr.sun_path, listen_path.c_str());
  unlink(listen_path.c_str());
  if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listener, 1) != 0) {
    std::perror(("rxfleet-usbredir-device: listen " + listen_path).c_str());
    return 1;
  }
  Device device(*lab, index, std::move(timeline), state_out, verbose);
  device.WriteState();
  std::cerr << "rxfleet-usbredir-device: listening on " << listen_path << "\n";
  int fd = -1;
  while (fd < 0 && !g_stop) {
    pollfd p = {listener, POLLIN, 0};
    if (poll(&p, 1, 200) > 0) fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  }
  close(listener);
  unlink(listen_path.c_str());
  if (fd < 0) {
    device.WriteState();
    return 0;
  }
  std::cerr << "rxfleet-usbredir-device: QEMU connected\n";
  const int code = device.Serve(fd, control_fd);
  close(fd);
  return code;
}
