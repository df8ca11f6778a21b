#include "net/request_cap.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include "util/strings.hpp"

namespace mullet::net {
namespace {

// Input is estimated from the request's own bytes, since the tokenizer is not
// available offline. Claude's tokenizers average 3.5 to 4 characters of
// English a token, and fewer for code, JSON and text outside Latin scripts
// (a CJK character is 3 bytes of UTF-8 and about one token). Counting every
// byte of the request body, JSON syntax and escapes included, at 2 bytes a
// token overestimates ordinary requests by about two times: the budget may
// end a little early, and rarely late. Pricing all of it at the input rate
// also covers cache writes (1.25 times the input rate for 5 minutes) in
// ordinary requests, and overcharges cache reads (0.1 times).
constexpr std::uint64_t body_bytes_per_token = 2;

// Images are billed by their size in pixels (about width * height / 750
// tokens, after the API scales them down: some 1,600 tokens at the usual
// largest size, more for the models that keep higher resolutions), not by
// their base64 bytes: each counts as this many tokens instead.
constexpr std::uint64_t tokens_per_image = 5'000;

using Json = nlohmann::ordered_json;

bool is_string_equal(const Json& object, const char* key, std::string_view value) {
  const auto found = object.find(key);
  return found != object.end() && found->is_string() && found->get_ref<const std::string&>() == value;
}

// The bytes of an image's inline data, when `object` is an image block
// (Anthropic: {"type": "image", "source": {"type": "base64", "data": ...}};
// OpenAI: {"type": "image_url", "image_url": {"url": "data:..."}}); nullopt
// when it is not an image. A URL-sourced image has no inline data (0).
std::optional<std::size_t> image_bytes(const Json& object) {
  if (is_string_equal(object, "type", "image")) {
    const auto source = object.find("source");
    if (source == object.end() || !source->is_object()) return std::size_t{0};
    const auto data = source->find("data");
    return data != source->end() && data->is_string() ? data->get_ref<const std::string&>().size() : 0;
  }
  if (is_string_equal(object, "type", "image_url")) {
    const auto image = object.find("image_url");
    if (image == object.end() || !image->is_object()) return std::size_t{0};
    const auto url = image->find("url");
    if (url == image->end() || !url->is_string()) return std::size_t{0};
    const auto& text = url->get_ref<const std::string&>();
    return text.starts_with("data:") ? text.size() : 0;
  }
  return std::nullopt;
}

// How deeply the JSON text nests, strings skipped; stops counting past
// `limit`.
int nesting_depth(std::string_view text, int limit) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return deepest;
}

// Parses a request body, refusing duplicate keys in any object: a client
// could otherwise state one max_tokens for us and another for an upstream
// that reads the first of two keys where nlohmann keeps the last.
std::optional<Json> parse_without_duplicates(std::string_view text, std::string& why) {
  std::vector<std::optional<std::set<std::string>>> open;  // per open container: an object's keys
  bool duplicate = false;
  const Json::parser_callback_t check = [&](int, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start: open.emplace_back(std::set<std::string>()); break;
      case Json::parse_event_t::array_start: open.emplace_back(std::nullopt); break;
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        if (!open.empty()) open.pop_back();
        break;
      case Json::parse_event_t::key:
        if (!open.empty() && open.back() && !open.back()->insert(parsed.get<std::string>()).second) duplicate = true;
        break;
      case Json::parse_event_t::value: break;
    }
    return true;
  };
  auto parsed = Json::parse(text, check, false);
  if (parsed.is_discarded()) {
    why = "the request body is not JSON";
    return std::nullopt;
  }
  if (duplicate) {
    why = "the request body has an object with a key twice";
    return std::nullopt;
  }
  if (!parsed.is_object()) {
    why = "the request body is not a JSON object";
    return std::nullopt;
  }
  return parsed;
}

// A cap field: absent (nullopt, ok), a positive integer, or malformed.
struct CapField {
  bool present = false;
  bool valid = true;
  std::uint64_t value = 0;
};

