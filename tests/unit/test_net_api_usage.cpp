#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "net/api_usage.hpp"

using mullet::net::ModelPrice;
using mullet::net::PriceTable;
using mullet::net::TokenRates;
using mullet::net::TokenUsage;
using mullet::net::usage_from_json;
using mullet::net::UsageMeter;

namespace {

std::string event(const std::string& name, const nlohmann::json& data, std::string_view end_of_line = "\n") {
  return "event: " + name + std::string(end_of_line) + "data: " + data.dump() + std::string(end_of_line) +
         std::string(end_of_line);
}

// A streamed Messages API answer as the API sends it.
std::string anthropic_stream(std::string_view end_of_line = "\n") {
  std::string stream;
  stream += event("message_start",
                  {{"type", "message_start"},
                   {"message",
                    {{"id", "msg_1"},
                     {"type", "message"},
                     {"role", "assistant"},
                     {"model", "claude-sonnet-4-5-20250929"},
                     {"content", nlohmann::json::array()},
                     {"usage",
                      {{"input_tokens", 1200},
                       {"cache_creation_input_tokens", 300},
                       {"cache_creation", {{"ephemeral_5m_input_tokens", 100}, {"ephemeral_1h_input_tokens", 200}}},
                       {"cache_read_input_tokens", 4000},
                       {"output_tokens", 1}}}}}},
                  end_of_line);
  stream += ": a comment line" + std::string(end_of_line);
  stream += event("content_block_start",
                  {{"type", "content_block_start"}, {"index", 0}, {"content_block", {{"type", "text"}, {"text", ""}}}},
                  end_of_line);
  // Text that looks like usage must not count.
  stream += event("content_block_delta",
                  {{"type", "content_block_delta"},
                   {"index", 0},
                   {"delta", {{"type", "text_delta"}, {"text", "\"usage\": {\"output_tokens\": 999999}"}}}},
                  end_of_line);
  stream += event("content_block_stop", {{"type", "content_block_stop"}, {"index", 0}}, end_of_line);
  stream += event("message_delta",
                  {{"type", "message_delta"},
                   {"delta", {{"stop_reason", "end_turn"}}},
                   {"usage", {{"output_tokens", 250}, {"server_tool_use", {{"web_search_requests", 2}}}}}},
                  end_of_line);
  stream += event("message_stop", {{"type", "message_stop"}}, end_of_line);
  return stream;
}

TokenUsage anthropic_stream_usage() {
  TokenUsage usage;
  usage.input = 1200;
  usage.cache_write_5m = 100;
  usage.cache_write_1h = 200;
  usage.cache_read = 4000;
  usage.output = 250;
  usage.web_searches = 2;
  return usage;
}

// Feeds `body` in two pieces split at every position, and byte by byte, and
// checks each meter with `check`.
void at_every_split(bool event_stream, const std::string& body, const std::function<void(const UsageMeter&)>& check) {
  for (std::size_t split = 0; split <= body.size(); ++split) {
    UsageMeter meter(event_stream);
    meter.feed(std::string_view(body).substr(0, split));
    meter.feed(std::string_view(body).substr(split));
    meter.finish();
    INFO("split at " << split);
    check(meter);
  }
  UsageMeter meter(event_stream);
  for (const char c : body) meter.feed(std::string_view(&c, 1));
  meter.finish();
  check(meter);
}

}  // namespace

TEST_CASE("api usage: a streamed Messages API answer, split at every byte, with LF, CRLF or CR line ends") {
  for (const std::string_view end_of_line : {"\n", "\r\n", "\r"}) {
    INFO("line end " << (end_of_line == "\n" ? "LF" : end_of_line == "\r" ? "CR" : "CRLF"));
    at_every_split(true, anthropic_stream(end_of_line), [](const UsageMeter& meter) {
      CHECK(meter.found());
      CHECK(meter.usage() == anthropic_stream_usage());
      CHECK(meter.model() == "claude-sonnet-4-5-20250929");
      CHECK(meter.skipped() == 0);
    });
  }
}

