#include "cli/usage.hpp"

#include <algorithm>
#include <map>
#include <numeric>

#include "util/strings.hpp"

namespace mullet::cli {
namespace {

// A word the user typed, quoted as git quotes it; it may hold anything.
std::string quoted(const std::string& word) {
  return "'" + util::terminal_safe(word) + "'";
}

std::string joined_quoted(const std::vector<std::string>& words, const std::string& last_separator) {
  std::string text;
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (i > 0) text += i + 1 == words.size() ? last_separator : ", ";
    text += quoted(words[i]);
  }
  return text;
}

// The options a command offers, as they are typed (--long, -s), hidden
// ones (group "") aside.
std::vector<std::string> option_spellings(const CLI::App& command) {
  std::vector<std::string> spellings;
  for (const CLI::Option* option : command.get_options()) {
    if (option->get_positional() || option->get_group().empty()) continue;
    for (const auto& name : option->get_lnames()) spellings.push_back("--" + name);
    for (const auto& name : option->get_snames()) spellings.push_back("-" + name);
  }
  return spellings;
}

// The arguments the parser did not take, in the order they were given
// (CLI11 collects them in its own order).
std::vector<std::string> unexpected_in_order(const CLI::App& app, const std::vector<std::string>& args) {
  std::map<std::string, int> left;
  for (const auto& word : app.remaining(/*recurse=*/true)) ++left[word];
  std::vector<std::string> ordered;
  for (const auto& word : args) {
    auto found = left.find(word);
    if (found != left.end() && found->second > 0) {
      --found->second;
      ordered.push_back(word);
    }
  }
  return ordered;
}

}  // namespace

std::string describe_unexpected(const CLI::App& command, const std::vector<std::string>& unexpected) {
  const auto spellings = option_spellings(command);
  std::vector<std::string> parts;
  for (const auto& word : unexpected) {
    if (word.size() < 2 || word[0] != '-') {
      parts.push_back("unexpected argument " + quoted(word));
      continue;
    }
    const std::string name = word.substr(0, word.find('='));
    std::string part = "unknown option " + quoted(name);
    const auto similar = most_similar(name, spellings);
    if (!similar.empty()) part += " (did you mean " + joined_quoted(similar, " or ") + "?)";
    parts.push_back(part);
  }
  return util::join(parts, ", ");
}

namespace {

// CLI11's own messages, said the way ours are.
std::string describe_cli11_message(const CLI::App& command, const CLI::ParseError& error) {
  const std::string what = util::trim(error.what());
  const std::string kind = error.get_name();
  if (kind == "ArgumentMismatch" && what.find("missing") != std::string::npos) {
    const std::string name = what.substr(0, what.find(':'));
    const CLI::Option* option = command.get_option_no_throw(name);
    const std::string value = option != nullptr ? option->get_type_name() : std::string();
    return "option " + quoted(name) + " needs a value" + (value.empty() ? "" : " (" + value + ")");
  }
  if (kind == "ArgumentMismatch" && what.find("At Most") != std::string::npos) {
    return "option " + quoted(what.substr(0, what.find(':'))) + " is given more than once";
  }
  const std::string conversion = "Could not convert: ";
  if (kind == "ConversionError" && what.rfind(conversion, 0) == 0) {
    const std::string rest = what.substr(conversion.size());
    const auto equals = rest.find(" = ");
    if (equals != std::string::npos) {
      const std::string name = rest.substr(0, equals);
      const CLI::Option* option = command.get_option_no_throw(name);
      const std::string value = option != nullptr ? option->get_type_name() : std::string();
      return quoted(rest.substr(equals + 3)) + " is not a valid " + (value.empty() ? "value" : value) + " for " +
             quoted(name);
    }
  }
  std::string line = what;
  std::replace(line.begin(), line.end(), '\n', ' ');
  return util::terminal_safe(line);
}

}  // namespace

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment: three rows of the Levenshtein table suffice.
  std::vector<std::size_t> before(b.size() + 1);
  std::vector<std::size_t> previous(b.size() + 1);
  std::vector<std::size_t> current(b.size() + 1);
  std::iota(previous.begin(), previous.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitution = a[i - 1] == b[j - 1] ? 0 : 1;
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        current[j] = std::min(current[j], before[j - 2] + 1);
      }
    }
    before.swap(previous);
    previous.swap(current);
  }
  return previous[b.size()];
}

std::vector<std::string> most_similar(std::string_view given, const std::vector<std::string>& candidates) {
  // Dashes are not what tells options apart.
  const std::size_t letters = given.size() - std::min(given.find_first_not_of('-'), given.size());
  std::size_t best = std::string::npos;
  std::vector<std::string> closest;
  for (const auto& candidate : candidates) {
    const std::size_t distance = edit_distance(given, candidate);
    if (distance > 2 || 2 * distance > letters) continue;
    if (distance < best) {
      best = distance;
      closest.clear();
    }
    if (distance == best && std::find(closest.begin(), closest.end(), candidate) == closest.end()) {
      closest.push_back(candidate);
    }
  }
  if (!closest.empty() || letters < 2) return closest;
  for (const auto& candidate : candidates) {
    if (candidate.rfind(given, 0) == 0 && std::find(closest.begin(), closest.end(), candidate) == closest.end()) {
      closest.push_back(candidate);
    }
  }
  return closest;
}

