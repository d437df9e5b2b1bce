#include "cli/commands/command.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/string_view_compat.h"
#include "common/validation.h"

namespace rxfleet::cli {

absl::StatusOr<std::pair<std::string, std::string>> ParseAdapterRef(std::string_view ref) {
  const size_t slash = ref.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == ref.size() ||
      ref.find('/', slash + 1) != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("adapter '", common::ToAbslView(ref),
                     "': expected HOST/ADAPTER, e.g. pi1/port-2-2 (adapter ids are unique per "
                     "host only)"));
  }
  std::pair<std::string, std::string> parts(ref.substr(0, slash), ref.substr(slash + 1));
  for (const absl::Status& s :
       {common::ValidateHostId(parts.first), common::ValidateAdapterId(parts.second)}) {
    if (!s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("adapter '", common::ToAbslView(ref), "': ", s.message()));
    }
  }
  return parts;
}

CLI::Validator RuleCheck(absl::Status (*rule)(std::string_view)) {
  return CLI::Validator(
      [rule](std::string& value) -> std::string {
        absl::Status s = rule(value);
        return s.ok() ? std::string() : std::string(s.message());
      },
      "", "rule");
}

void PrintNoResources(const Streams& streams) { *streams.err << "No resources found.\n"; }

namespace {
constexpr char kUsagePayload[] = "rxfleet.cli/usage";
}  // namespace

absl::Status UsageError(std::string_view message) {
  absl::Status status = absl::InvalidArgumentError(common::ToAbslView(message));
  status.SetPayload(kUsagePayload, absl::Cord("1"));
  return status;
}

bool IsUsageError(const absl::Status& status) {
  return status.GetPayload(kUsagePayload).has_value();
}

absl::StatusOr<std::string> ReadInputFile(const std::string& file, std::istream& stdin_stream) {
  std::ostringstream text;
  if (file == "-") {
    text << stdin_stream.rdbuf();
    return text.str();
  }
  errno = 0;
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    const int error = errno;
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": cannot be read: ", error != 0 ? std::strerror(error) : "open failed"));
  }
  errno = 0;
  text << in.rdbuf();
  // A read error (e.g. EISDIR for a directory) leaves errno set; an empty file only fails the
  // copy without an errno.
  const int error = errno;
  if (in.bad() || (text.fail() && error != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": cannot be read: ", error != 0 ? std::strerror(error) : "read error"));
  }
  return text.str();
}

void RejectUnknownResourceTypes(CLI::App& verb, std::string_view valid_types) {
  auto words = std::make_shared<std::vector<std::string>>();
  const std::string valid(valid_types);
  verb.add_option("TYPE", *words, absl::StrCat("Resource type: ", valid))
      ->expected(0, CLI::detail::expected_max_vector_size)
      ->allow_extra_args()
      ->group("");  // the subcommand list already names the types
  verb.callback([&verb, words, valid] {
    if (verb.get_subcommands().empty()) {
      if (words->empty()) {
        throw CLI::ParseError(
            absl::StrCat(verb.get_name(), ": a resource type is required; valid types: ", valid),
            CLI::ExitCodes::RequiredError);
      }
      throw CLI::ParseError(
          absl::StrCat("unknown resource type '", words->front(), "'; valid types: ", valid),
          CLI::ExitCodes::ValidationError);
    }
    if (!words->empty()) {
      throw CLI::ParseError(absl::StrCat("unexpected argument '", words->front(), "'"),
                            CLI::ExitCodes::ExtrasError);
    }
  });
}

void RejectUnknownCommands(CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  const std::string valid = absl::StrJoin(names, ", ");
  auto words = std::make_shared<std::vector<std::string>>();
  app.add_option("COMMAND", *words, "Command")
      ->expected(0, CLI::detail::expected_max_vector_size)
      ->group("");  // listed under Subcommands already
  app.callback([&app, words, valid] {
    if (!app.get_subcommands().empty()) return;
    if (words->empty()) {
      throw CLI::ParseError(absl::StrCat("a command is required; commands: ", valid),
                            CLI::ExitCodes::RequiredError);
    }
    throw CLI::ParseError(absl::StrCat("unknown command '", words->front(), "'; commands: ", valid),
                          CLI::ExitCodes::ValidationError);
  });
}

}  // namespace rxfleet::cli
