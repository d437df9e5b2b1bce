// Round-trips every v1 API message through the binary wire format and protobuf JSON, and checks
// the API conventions that clients depend on: unit-carrying JSON names, `*_UNSPECIFIED` enum
// zeros, and proto3 `optional` keeping "unset" apart from 0.

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/duration.pb.h>
#include <google/protobuf/message.h>
#include <google/protobuf/timestamp.pb.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <libusb.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "rxfleet/v1/adapter.pb.h"
#include "rxfleet/v1/agent_service.pb.h"
#include "rxfleet/v1/common.pb.h"
#include "rxfleet/v1/event.pb.h"
#include "rxfleet/v1/experiment.pb.h"
#include "rxfleet/v1/fleet_service.pb.h"
#include "rxfleet/v1/host.pb.h"
#include "rxfleet/v1/local_status.pb.h"
#include "rxfleet/v1/policy.pb.h"

namespace rxfleet::v1 {
namespace {

namespace pb = ::google::protobuf;
using pb::Descriptor;
using pb::EnumDescriptor;
using pb::FieldDescriptor;
using pb::FileDescriptor;
using pb::Message;
using pb::Reflection;

constexpr char kPackage[] = "rxfleet.v1";

// All files of the v1 package, found through the imports of the three service files.
std::vector<const FileDescriptor*> PackageFiles() {
  std::vector<const FileDescriptor*> pending = {AgentMessage::descriptor()->file(),
                                                ListHostsRequest::descriptor()->file(),
                                                GetStatusRequest::descriptor()->file()};
  std::set<std::string> seen;
  std::vector<const FileDescriptor*> files;
  while (!pending.empty()) {
    const FileDescriptor* file = pending.back();
    pending.pop_back();
    if (file->package() != kPackage || !seen.insert(file->name()).second) continue;
    files.push_back(file);
    for (int i = 0; i < file->dependency_count(); ++i) pending.push_back(file->dependency(i));
  }
  return files;
}

void CollectMessages(const Descriptor* message, std::vector<const Descriptor*>& out) {
  if (message->options().map_entry()) return;
  out.push_back(message);
  for (int i = 0; i < message->nested_type_count(); ++i) {
    CollectMessages(message->nested_type(i), out);
  }
}

std::vector<const Descriptor*> PackageMessages() {
  std::vector<const Descriptor*> out;
  for (const FileDescriptor* file : PackageFiles()) {
    for (int i = 0; i < file->message_type_count(); ++i)
      CollectMessages(file->message_type(i), out);
  }
  return out;
}

std::vector<const EnumDescriptor*> PackageEnums() {
  std::vector<const EnumDescriptor*> out;
  for (const FileDescriptor* file : PackageFiles()) {
    for (int i = 0; i < file->enum_type_count(); ++i) out.push_back(file->enum_type(i));
  }
  for (const Descriptor* message : PackageMessages()) {
    for (int i = 0; i < message->enum_type_count(); ++i) out.push_back(message->enum_type(i));
  }
  return out;
}

// Sets one singular or repeated element of `field` to a deterministic non-default value that
// depends on `salt`, so repeated elements and map keys differ.
void SetScalar(Message& msg, const FieldDescriptor* field, int salt);
void Populate(Message& msg, int salt, int oneof_choice, int depth);

void PopulateWellKnownOrMessage(Message& msg, int salt, int depth) {
  const std::string& name = msg.GetDescriptor()->full_name();
  if (name == "google.protobuf.Timestamp") {
    auto& ts = static_cast<pb::Timestamp&>(msg);
    ts.set_seconds(1775900000 + salt);  // 2026-04-11, the field captures' date.
    ts.set_nanos(123000000);
    return;
  }
  if (name == "google.protobuf.Duration") {
    auto& d = static_cast<pb::Duration&>(msg);
    d.set_seconds(60 + salt);
    d.set_nanos(500000000);
    return;
  }
  Populate(msg, salt, 0, depth + 1);
}

void SetScalar(Message& msg, const FieldDescriptor* field, int salt) {
  const Reflection* r = msg.GetReflection();
  const bool rep = field->is_repeated();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      rep ? r->AddInt32(&msg, field, -7 - salt) : r->SetInt32(&msg, field, -7 - salt);
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      rep ? r->AddInt64(&msg, field, int64_t{-9007199254740993} - salt)
          : r->SetInt64(&msg, field, int64_t{-9007199254740993} - salt);
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      rep ? r->AddUInt32(&msg, field, 4000000000u + salt)
          : r->SetUInt32(&msg, field, 4000000000u + salt);
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      // Above 2^53: JSON must carry it as a string to stay exact.
      rep ? r->AddUInt64(&msg, field, uint64_t{18446744073709551000u} + salt)
          : r->SetUInt64(&msg, field, uint64_t{18446744073709551000u} + salt);
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      rep ? r->AddDouble(&msg, field, 0.125 + salt) : r->SetDouble(&msg, field, 0.125 + salt);
      break;
    case FieldDescriptor::CPPTYPE_FLOAT:
      rep ? r->AddFloat(&msg, field, 0.5f + salt) : r->SetFloat(&msg, field, 0.5f + salt);
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      rep ? r->AddBool(&msg, field, true) : r->SetBool(&msg, field, true);
      break;
    case FieldDescriptor::CPPTYPE_ENUM: {
      const EnumDescriptor* e = field->enum_type();
      const auto* value = e->value(e->value_count() - 1 - (salt % (e->value_count() - 1)));
      rep ? r->AddEnum(&msg, field, value) : r->SetEnum(&msg, field, value);
      break;
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string value = field->name() + "-" + std::to_string(salt) + "-µs";
      rep ? r->AddString(&msg, field, value) : r->SetString(&msg, field, value);
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE: {
      Message* sub = rep ? r->AddMessage(&msg, field) : r->MutableMessage(&msg, field);
      PopulateWellKnownOrMessage(*sub, salt, 0);
      break;
    }
  }
}

// Fills every field of `msg`. Repeated and map fields get two elements. Of each real oneof only
// the member with index `oneof_choice` (modulo the member count) is set.
void Populate(Message& msg, int salt, int oneof_choice, int depth) {
  ASSERT_LT(depth, 12) << "unexpectedly deep (recursive?) message " << msg.GetTypeName();
  const Descriptor* d = msg.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* field = d->field(i);
    if (const pb::OneofDescriptor* oneof = field->real_containing_oneof()) {
      if (field->index_in_oneof() != oneof_choice % oneof->field_count()) continue;
    }
    if (field->is_map()) {
      for (int k = 1; k <= 2; ++k) {
        Message* entry = msg.GetReflection()->AddMessage(&msg, field);
        SetScalar(*entry, entry->GetDescriptor()->map_key(), salt + k);
        SetScalar(*entry, entry->GetDescriptor()->map_value(), salt + k);
      }
    } else if (field->is_repeated()) {
      SetScalar(msg, field, salt + 1);
      SetScalar(msg, field, salt + 2);
    } else {
      SetScalar(msg, field, salt);
    }
  }
}

int OneofVariants(const Descriptor* d) {
  int variants = 1;
  for (int i = 0; i < d->real_oneof_decl_count(); ++i) {
    variants = std::max(variants, d->oneof_decl(i)->field_count());
  }
  return variants;
}

// Serialises `original` to binary and JSON, parses both back, and expects equality.
void ExpectRoundTrip(const Message& original) {
  SCOPED_TRACE(original.GetTypeName());
  pb::util::MessageDifferencer differ;
  std::string report;
  differ.ReportDifferencesToString(&report);

  std::string wire;
  ASSERT_TRUE(original.SerializeToString(&wire));
  std::unique_ptr<Message> from_wire(original.New());
  ASSERT_TRUE(from_wire->ParseFromString(wire));
  EXPECT_TRUE(differ.Compare(original, *from_wire)) << "binary: " << report;

  report.clear();
  std::string json;
  ASSERT_TRUE(pb::util::MessageToJsonString(original, &json).ok());
  std::unique_ptr<Message> from_json(original.New());
  const auto status = pb::util::JsonStringToMessage(json, from_json.get());
  ASSERT_TRUE(status.ok()) << status.ToString() << "\n" << json;
  EXPECT_TRUE(differ.Compare(original, *from_json)) << "JSON: " << report << "\n" << json;
}

nlohmann::json ToJson(const Message& msg) {
  std::string json;
  EXPECT_TRUE(pb::util::MessageToJsonString(msg, &json).ok());
  return nlohmann::json::parse(json);
}

void SetTime(pb::Timestamp* ts, int64_t seconds) { ts->set_seconds(seconds); }

// --- Realistic instances, modelled on the field evidence and seed measurements. ---

Adapter MakeSuperSpeedAdapter() {
  Adapter a;
  a.mutable_metadata()->set_name("port-2-2");
  a.mutable_metadata()->set_resource_version("41");
  (*a.mutable_metadata()->mutable_labels())["position"] = "rear";
  a.set_host_id("fw13");
  AdapterStatus* s = a.mutable_status();
  s->set_vid(0x0bda);
  s->set_pid(0x8912);
  s->set_chip("rtl8922au");
  s->set_layout(RX_AGG_LAYOUT_V3);
  s->set_usb_speed(USB_SPEED_SUPER);
  s->set_port_path("2-2");
  s->set_peer_port_path("3-3");
  s->set_bus(2);
  s->set_devnum(3);
  s->set_netdev("wlan1");
  s->set_driver("rtw89_8922au");
  s->set_manufacturer("Realtek");
  s->set_product("802.11be WLAN Adapter");
  s->set_bcd_usb(0x0320);
  RxAggSettings* desired = s->mutable_desired()->mutable_settings();
  desired->set_hold_us(32);
  desired->set_count_threshold(255);
  desired->set_buffer_kib(20);
  desired->set_enable(true);
  Provenance& p = (*s->mutable_desired()->mutable_provenance())["hold_us"];
  p.set_source(SETTING_SOURCE_SERVER_POLICY);
  p.set_name("usb3-short-hold");
  p.set_bundle_version(7);
  ObservedRxAgg* observed = s->mutable_observed();
  RegisterWord* reg0 = observed->add_registers();
  reg0->set_address(0x6000);
  reg0->set_value(0x80FF0114);
  RegisterWord* reg1 = observed->add_registers();
  reg1->set_address(0x6004);
  reg1->set_value(0x0000001F);
  observed->mutable_decoded()->set_enable(true);
  observed->mutable_decoded()->set_count_threshold(255);
  observed->mutable_decoded()->set_hold_us(32);
  observed->mutable_decoded()->set_buffer_kib(20);
  observed->mutable_decoded()->set_small_packet_count_threshold(31);
  SetTime(observed->mutable_read_time(), 1775900000);
  s->set_state(ADAPTER_STATE_APPLIED);
  Condition* applied = s->add_conditions();
  applied->set_type("Applied");
  applied->set_status(CONDITION_STATUS_TRUE);
  applied->set_reason("Verified");
  SetTime(applied->mutable_last_transition_time(), 1775900000);
  s->mutable_counters()->set_applies_total(1);
  s->mutable_counters()->set_verifications_total(12);
  s->set_last_applied_bundle_version(7);
  return a;
}

Policy MakeUsb2Policy() {
  Policy policy;
  policy.mutable_metadata()->set_name("usb2-long-hold");
  policy.mutable_spec()->set_priority(10);
  AdapterSelector* sel = policy.mutable_spec()->mutable_selector();
  (*sel->mutable_match_labels())["board"] = "pi1";
  sel->add_usb_speeds(USB_SPEED_HIGH);
  sel->add_chips("rtl8922au");
  sel->add_vid_pids("0bda:8912");
  policy.mutable_spec()->mutable_settings()->set_hold_us(1024);
  policy.mutable_spec()->mutable_settings()->set_enable(true);
  return policy;
}

MetricWindow MakeWindow() {
  MetricWindow w;
  w.set_adapter_id("port-2-2");
  w.set_experiment("hold-usb3");
  w.set_arm("hold-32us");
  w.set_period_index(3);
  SetTime(w.mutable_window_start_time(), 1775900060);
  w.mutable_window_duration()->set_seconds(60);
  w.set_rx_bytes(7500000000);
  w.set_tx_bytes(120000000);
  w.set_rx_packets(5100000);
  w.set_tx_packets(1900000);
  w.set_rx_dropped(12);
  w.mutable_rtt()->set_count(600);
  w.mutable_rtt()->set_mean_seconds(0.00129);
  w.mutable_rtt()->set_p50_seconds(0.0012);
  w.mutable_rtt()->set_p90_seconds(0.0016);
  w.mutable_rtt()->set_p99_seconds(0.0031);
  w.set_probes_sent(600);
  w.set_probes_lost(1);
  w.set_busiest_core_ratio(0.128);
  w.set_host_cpu_ratio(0.04);
  w.set_valid(true);
  return w;
}

TEST(ProtoRoundTrip, EveryMessageOfThePackageFullyPopulated) {
  const std::vector<const Descriptor*> messages = PackageMessages();
  ASSERT_GT(messages.size(), 60u);
  for (const Descriptor* d : messages) {
    for (int variant = 0; variant < OneofVariants(d); ++variant) {
      std::unique_ptr<Message> msg(pb::MessageFactory::generated_factory()->GetPrototype(d)->New());
      Populate(*msg, 0, variant, 0);
      ExpectRoundTrip(*msg);
    }
  }
}

TEST(ProtoRoundTrip, TopLevelMessagesAreCovered) {
  std::set<std::string> names;
  for (const Descriptor* d : PackageMessages()) names.insert(d->full_name());
  for (const char* name : {"AgentMessage",
                           "Hello",
                           "AdapterInventory",
                           "AdapterUpdate",
                           "Ack",
                           "Nack",
                           "MetricWindow",
                           "ServerMessage",
                           "PolicyBundle",
                           "ServerConfig",
                           "ExperimentAssignment",
                           "Host",
                           "Adapter",
                           "Policy",
                           "Experiment",
                           "ExperimentReport",
                           "Event",
                           "GetStatusResponse",
                           "ApplyPolicyResponse",
                           "ExplainAdapterResponse",
                           "PromoteExperimentResponse",
                           "WatchEventsRequest"}) {
    EXPECT_TRUE(names.count(std::string(kPackage) + "." + name)) << name;
  }
}

TEST(ProtoRoundTrip, EveryAgentMessageVariant) {
  std::set<int> seen_cases;
  const Descriptor* d = AgentMessage::descriptor();
  ASSERT_EQ(d->real_oneof_decl_count(), 1);
  for (int variant = 0; variant < d->oneof_decl(0)->field_count(); ++variant) {
    AgentMessage msg;
    Populate(msg, 0, variant, 0);
    seen_cases.insert(msg.kind_case());
    ExpectRoundTrip(msg);
  }
  EXPECT_EQ(seen_cases, (std::set<int>{AgentMessage::kHello, AgentMessage::kInventory,
                                       AgentMessage::kAdapterUpdate, AgentMessage::kAck,
                                       AgentMessage::kNack, AgentMessage::kMetricWindow}));
}

TEST(ProtoRoundTrip, RealisticMessages) {
  AgentMessage update;
  *update.mutable_adapter_update()->add_adapters() = MakeSuperSpeedAdapter();
  update.mutable_adapter_update()->add_removed_adapter_ids("port-1-1.3");
  ExpectRoundTrip(update);

  AgentMessage window;
  *window.mutable_metric_window() = MakeWindow();
  ExpectRoundTrip(window);

  AgentMessage nack;
  nack.mutable_nack()->set_version(8);
  nack.mutable_nack()->set_nonce("c0ffee");
  nack.mutable_nack()->set_error_detail("buffer_kib 6 is not a multiple of 4 on layout v1");
  nack.mutable_nack()->set_active_version(7);
  ExpectRoundTrip(nack);

  ServerMessage push;
  PolicyBundle* bundle = push.mutable_bundle();
  bundle->set_version(8);
  bundle->set_nonce("5f1d3c");
  *bundle->add_policies() = MakeUsb2Policy();
  ExperimentAssignment* assignment = bundle->add_assignments();
  assignment->set_adapter_id("port-2-2");
  assignment->set_experiment("hold-usb3");
  assignment->set_arm("hold-32us");
  assignment->mutable_settings()->set_hold_us(32);
  assignment->set_period_index(3);
  SetTime(assignment->mutable_period_end_time(), 1775903600);
  ExpectRoundTrip(push);

  GetStatusResponse status;
  status.set_host_id("fw13");
  status.mutable_server_link()->set_state(SERVER_LINK_STATE_CONNECTED);
  status.mutable_server_link()->set_active_bundle_version(8);
  status.mutable_server_link()->set_active_bundle_origin(BUNDLE_ORIGIN_SERVER);
  *status.add_adapters() = MakeSuperSpeedAdapter();
  ExpectRoundTrip(status);
}

TEST(ProtoJson, FieldNamesCarryUnits) {
  const nlohmann::json adapter = ToJson(MakeSuperSpeedAdapter());
  const nlohmann::json& st = adapter.at("status");
  EXPECT_EQ(st.at("desired").at("settings").at("holdUs"), 32);
  EXPECT_EQ(st.at("desired").at("settings").at("bufferKib"), 20);
  EXPECT_EQ(st.at("desired").at("provenance").at("hold_us").at("source"),
            "SETTING_SOURCE_SERVER_POLICY");
  EXPECT_EQ(st.at("observed").at("decoded").at("holdUs"), 32);
  EXPECT_EQ(st.at("observed").at("registers").at(0).at("address"), 0x6000);
  EXPECT_EQ(st.at("observed").at("registers").at(0).at("value"), 0x80FF0114u);
  EXPECT_EQ(st.at("usbSpeed"), "USB_SPEED_SUPER");
  EXPECT_EQ(st.at("layout"), "RX_AGG_LAYOUT_V3");
  EXPECT_EQ(st.at("state"), "ADAPTER_STATE_APPLIED");
  EXPECT_EQ(st.at("bcdUsb"), 0x0320);
  // 64-bit integers are JSON strings (proto3 JSON mapping).
  EXPECT_EQ(st.at("lastAppliedBundleVersion"), "7");
  EXPECT_EQ(st.at("counters").at("verificationsTotal"), "12");

  const nlohmann::json window = ToJson(MakeWindow());
  EXPECT_EQ(window.at("rxBytes"), "7500000000");
  EXPECT_EQ(window.at("txBytes"), "120000000");
  EXPECT_EQ(window.at("rxDropped"), "12");
  EXPECT_EQ(window.at("probesLost"), "1");
  EXPECT_DOUBLE_EQ(window.at("rtt").at("p99Seconds").get<double>(), 0.0031);
  EXPECT_DOUBLE_EQ(window.at("busiestCoreRatio").get<double>(), 0.128);
  EXPECT_EQ(window.at("windowDuration"), "60s");
  EXPECT_EQ(window.at("windowStartTime"), "2026-04-11T09:34:20Z");
}

TEST(ProtoJson, OptionalSettingsKeepUnsetApartFromZero) {
  RxAggSettings settings;
  settings.set_hold_us(0);
  settings.set_enable(false);
  const nlohmann::json json = ToJson(settings);
  EXPECT_EQ(json.at("holdUs"), 0);
  EXPECT_EQ(json.at("enable"), false);
  EXPECT_FALSE(json.contains("countThreshold"));
  EXPECT_FALSE(json.contains("bufferKib"));

  RxAggSettings parsed;
  ASSERT_TRUE(pb::util::JsonStringToMessage(json.dump(), &parsed).ok());
  EXPECT_TRUE(parsed.has_hold_us());
  EXPECT_EQ(parsed.hold_us(), 0u);
  EXPECT_TRUE(parsed.has_enable());
  EXPECT_FALSE(parsed.has_count_threshold());
  EXPECT_FALSE(parsed.has_buffer_kib());
  EXPECT_FALSE(parsed.has_force_enable());

  RxAggSettings from_wire;
  ASSERT_TRUE(from_wire.ParseFromString(settings.SerializeAsString()));
  EXPECT_TRUE(from_wire.has_hold_us());
  EXPECT_FALSE(from_wire.has_buffer_kib());
}

TEST(ProtoJson, PolicyReadsFromHandWrittenJson) {
  // What an operator writes (e.g. `rxfleetctl apply -f policy.json`).
  constexpr char kJson[] = R"({
    "metadata": {"name": "usb2-long-hold"},
    "spec": {
      "priority": 10,
      "selector": {"matchLabels": {"board": "pi1"}, "usbSpeeds": ["USB_SPEED_HIGH"],
                   "chips": ["rtl8922au"], "vidPids": ["0bda:8912"]},
      "settings": {"holdUs": 1024, "enable": true}
    }
  })";
  Policy parsed;
  ASSERT_TRUE(pb::util::JsonStringToMessage(kJson, &parsed).ok());
  EXPECT_TRUE(pb::util::MessageDifferencer::Equals(parsed, MakeUsb2Policy()));
}

