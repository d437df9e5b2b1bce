// rxfleetctl end to end in-process (RunRxfleetctl with injected streams, environment and
// clients): exit codes, usage errors, help, bad input, completion, connection failures against
// real loopback sockets, and an interrupted watch.
#include "cli/app.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "cli/client/grpc_clients.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cli/test_util.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"

namespace rxfleet::cli {
namespace {

using ::rxfleet::cli::testing::MockFleetClient;
using ::testing::_;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Return;
using ::testing::StartsWith;
using ::testing::StrictMock;

std::string PolicyFile(std::string_view name) {
  return rxfleet::testing::SourcePath(std::string("tests/fixtures/cli/policies/") +
                                      std::string(name));
}

// Runs rxfleetctl in-process. Each connection gets a fresh StrictMock prepared by `expect`.
class Harness {
 public:
  Harness() {
    env_.streams = Streams{&in_, &out_, &err_};
    env_.getenv = [this](std::string_view name) -> std::optional<std::string> {
      auto it = vars_.find(std::string(name));
      if (it == vars_.end()) return std::nullopt;
      return it->second;
    };
    env_.now = [] { return testing::kGoldenNow; };
    env_.stop = stop_.get_token();
    env_.connect_fleet = [this](const ConnectionSettings& settings,
                                std::stop_token) -> absl::StatusOr<std::unique_ptr<FleetClient>> {
      settings_ = settings;
      auto mock = std::make_unique<StrictMock<MockFleetClient>>();
      if (expect) expect(*mock);
      return std::unique_ptr<FleetClient>(std::move(mock));
    };
    env_.connect_local = [](std::string_view socket, absl::Duration timeout, std::stop_token stop) {
      return ConnectLocalStatus(socket, timeout, std::move(stop));
    };
  }

  int Run(const std::vector<std::string>& args) {
    out_.str("");
    err_.str("");
    return RunRxfleetctl(args, env_);
  }
  std::string out() const { return out_.str(); }
  std::string err() const { return err_.str(); }

  std::function<void(StrictMock<MockFleetClient>&)> expect;
  std::map<std::string, std::string> vars_{{"HOME", "/nonexistent-rxfleet-home"}};
  std::optional<ConnectionSettings> settings_;
  std::stop_source stop_;
  Environment env_;

