// libFuzzer target: the policy and experiment YAML parsers (common/policy/policy.h,
// common/experiment/experiment.h) on arbitrary text. Any input must give a value or an error
// status: no crash, hang, leak or sanitizer report. The first byte picks the parser.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/experiment/experiment.h"
#include "common/policy/policy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    auto policies = rxfleet::common::ParsePolicyDocuments(text, "fuzz.yaml");
    if (policies.ok()) {
      for (const auto& policy : *policies) (void)rxfleet::common::ValidatePolicy(policy);
    }
  } else {
    (void)rxfleet::experiments::ParseExperimentDocuments(text, "fuzz.yaml");
  }
  return 0;
}
