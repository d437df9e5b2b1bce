#include "cli/client/connection.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/net_address.h"
#include "common/string_view_compat.h"
#include "yaml-cpp/yaml.h"

namespace rxfleet::cli {
namespace {

using common::ToAbslView;

std::string Position(absl::string_view path, const YAML::Mark& mark) {
  return absl::StrCat(path, ":", mark.line + 1, ":", mark.column + 1);
}

absl::Status ConfigError(absl::string_view path, const YAML::Mark& mark, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(Position(path, mark), ": ", what));
}

absl::StatusOr<std::string> ScalarString(const YAML::Node& value, absl::string_view key,
                                         absl::string_view path) {
  if (!value.IsScalar()) {
    return ConfigError(path, value.Mark(), absl::StrCat("'", key, "' must be a string"));
  }
  return value.Scalar();
}

std::string ResolveRelative(const std::string& file, std::string_view config_path) {
  std::filesystem::path p(file);
  if (p.is_absolute() || file.empty()) return file;
  return (std::filesystem::path(config_path).parent_path() / p).lexically_normal().string();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The transport as one source states it.
struct Transport {
  bool insecure = false;
  std::string ca_file, cert_file, key_file;
  bool Stated() const {
    return insecure || !ca_file.empty() || !cert_file.empty() || !key_file.empty();
  }
};

absl::Status CheckTransport(const Transport& t, absl::string_view origin,
                            absl::string_view insecure_name, absl::string_view cert_name,
                            absl::string_view key_name) {
  if (t.insecure && (!t.ca_file.empty() || !t.cert_file.empty() || !t.key_file.empty())) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": ", insecure_name, " (plaintext) cannot be combined with TLS files; choose one"));
  }
  if (t.cert_file.empty() != t.key_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": ", cert_name, " and ", key_name, " must be given together"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<absl::Duration> ParseTimeout(std::string_view std_text) {
  const absl::string_view text = ToAbslView(std_text);
  std::string trimmed(absl::StripAsciiWhitespace(text));
  absl::Duration duration;
  double seconds = 0;
  if (absl::SimpleAtod(trimmed, &seconds) && !trimmed.empty() &&
      std::isdigit(static_cast<unsigned char>(trimmed.back()))) {
    duration = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(trimmed, &duration)) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid timeout '", text, "': expected a duration such as 10s, 500ms or 2m"));
  }
  if (duration <= absl::ZeroDuration() || duration == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid timeout '", text, "': must be positive and finite"));
  }
  return duration;
}

absl::StatusOr<ConfigFile> ParseConfigFile(std::string_view text, std::string_view std_path) {
  const absl::string_view path = ToAbslView(std_path);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::ParserException& e) {
    return ConfigError(path, e.mark, e.msg);
  }
  ConfigFile config;
  if (root.IsNull()) return config;
  if (!root.IsMap()) {
    return ConfigError(path, root.Mark(), "expected a mapping of settings (server, token, ...)");
  }
  std::set<std::string> seen;
  for (const auto& entry : root) {
    const YAML::Node& key_node = entry.first;
    const YAML::Node& value = entry.second;
    if (!key_node.IsScalar()) return ConfigError(path, key_node.Mark(), "keys must be strings");
    const std::string key = key_node.Scalar();
    if (!seen.insert(key).second) {
      return ConfigError(path, key_node.Mark(), absl::StrCat("duplicate key '", key, "'"));
    }
    if (key == "insecure") {
      bool insecure = false;
      if (!value.IsScalar() || !YAML::convert<bool>::decode(value, insecure)) {
        return ConfigError(path, value.Mark(), "'insecure' must be true or false");
      }
      config.insecure = insecure;
      continue;
    }
    if (key == "timeout") {
      auto scalar = ScalarString(value, key, path);
      if (!scalar.ok()) return scalar.status();
      auto timeout = ParseTimeout(*scalar);
      if (!timeout.ok()) return ConfigError(path, value.Mark(), timeout.status().message());
      config.timeout = *timeout;
      continue;
    }
    std::optional<std::string>* target = nullptr;
    bool is_file = false;
    if (key == "server") {
      target = &config.server;
    } else if (key == "token") {
      target = &config.token;
    } else if (key == "ca_file") {
      target = &config.ca_file;
      is_file = true;
    } else if (key == "cert_file") {
      target = &config.cert_file;
      is_file = true;
    } else if (key == "key_file") {
      target = &config.key_file;
      is_file = true;
    } else {
      return ConfigError(path, key_node.Mark(),
                         absl::StrCat("unknown key '", key,
                                      "' (known: server, token, insecure, ca_file, cert_file, "
                                      "key_file, timeout)"));
    }
    auto scalar = ScalarString(value, key, path);
    if (!scalar.ok()) return scalar.status();
    *target = is_file ? ResolveRelative(*scalar, std_path) : *scalar;
  }
  return config;
}