 private:
  std::istringstream in_;
  std::ostringstream out_;
  std::ostringstream err_;
};

TEST(AppTest, UsageErrorsExitTwoWithAHint) {
  Harness h;
  const std::vector<std::vector<std::string>> cases = {
      {},
      {"get"},
      {"get", "adapters", "--bogus"},
      {"get", "adapters", "-o", "xml"},
      {"describe", "adapter"},
      {"frobnicate"},
      {"apply"},
      {"watch", "--type", "loud"},
  };
  for (const auto& args : cases) {
    SCOPED_TRACE(absl::StrJoin(args, " "));
    EXPECT_EQ(h.Run(args), 2);
    EXPECT_THAT(h.err(), StartsWith("error: "));
    EXPECT_THAT(h.err(), HasSubstr("--help' for usage."));
    EXPECT_EQ(h.out(), "");
  }
}

TEST(AppTest, LocalOnlyWorksWithStatus) {
  Harness h;
  EXPECT_EQ(h.Run({"--local", "get", "adapters"}), 2);
  EXPECT_THAT(h.err(), HasSubstr("--local works only with 'status'"));
}

// Every command path of the tree, e.g. {"get", "adapters"}.
void CollectPaths(const CLI::App& app, std::vector<std::string> prefix,
                  std::vector<std::vector<std::string>>& paths) {
  paths.push_back(prefix);
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    auto next = prefix;
    next.push_back(sub->get_name());
    CollectPaths(*sub, next, paths);
  }
}

TEST(AppTest, EveryCommandHasHelpWithAnExample) {
  GlobalOptions global;
  SelectedCommand selected;
  auto app = BuildApp(&global, &selected);
  std::vector<std::vector<std::string>> paths;
  CollectPaths(*app, {}, paths);
  ASSERT_GE(paths.size(), 16u);
  Harness h;
  for (auto args : paths) {
    SCOPED_TRACE(absl::StrJoin(args, " "));
    args.push_back("--help");
    EXPECT_EQ(h.Run(args), 0);
    EXPECT_THAT(h.out(), HasSubstr("Example"));
    EXPECT_THAT(h.out(), HasSubstr("rxfleetctl "));
  }
}

TEST(AppTest, VersionFlag) {
  Harness h;
  EXPECT_EQ(h.Run({"--version"}), 0);
  EXPECT_THAT(h.out(), StartsWith("rxfleetctl "));
}

TEST(AppTest, GlobalFlagsWorkAfterTheSubcommandAndReachTheConnection) {
  Harness h;
  h.vars_["RXFLEET_SERVER"] = "env-host:1";
  h.vars_["RXFLEET_TOKEN"] = "t0ken";
  h.expect = [](StrictMock<MockFleetClient>& m) {
    EXPECT_CALL(m, ListPolicies(_)).WillOnce(Return(v1::ListPoliciesResponse()));
  };
  EXPECT_EQ(h.Run({"get", "policies", "--server", "flag-host:2", "--timeout", "3s"}), 0);
  ASSERT_TRUE(h.settings_.has_value());
  EXPECT_EQ(h.settings_->server, "flag-host:2");
  EXPECT_EQ(h.settings_->token, "t0ken");
  EXPECT_EQ(h.settings_->timeout, absl::Seconds(3));
  EXPECT_EQ(h.err(), "No resources found.\n");
}

TEST(AppTest, InvalidPolicyDocumentsExitOneNamingFieldFileAndLine) {
  Harness h;  // no RPC may be made: the StrictMock has no expectations
  EXPECT_EQ(h.Run({"apply", "-f", PolicyFile("unknown-field.yaml")}), 1);
  EXPECT_THAT(h.err(), HasSubstr("unknown-field.yaml:10:"));
  EXPECT_THAT(h.err(), HasSubstr("holdTime"));

  EXPECT_EQ(h.Run({"apply", "-f", PolicyFile("wrong-kind.yaml")}), 1);
  EXPECT_THAT(h.err(), HasSubstr("wrong-kind.yaml:2:"));
  EXPECT_THAT(h.err(), HasSubstr("Deployment"));

  EXPECT_EQ(h.Run({"apply", "-f", PolicyFile("hold-33us.yaml")}), 1);
  EXPECT_THAT(h.err(), HasSubstr("hold-33us.yaml:7:"));
  EXPECT_THAT(h.err(), HasSubstr("nearest: 32us or 64us"));

  EXPECT_EQ(h.Run({"diff", "-f", PolicyFile("hold-33us.yaml")}), 1);
  EXPECT_THAT(h.err(), HasSubstr("nearest: 32us or 64us"));

  EXPECT_EQ(h.Run({"apply", "-f", PolicyFile("no-such-file.yaml")}), 1);
  EXPECT_THAT(h.err(), HasSubstr("no-such-file.yaml: cannot be read: No such file or directory"));
  EXPECT_EQ(h.Run({"diff", "-f", PolicyFile("no-such-file.yaml")}), 1);
  EXPECT_THAT(h.err(), HasSubstr("cannot be read: No such file or directory"));
  // A directory opens but cannot be read: the reason is the system's.
  EXPECT_EQ(h.Run({"apply", "-f", rxfleet::testing::SourcePath("tests/fixtures/cli/policies")}), 1);
  EXPECT_THAT(h.err(), HasSubstr("cannot be read: Is a directory"));
}

TEST(AppTest, UnknownCommandsAreUsageErrorsListingTheCommands) {
  Harness h;
  EXPECT_EQ(h.Run({"frobnicate"}), 2);
  EXPECT_THAT(h.err(),
              StartsWith("error: unknown command 'frobnicate'; commands: get, describe, "
                         "apply, diff, delete, experiment, tune, watch, status, completion\n"));
  EXPECT_EQ(h.Run({}), 2);
  EXPECT_THAT(h.err(), StartsWith("error: a command is required; commands: get,"));
  EXPECT_EQ(h.Run({"--local", "frobnicate"}), 2);
  EXPECT_THAT(h.err(), HasSubstr("unknown command 'frobnicate'"));
}

TEST(AppTest, UnknownResourceTypesAreUsageErrorsListingTheValidOnes) {
  Harness h;
  EXPECT_EQ(h.Run({"get", "widgets"}), 2);
  EXPECT_THAT(h.err(), StartsWith("error: unknown resource type 'widgets'; valid types: hosts, "
                                  "adapters, policies, experiments, events\n"));
  EXPECT_THAT(h.err(), HasSubstr("Run 'rxfleetctl get --help' for usage."));
  EXPECT_EQ(h.Run({"get"}), 2);
  EXPECT_THAT(h.err(), HasSubstr("a resource type is required; valid types: hosts,"));
  EXPECT_EQ(h.Run({"describe", "widget", "x"}), 2);
  EXPECT_THAT(h.err(), HasSubstr("unknown resource type 'widget'; valid types: host, adapter, "
                                 "policy, experiment"));
  EXPECT_EQ(h.Run({"delete", "host", "pi1"}), 2);
  EXPECT_THAT(h.err(), HasSubstr("unknown resource type 'host'; valid types: policy, experiment"));
  EXPECT_EQ(h.Run({"get", "adapters", "pi1/port-2-2", "extra"}), 2);
  EXPECT_THAT(h.err(), HasSubstr("extra"));
  EXPECT_EQ(h.out(), "");
}

TEST(AppTest, UnknownFieldSelectorKeysAreUsageErrorsForEveryKind) {
  Harness h;  // nothing is sent
  EXPECT_EQ(h.Run({"get", "hosts", "--field-selector", "board=pi1"}), 2);
  EXPECT_THAT(h.err(), HasSubstr("--field-selector: unknown field 'board'; valid fields: "
                                 "connected, stale"));
  EXPECT_THAT(h.err(), HasSubstr("Run 'rxfleetctl get hosts --help' for usage."));
  EXPECT_EQ(h.Run({"get", "hosts", "--field-selector", "connected=true,stale!=true,x=1"}), 2);
  EXPECT_THAT(h.err(), HasSubstr("unknown field 'x'"));
  EXPECT_EQ(h.Run({"get", "adapters", "--field-selector", "speed=super"}), 2);
  EXPECT_THAT(h.err(), HasSubstr("unknown field 'speed'; valid fields: usb_speed, chip, vid_pid, "
                                 "host, adapter"));
  for (const char* kind : {"policies", "experiments", "events"}) {
    SCOPED_TRACE(kind);
    EXPECT_EQ(h.Run({"get", kind, "--field-selector", "a=b"}), 2);
  }
  // Known keys with bad values are invalid input (exit 1), as before.
  EXPECT_EQ(h.Run({"get", "hosts", "--field-selector", "connected=maybe"}), 1);
  EXPECT_THAT(h.err(), HasSubstr("true or false"));
  EXPECT_EQ(h.Run({"get", "adapters", "--field-selector", "usb_speed=warp"}), 1);
}

TEST(AppTest, BadSelectorsAndNamesExitOne) {
  Harness h;
  EXPECT_EQ(h.Run({"get", "adapters", "-l", "board=pi 1"}), 1);
  EXPECT_THAT(h.err(), HasSubstr("-l/--selector"));
  EXPECT_EQ(h.Run({"get", "adapters", "--field-selector", "usb_speed=warp"}), 1);
  EXPECT_THAT(h.err(), HasSubstr("--field-selector"));
  EXPECT_EQ(h.Run({"describe", "adapter", "port-2-2"}), 1);
  EXPECT_THAT(h.err(), HasSubstr("expected HOST/ADAPTER"));
}

TEST(AppTest, NotFoundExitsThree) {
  Harness h;
  h.expect = [](StrictMock<MockFleetClient>& m) {
    EXPECT_CALL(m, GetPolicy(_)).WillOnce(Return(absl::NotFoundError("policy 'nope' not found")));
  };
  EXPECT_EQ(h.Run({"get", "policy", "nope"}), 3);
  EXPECT_EQ(h.err(), "error: policy 'nope' not found\n");
}

TEST(AppTest, StaleResourceVersionExitsFour) {
  Harness h;
  h.expect = [](StrictMock<MockFleetClient>& m) {
    EXPECT_CALL(m, ApplyPolicy(_)).WillOnce([](const v1::ApplyPolicyRequest& request) {
      EXPECT_EQ(request.policy().metadata().resource_version(), "1");
      return absl::StatusOr<v1::ApplyPolicyResponse>(
          absl::AbortedError("resource_version 1 is stale (stored 12)"));
    });
  };
  EXPECT_EQ(h.Run({"apply", "-f", PolicyFile("stale-version.yaml")}), 4);
  EXPECT_THAT(h.err(), HasSubstr("error: policy/usb3-short ("));
  EXPECT_THAT(h.err(), HasSubstr("stale-version.yaml:2): resource_version 1 is stale"));
}

TEST(AppTest, DeleteUnknownPolicyExitsThree) {
  Harness h;
  h.expect = [](StrictMock<MockFleetClient>& m) {
    EXPECT_CALL(m, DeletePolicy(_)).WillOnce(Return(absl::NotFoundError("no such policy")));
  };
  EXPECT_EQ(h.Run({"delete", "policy", "ghost"}), 3);
  EXPECT_EQ(h.err(), "error: policy/ghost: no such policy\n");
}

TEST(AppTest, DeleteExperimentSendsNameAndVersionAndSaysItIsGone) {
  Harness h;
  h.expect = [](StrictMock<MockFleetClient>& m) {
    EXPECT_CALL(m, DeleteExperiment(_)).WillOnce([](const v1::DeleteExperimentRequest& request) {
      EXPECT_EQ(request.name(), "hold-ab");
      EXPECT_EQ(request.resource_version(), "12");
      return v1::Experiment();
    });
  };
  EXPECT_EQ(h.Run({"delete", "experiment", "hold-ab", "--resource-version", "12"}), 0);
  EXPECT_EQ(h.out(), "experiment/hold-ab deleted with its metric windows\n");
}

TEST(AppTest, DeleteRunningExperimentNamesItAndFails) {
  Harness h;
  h.expect = [](StrictMock<MockFleetClient>& m) {
    EXPECT_CALL(m, DeleteExperiment(_))
        .WillOnce(Return(absl::FailedPreconditionError(
            "experiment hold-ab is RUNNING; stop it first (rxfleetctl experiment stop hold-ab)")));
  };
  EXPECT_NE(h.Run({"delete", "experiments", "hold-ab"}), 0);
  EXPECT_THAT(h.err(), HasSubstr("experiment/hold-ab: experiment hold-ab is RUNNING; stop it"));
}

TEST(AppTest, WatchEndsCleanlyWhenStopped) {
  Harness h;
  std::promise<void> streaming;
  h.expect = [&](StrictMock<MockFleetClient>& m) {
    EXPECT_CALL(m, WatchEvents(_, _, _))
        .WillOnce([&](const v1::WatchEventsRequest&,
                      const std::function<void(const v1::Event&)>& on_event, std::stop_token stop) {
          v1::Event event;
          event.set_type(v1::EVENT_TYPE_NORMAL);
          event.set_reason("Connected");
          event.mutable_involved_object()->set_kind("Host");
          event.mutable_involved_object()->set_name("pi1");
          on_event(event);
          streaming.set_value();
          std::mutex mu;
          std::condition_variable_any cv;
          std::unique_lock lock(mu);
          cv.wait(lock, stop, [] { return false; });  // until stopped
          return absl::OkStatus();
        });
  };
  std::future<int> code = std::async(std::launch::async, [&] { return h.Run({"watch"}); });
  streaming.get_future().wait();
  h.stop_.request_stop();
  EXPECT_EQ(code.get(), 0);
  EXPECT_EQ(h.out(), "-  Normal  Connected  host/pi1\n");
}

// An agent's strings (chip, product, diagnoses, conditions, NACK details, event messages) and
// names in error messages reached the terminal raw: an escape sequence could clear the screen,
// recolour text or retitle the window. Every line rxfleetctl prints passes one sanitiser.
TEST(AppTest, AgentTextCannotDriveTheTerminal) {
  const std::string hostile =
      "\x1b[2J\x1b]0;owned\x07\xc2\x9b"
      "31mFAKE\r";
  v1::Adapter adapter;
  adapter.mutable_metadata()->set_name("port-2-2");
  adapter.set_host_id("pi1");
  adapter.mutable_status()->set_chip("rtl8922au" + hostile);
  adapter.mutable_status()->set_product("Wi-Fi" + hostile);
  adapter.mutable_status()->set_state(v1::ADAPTER_STATE_APPLIED);
  v1::Diagnosis* diagnosis = adapter.mutable_status()->add_diagnoses();
  diagnosis->set_code("note");
  diagnosis->set_message("diagnosis" + hostile);
  v1::Condition* condition = adapter.mutable_status()->add_conditions();
  condition->set_type("Applied");
  condition->set_message("condition" + hostile);
  v1::Host host;
  host.mutable_metadata()->set_name("pi1");
  host.mutable_status()->mutable_last_nack()->set_error_detail("nack" + hostile);
  v1::Event event;
  event.set_type(v1::EVENT_TYPE_WARNING);
  event.set_reason("BundleNacked");
  event.set_message("rejected" + hostile);
  event.mutable_involved_object()->set_kind("Host");
  event.mutable_involved_object()->set_name("pi1");
  Harness h;
  h.expect = [&](StrictMock<MockFleetClient>& m) {
    v1::ListAdaptersResponse adapters;
    *adapters.add_adapters() = adapter;
    v1::ListEventsResponse events;
    *events.add_events() = event;
    EXPECT_CALL(m, ListAdapters(_)).WillRepeatedly(Return(adapters));
    EXPECT_CALL(m, GetHost(_)).WillRepeatedly(Return(host));
    EXPECT_CALL(m, ListEvents(_)).WillRepeatedly(Return(events));
    EXPECT_CALL(m, GetPolicy(_))
        .WillRepeatedly(Return(absl::NotFoundError("policy 'x" + hostile + "' not found")));
  };
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"get", "adapters", "-o", "wide"},
                                             {"describe", "host", "pi1"},
                                             {"get", "events"},
                                             {"get", "policy", "x"}}) {
    SCOPED_TRACE(absl::StrJoin(args, " "));
    h.Run(args);
    const std::string printed = h.out() + h.err();
    EXPECT_THAT(printed, HasSubstr("\\u001b[2J"));
    for (const char* raw : {"\x1b", "\x07", "\r", "\xc2\x9b"}) {
      EXPECT_THAT(printed, Not(HasSubstr(raw))) << printed;
    }
  }
  // JSON stays data: the same bytes come back when it is parsed.
  EXPECT_EQ(h.Run({"get", "adapters", "-o", "json"}), 0);
  EXPECT_THAT(h.out(), Not(HasSubstr("\x1b")));
  EXPECT_THAT(h.out(), HasSubstr("\\u001b"));
}

