#include "cli/commands/completion.h"

#include "cli/output/bash_completion.h"

namespace rxfleet::cli {

void AddCompletionCommand(CLI::App& root, SelectedCommand* selected) {
  CLI::App* completion = root.add_subcommand("completion", "Print a shell completion script");
  completion->require_subcommand(1);
  completion->footer("Example:\n  source <(rxfleetctl completion bash)");
  CLI::App* bash = completion->add_subcommand("bash", "Print the bash completion script");
  bash->footer(
      "Examples:\n  source <(rxfleetctl completion bash)\n"
      "  rxfleetctl completion bash > /usr/share/bash-completion/completions/rxfleetctl");
  CLI::App* root_ptr = &root;
  bash->callback([root_ptr, selected] {
    selected->path = "completion bash";
    selected->target = CommandTarget::kNone;
    selected->run = [root_ptr](const CommandContext& ctx) -> absl::Status {
      *ctx.streams.out << BashCompletionScript(*root_ptr, root_ptr->get_name());
      return absl::OkStatus();
    };
  });
}

}  // namespace rxfleet::cli
