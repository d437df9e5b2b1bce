#include "tools/emulator/descriptors.h"

#include <algorithm>

namespace rxfleet::emulator {
namespace {

void Put16(std::vector<uint8_t>& out, uint16_t v) {
  out.push_back(static_cast<uint8_t>(v & 0xff));
  out.push_back(static_cast<uint8_t>(v >> 8));
}

uint16_t DefaultMaxPacket(EndpointType type, double speed_mbps) {
  if (speed_mbps >= 5000) return 1024;
  if (speed_mbps >= 480) return type == EndpointType::kBulk ? 512 : 1024;
  if (speed_mbps >= 12) return 64;
  return 8;
}

DeviceConfig HubConfig(bool superspeed, bool root) {
  DeviceConfig c;
  c.speed_mbps = superspeed ? 5000 : 480;
  c.device_class = 9;
  c.device_protocol = superspeed ? 3 : 1;
  c.self_powered = true;
  c.remote_wakeup = true;
  c.max_power_ma = 0;
  InterfaceSpec hub;
  hub.number = 0;
  hub.interface_class = 9;
  hub.interface_subclass = 0;
  hub.interface_protocol = 0;
  hub.endpoints = {{0x81, EndpointType::kInterrupt, static_cast<uint16_t>(root ? 4 : 1), 12, 0}};
  hub.driver = "hub";
  c.interfaces = {hub};
  if (root) {
    c.vid = 0x1d6b;
    c.pid = superspeed ? 0x0003 : 0x0002;
    c.bcd_usb = superspeed ? 0x0300 : 0x0200;
    c.bcd_device = 0x0601;
  } else {
    c.vid = 0x05e3;
    c.pid = superspeed ? 0x0626 : 0x0610;
    c.bcd_usb = superspeed ? 0x0320 : 0x0210;
    c.bcd_device = 0x0663;
    c.self_powered = false;
    c.max_power_ma = superspeed ? 896 : 100;
  }
  return c;
}

}  // namespace

uint8_t MaxPacketSize0(double speed_mbps) {
  if (speed_mbps >= 5000) return 9;
  if (speed_mbps >= 12) return 64;
  return 8;
}

std::vector<uint8_t> DeviceDescriptor(const DeviceConfig& config) {
  std::vector<uint8_t> d;
  d.push_back(18);
  d.push_back(0x01);
  Put16(d, config.bcd_usb);
  d.push_back(config.device_class);
  d.push_back(config.device_subclass);
  d.push_back(config.device_protocol);
  d.push_back(MaxPacketSize0(config.speed_mbps));
  Put16(d, config.vid);
  Put16(d, config.pid);
  Put16(d, config.bcd_device);
  d.push_back(config.manufacturer.empty() ? 0 : kManufacturerIndex);
  d.push_back(config.product.empty() ? 0 : kProductIndex);
  d.push_back(config.serial.empty() ? 0 : kSerialIndex);
  d.push_back(1);  // bNumConfigurations
  return d;
}

std::vector<uint8_t> ConfigurationDescriptor(const DeviceConfig& config) {
  const bool ss = config.SuperSpeed();
  std::vector<uint8_t> body;
  std::vector<uint8_t> numbers;
  for (const InterfaceSpec& i : config.interfaces) {
    if (std::find(numbers.begin(), numbers.end(), i.number) == numbers.end()) {
      numbers.push_back(i.number);
    }
  }
  // Interfaces in (number, alternate) order, as devices report them.
  std::vector<const InterfaceSpec*> ordered;
  for (const InterfaceSpec& i : config.interfaces) ordered.push_back(&i);
  std::stable_sort(ordered.begin(), ordered.end(), [](const auto* a, const auto* b) {
    return a->number != b->number ? a->number < b->number : a->alternate < b->alternate;
  });
  for (const InterfaceSpec* i : ordered) {
    if (i->function) {
      body.insert(body.end(),
                  {8, 0x0b, i->number, i->function->interface_count, i->function->function_class,
                   i->function->function_subclass, i->function->function_protocol, 0});
    }
    body.insert(body.end(),
                {9, 0x04, i->number, i->alternate, static_cast<uint8_t>(i->endpoints.size()),
                 i->interface_class, i->interface_subclass, i->interface_protocol, 0});
    for (const EndpointSpec& ep : i->endpoints) {
      const uint16_t max_packet =
          ep.max_packet != 0 ? ep.max_packet : DefaultMaxPacket(ep.type, config.speed_mbps);
      uint8_t interval = ep.interval;
      if (interval == 0 && ep.type != EndpointType::kBulk) interval = 1;
      body.insert(body.end(), {7, 0x05, ep.address, static_cast<uint8_t>(ep.type)});
      Put16(body, max_packet);
      body.push_back(interval);
      if (ss) {
        body.insert(body.end(), {6, 0x30, ep.max_burst, 0});
        Put16(body, ep.type == EndpointType::kBulk
                        ? 0
                        : static_cast<uint16_t>(max_packet * (ep.max_burst + 1)));
      }
    }
  }
  std::vector<uint8_t> out;
  out.push_back(9);
  out.push_back(0x02);
  Put16(out, static_cast<uint16_t>(9 + body.size()));
  out.push_back(static_cast<uint8_t>(numbers.size()));
  out.push_back(1);  // bConfigurationValue
  out.push_back(0);  // iConfiguration
  out.push_back(static_cast<uint8_t>(0x80 | (config.self_powered ? 0x40 : 0) |
                                     (config.remote_wakeup ? 0x20 : 0)));
  const int unit = ss ? 8 : 2;
  out.push_back(static_cast<uint8_t>(std::min(255, (config.max_power_ma + unit - 1) / unit)));
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

std::vector<uint8_t> BosDescriptor(const DeviceConfig& config) {
  if (config.bcd_usb < 0x0201) return {};
  std::vector<uint8_t> caps = {7, 0x10, 0x02, 0, 0, 0, 0};  // USB 2.0 Extension, no LPM
  if (config.superspeed_capable || config.SuperSpeed()) {
    caps.insert(caps.end(), {10, 0x10, 0x03, 0x00});  // SuperSpeed USB Device Capability
    Put16(caps, 0x000e);                              // wSpeedsSupported: full, high, super
    caps.push_back(1);                                // bFunctionalitySupport: full speed
    caps.push_back(0x0a);                             // bU1DevExitLat
    Put16(caps, 0x07ff);                              // wU2DevExitLat
  }
  std::vector<uint8_t> out = {5, 0x0f};
  Put16(out, static_cast<uint16_t>(5 + caps.size()));
  out.push_back(static_cast<uint8_t>(caps.size() == 7 ? 1 : 2));
  out.insert(out.end(), caps.begin(), caps.end());
  return out;
}

std::vector<uint8_t> SysfsDescriptors(const DeviceConfig& config) {
  std::vector<uint8_t> out = DeviceDescriptor(config);
  std::vector<uint8_t> conf = ConfigurationDescriptor(config);
  out.insert(out.end(), conf.begin(), conf.end());
  return out;
}

std::vector<uint8_t> StringDescriptor(const DeviceConfig& config, uint8_t index) {
  if (index == 0) return {4, 0x03, 0x09, 0x04};
  const std::string* text = nullptr;
  if (index == kManufacturerIndex) text = &config.manufacturer;
  if (index == kProductIndex) text = &config.product;
  if (index == kSerialIndex) text = &config.serial;
  if (text == nullptr || text->empty()) return {};
  std::vector<uint8_t> out;
  out.push_back(static_cast<uint8_t>(std::min<size_t>(2 + 2 * text->size(), 254)));
  out.push_back(0x03);
  for (size_t i = 0; i < text->size() && out.size() + 2 <= 254; ++i) {
    out.push_back(static_cast<uint8_t>((*text)[i]));
    out.push_back(0);
  }
  return out;
}

std::vector<uint8_t> RootHubDescriptors(bool superspeed) {
  return SysfsDescriptors(HubConfig(superspeed, /*root=*/true));
}

std::vector<uint8_t> ExternalHubDescriptors(bool superspeed) {
  return SysfsDescriptors(HubConfig(superspeed, /*root=*/false));
}

}  // namespace rxfleet::emulator
