// What a model API response says it used, and what that costs. Pure: fed the
// bytes of a response body as they arrive (in any split), it reads the usage
// the API reports, and a price table turns it into US dollars. The credential
// endpoint (net/credential_endpoint.hpp) meters every response with it and
// enforces a job's budget on the sum.
//
// Read:
// - Anthropic's Messages API: streamed as server-sent events,
//   `message_start` (`message.usage`, `message.model`) then `message_delta`
//   (`usage`, whose counts are cumulative); not streamed, one JSON message
//   with `usage` and `model` at its top level.
// - OpenAI-compatible chat completions: streamed, the chunk that carries
//   `usage` (`prompt_tokens`, `completion_tokens`,
//   `prompt_tokens_details.cached_tokens`); not streamed, the top-level
//   `usage`.
// A usage object is read the OpenAI way when it has `prompt_tokens`, the
// Anthropic way otherwise. Where several events report a count, the largest
// is kept (Anthropic's counts only grow), so the meter never undercounts what
// it was told.
//
// Bounded whatever the upstream sends: an event (or line) larger than
// max_event_bytes is skipped, not buffered; a plain JSON body is never
// buffered at all, only its top-level `usage` and `model` values (at most
// max_event_bytes and max_model_bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mullet::net {

struct TokenUsage {
  std::uint64_t input = 0;           // uncached input tokens
  std::uint64_t output = 0;          // output tokens (thinking included)
  std::uint64_t cache_write_5m = 0;  // input tokens written to the cache for 5 minutes
  std::uint64_t cache_write_1h = 0;  // ... for an hour
  std::uint64_t cache_read = 0;      // input tokens read from the cache
  std::uint64_t web_searches = 0;    // server-side web search requests
  bool fast = false;                 // Anthropic's fast mode ("speed": "fast"), priced apart

  std::uint64_t cache_write() const { return cache_write_5m + cache_write_1h; }
  // Every input token of the request: what a long-prompt price tier counts.
  std::uint64_t prompt() const { return input + cache_write() + cache_read; }
  // Field by field, the larger of the two (fast if either is).
  void merge_max(const TokenUsage& other);
  TokenUsage& operator+=(const TokenUsage& other);
  bool operator==(const TokenUsage& other) const = default;
};

nlohmann::json to_json(const TokenUsage& usage);

// Reads a usage object as either API reports it (see the top of this file).
// Counts that are not non-negative integers read as 0.
TokenUsage usage_from_json(const nlohmann::json& usage);

class UsageMeter {
 public:
  static constexpr std::size_t max_event_bytes = std::size_t{1024} * 1024;
  static constexpr std::size_t max_model_bytes = 256;

  // `event_stream`: the body is server-sent events (Content-Type
  // text/event-stream); otherwise one JSON document.
  explicit UsageMeter(bool event_stream);

  void feed(std::string_view bytes);
  // The body has ended. An event not ended by a blank line is dropped, as an
  // event-stream reader does.
  void finish();

  // Whether any usage was reported (so far).
  bool found() const { return m_found; }
  const TokenUsage& usage() const { return m_usage; }
  // The model the response names; empty when it named none.
  const std::string& model() const { return m_model; }
  // Events (or lines) skipped for their size.
  std::size_t skipped() const { return m_skipped; }

 private:
  void feed_events(std::string_view bytes);
  void end_line();
  void dispatch_event();
  void take(const nlohmann::json& object);
  void feed_json(std::string_view bytes);
  void end_json_value();

  const bool m_event_stream;
  TokenUsage m_usage;
  std::string m_model;
  bool m_found = false;
  std::size_t m_skipped = 0;

  // Server-sent events.
  std::string m_line;
  bool m_line_too_long = false;
  bool m_after_cr = false;  // the last byte was a CR: an LF next ends nothing more
  std::string m_data;       // the event's data lines, joined by LF
  bool m_event_too_long = false;

  // One JSON document: only its top-level "usage" and "model" are kept.
  enum class Json { before, key_expected, in_key, after_key, value, done, given_up };
  Json m_json = Json::before;
  int m_depth = 0;
  bool m_in_string = false;
  bool m_escaped = false;
  std::string m_key;
  std::string m_capture;  // the value of an interesting key, as it arrives
  bool m_capturing = false;
  bool m_capture_too_long = false;
  std::size_t m_capture_limit = 0;
};

// A model's prices: US dollars per million tokens, and per web search.
struct TokenRates {
  double input = 0;
  double output = 0;
  double cache_write_5m = 0;
  double cache_write_1h = 0;
  double cache_read = 0;
  double web_search = 0;  // per request

  // Rate by rate, the larger of the two.
  TokenRates max(const TokenRates& other) const;
  bool operator==(const TokenRates& other) const = default;
};

struct ModelPrice {
  TokenRates rates;
  // When more than this many prompt tokens (TokenUsage::prompt) are sent in
  // one request, the whole request is priced at long_prompt_rates (0: never).
  std::uint64_t long_prompt_above = 0;
  TokenRates long_prompt_rates;
  // Fast mode. Without it, a fast request is priced as an unknown model.
  std::optional<TokenRates> fast_rates;
};

struct Priced {
  double cost_usd = 0;
  // What priced it: the table entry that matched ("claude-opus-4-5*"), or
  // "unknown model: the table's highest rates".
  std::string rule;
};

// Model name to prices. An entry's name is either exact ("gpt-4o") or a
// prefix ending in '*' ("claude-opus-4-5*", for "claude-opus-4-5-20251101"
// and the like). A model is found by its exact name first, then by the
// longest prefix that matches; names compare in lower case. A model the table
// does not know (or none), and a fast-mode request to a model without fast
// rates, are priced at the table's highest rates, each rate the highest of
// any entry (long-prompt and fast rates included), so a budget fails closed.
class PriceTable {
 public:
  PriceTable() = default;
  // Anthropic's list prices for the Claude models (see api_usage.cpp for
  // where they come from).
  static PriceTable defaults();

  // Adds or replaces an entry (a user's override).
  void set(const std::string& name, const ModelPrice& price);
  // The entry for `model`, and its name; nullopt when none matches.
  std::optional<std::pair<std::string, ModelPrice>> find(std::string_view model) const;
  TokenRates highest_rates() const;
  Priced price(std::string_view model, const TokenUsage& usage) const;
  const std::map<std::string, ModelPrice>& entries() const { return m_entries; }

 private:
  std::map<std::string, ModelPrice> m_entries;  // by lower-case name
};

// The cost of `usage` at `rates`.
double cost_at(const TokenRates& rates, const TokenUsage& usage);

}  // namespace mullet::net
