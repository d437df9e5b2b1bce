#include "common/yaml_guard.h"

#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/string_view_compat.h"
#include "yaml-cpp/eventhandler.h"
#include "yaml-cpp/exceptions.h"
#include "yaml-cpp/parser.h"

namespace rxfleet::common {
namespace {

class IgnoreEvents final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

}  // namespace

absl::Status CheckYamlDocumentCount(std::string_view text, size_t max_documents,
                                    std::string_view source_name) {
  std::istringstream in{std::string(text)};
  IgnoreEvents events;
  size_t documents = 0;
  try {
    YAML::Parser parser(in);
    while (parser.HandleNextDocument(events)) {
      if (++documents > max_documents) {
        return absl::InvalidArgumentError(
            absl::StrCat(ToAbslView(source_name), ": documents exceed the limit of ", max_documents,
                         " (or the YAML never ends a document)"));
      }
    }
  } catch (const YAML::Exception&) {
    // Malformed: LoadAll reports it with the position.
  }
  return absl::OkStatus();
}

}  // namespace rxfleet::common
