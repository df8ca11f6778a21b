// No single request may cost more than what remains of a job's budget. Pure:
// given a request body, what remains, and the price table, it decides whether
// the credential endpoint (net/credential_endpoint.hpp) forwards the request,
// and with which body.
//
// A model API request states the most it will produce (`max_tokens`), and
// what it sends (its input) can be estimated before it goes. So before a
// metered request goes upstream:
// - its input is estimated (estimate_input_tokens) and priced at the model's
//   input rate; a request whose input alone would cost more than what remains
//   is refused;
// - otherwise `max_tokens` is lowered (never raised) to what the rest affords
//   at the model's output rate, and a thinking budget with it, since the API
//   requires `thinking.budget_tokens` < `max_tokens`; a request that affords
//   less than one output token (or less than the API's smallest thinking
//   budget) is refused.
// The model is the one the request names, priced by PriceTable's rules (an
// unknown model at the table's highest rates). What the answer then reports
// is still metered: an upstream that reports more than it was allowed to
// produce still ends the job, it just cannot be stopped before that answer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "net/api_usage.hpp"

namespace mullet::net {

// Which API a metered request speaks: what its output cap is called.
enum class ApiDialect {
  messages,          // Anthropic's Messages API: `max_tokens`, required
  chat_completions,  // OpenAI-style: `max_completion_tokens` and/or `max_tokens`, optional
};

// The input tokens a request body will be billed for, estimated high (see
// request_cap.cpp for how and why). `body` is the parsed request, `body_bytes`
// the size of its text.
std::uint64_t estimate_input_tokens(const nlohmann::ordered_json& body, std::size_t body_bytes);

struct RequestCap {
  enum class Verdict {
    forward,      // forward `body` (or the original, when `body` is empty)
    malformed,    // not a request this endpoint can cap: 400
    unaffordable  // what remains of the budget cannot pay for it: 402
  };
  Verdict verdict = Verdict::forward;
  std::string reason;               // for a refusal: why, in a sentence
  std::optional<std::string> body;  // the rewritten body; nullopt: forward the original bytes
  std::string model;                // as the request names it; empty when it names none
  std::uint64_t estimated_input_tokens = 0;
  double estimated_input_usd = 0;
  // The output cap the client asked for, and the one forwarded (equal when
  // nothing was lowered); nullopt where the request carries none.
  std::optional<std::uint64_t> max_tokens_requested;
  std::optional<std::uint64_t> max_tokens_forwarded;
  // The thinking budget, likewise (Messages API, extended thinking only).
  std::optional<std::uint64_t> thinking_budget_requested;
  std::optional<std::uint64_t> thinking_budget_forwarded;
  // The most the request can cost with an honest upstream and a good
  // estimate: estimated input plus the forwarded output cap, priced.
  double most_usd = 0;
};

// The API's smallest `thinking.budget_tokens`.
inline constexpr std::uint64_t min_thinking_budget = 1024;

// How deeply a request body may nest; deeper bodies are refused before they
// are parsed (no model API request comes close, and it bounds every walk).
inline constexpr int max_request_depth = 128;

// Decides for one metered request (see the top of this file). `remaining_usd`
// is what the job may still spend on it (at most the budget less what is
// spent). A body that is not a JSON object, is nested deeper than the
// endpoint reads (max_request_depth), or has a Messages request without a
// positive integer `max_tokens` (the API requires one) is malformed; so is a
// cap field present but not a positive integer.
RequestCap cap_request(std::string_view body, ApiDialect dialect, double remaining_usd, const PriceTable& prices);

// What a request record keeps of a decision (the figures, not the body):
// {"model", "estimated_input_tokens", "estimated_input_usd",
// "max_tokens_asked", "max_tokens_forwarded", ["thinking_budget_asked",
// "thinking_budget_forwarded",] "cost_cap_usd"}; a figure the request did not
// carry is null.
nlohmann::json to_json(const RequestCap& cap);

}  // namespace mullet::net
