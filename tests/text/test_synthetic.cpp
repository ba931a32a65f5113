// Synthetic tokenizers (tests/text/data/synthetic, written by make_synthetic.py) exercising
// what the golden Qwen/Mistral files do not: Digits, Metaspace prepend_scheme "first", every
// Split behaviour and invert, Punctuation, Whitespace(Split), NFD/NFKC/Lowercase/Strip/Prepend/
// Replace normalizers, byte_fallback + fuse_unk, continuing_subword_prefix/end_of_word_suffix,
// added tokens with lstrip/rstrip/single_word/normalized, Template/Roberta post-processors and
// ByteLevel/Metaspace/ByteFallback/Fuse/Strip/Replace/BPEDecoder decoders. The expected ids
// and texts were produced by Hugging Face tokenizers' Rust core (npm tokenizers 0.23.2).
#include "tests/common/test_paths.h"
#include <QtTest/QtTest>

#include "core/text/tokenizer.h"
#include "tests/text/test_util.h"

using grpo::text::Tokenizer;
using namespace grpo::text::test;

class TestSynthetic : public QObject {
  Q_OBJECT

private Q_SLOTS:
  void matches_hugging_face_data() {
    QTest::addColumn<QString>("name");
    for (const char* n : {"byte_level", "metaspace_first", "split_behaviours", "whitespace_prepend"}) {
      QTest::newRow(n) << n;
    }
  }

  void matches_hugging_face() {
    QFETCH(QString, name);
    const std::string dir = std::string(GRPO_TEXT_TEST_DATA) + "/synthetic/";
    Tokenizer tok = Tokenizer::load(dir + name.toStdString() + ".json");
    auto texts = read_lines(dir + "texts.txt");
    auto refs = read_jsonl(dir + name.toStdString() + ".reference.jsonl");
    QCOMPARE(refs.size(), texts.size());
    int failures = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      const auto& r = refs[i];
      auto ids = tok.encode(texts[i], false);
      auto with_special = tok.encode(texts[i], true);
      auto expected_special = r["ids_with_special"].get<std::vector<int32_t>>();
      std::string decoded = tok.decode(expected_special, false);
      std::string decoded_skip = tok.decode(expected_special, true);
      bool ok = ids == r["ids"].get<std::vector<int32_t>>() && with_special == expected_special &&
                decoded == r["decoded"].get<std::string>() &&
                decoded_skip == r["decoded_skip"].get<std::string>();
      if (!ok) {
        ++failures;
        qWarning("line %zu %s\n  expected %s %s %s %s\n  got      %s %s %s %s", i + 1,
                 nlohmann::json(texts[i]).dump().c_str(), r["ids"].dump().c_str(),
                 r["ids_with_special"].dump().c_str(), r["decoded"].dump().c_str(),
                 r["decoded_skip"].dump().c_str(), show_ids(ids).c_str(), show_ids(with_special).c_str(),
                 nlohmann::json(decoded).dump().c_str(), nlohmann::json(decoded_skip).dump().c_str());
      }
    }
    QCOMPARE(failures, 0);
  }
};

QTEST_GUILESS_MAIN(TestSynthetic)
#include "test_synthetic.moc"