std::string DefaultConfigPath(const EnvLookup& env) {
  if (auto xdg = env("XDG_CONFIG_HOME"); xdg && !xdg->empty()) {
    return (std::filesystem::path(*xdg) / "rxfleet" / "config.yaml").string();
  }
  if (auto home = env("HOME"); home && !home->empty()) {
    return (std::filesystem::path(*home) / ".config" / "rxfleet" / "config.yaml").string();
  }
  return "";
}

absl::StatusOr<ConnectionSettings> ResolveConnection(const ConnectionFlags& flags,
                                                     const EnvLookup& env) {
  // The config file: --config must exist; the default path may be absent.
  ConfigFile file;
  std::string config_path = flags.config.value_or(DefaultConfigPath(env));
  if (!config_path.empty()) {
    std::error_code ec;
    const bool exists = std::filesystem::exists(config_path, ec);
    if (exists || flags.config.has_value()) {
      auto text = ReadFile(config_path);
      if (!text.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("config file ", config_path, ": cannot be read"));
      }
      auto parsed = ParseConfigFile(*text, config_path);
      if (!parsed.ok()) return parsed.status();
      file = *std::move(parsed);
    }
  }

  ConnectionSettings settings;
  if (flags.server) {
    settings.server = *flags.server;
    settings.server_origin = "--server";
  } else if (auto env_server = env(kServerEnv); env_server && !env_server->empty()) {
    settings.server = *env_server;
    settings.server_origin = std::string(kServerEnv);
  } else if (file.server) {
    settings.server = *file.server;
    settings.server_origin = config_path;
  } else {
    settings.server = std::string(kDefaultServerAddress);
    settings.server_origin = "default";
  }
  if (absl::StripAsciiWhitespace(settings.server).empty() ||
      settings.server.find_first_of(" \t\n") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("invalid server address '", settings.server,
                                                   "' (from ", settings.server_origin,
                                                   "): expected HOST:PORT"));
  }
  if (!absl::StrContains(settings.server, "://") && !absl::StartsWith(settings.server, "unix:")) {
    if (absl::Status address = common::ValidateHostPort(settings.server); !address.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(address.message(), " (from ", settings.server_origin, ")"));
    }
  }

  if (flags.token) {
    settings.token = *flags.token;
  } else if (auto env_token = env(kTokenEnv); env_token && !env_token->empty()) {
    settings.token = *env_token;
  } else if (file.token) {
    settings.token = *file.token;
  }

  if (flags.timeout) {
    auto timeout = ParseTimeout(*flags.timeout);
    if (!timeout.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--timeout: ", timeout.status().message()));
    }
    settings.timeout = *timeout;
  } else if (file.timeout) {
    settings.timeout = *file.timeout;
  }

  Transport from_flags{flags.insecure, flags.ca_file.value_or(""), flags.cert_file.value_or(""),
                       flags.key_file.value_or("")};
  Transport from_file{file.insecure.value_or(false), file.ca_file.value_or(""),
                      file.cert_file.value_or(""), file.key_file.value_or("")};
  Transport transport;
  if (from_flags.Stated()) {
    if (auto s = CheckTransport(from_flags, "flags", "--insecure", "--cert-file", "--key-file");
        !s.ok()) {
      return s;
    }
    transport = from_flags;
  } else if (from_file.Stated()) {
    if (auto s = CheckTransport(from_file, absl::StrCat("config file ", config_path), "insecure",
                                "cert_file", "key_file");
        !s.ok()) {
      return s;
    }
    transport = from_file;
  }
  // TLS unless --insecure (or `insecure: true`) says otherwise; no CA file = system roots.
  settings.tls = !transport.insecure;
  settings.ca_file = transport.ca_file;
  settings.cert_file = transport.cert_file;
  settings.key_file = transport.key_file;
  return settings;
}

}  // namespace rxfleet::cli
