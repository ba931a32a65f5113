// Tests for the built-in rewards, the math-answer helpers, the registry and RewardSet.
#include <QtTest>

#include <cmath>

#include "tests/common/error_of.h"
#include "core/common/error.h"
#include "core/rollout/reward.h"
#include "core/rollout/reward_builtin.h"
#include "core/rollout/reward_math.h"

using namespace grpo::rollout;

namespace {
RewardInput sample(std::string completion, std::optional<std::string> answer = std::nullopt) {
  return RewardInput{"Q", std::move(completion), std::move(answer)};
}

std::optional<double> score1(RewardFunction& fn, const RewardInput& in) { return fn.score({in}).at(0); }

// A scripted reward for RewardSet tests: returns the given values, in order.
class FixedReward : public RewardFunction {
public:
  FixedReward(std::string name, std::vector<std::optional<double>> v) : name_(std::move(name)), v_(std::move(v)) {}
  std::string name() const override { return name_; }
  std::vector<std::optional<double>> score(const std::vector<RewardInput>&) override { return v_; }

private:
  std::string name_;
  std::vector<std::optional<double>> v_;
};

using grpo::testing::error_of;

#define QVERIFY_ERROR(expr, expected)                                                                     \
  do {                                                                                                    \
    std::string e_ = error_of([&] { (void)(expr); });                                                     \
    QVERIFY2(e_.find(expected) != std::string::npos, (e_ + "  [expected: " + (expected) + "]").c_str()); \
  } while (0)
}  // namespace