CapField cap_field(const Json& object, const char* key) {
  const auto found = object.find(key);
  if (found == object.end() || found->is_null()) return {};
  if (!found->is_number_unsigned() || found->get<std::uint64_t>() == 0) return {true, false, 0};
  return {true, true, found->get<std::uint64_t>()};
}

std::string dollars(double value) {
  return "$" + util::format_decimal(value, 4);
}

}  // namespace

std::uint64_t estimate_input_tokens(const nlohmann::ordered_json& body, std::size_t body_bytes) {
  std::uint64_t image_data = 0;
  std::uint64_t images = 0;
  // Iterative: a body's depth is bounded (max_request_depth), but a walk
  // should not depend on it.
  std::vector<const Json*> pending = {&body};
  while (!pending.empty()) {
    const Json* node = pending.back();
    pending.pop_back();
    if (node->is_object()) {
      if (const auto bytes = image_bytes(*node)) {
        ++images;
        image_data += *bytes;
        continue;
      }
      for (const auto& [key, value] : node->items()) pending.push_back(&value);
    } else if (node->is_array()) {
      for (const auto& value : *node) pending.push_back(&value);
    }
  }
  const auto text_bytes = body_bytes - std::min<std::uint64_t>(body_bytes, image_data);
  return (text_bytes + body_bytes_per_token - 1) / body_bytes_per_token + images * tokens_per_image;
}

