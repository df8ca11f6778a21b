#include "net/api_usage.hpp"

#include <algorithm>
#include <limits>
#include <utility>

#include "util/strings.hpp"

namespace mullet::net {
namespace {

// No response reports more; a larger count is a broken upstream, and summing
// such counts must not overflow.
constexpr std::uint64_t max_count = 1'000'000'000'000ULL;

std::uint64_t count(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return 0;
  const auto found = object.find(key);
  if (found == object.end() || !found->is_number_unsigned()) return 0;
  return std::min(found->get<std::uint64_t>(), max_count);
}

const nlohmann::json& member(const nlohmann::json& object, const char* key) {
  static const nlohmann::json none;
  if (!object.is_object()) return none;
  const auto found = object.find(key);
  return found == object.end() ? none : *found;
}

std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  return a > std::numeric_limits<std::uint64_t>::max() - b ? std::numeric_limits<std::uint64_t>::max() : a + b;
}

bool is_json_blank(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

}  // namespace

// ---------------------------------------------------------------------------
// Usage

void TokenUsage::merge_max(const TokenUsage& other) {
  input = std::max(input, other.input);
  output = std::max(output, other.output);
  cache_write_5m = std::max(cache_write_5m, other.cache_write_5m);
  cache_write_1h = std::max(cache_write_1h, other.cache_write_1h);
  cache_read = std::max(cache_read, other.cache_read);
  web_searches = std::max(web_searches, other.web_searches);
  fast = fast || other.fast;
}

TokenUsage& TokenUsage::operator+=(const TokenUsage& other) {
  input = saturating_add(input, other.input);
  output = saturating_add(output, other.output);
  cache_write_5m = saturating_add(cache_write_5m, other.cache_write_5m);
  cache_write_1h = saturating_add(cache_write_1h, other.cache_write_1h);
  cache_read = saturating_add(cache_read, other.cache_read);
  web_searches = saturating_add(web_searches, other.web_searches);
  fast = fast || other.fast;
  return *this;
}

nlohmann::json to_json(const TokenUsage& usage) {
  return {{"input_tokens", usage.input},
          {"output_tokens", usage.output},
          {"cache_write_5m_tokens", usage.cache_write_5m},
          {"cache_write_1h_tokens", usage.cache_write_1h},
          {"cache_read_tokens", usage.cache_read},
          {"web_searches", usage.web_searches},
          {"fast", usage.fast}};
}

TokenUsage usage_from_json(const nlohmann::json& usage) {
  TokenUsage read;
  if (!usage.is_object()) return read;
  if (usage.contains("prompt_tokens")) {
    // OpenAI: prompt_tokens counts the cached ones too.
    const auto prompt = count(usage, "prompt_tokens");
    const auto cached = std::min(prompt, count(member(usage, "prompt_tokens_details"), "cached_tokens"));
    read.input = prompt - cached;
    read.cache_read = cached;
    read.output = count(usage, "completion_tokens");
    return read;
  }
  read.input = count(usage, "input_tokens");
  read.output = count(usage, "output_tokens");
  read.cache_read = count(usage, "cache_read_input_tokens");
  // cache_creation_input_tokens is the total; cache_creation, when present,
  // says how much of it is kept for an hour (which costs more).
  const auto written = count(usage, "cache_creation_input_tokens");
  const auto hour = std::min(written, count(member(usage, "cache_creation"), "ephemeral_1h_input_tokens"));
  read.cache_write_1h = hour;
  read.cache_write_5m = written - hour;
  read.web_searches = count(member(usage, "server_tool_use"), "web_search_requests");
  const auto& speed = member(usage, "speed");
  read.fast = speed.is_string() && speed.get<std::string>() == "fast";
  return read;
}

// ---------------------------------------------------------------------------
// The meter

UsageMeter::UsageMeter(bool event_stream) : m_event_stream(event_stream) {}

void UsageMeter::feed(std::string_view bytes) {
  if (m_event_stream) {
    feed_events(bytes);
  } else {
    feed_json(bytes);
  }
}

void UsageMeter::finish() {
  if (!m_event_stream) {
    // A body whose top level is a number or string has no usage; a capture
    // still open means the document was cut short.
    m_capturing = false;
    return;
  }
  m_line.clear();
  m_data.clear();
}

// A usage report: an Anthropic message (message_start's "message", or a whole
// non-streamed one), an Anthropic message_delta, an OpenAI chunk or
// completion.
void UsageMeter::take(const nlohmann::json& object) {
  if (!object.is_object()) return;
  const auto& type = member(object, "type");
  const auto& carrier =
      type.is_string() && type.get<std::string>() == "message_start" ? member(object, "message") : object;
  const auto& model = member(carrier, "model");
  if (model.is_string() && !model.get<std::string>().empty() && model.get<std::string>().size() <= max_model_bytes) {
    m_model = model.get<std::string>();
  }
  const auto& usage = member(carrier, "usage");
  if (usage.is_object()) {
    m_usage.merge_max(usage_from_json(usage));
    m_found = true;
  }
}

// Server-sent events (HTML's event-stream format): lines end in CRLF, LF or
// CR; "data:" lines add to the event, a blank line dispatches it, other
// fields and comments do not matter here.
void UsageMeter::feed_events(std::string_view bytes) {
  for (const char c : bytes) {
    if (c == '\n' && m_after_cr) {
      m_after_cr = false;
      continue;
    }
    m_after_cr = c == '\r';
    if (c == '\r' || c == '\n') {
      end_line();
      continue;
    }
    if (m_line_too_long) continue;
    if (m_line.size() >= max_event_bytes) {
      m_line_too_long = true;
      m_line.clear();
      continue;
    }
    m_line += c;
  }
}

void UsageMeter::end_line() {
  if (m_line_too_long) {
    // The event this line belongs to is lost: skip it whole.
    m_line_too_long = false;
    m_event_too_long = true;
    return;
  }
  if (m_line.empty()) {
    dispatch_event();
    return;
  }
  std::string_view line = m_line;
  const auto colon = line.find(':');
  const auto field = line.substr(0, colon);
  if (field == "data") {
    auto value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (!m_event_too_long) {
      if (m_data.size() + value.size() + 1 > max_event_bytes) {
        m_event_too_long = true;
        m_data.clear();
        m_data.shrink_to_fit();
      } else {
        if (!m_data.empty()) m_data += '\n';
        m_data.append(value);
      }
    }
  }
  m_line.clear();
}

void UsageMeter::dispatch_event() {
  if (m_event_too_long) {
    ++m_skipped;
  } else if (!m_data.empty() && m_data.front() == '{') {
    // "[DONE]" and other non-objects end OpenAI streams; they carry nothing.
    take(nlohmann::json::parse(m_data, nullptr, false));
  }
  m_event_too_long = false;
  m_data.clear();
  if (m_data.capacity() > std::size_t{64} * 1024) m_data.shrink_to_fit();
}

// One JSON document, scanned a byte at a time without being kept: only the
// values of the top-level keys "usage" and "model" are captured, then parsed.
void UsageMeter::feed_json(std::string_view bytes) {
  for (const char c : bytes) {
    if (m_json == Json::done || m_json == Json::given_up) return;
    if (m_capturing) {
      if (m_capture.size() >= m_capture_limit) {
        m_capture_too_long = true;
      } else {
        m_capture += c;
      }
    }
    if (m_in_string) {
      if (m_escaped) {
        m_escaped = false;
      } else if (c == '\\') {
        m_escaped = true;
      } else if (c == '"') {
        m_in_string = false;
        if (m_json == Json::in_key) m_json = Json::after_key;
      } else if (m_json == Json::in_key && m_key.size() <= 16) {
        m_key += c;
      }
      continue;
    }
    switch (m_json) {
      case Json::before:
        if (c == '{') {
          m_depth = 1;
          m_json = Json::key_expected;
        } else if (!is_json_blank(c)) {
          m_json = Json::given_up;
        }
        break;
      case Json::key_expected:
        if (c == '"') {
          m_key.clear();
          m_in_string = true;
          m_json = Json::in_key;
        } else if (c == '}') {
          m_json = Json::done;
        }
        break;
      case Json::after_key:
        if (c == ':') {
          m_json = Json::value;
          m_capturing = m_key == "usage" || m_key == "model";
          m_capture_limit = m_key == "usage" ? max_event_bytes : max_model_bytes + 16;  // quotes, blanks
          m_capture.clear();
          m_capture_too_long = false;
        }
        break;
      case Json::value:
        if (c == '"') {
          m_in_string = true;
        } else if (c == '{' || c == '[') {
          ++m_depth;
        } else if (c == '}' || c == ']') {
          if (m_depth == 1) {
            end_json_value();
            m_json = Json::done;
          } else {
            --m_depth;
          }
        } else if (c == ',' && m_depth == 1) {
          end_json_value();
          m_json = Json::key_expected;
        }
        break;
      default: break;
    }
  }
}

void UsageMeter::end_json_value() {
  if (!m_capturing) return;
  m_capturing = false;
  if (m_capture_too_long) {
    ++m_skipped;
  } else {
    m_capture.pop_back();  // the ',' or '}' that ended the value
    const auto value = nlohmann::json::parse(m_capture, nullptr, false);
    if (m_key == "usage") {
      take(nlohmann::json{{"usage", value}});
    } else {
      take(nlohmann::json{{"model", value}});
    }
  }
  m_capture.clear();
  m_capture.shrink_to_fit();
}

// ---------------------------------------------------------------------------
// Prices

TokenRates TokenRates::max(const TokenRates& other) const {
  return {std::max(input, other.input),
          std::max(output, other.output),
          std::max(cache_write_5m, other.cache_write_5m),
          std::max(cache_write_1h, other.cache_write_1h),
          std::max(cache_read, other.cache_read),
          std::max(web_search, other.web_search)};
}

double cost_at(const TokenRates& rates, const TokenUsage& usage) {
  const auto per_million = [](std::uint64_t tokens, double rate) { return static_cast<double>(tokens) * rate / 1e6; };
  return per_million(usage.input, rates.input) + per_million(usage.output, rates.output) +
         per_million(usage.cache_write_5m, rates.cache_write_5m) +
         per_million(usage.cache_write_1h, rates.cache_write_1h) + per_million(usage.cache_read, rates.cache_read) +
         static_cast<double>(usage.web_searches) * rates.web_search;
}

void PriceTable::set(const std::string& name, const ModelPrice& price) {
  m_entries[util::to_lower(name)] = price;
}

std::optional<std::pair<std::string, ModelPrice>> PriceTable::find(std::string_view model) const {
  const auto wanted = util::to_lower(model);
  if (wanted.empty()) return std::nullopt;
  if (const auto exact = m_entries.find(wanted); exact != m_entries.end()) return *exact;
  const std::pair<const std::string, ModelPrice>* best = nullptr;
  for (const auto& entry : m_entries) {
    const auto& name = entry.first;
    if (name.empty() || name.back() != '*') continue;
    const std::string_view prefix(name.data(), name.size() - 1);
    if (wanted.starts_with(prefix) && (best == nullptr || name.size() > best->first.size())) best = &entry;
  }
  if (best == nullptr) return std::nullopt;
  return *best;
}

TokenRates PriceTable::highest_rates() const {
  TokenRates highest;
  for (const auto& [name, price] : m_entries) {
    highest = highest.max(price.rates);
    if (price.long_prompt_above > 0) highest = highest.max(price.long_prompt_rates);
    if (price.fast_rates) highest = highest.max(*price.fast_rates);
  }
  return highest;
}

Priced PriceTable::price(std::string_view model, const TokenUsage& usage) const {
  const auto entry = find(model);
  const auto unknown = [&](const std::string& why) {
    return Priced{cost_at(highest_rates(), usage), why + ": the table's highest rates"};
  };
  if (!entry) return unknown(model.empty() ? "no model named" : "unknown model");
  const auto& [name, price] = *entry;
  if (usage.fast) {
    if (!price.fast_rates) return unknown("fast mode of " + name);
    return {cost_at(*price.fast_rates, usage), name + " (fast mode)"};
  }
  if (price.long_prompt_above > 0 && usage.prompt() > price.long_prompt_above) {
    return {cost_at(price.long_prompt_rates, usage), name + " (long prompt)"};
  }
  return {cost_at(price.rates, usage), name};
}

// Anthropic's list prices, US dollars per million tokens, as published on
// https://platform.claude.com/docs/en/about-claude/pricing ("Model pricing")
// and on each model's overview page under
// https://platform.claude.com/docs/en/models/, read on 2026-12-03. Sonnet
// 5.5's cache reads are $0.10 since 2026-10-07; Haiku 5.5 costs five times as
// much per token for a request whose prompt is over 100K tokens; Sonnet 4 and
// 4.5 charged long-context rates above 200K prompt tokens. Fast-mode rates
// (Opus 4.6 to 4.8) are those of Claude Code 2.1.197's own cost table. Web
// search is $10 per 1,000 searches on every model.
PriceTable PriceTable::defaults() {
  constexpr double search = 0.01;
  const auto rates = [](double input, double output, double cache_read) {
    // Cache writes cost 1.25 (5 minutes) and 2 (an hour) times the input rate.
    return TokenRates{input, output, input * 1.25, input * 2, cache_read, search};
  };
  const auto plain = [](TokenRates base) { return ModelPrice{base, 0, {}, std::nullopt}; };
  const auto with_fast = [](TokenRates base, TokenRates fast) { return ModelPrice{base, 0, {}, fast}; };
  const auto with_long_prompt = [](TokenRates base, std::uint64_t above, TokenRates long_prompt) {
    return ModelPrice{base, above, long_prompt, std::nullopt};
  };

  PriceTable table;
  // Fable and Mythos.
  table.set("claude-fable-5*", plain(rates(10, 50, 1)));
  table.set("claude-mythos-5*", plain(rates(10, 50, 1)));
  table.set("claude-fable-5-1*", plain(rates(10, 50, 0.25)));
  table.set("claude-mythos-5-1*", plain(rates(10, 50, 0.25)));
  // Opus.
  table.set("claude-opus-5-5*", plain(rates(4, 20, 0.20)));
  table.set("claude-opus-5*", plain(rates(5, 25, 0.50)));
  table.set("claude-opus-4-8*", with_fast(rates(5, 25, 0.50), rates(10, 50, 1)));
  table.set("claude-opus-4-7*", with_fast(rates(5, 25, 0.50), rates(30, 150, 3)));
  table.set("claude-opus-4-6*", with_fast(rates(5, 25, 0.50), rates(30, 150, 3)));
  table.set("claude-opus-4-5*", plain(rates(5, 25, 0.50)));
  table.set("claude-opus-4*", plain(rates(15, 75, 1.50)));  // Opus 4 and 4.1
  table.set("claude-3-opus*", plain(rates(15, 75, 1.50)));
  // Sonnet.
  table.set("claude-sonnet-5-5*", plain(rates(2, 10, 0.10)));
  table.set("claude-sonnet-5*", plain(rates(2, 10, 0.20)));
  table.set("claude-sonnet-4-6*", plain(rates(3, 15, 0.30)));
  table.set("claude-sonnet-4*", with_long_prompt(rates(3, 15, 0.30), 200'000, rates(6, 22.50, 0.60)));
  table.set("claude-3-7-sonnet*", plain(rates(3, 15, 0.30)));
  table.set("claude-3-5-sonnet*", plain(rates(3, 15, 0.30)));
  // Haiku.
  table.set("claude-haiku-5-5*", with_long_prompt(rates(0.10, 0.50, 0.01), 100'000, rates(0.50, 2.50, 0.05)));
  table.set("claude-haiku-4-5*", plain(rates(1, 5, 0.10)));
  table.set("claude-3-5-haiku*", plain(rates(0.80, 4, 0.08)));
  table.set("claude-3-haiku*", plain({0.25, 1.25, 0.30, 0.50, 0.03, search}));
  return table;
}

}  // namespace mullet::net
