// Who result commits say wrote them: the user's git identity (as git resolves
// it for the user's repository) when it is set, and trailers naming the job,
// the executor, the model and the executor's version.
#pragma once

#include <optional>
#include <string>

#include "git/handles.hpp"
#include "git/repository.hpp"

namespace mullet::git {

struct Identity {
  std::string name;
  std::string email;
  bool operator==(const Identity&) const = default;
};

// The author and committer git would use in `repo` (`git var
// GIT_AUTHOR_IDENT` / `GIT_COMMITTER_IDENT`: user.name, user.email,
// author.*, committer.*, GIT_AUTHOR_* and GIT_COMMITTER_* variables, `git -c`),
// each unset when the user set none (git's guesses from the host name are
// not an identity: user.useConfigOnly).
struct UserIdentity {
  std::optional<Identity> author;
  std::optional<Identity> committer;
};
UserIdentity user_identity(const Repository& repo);

// "Name <email> 1700000000 +0000" (one line of `git var`) as an identity;
// nullopt when it is not one.
std::optional<Identity> parse_ident_line(const std::string& line);

// A signature stamped now: `identity`, else git-mullet's own
// (mullet_signature()).
SignaturePtr signature_or_mullet(const std::optional<Identity>& identity);

// What a result commit's trailers say.
struct ResultTrailers {
  std::string job;
  int attempt = 0;
  std::string executor;
  std::string model;             // empty: not known
  std::string executor_version;  // empty: not known; comes from the worker's binary (hostile)
  bool by_shell = false;         // `shell --record`: a person's work, not the executor's
};

// The longest trailer value we write.
inline constexpr std::size_t max_trailer_value_bytes = 128;

// A value made into one trailer line: valid UTF-8, every control character
// (C0, DEL, C1, line and paragraph separators) and run of white space made
// one space, trimmed and cut to max_trailer_value_bytes. Nothing in it can
// start a line of its own, so it cannot forge another trailer.
std::string trailer_value(const std::string& value);

// The trailer block ("Mullet-Job: ...\n..."), unknown values left out.
std::string result_trailers(const ResultTrailers& trailers);

}  // namespace mullet::git
