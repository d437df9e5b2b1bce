#pragma once

#include <string>
#include <string_view>

#include "CLI/CLI.hpp"

namespace rxfleet::cli {

/// A bash completion script for `program`, generated from the CLI11 definition in `app`:
/// - subcommand names and aliases at every level;
/// - the options valid at each level, including those of parents reached by fall-through
///   (CLI11 `fallthrough()`), so `get adapters --ser<TAB>` offers the global --server;
/// - option values: the members of an IsMember set (from the option's type name,
///   "TEXT:{a,b}") and file names for options whose type name is FILE;
/// - option values are skipped when finding the subcommand path.
/// The output is deterministic (definition order) so it can be committed and compared.
/// Works with and without the bash-completion package (uses _init_completion if present).
std::string BashCompletionScript(const CLI::App& app, std::string_view program);

}  // namespace rxfleet::cli
