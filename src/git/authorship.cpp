#include "git/authorship.hpp"

#include "git/cli.hpp"
#include "util/error.hpp"
#include "util/strings.hpp"

namespace mullet::git {
namespace {

std::optional<Identity> resolve(const Repository& repo, const char* variable) {
  GitCliTarget target{repo.git_dir(), std::nullopt, {}};
  target.user_config = true;
  // Only what the user set: no name from /etc/passwd, no user@host address.
  const auto run = run_git(target, {"-c", "user.useConfigOnly=true", "var", variable});
  if (!run.status.success()) return std::nullopt;
  return parse_ident_line(util::split(run.out, '\n').front());
}

}  // namespace

std::optional<Identity> parse_ident_line(const std::string& line) {
  const auto close = line.rfind('>');
  if (close == std::string::npos) return std::nullopt;
  const auto open = line.rfind('<', close);
  if (open == std::string::npos) return std::nullopt;
  Identity identity{util::trim(line.substr(0, open)), line.substr(open + 1, close - open - 1)};
  const auto bad = [](const std::string& text) {
    return text.find_first_of(std::string("<>\n\r\0", 5)) != std::string::npos;
  };
  if (identity.name.empty() || identity.email.empty() || bad(identity.name) || bad(identity.email)) {
    return std::nullopt;
  }
  return identity;
}

UserIdentity user_identity(const Repository& repo) {
  try {
    return {resolve(repo, "GIT_AUTHOR_IDENT"), resolve(repo, "GIT_COMMITTER_IDENT")};
  } catch (const Error&) {
    // No git to ask (it is needed for every job anyway): git-mullet's own.
    return {};
  }
}

SignaturePtr signature_or_mullet(const std::optional<Identity>& identity) {
  if (identity) {
    git_signature* raw = nullptr;
    // libgit2 refuses what git would not write either; then git-mullet's own.
    if (git_signature_now(&raw, identity->name.c_str(), identity->email.c_str()) == 0) return SignaturePtr(raw);
  }
  return mullet_signature();
}

std::string trailer_value(const std::string& value) {
  const std::string text = util::valid_utf8(value);
  std::string out;
  bool space = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    std::size_t skip = 0;
    // C1 controls (U+0080-U+009F: C2 80-9F), U+2028 and U+2029 (E2 80 A8/A9).
    if (byte == 0xC2U && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) <= 0x9FU) skip = 1;
    if (byte == 0xE2U && i + 2 < text.size() && static_cast<unsigned char>(text[i + 1]) == 0x80U &&
        (static_cast<unsigned char>(text[i + 2]) == 0xA8U || static_cast<unsigned char>(text[i + 2]) == 0xA9U)) {
      skip = 2;
    }
    if (byte < 0x20U || byte == 0x7FU || byte == ' ' || skip > 0) {
      space = true;
      i += skip;
      continue;
    }
    if (space && !out.empty()) out += ' ';
    space = false;
    out += text[i];
  }
  if (out.size() > max_trailer_value_bytes) {
    std::size_t cut = max_trailer_value_bytes;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0U) == 0x80U) --cut;
    out.resize(cut);
  }
  return util::trim(out);
}

std::string result_trailers(const ResultTrailers& trailers) {
  std::string block;
  const auto add = [&](const char* key, const std::string& value) {
    const std::string clean = trailer_value(value);
    if (!clean.empty()) block += std::string(key) + ": " + clean + "\n";
  };
  add("Mullet-Job", trailers.job);
  if (trailers.attempt > 0) add("Mullet-Attempt", std::to_string(trailers.attempt));
  if (trailers.by_shell) {
    add("Mullet-Kind", "shell");
    return block;
  }
  add("Mullet-Executor", trailers.executor);
  add("Mullet-Model", trailers.model);
  add("Mullet-Executor-Version", trailers.executor_version);
  return block;
}

}  // namespace mullet::git