TEST_CASE("api usage: counts reported again only grow; an event cut off at the end does not count") {
  // Newer API versions repeat the input counts in message_delta, cumulatively.
  std::string stream = event(
      "message_start", {{"type", "message_start"}, {"message", {{"model", "m"}, {"usage", {{"input_tokens", 10}}}}}});
  stream +=
      event("message_delta", {{"type", "message_delta"}, {"usage", {{"input_tokens", 10}, {"output_tokens", 5}}}});
  stream += event("message_delta", {{"type", "message_delta"}, {"usage", {{"output_tokens", 7}}}});
  UsageMeter meter(true);
  meter.feed(stream);
  meter.feed("data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":900}}\n");  // no blank line
  meter.finish();
  CHECK(meter.usage().input == 10);
  CHECK(meter.usage().output == 7);
  // data lines of one event join with LF; multi-line JSON still parses.
  UsageMeter joined(true);
  joined.feed("data: {\"usage\":\ndata: {\"output_tokens\": 3}}\n\n");
  CHECK(joined.usage().output == 3);
}

TEST_CASE("api usage: a plain JSON message, split at every byte; nested and quoted look-alikes do not count") {
  const nlohmann::json message = {
      {"id", "msg_2"},
      {"type", "message"},
      {"content",
       {{{"type", "tool_use"}, {"name", "Write"}, {"input", {{"usage", {{"output_tokens", 999999}}}, {"model", "x"}}}},
        {{"type", "text"}, {"text", "\"usage\": {\"input_tokens\": 999999}, \"model\": \"y\" \\\" }"}}}},
      {"model", "claude-haiku-4-5"},
      {"stop_reason", "end_turn"},
      {"usage", {{"input_tokens", 12}, {"output_tokens", 34}, {"cache_read_input_tokens", 56}}},
      {"trailing", {1, 2, {{"usage", {{"input_tokens", 999999}}}}}}};
  TokenUsage expected;
  expected.input = 12;
  expected.output = 34;
  expected.cache_read = 56;
  at_every_split(false, "  " + message.dump(2) + "\n", [&](const UsageMeter& meter) {
    CHECK(meter.found());
    CHECK(meter.usage() == expected);
    CHECK(meter.model() == "claude-haiku-4-5");
  });
  // A body that is no object, or an error without usage, reports nothing.
  for (const std::string body :
       {"[1, 2]", "\"usage\"", R"({"type":"error","error":{"type":"overloaded_error"}})", ""}) {
    UsageMeter meter(false);
    meter.feed(body);
    meter.finish();
    CHECK_FALSE(meter.found());
  }
}

TEST_CASE("api usage: OpenAI-compatible chat completions, streamed and not") {
  std::string stream;
  for (int i = 0; i < 3; ++i) {
    stream += "data: " +
              nlohmann::json{{"object", "chat.completion.chunk"},
                             {"model", "gpt-test"},
                             {"choices", {{{"index", 0}, {"delta", {{"content", "usage"}}}}}},
                             {"usage", nullptr}}
                  .dump() +
              "\n\n";
  }
  stream += "data: " +
            nlohmann::json{{"object", "chat.completion.chunk"},
                           {"model", "gpt-test"},
                           {"choices", nlohmann::json::array()},
                           {"usage",
                            {{"prompt_tokens", 1000},
                             {"completion_tokens", 50},
                             {"total_tokens", 1050},
                             {"prompt_tokens_details", {{"cached_tokens", 600}}}}}}
                .dump() +
            "\n\n";
  stream += "data: [DONE]\n\n";
  TokenUsage expected;
  expected.input = 400;
  expected.cache_read = 600;
  expected.output = 50;
  at_every_split(true, stream, [&](const UsageMeter& meter) {
    CHECK(meter.found());
    CHECK(meter.usage() == expected);
    CHECK(meter.model() == "gpt-test");
  });

  const nlohmann::json completion = {{"object", "chat.completion"},
                                     {"model", "gpt-test"},
                                     {"usage", {{"prompt_tokens", 7}, {"completion_tokens", 3}}}};
  UsageMeter plain(false);
  plain.feed(completion.dump());
  plain.finish();
  CHECK(plain.usage().input == 7);
  CHECK(plain.usage().output == 3);
  CHECK(plain.usage().cache_read == 0);
}