class TestRewards : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void extractBoxedHandlesNestingAndTakesTheLast() {
    QCOMPARE(extract_boxed("so \\boxed{42}."), std::optional<std::string>("42"));
    QCOMPARE(extract_boxed("\\boxed{\\frac{3}{4}}"), std::optional<std::string>("\\frac{3}{4}"));
    QCOMPARE(extract_boxed("\\boxed{{a}+{b{c}}}"), std::optional<std::string>("{a}+{b{c}}"));
    QCOMPARE(extract_boxed("first \\boxed{1} then \\boxed{2}"), std::optional<std::string>("2"));
    QCOMPARE(extract_boxed("\\fbox{7}"), std::optional<std::string>("7"));
    QCOMPARE(extract_boxed("\\boxed{1} and unclosed \\boxed{2"), std::optional<std::string>("1"));
    QVERIFY(!extract_boxed("no box here 12"));
    QVERIFY(!extract_boxed("\\boxed{oops"));
  }
  void extractLastNumber() {
    QCOMPARE(extract_last_number("1 then 2 then 3."), std::optional<std::string>("3"));
    QCOMPARE(extract_last_number("total is 1,234 apples"), std::optional<std::string>("1,234"));
    QCOMPARE(extract_last_number("x = -5"), std::optional<std::string>("-5"));
    QCOMPARE(extract_last_number("7-5 is 2 and 10 - 3"), std::optional<std::string>("3"));
    QCOMPARE(extract_last_number("it is 3.25"), std::optional<std::string>("3.25"));
    QCOMPARE(extract_last_number("ratio 3/4"), std::optional<std::string>("3/4"));
    QCOMPARE(extract_last_number("so \\frac{3}{4}"), std::optional<std::string>("\\frac{3}{4}"));
    QVERIFY(!extract_last_number("no digits"));
  }
  void parseMathNumbers() {
    struct Case { const char* text; double value; };
    const Case cases[] = {{"82", 82},        {"-3", -3},          {"1,234", 1234},       {"1,234,567.5", 1234567.5},
                          {"3.50", 3.5},     {".5", 0.5},         {"3/4", 0.75},         {"-3/4", -0.75},
                          {"\\frac{3}{4}", 0.75}, {"\\dfrac{1}{8}", 0.125}, {"-\\frac{3}{4}", -0.75}, {"\\frac34", 0.75},
                          {"$42$", 42},      {"42.", 42},         {"50\\%", 50},         {"90^\\circ", 90},
                          {"12\\text{ cm}", 12}, {"x = 5", 5},    {"1{,}000", 1000},     {"\\boxed{7}", 7},
                          {"\xE2\x88\x92" "2", -2}};
    for (const auto& c : cases) {
      auto v = parse_math_number(c.text);
      QVERIFY2(v.has_value(), c.text);
      QVERIFY2(std::fabs(*v - c.value) < 1e-12, c.text);
    }
    for (const char* bad : {"", "abc", "1,2", "12,34", "3/0", "1.2.3", "--5"}) QVERIFY2(!parse_math_number(bad), bad);
  }
  void referenceAnswerForms() {
    QCOMPARE(reference_answer("Natalia sold 48/2 = 24 clips... #### 72"), std::string("72"));
    QCOMPARE(reference_answer("The answer is \\boxed{5}"), std::string("5"));
    QCOMPARE(reference_answer("  42 "), std::string("42"));
  }

  void accuracyCases() {
    AccuracyReward acc;
    struct Case { const char* completion; const char* answer; double expected; };
    const Case cases[] = {
        {"The answer is \\boxed{82}.", "82", 1},
        {"The answer is \\boxed{81}.", "82", 0},
        {"So we get 37 + 45 = 82", "82", 1},
        {"I think 82, no wait, 83", "82", 0},
        {"\\boxed{\\frac{3}{4}}", "3/4", 1},
        {"\\boxed{0.75}", "\\frac{3}{4}", 1},
        {"\\boxed{\\dfrac{6}{8}}", "0.75", 1},
        {"The result is -17.", "-17", 1},
        {"The result is 17.", "-17", 0},
        {"Total: 1,234", "1234", 1},
        {"\\boxed{1234}", "1,234", 1},
        {"\\boxed{1.0}", "1", 1},
        {"\\boxed{1.50}", "1.5", 1},
        {"answer 2.5", "5/2", 1},
        {"\\boxed{{12}}", "12", 1},
        {"first \\boxed{3} then on second thought \\boxed{4}", "4", 1},
        {"\\boxed{3} then \\boxed{4}", "4", 0},  // boxes this close are one answer, {3, 4} (math_verify)
        {"\\boxed{x+1}", "x + 1", 1},  // expressions: compared by value
        {"\\boxed{x+2}", "x+1", 0},
        {"no number at all", "5", 0},
        {"#### 72", "Work... #### 72", 1},
    };
    for (const auto& c : cases) {
      auto v = score1(acc, sample(c.completion, std::string(c.answer)));
      QVERIFY2(v.has_value(), c.completion);
      QVERIFY2(*v == c.expected, (std::string(c.completion) + " vs " + c.answer).c_str());
    }
    QVERIFY(!score1(acc, sample("\\boxed{3}")).has_value());                    // no answer -> None
    QVERIFY(!score1(acc, sample("\\boxed{3}", std::string("  "))).has_value());  // empty answer -> None
    QCOMPARE(acc.score({}).size(), size_t(0));
  }
  void exactMatchCases() {
    ExactMatchReward em;
    QCOMPARE(*score1(em, sample("  Paris\n", std::string("Paris"))), 1.0);
    QCOMPARE(*score1(em, sample("paris", std::string("Paris"))), 0.0);
    QCOMPARE(*score1(em, sample("Paris.", std::string("Paris"))), 0.0);
    QVERIFY(!score1(em, sample("Paris")).has_value());
  }
  void formatFullAndSearch() {
    const std::string pat = "<think>.*?</think>\\s*<answer>.*?</answer>";
    FormatReward full(pat, FormatReward::Mode::Full);
    FormatReward search(pat, FormatReward::Mode::Search);
    auto good = sample("<think>a\nb</think>\n<answer>4</answer>");
    auto trailing = sample("<think>a</think><answer>4</answer> and more");
    auto bad = sample("just 4");
    QCOMPARE(*score1(full, good), 1.0);
    QCOMPARE(*score1(full, trailing), 0.0);
    QCOMPARE(*score1(search, trailing), 1.0);
    QCOMPARE(*score1(full, bad), 0.0);
    QCOMPARE(*score1(search, bad), 0.0);
    FormatReward no_dotall(pat, FormatReward::Mode::Full, /*dotall=*/false);
    QCOMPARE(*score1(no_dotall, good), 0.0);  // "." does not cross the newline
    // Unicode classes (UCP) and invalid UTF-8 in the subject.
    FormatReward word("\\w+", FormatReward::Mode::Full);
    QCOMPARE(*score1(word, sample("héllo")), 1.0);
    QCOMPARE(*score1(word, sample("h\xC3")), 0.0);
    QVERIFY(std::string(error_of([] { FormatReward("(unclosed"); })).find("offset") != std::string::npos);
  }
  void lengthPenalty() {
    LengthReward chars(10, 0.5);
    QCOMPARE(*score1(chars, sample("")), 0.0);
    QCOMPARE(*score1(chars, sample("0123456789")), 0.0);
    QCOMPARE(*score1(chars, sample("0123456789abc")), -1.5);
    QCOMPARE(*score1(chars, sample("ééééééééééé")), -0.5);  // 11 code points, 22 bytes
    // Tokens are the completion's real ids; a non-empty completion without them is unscorable.
    LengthReward tokens(2, 1.0, LengthReward::Unit::Tokens);
    auto with_ids = [&](const char* text, std::vector<int64_t> ids) {
      auto in = sample(text);
      in.completion_ids = std::move(ids);
      return in;
    };
    QCOMPARE(*score1(tokens, with_ids("12345678", {1, 2})), 0.0);
    QCOMPARE(*score1(tokens, with_ids("1", {1, 2, 3})), -1.0);
    QVERIFY(!score1(tokens, sample("123456789")).has_value());
    QCOMPARE(*score1(tokens, with_ids("", {})), 0.0);
    QVERIFY_THROWS_EXCEPTION(grpo::Error, LengthReward(-1, 0.1));
  }

  // TRL's own tests (trl tests/test_rewards.py) and open-r1's patterns, case by case.
  void trlThinkFormatReward() {
    auto fn = make_reward("think_format_reward");
    QCOMPARE(fn->name(), std::string("think_format_reward"));
    for (const char* ok : {"<think>This is my reasoning.</think>This is my answer.",
                           "<think>\nThis is my reasoning.\n</think>\nThis is my answer.",
                           "<think>\nThis is\nmy reasoning.\n</think>\nThis is my answer.",
                           "<think>\nThis is <some tag> my reasoning.</think>\nThis is my answer.",
                           "<think></think>\nThis is my answer."})
      QVERIFY2(*score1(*fn, sample(ok)) == 1.0, ok);
    for (const char* bad : {"<think>\nThis is my reasoning.\nThis is my answer.",
                            "<think>This is my reasoning.\nThis is my answer.", "This is my reasoning. This is my answer.",
                            "This is my reasoning.\nThis is my answer.", "This is my reasoning.</think>\nThis is my answer.",
                            "This is my reasoning.</think>This is my answer.",
                            "This<think>is my reasoning.</think>\nThis is my answer.",
                            "<think>This is<think>my reasoning.</think></think>This is my answer.",
                            "<think>This is</think>\nmy\n<think>reasoning.</think>\nThis is my answer."})
      QVERIFY2(*score1(*fn, sample(bad)) == 0.0, bad);
  }

  void trlSoftOverlongPunishmentCountsTokens() {
    auto fn = make_reward({{"name", "get_soft_overlong_punishment"}, {"max_completion_len", 100}, {"soft_punish_cache", 20}});
    QCOMPARE(fn->name(), std::string("soft_overlong_punishment_reward"));
    auto of_len = [](size_t n) {
      auto in = sample(std::string(n, 'x'));
      in.completion_ids.assign(n, 1);
      return in;
    };
    QCOMPARE(*score1(*fn, of_len(50)), 0.0);
    QCOMPARE(*score1(*fn, of_len(110)), -1.0);
    QVERIFY(std::abs(*score1(*fn, of_len(90)) - -0.5) < 1e-12);
    QCOMPARE(*score1(*fn, of_len(80)), 0.0);
    QCOMPARE(*score1(*fn, of_len(100)), -1.0);
    QVERIFY(!score1(*fn, sample("text without ids")).has_value());  // never a guess
    QVERIFY_ERROR(make_reward({{"name", "soft_overlong_punishment"}, {"max_completion_len", 100}}), "soft_punish_cache");
    QVERIFY_ERROR(make_reward({{"name", "soft_overlong_punishment"}, {"max_completion_len", 10}, {"soft_punish_cache", 20}}),
                  "[0, max_completion_len]");
  }

  void trlRepetitionPenaltyOnTokenIds() {
    auto fn = make_reward({{"name", "get_repetition_penalty_reward"}, {"ngram_size", 2}, {"max_penalty", -1.0}});
    QCOMPARE(fn->name(), std::string("repetition_penalty_reward"));
    auto ids = [](std::vector<int64_t> v) {
      auto in = sample("x");
      in.completion_ids = std::move(v);
      return in;
    };
    QCOMPARE(*score1(*fn, ids({1, 2, 3, 4})), 0.0);    // TRL docstring: [0.0, -0.75]
    QCOMPARE(*score1(*fn, ids({5, 5, 5, 5, 5})), -0.75);
    QCOMPARE(*score1(*fn, ids({7})), 0.0);             // shorter than one n-gram
    QVERIFY_ERROR(make_reward({{"name", "repetition_penalty"}, {"max_penalty", 0.5}}), "<= 0");
  }

  void trlCosineScaledReward() {
    auto fn = make_reward({{"name", "get_cosine_scaled_reward"}, {"max_len", 100}});
    QCOMPARE(fn->name(), std::string("cosine_scaled_reward"));
    auto in = [](const char* completion, const char* gold, size_t n) {
      auto s = sample(completion, std::string(gold));
      s.completion_ids.assign(n, 1);
      return s;
    };
    const char* third = "\\boxed{\\frac{1}{3}}";
    const char* half = "\\boxed{\\frac{1}{2}}";
    QVERIFY(std::abs(*score1(*fn, in(third, "\\frac{1}{3}", 25)) - 0.92678) < 1e-4);
    QVERIFY(std::abs(*score1(*fn, in(third, "\\frac{1}{3}", 75)) - 0.57322) < 1e-4);
    QVERIFY(std::abs(*score1(*fn, in(half, "\\frac{1}{3}", 25)) - -0.92678) < 1e-4);
    QVERIFY(std::abs(*score1(*fn, in(half, "\\frac{1}{3}", 75)) - -0.57322) < 1e-4);
    QVERIFY(std::abs(*score1(*fn, in(third, "\\frac{1}{3}", 50)) - 0.75) < 1e-12);
    // TRL's boundary case passes [] ids with a non-empty completion; here that means "no ids"
    // (None), so the shortest real length, one token, stands in for it.
    QVERIFY(std::abs(*score1(*fn, in(third, "\\frac{1}{3}", 1)) - (0.75 + 0.25 * std::cos(3.14159265358979323846 / 100))) < 1e-12);
    QVERIFY(std::abs(*score1(*fn, in(half, "\\frac{1}{3}", 100)) - -0.5) < 1e-12);
    QVERIFY(std::abs(*score1(*fn, in(third, "\\frac{1}{3}", 200)) - 0.5) < 1e-12);  // clamped past max_len
    QVERIFY(std::abs(*score1(*fn, in(half, "\\frac{1}{3}", 200)) - -0.5) < 1e-12);
    QVERIFY(!score1(*fn, in("\\boxed{42}", "forty two", 50)).has_value());
    auto custom = make_reward({{"name", "cosine_scaled_reward"}, {"max_len", 100}, {"min_value_correct", 0.0}, {"max_value_correct", 2.0}});
    QVERIFY(std::abs(*score1(*custom, in(third, "\\frac{1}{3}", 50)) - 1.0) < 1e-12);
  }

  void trlAccuracyAndReasoningAccuracy() {
    auto acc = make_reward("accuracy_reward");
    QCOMPARE(acc->name(), std::string("accuracy_reward"));
    QVERIFY(acc->measures_accuracy());
    QCOMPARE(*score1(*acc, sample("\\boxed{\\frac{63}{400}}", std::string("\\frac{63}{400}"))), 1.0);
    QCOMPARE(*score1(*acc, sample("\\boxed{\\frac{63}{400}}", std::string("63/400"))), 1.0);
    QCOMPARE(*score1(*acc, sample("\\boxed{\\frac{64}{400}}", std::string("\\frac{63}{400}"))), 0.0);
    QCOMPARE(*score1(*acc, sample("\\boxed{3}", std::string("6"))), 0.0);
    QVERIFY(!score1(*acc, sample("Answer is forty two.", std::string("Answer is forty two."))).has_value());
    QVERIFY(!score1(*acc, sample("Some other content. \\boxed{43}.", std::string("Answer is forty three."))).has_value());

    auto r = make_reward("reasoning_accuracy_reward");
    QVERIFY(r->measures_accuracy());
    const std::string gold = "\\frac{63}{400}";
    QCOMPARE(*score1(*r, sample("<think> Reasoning content </think> \\boxed{\\frac{63}{400}}", gold)), 1.0);
    QCOMPARE(*score1(*r, sample("Reasoning content </think> \\boxed{\\frac{63}{400}}", gold)), 1.0);
    QCOMPARE(*score1(*r, sample("<think> Reasoning content </think> \\boxed{\\frac{64}{400}}", gold)), 0.0);
    QCOMPARE(*score1(*r, sample("<think> My answer is \\boxed{42} </think> Some other text.", std::string("\\boxed{42}"))), 0.0);
    QCOMPARE(*score1(*r, sample("<think> The answer is \\boxed{42} </think> Here's a wrong answer: \\boxed{43}.",
                                std::string("\\boxed{42}"))), 0.0);
    QCOMPARE(*score1(*r, sample("<think> Incomplete reasoning without closing tag", gold)), 0.0);
    QCOMPARE(*score1(*r, sample("Correct answer \\frac{63}{400} but completely missing reasoning content", gold)), 0.0);
    QVERIFY(!score1(*r, sample("<think> Reasoning content </think> \\boxed{42}", std::string("forty two"))).has_value());
    auto custom = make_reward({{"name", "reasoning_accuracy_reward"}, {"reasoning_delimiters", {"</REASONING_END>"}}});
    QCOMPARE(*score1(*custom, sample("<REASONING_START> Reasoning content </REASONING_END> \\boxed{\\frac{63}{400}}", gold)), 1.0);
  }

  void openR1FormatAndTagCount() {
    auto fmt = make_reward("format_reward");
    QCOMPARE(*score1(*fmt, sample("<think>\nwhy\n</think>\n<answer>\n42\n</answer>")), 1.0);
    QCOMPARE(*score1(*fmt, sample("<think>\nwhy\n</think>\n<answer>\n42\n</answer>\nmore")), 1.0);  // MULTILINE $
    QCOMPARE(*score1(*fmt, sample("<think>\nwhy\n</think>\n<answer>\n42\n</answer> more")), 0.0);
    QCOMPARE(*score1(*fmt, sample(" <think>\nwhy\n</think>\n<answer>\n42\n</answer>")), 0.0);
    QCOMPARE(*score1(*fmt, sample("<think>why</think><answer>42</answer>")), 0.0);
    auto tags = make_reward("tag_count_reward");
    QCOMPARE(*score1(*tags, sample("<think>\nwhy\n</think>\n<answer>\n42\n</answer>")), 1.0);
    QCOMPARE(*score1(*tags, sample("<think>\nwhy\n</think>\n")), 0.5);
    QCOMPARE(*score1(*tags, sample("<think>\n<think>\n")), 0.0);
  }

  void evalAccuracyFunctionIsTheAccuracyOne() {
    auto set = RewardSet::from_json(nlohmann::json::array({"think_format_reward", "accuracy_reward"}));
    QVERIFY(set.accuracy_function() != nullptr);
    QCOMPARE(set.accuracy_function()->name(), std::string("accuracy_reward"));
    auto none = RewardSet::from_json(nlohmann::json::array({"think_format_reward"}));
    QVERIFY(none.accuracy_function() == nullptr);
  }

  void registryBuildsByName() {
    QCOMPARE(make_reward({{"name", "accuracy"}})->name(), std::string("accuracy"));
    QCOMPARE(make_reward("exact_match")->name(), std::string("exact_match"));
    auto f = make_reward({{"name", "format"}, {"pattern", "^\\d+$"}, {"mode", "search"}, {"alias", "digits"}});
    QCOMPARE(f->name(), std::string("digits"));
    QCOMPARE(*score1(*f, sample("123")), 1.0);
    auto len = make_reward({{"name", "length"}, {"target", 64}, {"penalty", 0.01}, {"unit", "tokens"}});
    auto long_one = sample(std::string(260, 'a'));
    long_one.completion_ids.assign(65, 7);
    QCOMPARE(*score1(*len, long_one), -0.01);
    QCOMPARE(make_reward({{"name", "external"}, {"command", "cat"}, {"timeout_s", 1}})->name(), std::string("external"));
  }
  void registryErrorsNameTheNearest() {
    std::string e = error_of([] { make_reward({{"name", "acuracy"}}); });
    QVERIFY2(e.find("unknown reward \"acuracy\"") != std::string::npos && e.find("\"accuracy\"") != std::string::npos, e.c_str());
    e = error_of([] { make_reward({{"name", "length"}, {"target", 5}, {"penalti", 1}}); });
    QVERIFY2(e.find("unknown key \"penalti\"") != std::string::npos && e.find("\"penalty\"") != std::string::npos, e.c_str());
    e = error_of([] { make_reward({{"name", "format"}}); });
    QVERIFY2(e.find("field \"pattern\": missing") != std::string::npos, e.c_str());
    e = error_of([] { make_reward({{"name", "length"}, {"target", "big"}}); });
    QVERIFY2(e.find("field \"target\": expected a number, got string") != std::string::npos, e.c_str());
    e = error_of([] { make_reward({{"name", "format"}, {"pattern", "x"}, {"mode", "fulll"}}); });
    QVERIFY2(e.find("did you mean \"full\"") != std::string::npos, e.c_str());
    e = error_of([] { make_reward({{"name", "external"}, {"command", ""}}); });
    QVERIFY2(e.find("command") != std::string::npos, e.c_str());
    e = error_of([] { RewardSet::from_json(nlohmann::json::array({"accuracy", {{"name", "lenght"}}})); });
    QVERIFY2(e.find("reward_funcs[1]") != std::string::npos && e.find("\"length\"") != std::string::npos, e.c_str());
  }

  void rewardSetWeightsAndNaN() {
    std::vector<std::unique_ptr<RewardFunction>> fns;
    fns.push_back(std::make_unique<FixedReward>("a", std::vector<std::optional<double>>{1.0, std::nullopt, std::nullopt, 0.5}));
    fns.push_back(std::make_unique<FixedReward>("b", std::vector<std::optional<double>>{2.0, 3.0, std::nullopt, std::nullopt}));
    RewardSet set(std::move(fns), {1.0, 0.5});
    std::vector<RewardInput> batch(4, sample("x"));
    RewardScores s = set.score(batch);
    QCOMPARE(s.names, (std::vector<std::string>{"a", "b"}));
    QCOMPARE(s.per_function.size(), size_t(2));
    QCOMPARE(s.per_function[0].size(), size_t(4));
    QCOMPARE(s.per_function[0][0], 1.0);
    QVERIFY(std::isnan(s.per_function[0][1]));
    QVERIFY(std::isnan(s.per_function[1][3]));
    QCOMPARE(s.total[0], 1.0 + 0.5 * 2.0);
    QCOMPARE(s.total[1], 0.5 * 3.0);     // NaN is skipped (nansum)
    QVERIFY(std::isnan(s.total[2]));     // every function None -> unscorable
    QCOMPARE(s.total[3], 0.5);
    QCOMPARE(s.seconds.size(), size_t(2));
    QVERIFY(s.seconds[0] >= 0.0);
    QCOMPARE(s.weights, (std::vector<double>{1.0, 0.5}));
    QVERIFY_THROWS_EXCEPTION(grpo::Error, set.set_weights({1.0}));
  }
  void rewardSetFromJsonAndWrongSize() {
    RewardSet set = RewardSet::from_json(nlohmann::json::parse(
        R"(["accuracy", {"name": "length", "target": 3, "penalty": 1, "weight": 0.25}])"));
    QCOMPARE(set.weights(), (std::vector<double>{1.0, 0.25}));
    auto s = set.score({sample("\\boxed{12}", std::string("12")), sample("12345")});
    QCOMPARE(s.per_function[0][0], 1.0);
    QVERIFY(std::isnan(s.per_function[0][1]));
    QCOMPARE(s.per_function[1][1], -2.0);
    QCOMPARE(s.total[0], 1.0 - 0.25 * 7.0);  // "\boxed{12}" is 10 chars: 7 over
    QCOMPARE(s.total[1], -0.5);

    RewardSet bad;
    bad.add(std::make_unique<FixedReward>("short", std::vector<std::optional<double>>{1.0}));
    std::string e = error_of([&] { bad.score({sample("a"), sample("b")}); });
    QVERIFY2(e.find("reward \"short\"") != std::string::npos && e.find("returned 1 values") != std::string::npos, e.c_str());
  }
};

QTEST_GUILESS_MAIN(TestRewards)
#include "test_rewards.moc"