TEST(AppTest, LocalStatusWithoutAgentIsAClearError) {
  Harness h;
  rxfleet::testing::TempDir dir("rxfleetctl-local");
  const std::string socket = dir.File("agent.sock");
  const absl::Time start = absl::Now();
  EXPECT_EQ(h.Run({"--local", "--local-socket", socket, "--timeout", "2s", "status"}), 1);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_THAT(h.err(), HasSubstr("cannot reach rxfleet-agent on " + socket));
}

// A TCP socket on loopback; listening ones accept connections into the backlog but never
// speak gRPC.
class LoopbackSocket {
 public:
  explicit LoopbackSocket(bool listen_on_it) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port_ = ntohs(addr.sin_port);
    if (listen_on_it) {
      EXPECT_EQ(listen(fd_, 16), 0);
    } else {
      close(fd_);  // nothing listens there any more: connection refused
      fd_ = -1;
    }
  }
  ~LoopbackSocket() {
    if (fd_ >= 0) close(fd_);
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

class UnreachableServerTest : public ::testing::Test {
 protected:
  UnreachableServerTest() {
    h_.env_.connect_fleet = [](const ConnectionSettings& settings, std::stop_token stop) {
      return ConnectFleet(settings, std::move(stop));
    };
  }
  Harness h_;
};

TEST_F(UnreachableServerTest, RefusedConnectionFailsFastWithTheAddress) {
  LoopbackSocket closed(/*listen_on_it=*/false);
  const absl::Time start = absl::Now();
  EXPECT_EQ(h_.Run({"get", "adapters", "--server", closed.address()}), 1);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_THAT(h_.err(),
              HasSubstr(absl::StrCat("error: cannot reach rxfleet-server at ", closed.address(),
                                     " (server address from --server)")));
}

TEST_F(UnreachableServerTest, SilentServerHitsTheTimeout) {
  LoopbackSocket silent(/*listen_on_it=*/true);
  h_.vars_["RXFLEET_SERVER"] = silent.address();
  const absl::Time start = absl::Now();
  EXPECT_EQ(h_.Run({"get", "hosts", "--timeout", "1s"}), 1);
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(900));
  EXPECT_LT(took, absl::Seconds(5));
  EXPECT_THAT(h_.err(), HasSubstr(absl::StrCat("rxfleet-server at ", silent.address(),
                                               " (server address from RXFLEET_SERVER)")));
  EXPECT_THAT(h_.err(), HasSubstr("within 1s"));
}