TEST_CASE("api usage: counts that are not non-negative integers read as 0; fast mode and web search are read") {
  auto usage = usage_from_json(
      {{"input_tokens", -5}, {"output_tokens", 2.5}, {"cache_read_input_tokens", "7"}, {"speed", "fast"}});
  CHECK(usage.input == 0);
  CHECK(usage.output == 0);
  CHECK(usage.cache_read == 0);
  CHECK(usage.fast);
  // More cached than prompted, or more 1h writes than writes: cut to the total.
  usage =
      usage_from_json(nlohmann::json::parse(R"({"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": 9}})"));
  CHECK(usage.input == 0);
  CHECK(usage.cache_read == 5);
  usage = usage_from_json(nlohmann::json::parse(
      R"({"cache_creation_input_tokens": 4, "cache_creation": {"ephemeral_1h_input_tokens": 10}})"));
  CHECK(usage.cache_write_1h == 4);
  CHECK(usage.cache_write_5m == 0);
  // Absurd counts are capped, so sums cannot wrap.
  usage = usage_from_json({{"input_tokens", 18446744073709551615ULL}});
  TokenUsage total;
  for (int i = 0; i < 100; ++i) total += usage;
  CHECK(total.input >= usage.input);
}

TEST_CASE("api usage: memory stays bounded: huge events, lines and values are skipped, the rest is read") {
  const std::string huge(UsageMeter::max_event_bytes + 10, 'x');
  std::string stream;
  stream += "data: {\"usage\": {\"input_tokens\": 999, \"pad\": \"" + huge + "\"}}\n\n";  // one huge line
  stream += "data: {\"usage\":\ndata: \"" + huge.substr(0, UsageMeter::max_event_bytes / 2) + "\"\ndata: \"" +
            huge.substr(0, UsageMeter::max_event_bytes / 2) + "\"}\n\n";  // lines that add up
  stream += anthropic_stream();
  for (const std::size_t piece : {std::size_t{1} << 20, std::size_t{4096}, std::size_t{7}}) {
    UsageMeter meter(true);
    for (std::size_t at = 0; at < stream.size(); at += piece) meter.feed(std::string_view(stream).substr(at, piece));
    meter.finish();
    CHECK(meter.skipped() == 2);
    CHECK(meter.usage() == anthropic_stream_usage());
  }

  // A plain body: megabytes of content before the usage are never kept.
  const std::string body = "{\"content\": \"" + huge + huge + "\", \"model\": \"" + std::string(1000, 'm') +
                           "\", \"usage\": {\"input_tokens\": 3, \"output_tokens\": 4}}";
  UsageMeter meter(false);
  meter.feed(body);
  meter.finish();
  CHECK(meter.found());
  CHECK(meter.usage().input == 3);
  CHECK(meter.model().empty());  // a model name that long is not one
  UsageMeter huge_usage(false);
  huge_usage.feed("{\"usage\": {\"input_tokens\": 3, \"pad\": \"" + huge + "\"}}");
  huge_usage.finish();
  CHECK_FALSE(huge_usage.found());
  CHECK(huge_usage.skipped() == 1);
}

TEST_CASE("api prices: exact names, then the longest prefix, in any case") {
  PriceTable table;
  table.set("claude-opus-4*", {{15, 75, 18.75, 30, 1.5, 0.01}, 0, {}, std::nullopt});
  table.set("claude-opus-4-5*", {{5, 25, 6.25, 10, 0.5, 0.01}, 0, {}, std::nullopt});
  table.set("Claude-Opus-4-5-Special", {{1, 1, 1, 1, 1, 0}, 0, {}, std::nullopt});
  CHECK(table.find("claude-opus-4-20250514")->first == "claude-opus-4*");
  CHECK(table.find("claude-opus-4-5-20251101")->first == "claude-opus-4-5*");
  CHECK(table.find("CLAUDE-OPUS-4-5")->first == "claude-opus-4-5*");
  CHECK(table.find("claude-opus-4-5-special")->first == "claude-opus-4-5-special");
  CHECK_FALSE(table.find("claude-opus-3"));
  CHECK_FALSE(table.find(""));
}

