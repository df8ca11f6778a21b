#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mullet::util {

std::string trim(std::string_view text);
std::string to_lower(std::string_view text);
std::vector<std::string> split(std::string_view text, char separator);
std::string join(const std::vector<std::string>& parts, std::string_view separator);
// Quotes a word for display as a POSIX shell word (only when it needs it).
std::string shell_quote(std::string_view word);
std::string shell_join(const std::vector<std::string>& argv);
// First line of a text, cut to max_chars (with an ellipsis when cut).
std::string first_line(std::string_view text, std::size_t max_chars);
// Keeps the last max_bytes of a text, marking the cut.
std::string tail(std::string_view text, std::size_t max_bytes);
// True for a name a POSIX shell accepts as an environment variable name.
bool is_env_name(std::string_view name);
std::string errno_text(int error_number);
// The text with every invalid UTF-8 sequence replaced by U+FFFD, so output a
// worker printed (binary, or cut mid-character) can always be stored as JSON.
std::string valid_utf8(std::string_view text);
// Text a worker, a repository or a record chose, made safe to print on a
// terminal: it can no longer drive it (OSC 52 clipboard writes, titles, CSI
// screen clears, OSC 8 links, BEL, bare CR overwrites, bidi reordering).
// Kept: newline, tab, CR right before LF, valid UTF-8. Escaped, visibly:
// other C0 controls, DEL and bytes that are not valid UTF-8 as \xHH (ESC is
// \x1b); UTF-8 encoded C1 controls (U+0080-U+009F) and the bidi embeddings,
// overrides and isolates (U+202A-U+202E, U+2066-U+2069) as \uHHHH.
std::string terminal_safe(std::string_view text);
// `text` with `prefix` after each of its newlines but a last one: a quoted
// message's later lines cannot pass for lines of ours.
std::string indent_later_lines(std::string_view text, std::string_view prefix);

// terminal_safe over a stream that arrives in chunks: a chunk may end inside
// a UTF-8 sequence (or a CR whose LF is in the next chunk), which is carried
// over (at most a few bytes). With keep_colours, SGR sequences (ESC [ ... m)
// that only reset, set bold or a foreground colour other than black and white
// pass unchanged, for git's coloured diff: nothing that could hide text.
class TerminalSafeStream {
 public:
  explicit TerminalSafeStream(bool keep_colours = false) : m_keep_colours(keep_colours) {}
  std::string feed(std::string_view chunk);
  // The carried bytes, escaped: the stream ended.
  std::string finish();

 private:
  bool m_keep_colours;
  std::string m_carry;
};

// A number with at most max_decimals decimals and no trailing zeros: 0.25, 3.
std::string format_decimal(double value, int max_decimals = 4);

}  // namespace mullet::util