TEST(ProtoConventions, EnumZeroValuesAreUnspecified) {
  const std::vector<const EnumDescriptor*> enums = PackageEnums();
  ASSERT_GE(enums.size(), 10u);
  for (const EnumDescriptor* e : enums) {
    SCOPED_TRACE(e->full_name());
    ASSERT_GT(e->value_count(), 1);
    const auto* zero = e->value(0);
    EXPECT_EQ(zero->number(), 0);
    const std::string suffix = "_UNSPECIFIED";
    ASSERT_GT(zero->name().size(), suffix.size());
    EXPECT_EQ(zero->name().substr(zero->name().size() - suffix.size()), suffix);
    // Every value carries the zero value's prefix (UsbSpeed -> USB_SPEED_*), so values of
    // different enums never collide in the package scope.
    const std::string prefix = zero->name().substr(0, zero->name().size() - suffix.size() + 1);
    for (int i = 0; i < e->value_count(); ++i) {
      EXPECT_EQ(e->value(i)->name().rfind(prefix, 0), 0u) << e->value(i)->name();
    }
  }
}

TEST(ProtoConventions, UsbSpeedMatchesLibusbNumbering) {
  // The agent converts libusb_get_device_speed() results with a cast.
  static_assert(int{USB_SPEED_UNSPECIFIED} == int{LIBUSB_SPEED_UNKNOWN});
  static_assert(int{USB_SPEED_LOW} == int{LIBUSB_SPEED_LOW});
  static_assert(int{USB_SPEED_FULL} == int{LIBUSB_SPEED_FULL});
  static_assert(int{USB_SPEED_HIGH} == int{LIBUSB_SPEED_HIGH});
  static_assert(int{USB_SPEED_SUPER} == int{LIBUSB_SPEED_SUPER});
  static_assert(int{USB_SPEED_SUPER_PLUS} == int{LIBUSB_SPEED_SUPER_PLUS});
  EXPECT_EQ(UsbSpeed_descriptor()->value_count(), 6);
}

}  // namespace
}  // namespace rxfleet::v1