TEST_CASE("api prices: cost per token kind, long prompts, fast mode, and unknown models at the highest rates") {
  const auto table = PriceTable::defaults();
  TokenUsage usage;
  usage.input = 100'000;
  CHECK(table.price("claude-sonnet-4-5-20250929", usage).cost_usd == doctest::Approx(0.3));
  usage = {};
  usage.output = 2'000'000;  // output is no prompt: not a long one
  CHECK(table.price("claude-sonnet-4-5", usage).cost_usd == doctest::Approx(30));
  usage = {};
  usage.cache_write_5m = 100'000;
  usage.cache_write_1h = 50'000;
  usage.cache_read = 40'000;
  usage.web_searches = 10;
  // 0.375 + 0.30 + 0.012 + 0.10
  CHECK(table.price("claude-sonnet-4-5", usage).cost_usd == doctest::Approx(0.787));

  usage = {};
  usage.input = 150'000;
  usage.cache_read = 50'001;  // 200,001 prompt tokens: the long-prompt rates, for every token
  usage.output = 1'000;
  const auto long_prompt = table.price("claude-sonnet-4-20250514", usage);
  CHECK(long_prompt.rule == "claude-sonnet-4* (long prompt)");
  CHECK(long_prompt.cost_usd == doctest::Approx(0.15 * 6 + 0.050001 * 0.6 + 0.001 * 22.5));
  CHECK(table.price("claude-sonnet-4-6", usage).rule == "claude-sonnet-4-6*");

  usage = {};
  usage.output = 1'000'000;
  usage.fast = true;
  CHECK(table.price("claude-opus-4-8", usage).cost_usd == doctest::Approx(50));
  const auto highest = table.highest_rates();
  CHECK(highest.output == doctest::Approx(150));  // Opus 4.6 in fast mode
  CHECK(highest.input == doctest::Approx(30));
  // Fast mode of a model with no fast rates, an unknown model, no model.
  CHECK(table.price("claude-opus-4-5", usage).cost_usd == doctest::Approx(150));
  usage.fast = false;
  const auto unknown = table.price("some-new-model", usage);
  CHECK(unknown.cost_usd == doctest::Approx(150));
  CHECK(unknown.rule == "unknown model: the table's highest rates");
  CHECK(table.price("", usage).cost_usd == doctest::Approx(150));
}

TEST_CASE("api prices: the shipped table prices each Claude family, and a user's entry overrides it") {
  auto table = PriceTable::defaults();
  TokenUsage usage;
  usage.input = 10'000;
  usage.output = 10'000;
  // A hundredth of the input and output rates per million.
  const std::vector<std::pair<std::string, double>> expected = {
      {"claude-opus-4-1-20250805", 0.9},
      {"claude-opus-4-5-20251101", 0.3},
      {"claude-opus-4-8", 0.3},
      {"claude-opus-5", 0.3},
      {"claude-opus-5-5", 0.24},
      {"claude-sonnet-4-6", 0.18},
      {"claude-sonnet-5", 0.12},
      {"claude-sonnet-5-5", 0.12},
      {"claude-haiku-4-5-20251001", 0.06},
      {"claude-3-5-haiku-20241022", 0.048},
      {"claude-fable-5-1", 0.6},
      {"claude-mythos-5", 0.6},
      {"claude-haiku-5-5", 0.006},
  };
  for (const auto& [model, cost] : expected) {
    INFO(model);
    CHECK(table.price(model, usage).cost_usd == doctest::Approx(cost));
  }
  table.set("claude-opus-4-5*", {{1, 1, 1, 1, 1, 0}, 0, {}, std::nullopt});
  table.set("gpt-test", {{2, 8, 2, 2, 0.5, 0}, 0, {}, std::nullopt});
  CHECK(table.price("claude-opus-4-5-20251101", usage).cost_usd == doctest::Approx(0.02));
  CHECK(table.price("gpt-test", usage).cost_usd == doctest::Approx(0.1));
}
