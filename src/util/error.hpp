// Errors and exit codes shared by every layer.
//
// Inside the program, functions that can fail in ways a caller may want to
// handle return Result<T> (tl::expected). At the edges (the CLI), failures are
// thrown as mullet::Error and turned into one message and one exit code.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

#include <tl/expected.hpp>

namespace mullet {

// The documented exit codes (see README "Exit codes" and `git mullet -h`).
enum class ExitCode : int {
  ok = 0,          // success
  job_failed = 1,  // the job ran and failed (or an internal error)
  usage = 2,       // usage or bad input; nothing was changed
  refused = 3,     // refused by policy or by the sandbox; nothing was run
};

class Error : public std::runtime_error {
 public:
  // runtime_error copies the message whatever it is given.
  Error(ExitCode code, const std::string& message, std::string hint = {})
      : std::runtime_error(message), m_code(code), m_hint(std::move(hint)) {}

  ExitCode code() const { return m_code; }
  // What the user can do about it; may be empty.
  const std::string& hint() const { return m_hint; }

 private:
  ExitCode m_code;
  std::string m_hint;
};

inline Error usage_error(const std::string& message, std::string hint = {}) {
  return {ExitCode::usage, message, std::move(hint)};
}
inline Error refused_error(const std::string& message, std::string hint = {}) {
  return {ExitCode::refused, message, std::move(hint)};
}
inline Error failure(const std::string& message, std::string hint = {}) {
  return {ExitCode::job_failed, message, std::move(hint)};
}

template <typename T>
using Result = tl::expected<T, Error>;

inline tl::unexpected<Error> fail(Error error) {
  return tl::unexpected<Error>(std::move(error));
}

// Unwraps a Result at an edge: returns the value or throws the error.
template <typename T>
T value_or_throw(Result<T> result) {
  if (!result) throw std::move(result.error());
  if constexpr (!std::is_void_v<T>) return std::move(*result);
}

}  // namespace mullet
