#include "git/diff_options.hpp"

#include <algorithm>
#include <string_view>

namespace mullet::git {
namespace {

enum class Value { none, optional, required };

struct LongOption {
  std::string_view name;
  Value value;
};

// Each only selects, formats or compares what git diff prints; none reads or
// writes a file of its own or runs a program.
constexpr LongOption long_options[] = {
    {"stat", Value::optional},
    {"numstat", Value::none},
    {"shortstat", Value::none},
    {"dirstat", Value::optional},
    {"compact-summary", Value::none},
    {"summary", Value::none},
    {"name-only", Value::none},
    {"name-status", Value::none},
    {"raw", Value::none},
    {"patch", Value::none},
    {"no-patch", Value::none},
    {"patch-with-stat", Value::none},
    {"patch-with-raw", Value::none},
    {"unified", Value::required},
    {"inter-hunk-context", Value::required},
    {"function-context", Value::none},
    {"color", Value::optional},
    {"no-color", Value::none},
    {"color-words", Value::optional},
    {"word-diff", Value::optional},
    {"word-diff-regex", Value::required},
    {"color-moved", Value::optional},
    {"no-color-moved", Value::none},
    {"minimal", Value::none},
    {"patience", Value::none},
    {"histogram", Value::none},
    {"anchored", Value::required},
    {"diff-algorithm", Value::required},
    {"find-renames", Value::optional},
    {"no-renames", Value::none},
    {"find-copies", Value::optional},
    {"find-copies-harder", Value::none},
    {"break-rewrites", Value::optional},
    {"irreversible-delete", Value::none},
    {"diff-filter", Value::required},
    {"pickaxe-all", Value::none},
    {"pickaxe-regex", Value::none},
    {"text", Value::none},
    {"ignore-all-space", Value::none},
    {"ignore-space-change", Value::none},
    {"ignore-space-at-eol", Value::none},
    {"ignore-cr-at-eol", Value::none},
    {"ignore-blank-lines", Value::none},
    {"full-index", Value::none},
    {"binary", Value::none},
    {"abbrev", Value::optional},
    {"relative", Value::optional},
    {"no-prefix", Value::none},
    // What we pass anyway.
    {"no-ext-diff", Value::none},
    {"no-textconv", Value::none},
    {"src-prefix", Value::required},
    {"dst-prefix", Value::required},
    {"stat-width", Value::required},
    {"stat-name-width", Value::required},
    {"stat-count", Value::required},
};

// Short options: alone, or with a value attached (`-U5`, `-Sword`).
constexpr std::string_view short_flags = "pusRawbWzD";
constexpr std::string_view short_with_optional_value = "MCBl";
constexpr std::string_view short_with_required_value = "USG";

// Why the dangerous ones are refused, by their full name.
std::string refusal_reason(std::string_view name) {
  if (name == "output") return "git mullet diff writes only to standard output";
  if (name == "ext-diff" || name == "textconv") {
    return "it would run a program named by attributes in a tree the worker wrote";
  }
  if (name == "no-index") return "it compares files outside the job";
  return {};
}

Error refused_option(const std::string& word, const std::string& why) {
  return usage_error("diff: " + word + " is not passed to git diff" + (why.empty() ? "" : ": " + why),
                     "see OPTIONS PASSED TO GIT DIFF in git-mullet(1)");
}

Result<void> check_long(const std::string& word) {
  const auto equals = word.find('=');
  const std::string name = word.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
  const bool has_value = equals != std::string::npos;
  const auto* found = std::find_if(std::begin(long_options), std::end(long_options),
                                   [&](const LongOption& option) { return option.name == name; });
  if (found == std::end(long_options)) {
    // git would expand an abbreviation (a name on the list is exact, and
    // git takes an exact name as it is): say why the worst it could be is
    // refused.
    for (std::string_view dangerous : {"output", "ext-diff", "textconv", "no-index"}) {
      if (!name.empty() && dangerous.substr(0, name.size()) == name) {
        return tl::unexpected(refused_option(word, refusal_reason(dangerous)));
      }
    }
    return tl::unexpected(refused_option(word, ""));
  }
  if (has_value && found->value == Value::none) {
    return tl::unexpected(usage_error("diff: --" + name + " takes no value"));
  }
  if (!has_value && found->value == Value::required) {
    return tl::unexpected(usage_error("diff: --" + name + " needs its value in the same word: --" + name + "=..."));
  }
  return {};
}

Result<void> check_short(const std::string& word) {
  const char letter = word[1];
  const bool has_value = word.size() > 2;
  if (short_flags.find(letter) != std::string_view::npos && !has_value) return {};
  if (short_with_optional_value.find(letter) != std::string_view::npos) return {};
  if (short_with_required_value.find(letter) != std::string_view::npos) {
    if (has_value) return {};
    return tl::unexpected(
        usage_error("diff: -" + std::string(1, letter) + " needs its value in the same word: -" + letter + "..."));
  }
  if (short_flags.find(letter) != std::string_view::npos) {
    return tl::unexpected(usage_error("diff: " + word + ": give short options one word each"));
  }
  return tl::unexpected(refused_option(word, ""));
}

}  // namespace

Result<DiffRequest> parse_diff_request(const std::vector<std::string>& words) {
  DiffRequest request;
  bool paths_only = false;
  for (const auto& word : words) {
    if (paths_only || word.size() < 2 || word[0] != '-') {
      request.paths.push_back(word);
      continue;
    }
    if (word == "--") {
      paths_only = true;
      continue;
    }
    const auto checked = word[1] == '-' ? check_long(word) : check_short(word);
    if (!checked) return tl::unexpected(checked.error());
    request.options.push_back(word);
  }
  return request;
}

std::vector<std::string> allowed_diff_options() {
  std::vector<std::string> names;
  for (const auto& option : long_options) {
    names.push_back("--" + std::string(option.name) +
                    (option.value == Value::required   ? "=..."
                     : option.value == Value::optional ? "[=...]"
                                                       : ""));
  }
  for (const char letter : short_flags) names.push_back("-" + std::string(1, letter));
  for (const char letter : short_with_optional_value) names.push_back("-" + std::string(1, letter) + "[N]");
  for (const char letter : short_with_required_value) names.push_back("-" + std::string(1, letter) + "...");
  return names;
}

}  // namespace mullet::git
