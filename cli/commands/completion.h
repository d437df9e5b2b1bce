#pragma once

#include "CLI/CLI.hpp"
#include "cli/commands/command.h"

namespace rxfleet::cli {

/// Adds `completion bash` to `root`: prints the bash completion script generated from `root`
/// itself (BashCompletionScript), so it always matches the commands and options. `root` must
/// outlive the selected command. The same script is committed as
/// deploy/completion/rxfleetctl.bash.
void AddCompletionCommand(CLI::App& root, SelectedCommand* selected);

}  // namespace rxfleet::cli