RequestCap cap_request(std::string_view text, ApiDialect dialect, double remaining_usd, const PriceTable& prices) {
  RequestCap cap;
  const auto refuse = [&](RequestCap::Verdict verdict, std::string reason) {
    cap.verdict = verdict;
    cap.reason = std::move(reason);
    cap.body.reset();
    return cap;
  };
  if (nesting_depth(text, max_request_depth) > max_request_depth) {
    return refuse(RequestCap::Verdict::malformed,
                  "the request body nests deeper than " + std::to_string(max_request_depth) + " levels");
  }
  std::string why;
  auto parsed = parse_without_duplicates(text, why);
  if (!parsed) return refuse(RequestCap::Verdict::malformed, why);
  Json& body = *parsed;

  if (const auto model = body.find("model"); model != body.end() && model->is_string()) {
    cap.model = model->get<std::string>().substr(0, UsageMeter::max_model_bytes);
  }
  // The output cap fields of this dialect, in the order they are read.
  const std::vector<const char*> cap_keys = dialect == ApiDialect::messages
                                                ? std::vector<const char*>{"max_tokens"}
                                                : std::vector<const char*>{"max_completion_tokens", "max_tokens"};
  std::vector<std::pair<const char*, std::uint64_t>> caps;
  for (const auto* key : cap_keys) {
    const auto field = cap_field(body, key);
    if (!field.valid) return refuse(RequestCap::Verdict::malformed, std::string(key) + " is not a positive integer");
    if (field.present) caps.emplace_back(key, field.value);
  }
  if (dialect == ApiDialect::messages && caps.empty()) {
    return refuse(RequestCap::Verdict::malformed, "max_tokens is missing (the Messages API requires it)");
  }
  // OpenAI's `n` asks for that many completions, each up to the cap.
  std::uint64_t completions = 1;
  if (dialect == ApiDialect::chat_completions) {
    const auto n = cap_field(body, "n");
    if (!n.valid) return refuse(RequestCap::Verdict::malformed, "n is not a positive integer");
    if (n.present) completions = n.value;
  }
  if (!caps.empty()) {
    // The smallest cap the client stated is what it will be held to.
    cap.max_tokens_requested = std::min_element(caps.begin(), caps.end(), [](const auto& a, const auto& b) {
                                 return a.second < b.second;
                               })->second;
  }

  cap.estimated_input_tokens = estimate_input_tokens(body, text.size());
  TokenUsage input;
  input.input = cap.estimated_input_tokens;
  input.fast = is_string_equal(body, "speed", "fast");
  cap.estimated_input_usd = prices.price(cap.model, input).cost_usd;
  cap.most_usd = cap.estimated_input_usd;
  const auto remaining = std::max(0.0, remaining_usd);
  if (cap.estimated_input_usd > remaining) {
    return refuse(RequestCap::Verdict::unaffordable,
                  "its input (about " + std::to_string(cap.estimated_input_tokens) + " tokens, " +
                      dollars(cap.estimated_input_usd) + " at " + (cap.model.empty() ? "an unnamed model" : cap.model) +
                      "'s input rate) would cost more than what remains of this job's API budget (" +
                      dollars(remaining) + ")");
  }
  if (!cap.max_tokens_requested) return cap;  // nothing to cap (chat completions without a cap)

  // The output rate at the tier this input puts the request in.
  TokenUsage one_more = input;
  one_more.output = 1;
  const double per_output_token = prices.price(cap.model, one_more).cost_usd - cap.estimated_input_usd;
  std::uint64_t afforded = *cap.max_tokens_requested;
  if (per_output_token > 0) {
    const double tokens =
        std::floor((remaining - cap.estimated_input_usd) / (per_output_token * static_cast<double>(completions)));
    if (tokens < static_cast<double>(afforded)) afforded = tokens < 0 ? 0 : static_cast<std::uint64_t>(tokens);
  }
  if (afforded < 1) {
    return refuse(RequestCap::Verdict::unaffordable, "after its input (about " + dollars(cap.estimated_input_usd) +
                                                         "), what remains of this job's API " + "budget (" +
                                                         dollars(remaining) + ") affords no output token");
  }
  cap.max_tokens_forwarded = afforded;
  cap.most_usd = cap.estimated_input_usd + static_cast<double>(afforded * completions) * per_output_token;

  bool rewritten = false;
  for (const auto& [key, value] : caps) {
    if (value > afforded) {
      body[key] = afforded;
      rewritten = true;
    }
  }
  if (dialect == ApiDialect::messages) {
    const auto thinking = body.find("thinking");
    if (thinking != body.end() && thinking->is_object() && is_string_equal(*thinking, "type", "enabled")) {
      const auto budget = cap_field(*thinking, "budget_tokens");
      if (!budget.valid)
        return refuse(RequestCap::Verdict::malformed, "thinking.budget_tokens is not a positive integer");
      if (budget.present) {
        cap.thinking_budget_requested = budget.value;
        cap.thinking_budget_forwarded = budget.value;
        // Only a budget the client kept below its own max_tokens is lowered
        // with it (interleaved thinking may exceed max_tokens on purpose).
        if (budget.value >= afforded && budget.value < *cap.max_tokens_requested) {
          if (afforded - 1 < min_thinking_budget) {
            return refuse(RequestCap::Verdict::unaffordable,
                          "what remains of this job's API budget (" + dollars(remaining) + ") affords " +
                              std::to_string(afforded) + " output tokens, too few for extended thinking's " +
                              "smallest budget (" + std::to_string(min_thinking_budget) + ")");
          }
          (*thinking)["budget_tokens"] = afforded - 1;
          cap.thinking_budget_forwarded = afforded - 1;
          rewritten = true;
        }
      }
    }
  }
  if (rewritten) cap.body = body.dump(-1, ' ', false, Json::error_handler_t::replace);
  return cap;
}

nlohmann::json to_json(const RequestCap& cap) {
  const auto figure = [](const std::optional<std::uint64_t>& value) {
    return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
  };
  auto json = nlohmann::json{{"model", cap.model},
                             {"estimated_input_tokens", cap.estimated_input_tokens},
                             {"estimated_input_usd", cap.estimated_input_usd},
                             {"max_tokens_asked", figure(cap.max_tokens_requested)},
                             {"max_tokens_forwarded", figure(cap.max_tokens_forwarded)},
                             {"cost_cap_usd", cap.most_usd}};
  if (cap.thinking_budget_requested) {
    json["thinking_budget_asked"] = figure(cap.thinking_budget_requested);
    json["thinking_budget_forwarded"] = figure(cap.thinking_budget_forwarded);
  }
  return json;
}

}  // namespace mullet::net