TEST_F(UnreachableServerTest, WatchGivesUpOnASilentServerAfterTheTimeout) {
  LoopbackSocket silent(/*listen_on_it=*/true);
  const absl::Time start = absl::Now();
  EXPECT_EQ(h_.Run({"watch", "--server", silent.address(), "--timeout", "1s"}), 1);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_THAT(h_.err(), HasSubstr("no answer from rxfleet-server at " + silent.address()));
}

TEST_F(UnreachableServerTest, WatchFailsFastOnARefusedConnection) {
  LoopbackSocket closed(/*listen_on_it=*/false);
  EXPECT_EQ(h_.Run({"watch", "--server", closed.address()}), 1);
  EXPECT_THAT(h_.err(), HasSubstr("cannot reach rxfleet-server at " + closed.address()));
}

TEST(CompletionTest, GeneratedScriptMatchesTheCommittedOne) {
  Harness h;
  ASSERT_EQ(h.Run({"completion", "bash"}), 0);
  const std::string committed = rxfleet::testing::SourcePath("deploy/completion/rxfleetctl.bash");
  const char* update = std::getenv("UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    ASSERT_TRUE(rxfleet::testing::WriteTextFile(committed, h.out()).ok());
  }
  auto text = rxfleet::testing::ReadTextFile(committed);
  ASSERT_TRUE(text.ok()) << committed;
  EXPECT_EQ(h.out(), *text) << "regenerate: rxfleetctl completion bash > "
                               "deploy/completion/rxfleetctl.bash (or UPDATE_GOLDEN=1)";
}

