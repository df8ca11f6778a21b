// How the command line answers a mistake (git's way: one line, naming what
// was given, with a suggestion computed from the parser's own names) and how
// it describes itself (`--dump-cli-json`, which the drift test reads to check
// the man page and the completions).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

namespace mullet::cli {

// Edits (insert, delete, substitute, swap two neighbours) from a to b.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidates close enough to `given` to be what was meant: those at the
// smallest edit distance when it is small for the word's length, else those
// `given` is the start of. Empty when nothing is close.
std::vector<std::string> most_similar(std::string_view given, const std::vector<std::string>& candidates);

// The subcommands `app` offers, by name.
std::vector<std::string> command_names(const CLI::App& app);

// git's answer to a word that names no command (several lines, as git's).
std::string unknown_command_message(const CLI::App& app, const std::string& given);

// "unknown option '--comand' (did you mean '--command'?), unexpected
// argument 'x'": each of `unexpected` (as given) against what `command` offers.
std::string describe_unexpected(const CLI::App& command, const std::vector<std::string>& unexpected);

// The one `git mullet: ...` line a failed parse gets. `args` is the command
// line without the program's name, so the offending arguments are named in
// the order they were given.
std::string describe_parse_error(const CLI::App& app, const CLI::ParseError& error,
                                 const std::vector<std::string>& args);

// What an exit code means for one command.
struct ExitCodeMeaning {
  int code;
  const char* meaning;
};
// The "Exit codes:" footer of a command's help.
std::string exit_codes_footer(const std::vector<ExitCodeMeaning>& codes);

// Every command, option and positional the parser knows (hidden ones
// aside), with the exit codes each command documents.
nlohmann::json describe_cli(const CLI::App& app,
                            const std::vector<std::pair<std::string, std::vector<ExitCodeMeaning>>>& codes);

// CLI11's help, in git's words (COMMAND, not SUBCOMMAND), without what it puts after a positional's name ("JOB TEXT
// REQUIRED" is shown "JOB": the usage line says which are optional).
class HelpFormatter : public CLI::Formatter {
 public:
  HelpFormatter();
  std::string make_option_opts(const CLI::Option* option) const override;
};

}  // namespace mullet::cli
