#pragma once

// Registry fixtures of the experiment and tuning controller tests: managed RTL8922AU adapters
// (rtw89, register layout v3, APPLIED) on hosts labelled board=<board> that announce the
// `probes` capability.

#include <string>

#include "absl/strings/str_cat.h"
#include "rxfleet/v1/adapter.pb.h"
#include "server/experiments/controller.h"
#include "server/store/store.h"

namespace rxfleet::server::testing {

inline v1::Adapter MakeAdapter(const std::string& host, const std::string& board,
                               const std::string& id, v1::UsbSpeed speed) {
  v1::Adapter adapter;
  adapter.mutable_metadata()->set_name(id);
  (*adapter.mutable_metadata()->mutable_labels())["board"] = board;
  adapter.set_host_id(host);
  adapter.mutable_status()->set_vid(0x0bda);
  adapter.mutable_status()->set_pid(0x8912);
  adapter.mutable_status()->set_chip("rtl8922au");
  adapter.mutable_status()->set_family("rtw89");
  adapter.mutable_status()->set_layout(v1::RX_AGG_LAYOUT_V3);
  adapter.mutable_status()->set_usb_speed(speed);
  adapter.mutable_status()->set_state(v1::ADAPTER_STATE_APPLIED);
  return adapter;
}

/// Host `id` with `adapters` adapters port-1 .. port-N.
inline HostRecord MakeHost(const std::string& id, const std::string& board, int adapters,
                           v1::UsbSpeed speed) {
  HostRecord record;
  record.host.mutable_metadata()->set_name(id);
  (*record.host.mutable_metadata()->mutable_labels())["board"] = board;
  record.host.mutable_status()->add_capabilities(kProbesCapability);
  for (int i = 1; i <= adapters; ++i) {
    record.adapters.push_back(MakeAdapter(id, board, absl::StrCat("port-", i), speed));
  }
  return record;
}

}  // namespace rxfleet::server::testing
