#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "net/api_usage.hpp"
#include "net/request_cap.hpp"

using mullet::net::ApiDialect;
using mullet::net::cap_request;
using mullet::net::estimate_input_tokens;
using mullet::net::PriceTable;
using mullet::net::RequestCap;
using mullet::net::TokenRates;
using Json = nlohmann::ordered_json;

namespace {

// $1 a million input tokens, $10 a million output tokens: a token of input
// is $0.000001, one of output $0.00001.
PriceTable test_prices() {
  PriceTable prices;
  prices.set("test-model*", {{1, 10, 1.25, 2, 0.1, 0}, 0, {}, std::nullopt});
  return prices;
}

Json messages_request(std::uint64_t max_tokens, const std::string& text = "hello") {
  return Json{{"model", "test-model-1"},
              {"max_tokens", max_tokens},
              {"stream", true},
              {"messages", Json::array({Json{{"role", "user"}, {"content", text}}})}};
}

std::uint64_t estimate_of(const std::string& body) {
  return estimate_input_tokens(Json::parse(body), body.size());
}

}  // namespace

TEST_CASE("request cap: max_tokens is lowered to what the rest of the budget affords, never raised") {
  const auto prices = test_prices();
  const auto body = messages_request(64'000).dump();
  const auto input_tokens = estimate_of(body);
  CHECK(input_tokens == (body.size() + 1) / 2);

  const auto cap = cap_request(body, ApiDialect::messages, 0.10, prices);
  REQUIRE(cap.verdict == RequestCap::Verdict::forward);
  CHECK(cap.model == "test-model-1");
  CHECK(cap.estimated_input_tokens == input_tokens);
  CHECK(cap.estimated_input_usd == doctest::Approx(static_cast<double>(input_tokens) * 1e-6));
  const auto afforded = static_cast<std::uint64_t>(std::floor((0.10 - cap.estimated_input_usd) / 1e-5));
  CHECK(cap.max_tokens_requested == 64'000u);
  CHECK(cap.max_tokens_forwarded == afforded);
  CHECK(afforded < 10'000u);
  CHECK(cap.most_usd <= 0.10);
  CHECK(cap.most_usd > 0.10 - 1e-5);  // within one output token of what remained
  // The body is rewritten with only that changed, its keys in their order.
  REQUIRE(cap.body);
  auto expected = messages_request(afforded);
  CHECK(*cap.body == expected.dump());

  // Enough left: the body goes as it came, byte for byte.
  const auto roomy = cap_request(body, ApiDialect::messages, 100, prices);
  CHECK(roomy.verdict == RequestCap::Verdict::forward);
  CHECK_FALSE(roomy.body);
  CHECK(roomy.max_tokens_forwarded == 64'000u);
  CHECK(roomy.most_usd == doctest::Approx(cap.estimated_input_usd + 0.64));
  // Exactly enough: unchanged as well.
  const auto exact = cap_request(body, ApiDialect::messages, cap.estimated_input_usd + 0.64 + 1e-9, prices);
  CHECK_FALSE(exact.body);
}

TEST_CASE("request cap: a request whose input alone costs more than what remains is refused") {
  const auto prices = test_prices();
  // About 200 KB of text: some 100,000 tokens estimated, $0.10 of input.
  const auto body = messages_request(1000, std::string(200'000, 'a')).dump();
  const auto cap = cap_request(body, ApiDialect::messages, 0.05, prices);
  CHECK(cap.verdict == RequestCap::Verdict::unaffordable);
  CHECK(cap.reason.find("its input (about 100") != std::string::npos);
  CHECK(cap.reason.find("test-model-1's input rate") != std::string::npos);
  CHECK_FALSE(cap.body);
  CHECK(cap.max_tokens_forwarded == std::nullopt);
  // Input it can pay for, but not one token of output.
  const auto no_output = cap_request(body, ApiDialect::messages, cap.estimated_input_usd + 5e-6, prices);
  CHECK(no_output.verdict == RequestCap::Verdict::unaffordable);
  CHECK(no_output.reason.find("affords no output token") != std::string::npos);
  const auto one = cap_request(body, ApiDialect::messages, cap.estimated_input_usd + 1.5e-5, prices);
  CHECK(one.verdict == RequestCap::Verdict::forward);
  CHECK(one.max_tokens_forwarded == 1u);
  // Nothing left, or less than nothing: refused.
  CHECK(cap_request(messages_request(10).dump(), ApiDialect::messages, -1, prices).verdict ==
        RequestCap::Verdict::unaffordable);
}

TEST_CASE("request cap: an unknown model is priced at the table's highest rates") {
  const auto prices = PriceTable::defaults();
  const auto highest = prices.highest_rates();
  auto request = messages_request(64'000);
  request["model"] = "mystery-model-9";
  const auto body = request.dump();
  const auto cap = cap_request(body, ApiDialect::messages, 1.0, prices);
  REQUIRE(cap.verdict == RequestCap::Verdict::forward);
  CHECK(cap.estimated_input_usd ==
        doctest::Approx(static_cast<double>(cap.estimated_input_tokens) * highest.input / 1e6));
  const auto afforded =
      static_cast<std::uint64_t>(std::floor((1.0 - cap.estimated_input_usd) / (highest.output / 1e6)));
  CHECK(cap.max_tokens_forwarded == afforded);
  // A known model affords more for the same money.
  request["model"] = "claude-haiku-4-5";
  const auto known = cap_request(request.dump(), ApiDialect::messages, 1.0, prices);
  CHECK(known.max_tokens_forwarded > afforded);
  // No model named at all: the highest rates too.
  request.erase("model");
  const auto unnamed = cap_request(request.dump(), ApiDialect::messages, 1.0, prices);
  CHECK(unnamed.verdict == RequestCap::Verdict::forward);
  CHECK(unnamed.max_tokens_forwarded ==
        static_cast<std::uint64_t>(std::floor((1.0 - unnamed.estimated_input_usd) / (highest.output / 1e6))));
}

TEST_CASE("request cap: max_tokens is required by the Messages API, optional in chat completions") {
  const auto prices = test_prices();
  auto request = messages_request(100);
  request.erase("max_tokens");
  const auto missing = cap_request(request.dump(), ApiDialect::messages, 10, prices);
  CHECK(missing.verdict == RequestCap::Verdict::malformed);
  CHECK(missing.reason.find("max_tokens is missing") != std::string::npos);
  for (const auto* bad : {R"("100")", "0", "-5", "1.5", "true"}) {
    CAPTURE(bad);
    auto with_bad = messages_request(100);
    with_bad["max_tokens"] = Json::parse(bad);
    const auto cap = cap_request(with_bad.dump(), ApiDialect::messages, 10, prices);
    CHECK(cap.verdict == RequestCap::Verdict::malformed);
    CHECK(cap.reason.find("max_tokens is not a positive integer") != std::string::npos);
  }

  // Chat completions without a cap: nothing to lower; the input is checked.
  CHECK(cap_request(request.dump(), ApiDialect::chat_completions, 10, prices).verdict == RequestCap::Verdict::forward);
  const auto uncapped = cap_request(request.dump(), ApiDialect::chat_completions, 10, prices);
  CHECK_FALSE(uncapped.body);
  CHECK(uncapped.max_tokens_requested == std::nullopt);
  CHECK(uncapped.most_usd == doctest::Approx(uncapped.estimated_input_usd));
  CHECK(cap_request(request.dump(), ApiDialect::chat_completions, 0, prices).verdict ==
        RequestCap::Verdict::unaffordable);
  // Both of its cap fields are lowered, and `n` completions share the rest.
  request["max_completion_tokens"] = 50'000;
  request["max_tokens"] = 60'000;
  request["n"] = 2;
  const auto both = cap_request(request.dump(), ApiDialect::chat_completions, 0.1, prices);
  REQUIRE(both.verdict == RequestCap::Verdict::forward);
  CHECK(both.max_tokens_requested == 50'000u);
  const auto afforded = static_cast<std::uint64_t>(std::floor((0.1 - both.estimated_input_usd) / 2e-5));
  CHECK(both.max_tokens_forwarded == afforded);
  REQUIRE(both.body);
  const auto sent = Json::parse(*both.body);
  CHECK(sent["max_completion_tokens"] == afforded);
  CHECK(sent["max_tokens"] == afforded);
  CHECK(both.most_usd <= 0.1);
  // The Messages API's max_tokens alone is read there.
  auto messages = messages_request(100);
  messages["max_completion_tokens"] = "ignored";
  CHECK(cap_request(messages.dump(), ApiDialect::messages, 10, prices).verdict == RequestCap::Verdict::forward);
}

TEST_CASE("request cap: a thinking budget stays below the lowered max_tokens") {
  const auto prices = test_prices();
  auto request = messages_request(16'000);
  request["thinking"] = {{"type", "enabled"}, {"budget_tokens", 10'000}};
  const auto input = cap_request(request.dump(), ApiDialect::messages, 100, prices).estimated_input_usd;
  CHECK(cap_request(request.dump(), ApiDialect::messages, 100, prices).thinking_budget_forwarded == 10'000u);

  // Room for 5,000 output tokens: max_tokens 5,000, thinking 4,999.
  const auto lowered = cap_request(request.dump(), ApiDialect::messages, input + 0.05 + 1e-9, prices);
  REQUIRE(lowered.verdict == RequestCap::Verdict::forward);
  CHECK(lowered.max_tokens_forwarded == 5'000u);
  CHECK(lowered.thinking_budget_requested == 10'000u);
  CHECK(lowered.thinking_budget_forwarded == 4'999u);
  REQUIRE(lowered.body);
  const auto sent = Json::parse(*lowered.body);
  CHECK(sent["thinking"]["budget_tokens"] == 4'999);
  CHECK(sent["thinking"]["type"] == "enabled");
  CHECK(sent["max_tokens"] == 5'000);

  // Lowered, but above the budget: the budget stays.
  const auto above = cap_request(request.dump(), ApiDialect::messages, input + 0.12 + 1e-9, prices);
  CHECK(above.max_tokens_forwarded == 12'000u);
  CHECK(above.thinking_budget_forwarded == 10'000u);

  // Too little for the API's smallest thinking budget: refused.
  const auto starved = cap_request(request.dump(), ApiDialect::messages, input + 0.01 + 1e-9, prices);
  CHECK(starved.verdict == RequestCap::Verdict::unaffordable);
  CHECK(starved.reason.find("extended thinking") != std::string::npos);

  // Interleaved thinking may ask for more than max_tokens: left as asked.
  request["thinking"]["budget_tokens"] = 20'000;
  const auto interleaved = cap_request(request.dump(), ApiDialect::messages, input + 0.05 + 1e-9, prices);
  CHECK(interleaved.verdict == RequestCap::Verdict::forward);
  CHECK(interleaved.thinking_budget_forwarded == 20'000u);
  // Adaptive thinking has no budget to lower.
  request["thinking"] = {{"type", "adaptive"}};
  const auto adaptive_input = cap_request(request.dump(), ApiDialect::messages, 100, prices).estimated_input_usd;
  const auto adaptive = cap_request(request.dump(), ApiDialect::messages, adaptive_input + 0.05 + 1e-9, prices);
  CHECK(adaptive.max_tokens_forwarded == 5'000u);
  CHECK(adaptive.thinking_budget_requested == std::nullopt);
  CHECK(Json::parse(*adaptive.body)["thinking"] == Json{{"type", "adaptive"}});
  request["thinking"] = {{"type", "enabled"}, {"budget_tokens", "lots"}};
  CHECK(cap_request(request.dump(), ApiDialect::messages, 100, prices).verdict == RequestCap::Verdict::malformed);
}

TEST_CASE("request cap: bodies that are not one plain JSON object are refused as malformed") {
  const auto prices = test_prices();
  for (const std::string body : {"", "not json", "{\"max_tokens\": 5", "[1, 2]", "\"text\"", "{\"a\": \"\\ud800\"}"}) {
    CAPTURE(body);
    const auto cap = cap_request(body, ApiDialect::messages, 10, prices);
    CHECK(cap.verdict == RequestCap::Verdict::malformed);
    CHECK_FALSE(cap.body);
  }
  // A key twice: the upstream might read the other one.
  const auto twice = cap_request(R"({"model": "test-model", "max_tokens": 64000, "max_tokens": 5, "messages": []})",
                                 ApiDialect::messages, 10, prices);
  CHECK(twice.verdict == RequestCap::Verdict::malformed);
  CHECK(twice.reason.find("a key twice") != std::string::npos);
  CHECK(cap_request(R"({"model": "test-model", "max_tokens": 5, "messages": [{"a": 1, "a": 2}]})", ApiDialect::messages,
                    10, prices)
            .verdict == RequestCap::Verdict::malformed);
  // The same key in different objects is fine.
  CHECK(cap_request(R"({"model": "test-model", "max_tokens": 5, "messages": [{"a": 1}, {"a": 2}]})",
                    ApiDialect::messages, 10, prices)
            .verdict == RequestCap::Verdict::forward);
  // Nested deeper than the endpoint reads.
  std::string deep = R"({"model": "test-model", "max_tokens": 5, "x": )";
  deep += std::string(mullet::net::max_request_depth, '[') + std::string(mullet::net::max_request_depth, ']') + "}";
  const auto nested = cap_request(deep, ApiDialect::messages, 10, prices);
  CHECK(nested.verdict == RequestCap::Verdict::malformed);
  CHECK(nested.reason.find("nests deeper") != std::string::npos);
  // Brackets inside strings do not count.
  std::string quoted = R"({"model": "test-model", "max_tokens": 5, "x": ")";
  quoted += std::string(1000, '[') + "\"}";
  CHECK(cap_request(quoted, ApiDialect::messages, 10, prices).verdict == RequestCap::Verdict::forward);
}

TEST_CASE("request cap: images count by a fixed bound, not by their bytes") {
  const std::string data(400'000, 'A');
  const auto with_image = Json{
      {"model", "m"},
      {"max_tokens", 10},
      {"messages",
       Json::array({Json{
           {"role", "user"},
           {"content", Json::array({Json{{"type", "image"},
                                         {"source", {{"type", "base64"}, {"media_type", "image/png"}, {"data", data}}}},
                                    Json{{"type", "text"}, {"text", "what is it?"}}})}}})}};
  const auto body = with_image.dump();
  const auto tokens = estimate_input_tokens(with_image, body.size());
  CHECK(tokens == (body.size() - data.size() + 1) / 2 + 5'000);
  // OpenAI's data URLs likewise.
  const auto openai = Json{
      {"model", "m"},
      {"messages", Json::array({Json{
                       {"role", "user"},
                       {"content", Json::array({Json{{"type", "image_url"},
                                                     {"image_url", {{"url", "data:image/png;base64," + data}}}}})}}})}};
  const auto openai_body = openai.dump();
  CHECK(estimate_input_tokens(openai, openai_body.size()) == (openai_body.size() - data.size() - 22 + 1) / 2 + 5'000);
  // Any other text counts by its bytes, documents included.
  const auto document = Json{{"type", "document"}, {"source", {{"type", "base64"}, {"data", data}}}};
  CHECK(estimate_input_tokens(document, document.dump().size()) == (document.dump().size() + 1) / 2);
}

TEST_CASE("request cap: the record keeps the figures") {
  const auto prices = test_prices();
  auto request = messages_request(64'000);
  request["thinking"] = {{"type", "enabled"}, {"budget_tokens", 10'000}};
  const auto cap = cap_request(request.dump(), ApiDialect::messages, 0.05, prices);
  const auto json = to_json(cap);
  CHECK(json["model"] == "test-model-1");
  CHECK(json["max_tokens_asked"] == 64'000);
  CHECK(json["max_tokens_forwarded"] == *cap.max_tokens_forwarded);
  CHECK(json["thinking_budget_asked"] == 10'000);
  CHECK(json["thinking_budget_forwarded"] == *cap.max_tokens_forwarded - 1);
  CHECK(json["estimated_input_tokens"] == cap.estimated_input_tokens);
  CHECK(json["cost_cap_usd"].get<double>() == doctest::Approx(cap.most_usd));
  CHECK_FALSE(json.contains("body"));
  request.erase("max_tokens");
  request.erase("thinking");
  const auto uncapped = to_json(cap_request(request.dump(), ApiDialect::chat_completions, 1, prices));
  CHECK(uncapped["max_tokens_asked"].is_null());
  CHECK(uncapped["max_tokens_forwarded"].is_null());
  CHECK_FALSE(uncapped.contains("thinking_budget_asked"));
}
