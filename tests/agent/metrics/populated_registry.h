#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "agent/collectors/cpu_stat.h"
#include "agent/collectors/icmp_prober.h"
#include "agent/collectors/netdev_stats.h"
#include "agent/collectors/sampler.h"
#include "agent/collectors/window.h"
#include "agent/metrics/adapter_metrics.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "tests/support/paths.h"

namespace rxfleet::agent::testing {

/// Every metric family the agent exports, filled from the recorded samples in tests/fixtures
/// (no device, no network): two adapters in different states, traffic from the netdev
/// fixtures, CPU from the /proc fixtures, an RTT prober whose adapter has no default gateway
/// (so nothing is sent), and the sampler's wrapper series.
class PopulatedRegistry {
 public:
  PopulatedRegistry() : registry_(std::make_shared<prometheus::Registry>()) {
    namespace fs = std::filesystem;
    using ::rxfleet::testing::ReadTextFile;
    using ::rxfleet::testing::SourcePath;
    using ::rxfleet::testing::WriteTextFile;
    auto copy_text = [](const std::string& fixture, const fs::path& to) {
      EXPECT_TRUE(
          WriteTextFile(to, ReadTextFile(SourcePath("tests/fixtures/" + fixture)).value_or(""))
              .ok());
    };
    const fs::path netdev = sysfs_.path() / "class/net/wlan0";
    auto install_netdev = [&](const std::string& sample) {
      fs::remove_all(netdev);
      fs::create_directories(netdev);
      fs::copy(SourcePath("tests/fixtures/netdev/" + sample), netdev, fs::copy_options::recursive);
    };
    fs::create_directories(procfs_.path() / "self");
    fs::create_directories(procfs_.path() / "net");
    copy_text("proc/self-stat", procfs_.path() / "self/stat");
    copy_text("proc/self-statm", procfs_.path() / "self/statm");
    copy_text("proc/net-route", procfs_.path() / "net/route");

    prometheus::Registry& r = *registry_;
    adapters_ = std::make_unique<AdapterMetrics>(r);
    NetdevCollectorOptions netdev_options;
    netdev_options.sysfs_root = sysfs_.path().string();
    netdev_options.log = [](std::string_view) {};
    traffic_ = std::make_unique<NetdevCollector>(r, netdev_options);
    CpuCollectorOptions cpu_options;
    cpu_options.procfs_root = procfs_.path().string();
    cpu_options.clock_ticks_per_second = 100;
    cpu_options.page_size_bytes = 4096;
    cpu_ = std::make_unique<CpuCollector>(r, cpu_options);
    IcmpProberOptions prober_options;
    prober_options.procfs_root = procfs_.path().string();
    prober_options.log = [](std::string_view) {};
    prober_ = *IcmpProber::Create(r, prober_options);
    windows_ = std::make_unique<WindowTracker>(traffic_.get(), cpu_.get(), prober_.get());
    SamplerOptions sampler_options;
    sampler_options.log = [](std::string_view) {};
    sampler_ = std::make_unique<Sampler>(
        r, std::vector<Collector*>{traffic_.get(), cpu_.get(), windows_.get()}, sampler_options);

    adapters_->SetAdapter({"port-2-2", "RTL8922AU", "0bda", "8912", "super", "2-2", "wlan0",
                           "rtw89_8922au", "rtw89", "true", "table", "2", "", "true"});
    adapters_->SetState("port-2-2", AdapterState::kApplied);
    adapters_->SetDesiredHold("port-2-2", 32e-6);
    adapters_->SetObservedHold("port-2-2", 32e-6);
    adapters_->CountApply("port-2-2");
    adapters_->CountVerify("port-2-2");
    adapters_->CountVerify("port-2-2");
    adapters_->CountDriftRepair("port-2-2");
    adapters_->CountFailure("port-2-2", "timeout");
    adapters_->CountIoErrorBurst("port-2-2", "timeout");
    adapters_->SetExperimentArm("port-2-2", "hold-usb3-pi5", "short");
    adapters_->SetAdapter({"port-1-3", "RTL8852BU", "0bda", "b832", "high", "1-3", "", "", "rtw89",
                           "true", "table", "1", "", "false"});
    adapters_->SetState("port-1-3", AdapterState::kStorageMode);
    adapters_->SetDiagnosis("port-1-3", "storage_mode_stuck", true);

    traffic_->SetAdapters({{"port-2-2", "wlan0", ""}, {"port-1-3", "", ""}});
    prober_->SetAdapters({{"port-2-2", "wlan1", ""}, {"port-1-3", "", ""}});
    prober_->ProbeOnce();  // no default gateway via wlan1, no netdev: states only

    const SteadyTime t0{};
    install_netdev("wlan0-t0");
    copy_text("proc/stat-2core-a", procfs_.path() / "stat");
    sampler_->RunOnce(t0);
    install_netdev("wlan0-t1");
    copy_text("proc/stat-2core-b", procfs_.path() / "stat");
    copy_text("proc/self-stat-b", procfs_.path() / "self/stat");
    sampler_->RunOnce(t0 + std::chrono::seconds(10));
  }

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

 private:
  ::rxfleet::testing::TempDir sysfs_;
  ::rxfleet::testing::TempDir procfs_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<AdapterMetrics> adapters_;
  std::unique_ptr<NetdevCollector> traffic_;
  std::unique_ptr<CpuCollector> cpu_;
  std::unique_ptr<IcmpProber> prober_;
  std::unique_ptr<WindowTracker> windows_;
  std::unique_ptr<Sampler> sampler_;
};

}  // namespace rxfleet::agent::testing