// Runs the completion function in bash for the words of a command line (the last word is
// the one being completed) and returns the candidates, space-separated.
std::string Complete(const std::string& script_path, const std::vector<std::string>& words) {
  std::string array;
  for (const auto& w : words) absl::StrAppend(&array, " '", w, "'");
  const std::string program =
      absl::StrCat("source '", script_path, "'; COMP_WORDS=(", array,
                   "); COMP_CWORD=", words.size() - 1, "; _rxfleetctl; echo \"${COMPREPLY[*]}\"");
  auto result = rxfleet::testing::RunProcess({"bash", "--norc", "--noprofile", "-c", program},
                                             absl::Seconds(20));
  EXPECT_EQ(result.exit_code, 0) << result.stderr_text;
  std::string out = result.stdout_text;
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

TEST(CompletionTest, CompletesSubcommandsOptionsAndValuesInBash) {
  const std::string script = rxfleet::testing::SourcePath("deploy/completion/rxfleetctl.bash");
  EXPECT_EQ(Complete(script, {"rxfleetctl", "de"}), "describe delete");
  EXPECT_EQ(Complete(script, {"rxfleetctl", "get", "ad"}), "adapters adapter");
  EXPECT_EQ(Complete(script, {"rxfleetctl", "get", "adapters", "-o", ""}),
            "table wide json yaml name");
  EXPECT_EQ(Complete(script, {"rxfleetctl", "get", "adapters", "--ser"}), "--server");
  EXPECT_EQ(Complete(script, {"rxfleetctl", "--server", "h:1", "describe", "p"}),
            "policy policies");
  EXPECT_EQ(Complete(script, {"rxfleetctl", "watch", "--type", "w"}), "warning");
  // Subcommands first, then the level's own options, then the global ones (fall-through).
  EXPECT_THAT(Complete(script, {"rxfleetctl", "completion", ""}),
              StartsWith("bash -h --help --version --server --token"));
  EXPECT_EQ(Complete(script, {"rxfleetctl", "apply", "--dry-run", "-f", "/nonexistent-dir/x"}), "");
}

}  // namespace
}  // namespace rxfleet::cli
