// Golden tests for grpo::text::Tokenizer on real tokenizers (Qwen 3 byte-level BPE, Mistral
// SentencePiece-style BPE with byte fallback): every line of texts.txt must encode to the ids
// Hugging Face tokenizers' Rust core produced, and decode to what it decodes to.
#include "tests/common/test_paths.h"
#include <QtTest/QtTest>

#include <chrono>

#include "core/common/error.h"
#include "core/text/tokenizer.h"
#include "tests/text/test_util.h"

using grpo::text::Tokenizer;
using namespace grpo::text::test;

class TestTokenizer : public QObject {
  Q_OBJECT

private:
  static std::string golden(const std::string& name) {
    return std::string(GRPO_TEST_DATA) + "/golden/tokenizers/" + name;
  }

  // Encodes every line and compares with ids.jsonl / ids_with_special.jsonl.
  static void check_golden_ids(const std::string& name) {
    Tokenizer tok = Tokenizer::load(golden(name));
    auto texts = read_lines(golden(name) + "/texts.txt");
    auto plain = read_jsonl(golden(name) + "/ids.jsonl");
    auto special = read_jsonl(golden(name) + "/ids_with_special.jsonl");
    QCOMPARE(plain.size(), texts.size());
    QCOMPARE(special.size(), texts.size());
    int failures = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      for (bool add : {false, true}) {
        const auto& row = add ? special[i] : plain[i];
        QCOMPARE(row["line"].get<size_t>(), i + 1);
        auto expected = row["ids"].get<std::vector<int32_t>>();
        auto got = tok.encode(texts[i], add);
        if (got != expected) {
          ++failures;
          qWarning("%s line %zu (add_special=%d) %s\n  expected %s\n  got      %s", name.c_str(),
                   i + 1, add, texts[i].c_str(), show_ids(expected).c_str(), show_ids(got).c_str());
        }
      }
    }
    QCOMPARE(failures, 0);
  }

  // Decodes the reference ids (with special tokens) with and without skipping them.
  static void check_decode(const std::string& name) {
    Tokenizer tok = Tokenizer::load(golden(name));
    auto texts = read_lines(golden(name) + "/texts.txt");
    auto refs = read_jsonl(std::string(GRPO_TEXT_TEST_DATA) + "/" + name + "_reference.jsonl");
    QCOMPARE(refs.size(), texts.size());
    int failures = 0, differs_from_text = 0;
    for (size_t i = 0; i < refs.size(); ++i) {
      auto ids = refs[i]["ids_with_special"].get<std::vector<int32_t>>();
      std::string keep = tok.decode(ids, false), skip = tok.decode(ids, true);
      if (keep != refs[i]["decoded"].get<std::string>() || skip != refs[i]["decoded_skip"].get<std::string>()) {
        ++failures;
        qWarning("%s line %zu: decode %s / %s, expected %s / %s", name.c_str(), i + 1, keep.c_str(),
                 skip.c_str(), refs[i]["decoded"].dump().c_str(), refs[i]["decoded_skip"].dump().c_str());
      }
      if (skip != texts[i]) ++differs_from_text;
    }
    QCOMPARE(failures, 0);
    // Decoding gives the text back except where the normalizer changed it (Qwen 3 applies NFC:
    // 4 lines hold decomposed or compatibility characters, and HF decodes them composed).
    QCOMPARE(differs_from_text, name == "qwen3" ? 4 : 0);
  }

private Q_SLOTS:
  void qwen3_ids() { check_golden_ids("qwen3"); }
  void mistral_ids() { check_golden_ids("mistral"); }
  void qwen3_decode() { check_decode("qwen3"); }
  void mistral_decode() { check_decode("mistral"); }

  void vocabulary_and_special_tokens() {
    Tokenizer qwen = Tokenizer::load(golden("qwen3"));
    QCOMPARE(qwen.vocab_size(), size_t(151669));
    QCOMPARE(qwen.token_to_id("<|im_start|>").value(), 151644);
    QCOMPARE(qwen.id_to_token(151645).value(), std::string("<|im_end|>"));
    QCOMPARE(qwen.eos_id().value(), 151645);
    QVERIFY(!qwen.bos_id().has_value());
    QVERIFY(qwen.is_special(151643));
    QVERIFY(!qwen.token_to_id("no such token").has_value());
    Tokenizer mistral = Tokenizer::load(golden("mistral") + "/tokenizer.json");
    QCOMPARE(mistral.vocab_size(), size_t(32000));
    QCOMPARE(mistral.bos_id().value(), 1);
    QCOMPARE(mistral.eos_id().value(), 2);
    QCOMPARE(mistral.encode("Hi", true).front(), 1);
    QVERIFY(!mistral.chat_template().has_value());
  }

  void invalid_utf8_is_an_error() {
    Tokenizer tok = Tokenizer::load(golden("qwen3"));
    QVERIFY_THROWS_EXCEPTION(grpo::Error, tok.encode(std::string("ab\xff", 3)));
  }
};

QTEST_GUILESS_MAIN(TestTokenizer)
#include "test_tokenizer.moc"