std::vector<std::string> command_names(const CLI::App& app) {
  // CLI11's filtering get_subcommands is not const; it changes nothing.
  std::vector<std::string> names;
  for (const CLI::App* command :
       const_cast<CLI::App&>(app).get_subcommands([](CLI::App* sub) { return !sub->get_group().empty(); })) {
    names.push_back(command->get_name());
  }
  return names;
}

std::string unknown_command_message(const CLI::App& app, const std::string& given) {
  std::string text = "git mullet: " + quoted(given) + " is not a git mullet command. See 'git mullet --help'.\n";
  const auto similar = most_similar(given, command_names(app));
  if (!similar.empty()) {
    text += similar.size() == 1 ? "\nThe most similar command is\n" : "\nThe most similar commands are\n";
    for (const auto& name : similar) text += "\t" + name + "\n";
  }
  return text;
}

std::string describe_parse_error(const CLI::App& app, const CLI::ParseError& error,
                                 const std::vector<std::string>& args) {
  const auto parsed = app.get_subcommands();
  const CLI::App& command = parsed.empty() ? app : *parsed.back();
  const std::string help = parsed.empty() ? "git mullet -h" : "git mullet " + command.get_name() + " -h";
  std::string detail;
  const auto unexpected = unexpected_in_order(app, args);
  if (!unexpected.empty()) {
    detail = describe_unexpected(command, unexpected);
  } else if (parsed.empty() && std::string(error.get_name()) == "RequiredError") {
    return "git mullet: no command given; the commands are " + util::join(command_names(app), ", ") + " (see '" + help +
           "')";
  } else {
    detail = describe_cli11_message(command, error);
  }
  const std::string where = parsed.empty() ? "" : command.get_name() + ": ";
  return "git mullet: " + where + detail + " (see '" + help + "')";
}

std::string exit_codes_footer(const std::vector<ExitCodeMeaning>& codes) {
  std::string text = "Exit codes:\n";
  for (const auto& code : codes) text += "  " + std::to_string(code.code) + "  " + code.meaning + "\n";
  return text;
}

nlohmann::json describe_cli(const CLI::App& app,
                            const std::vector<std::pair<std::string, std::vector<ExitCodeMeaning>>>& codes) {
  const auto describe_options = [](const CLI::App& command) {
    nlohmann::json options = nlohmann::json::array();
    nlohmann::json positionals = nlohmann::json::array();
    for (const CLI::Option* option : command.get_options()) {
      if (option->get_group().empty()) continue;
      if (option->get_positional()) {
        positionals.push_back({{"name", option->get_name()}, {"required", option->get_required()}});
        continue;
      }
      nlohmann::json names = nlohmann::json::array();
      for (const auto& name : option->get_lnames()) names.push_back("--" + name);
      for (const auto& name : option->get_snames()) names.push_back("-" + name);
      const bool takes_value = option->get_type_size_max() > 0;
      options.push_back({{"names", names},
                         {"value", takes_value ? nlohmann::json(option->get_type_name()) : nlohmann::json()},
                         {"repeatable", option->get_items_expected_max() > 1},
                         {"description", option->get_description()}});
    }
    return std::make_pair(options, positionals);
  };
  nlohmann::json commands = nlohmann::json::array();
  for (const CLI::App* command :
       const_cast<CLI::App&>(app).get_subcommands([](CLI::App* sub) { return !sub->get_group().empty(); })) {
    auto [options, positionals] = describe_options(*command);
    nlohmann::json exit_codes = nlohmann::json::object();
    for (const auto& [name, meanings] : codes) {
      if (name != command->get_name()) continue;
      for (const auto& meaning : meanings) exit_codes[std::to_string(meaning.code)] = meaning.meaning;
    }
    commands.push_back({{"name", command->get_name()},
                        {"description", command->get_description()},
                        {"options", options},
                        {"positionals", positionals},
                        {"exit_codes", exit_codes}});
  }
  auto [options, positionals] = describe_options(app);
  return {{"options", options}, {"commands", commands}};
}

HelpFormatter::HelpFormatter() {
  label("SUBCOMMAND", "COMMAND");
  label("SUBCOMMANDS", "COMMANDS");
  label("Subcommands", "Commands");
}

std::string HelpFormatter::make_option_opts(const CLI::Option* option) const {
  if (option->get_positional()) return "";
  return CLI::Formatter::make_option_opts(option);
}

}  // namespace mullet::cli
