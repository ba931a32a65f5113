// Tests for core/io safetensors: round trips of every dtype, the golden Hugging Face files (read,
// and re-written byte for byte), and one test per validation rule of docs/formats.md, "Validation
// rules" (numbered 1-12 there), each checking that the error names the file and the specific
// problem.
#include "tests/common/test_paths.h"
#include <QtTest>

#include <cstring>
#include <functional>
#include <random>

#include "tests/common/error_of.h"
#include "core/common/error.h"
#include "core/common/files.h"
#include "core/io/safetensors.h"

using namespace grpo::io;

namespace {

const std::string kModels = std::string(GRPO_TEST_DATA) + "/golden/models/";
constexpr DType kAllDTypes[] = {DType::BOOL, DType::U8,   DType::I8,  DType::F8_E5M2, DType::F8_E4M3,
                                DType::I16,  DType::U16,  DType::F16, DType::BF16,    DType::I32,
                                DType::U32,  DType::F32,  DType::F64, DType::I64,     DType::U64};

// A file image: 8-byte little-endian length, header, data. `claimed` overrides the length.
std::string image(const std::string& header, const std::string& data = {}, int64_t claimed = -1) {
  uint64_t n = claimed < 0 ? header.size() : static_cast<uint64_t>(claimed);
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out + header + data;
}

using grpo::testing::error_of;

// The error from validating `header` + `data` as "bad.safetensors".
std::string bad(const std::string& header, const std::string& data = {}) {
  return error_of([&] { SafetensorsFile::from_bytes(image(header, data), "bad.safetensors"); });
}

bool contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

}  // namespace

// Every needle must occur in the message; the message must name the file.
#define CHECK_ERROR(msg, ...) CHECK_ERROR_CONTAINS(msg, "bad.safetensors", __VA_ARGS__)

class TestSafetensors : public QObject {
  Q_OBJECT
private Q_SLOTS:
  // ---- round trips ----
  void roundTripEveryDtypeIncludingZeroSizeAndScalars() {
    struct Made { TensorView view; std::string bytes; };
    std::vector<Made> made;
    for (DType d : kAllDTypes) {
      for (const std::vector<int64_t>& shape : {std::vector<int64_t>{2, 3}, {0, 5}, {}}) {
        Made m;
        m.view.name = std::string(dtype_name(d)) + (shape.empty() ? ".scalar" : shape[0] ? ".mat" : ".empty");
        m.view.dtype = d;
        m.view.shape = shape;
        int64_t numel = 1;
        for (int64_t x : shape) numel *= x;
        for (size_t i = 0; i < numel * dtype_size(d); ++i) m.bytes.push_back(static_cast<char>(i * 7 + int(d)));
        made.push_back(std::move(m));
      }
    }
    std::vector<TensorView> views;
    for (Made& m : made) {
      m.view.data = m.bytes.data();
      m.view.nbytes = m.bytes.size();
      views.push_back(m.view);
    }
    const std::string bytes = serialize_safetensors(views, {{"format", "pt"}});
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    QCOMPARE(n % 8, uint64_t(0));  // header padded to a multiple of 8

    QTemporaryDir dir;
    const std::string path = grpo::path_join(dir.path().toStdString(), "all.safetensors");
    write_safetensors(path, views, {{"format", "pt"}});
    QCOMPARE(grpo::read_file(path), bytes);

    for (const SafetensorsFile& f : {SafetensorsFile::from_bytes(bytes, "mem"), SafetensorsFile::open(path)}) {
      QCOMPARE(f.tensors().size(), made.size());
      QCOMPARE(f.metadata().at("format"), std::string("pt"));
      for (const Made& m : made) {
        const TensorInfo& t = f.at(m.view.name);
        QCOMPARE(t.dtype, m.view.dtype);
        QCOMPARE(t.shape, m.view.shape);
        QCOMPARE(t.nbytes(), uint64_t(m.bytes.size()));
        QCOMPARE(t.numel(), int64_t(m.bytes.size() / dtype_size(t.dtype)));
        QVERIFY(std::memcmp(f.data(t), m.bytes.data(), m.bytes.size()) == 0);
        QCOMPARE(t.begin % dtype_size(t.dtype), uint64_t(0));  // aligned within the buffer
      }
      // The reference writer's order: dtype (alignment) descending, then name.
      for (size_t i = 1; i < f.tensors().size(); ++i) {
        const TensorInfo &a = f.tensors()[i - 1], &b = f.tensors()[i];
        QVERIFY(a.dtype > b.dtype || (a.dtype == b.dtype && a.name < b.name));
      }
      // Serializing what we read gives the same bytes again.
      std::vector<TensorView> again;
      for (const TensorInfo& t : f.tensors()) again.push_back({t.name, t.dtype, t.shape, f.data(t), t.nbytes()});
      QCOMPARE(serialize_safetensors(again, f.metadata()), bytes);
    }
  }

  void emptyFileAndIntegersWithoutExponent() {
    auto empty = SafetensorsFile::from_bytes(serialize_safetensors({}), "empty");
    QVERIFY(empty.tensors().empty());
    std::string big(3'000'000, '\x01');
    std::string bytes = serialize_safetensors({{"big", DType::U8, {3'000'000}, big.data(), big.size()}});
    QVERIFY(contains(bytes, "\"shape\":[3000000],\"data_offsets\":[0,3000000]"));
    QVERIFY(!contains(bytes.substr(0, 100), "e+"));
    auto f = SafetensorsFile::from_bytes(bytes, "big");
    QCOMPARE(f.at("big").nbytes(), uint64_t(3'000'000));
  }

  void zeroSizeTensorsMayShareAnOffset() {
    auto f = SafetensorsFile::from_bytes(
        image(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
              R"("b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
              R"("c":{"dtype":"I64","shape":[0,3],"data_offsets":[4,4]}})",
              std::string(4, '\0')),
        "zero.safetensors");
    QCOMPARE(f.tensors().size(), size_t(3));
    QCOMPARE(f.at("c").numel(), int64_t(0));
  }

  void writerRejectsBadInput() {
    float x[4] = {};
    auto err = error_of([&] { serialize_safetensors({{"x", DType::F32, {2, 2}, x, 12}}); });
    QVERIFY2(contains(err, "tensor \"x\"") && contains(err, "12 bytes given, expected 16"), err.c_str());
    err = error_of([&] { serialize_safetensors({{"x", DType::F32, {1}, x, 4}, {"x", DType::F32, {1}, x, 4}}); });
    QVERIFY2(contains(err, "duplicate tensor name"), err.c_str());
    err = error_of([&] { serialize_safetensors({{"x", DType::F32, {-1}, x, 4}}); });
    QVERIFY2(contains(err, "negative"), err.c_str());
  }

  // ---- golden Hugging Face files ----
  void goldenQwen2IsBf16WithoutLmHead() {
    auto f = SafetensorsFile::open(kModels + "qwen2-tied-bf16/model.safetensors");
    QCOMPARE(f.tensors().size(), size_t(26));
    QCOMPARE(f.metadata().at("format"), std::string("pt"));
    QVERIFY(f.find("lm_head.weight") == nullptr);
    for (const TensorInfo& t : f.tensors()) QCOMPARE(t.dtype, DType::BF16);
    const TensorInfo& emb = f.at("model.embed_tokens.weight");
    QCOMPARE(emb.shape, (std::vector<int64_t>{300, 64}));
    QVERIFY(f.find("model.layers.1.self_attn.q_proj.bias") != nullptr);
    QCOMPARE(reinterpret_cast<uintptr_t>(f.data(emb)) % 8, uintptr_t(0));
  }

  void goldenLlamaIsF32WithLmHead() {
    auto f = SafetensorsFile::open(kModels + "llama-untied-f32/model.safetensors");
    QCOMPARE(f.tensors().size(), size_t(21));
    for (const TensorInfo& t : f.tensors()) QCOMPARE(t.dtype, DType::F32);
    QCOMPARE(f.at("lm_head.weight").shape, (std::vector<int64_t>{300, 64}));
    QCOMPARE(f.at("model.layers.0.mlp.down_proj.weight").shape, (std::vector<int64_t>{64, 128}));
    QVERIFY(f.find("model.layers.0.self_attn.q_proj.bias") == nullptr);
    const auto* w = reinterpret_cast<const float*>(f.data(f.at("model.norm.weight")));
    for (int i = 0; i < 64; ++i) QVERIFY(std::isfinite(w[i]));
  }

  void goldenFilesRewriteByteForByte() {
    for (const char* rel : {"qwen2-tied-bf16/model.safetensors", "llama-untied-f32/model.safetensors",
                            "qwen2-tied-bf16-lora-r4/adapter_model.safetensors"}) {
      auto f = SafetensorsFile::open(kModels + rel);
      std::vector<TensorView> views;
      for (const TensorInfo& t : f.tensors()) views.push_back({t.name, t.dtype, t.shape, f.data(t), t.nbytes()});
      QVERIFY2(serialize_safetensors(views, f.metadata()) == grpo::read_file(kModels + rel), rel);
    }
  }

  void atNamesFileAndTensorWithSuggestion() {
    auto f = SafetensorsFile::open(kModels + "llama-untied-f32/model.safetensors");
    auto err = error_of([&] { f.at("model.norm.weigth"); });
    QVERIFY2(contains(err, "model.safetensors: tensor \"model.norm.weigth\": not in this file"), err.c_str());
    QVERIFY2(contains(err, "did you mean \"model.norm.weight\""), err.c_str());
  }

  // Random byte edits and truncations of a real file: each is either valid or a grpo::Error.
  void corruptionsThrowOnlyGrpoErrors() {
    const std::string good = grpo::read_file(kModels + "qwen2-tied-bf16-lora-r4/adapter_model.safetensors");
    uint64_t n = 0;
    std::memcpy(&n, good.data(), 8);
    std::mt19937_64 rng(42);
    int rejected = 0;
    for (int i = 0; i < 3000; ++i) {
      std::string b = good.substr(0, i % 10 == 0 ? rng() % good.size() : good.size());
      for (int k = 0, edits = 1 + rng() % 3; k < edits && !b.empty(); ++k)
        b[rng() % std::min<uint64_t>(b.size(), 8 + n)] = static_cast<char>(rng());
      try {
        auto f = SafetensorsFile::from_bytes(b, "fuzz.safetensors");
        uint64_t total = 0;  // touch every byte (AddressSanitizer would flag a read out of bounds)
        for (const TensorInfo& t : f.tensors())
          for (uint64_t j = 0; j < t.nbytes(); ++j) total += f.data(t)[j];
        QVERIFY(total < (uint64_t(1) << 40));
      } catch (const grpo::Error& e) {
        QVERIFY2(contains(e.what(), "fuzz.safetensors"), e.what());
        ++rejected;
      }
    }
    QVERIFY(rejected > 1000);
  }

  // ---- one test per malformed-file rule ----
  void truncatedLengthPrefix() {
    CHECK_ERROR(error_of([] { SafetensorsFile::from_bytes(std::string("\x10\0\0\0\0", 5), "bad.safetensors"); }),
                "file is 5 bytes, too short for the 8-byte header length");
    QTemporaryDir dir;
    const std::string path = grpo::path_join(dir.path().toStdString(), "bad.safetensors");
    grpo::write_file_atomic(path, "abc");
    CHECK_ERROR(error_of([&] { SafetensorsFile::open(path); }), path, "file is 3 bytes");
  }
  void headerLengthPastEof() {
    CHECK_ERROR(error_of([] { SafetensorsFile::from_bytes(image("{}", "", 1000), "bad.safetensors"); }),
                "header length 1000 runs past the end of the file (file is 10 bytes");
  }
  void headerOver100MbClaimed() {
    CHECK_ERROR(error_of([] { SafetensorsFile::from_bytes(image("{}", "", 200'000'000), "bad.safetensors"); }),
                "header length 200000000 exceeds the 100 MB limit");
  }
  void headerNotJson() { CHECK_ERROR(bad("{not json}"), "header is not valid UTF-8 JSON"); }
  void headerNotUtf8() { CHECK_ERROR(bad("{\"\xff\xfe\":1}"), "header is not valid UTF-8 JSON"); }
  void trailingGarbageAfterJson() { CHECK_ERROR(bad("{} x"), "header is not valid UTF-8 JSON"); }
  void headerNotObject() { CHECK_ERROR(bad("[1,2,3]"), "header must be a JSON object, got array"); }
  void entryNotObject() { CHECK_ERROR(bad(R"({"x":5})"), "tensor \"x\"", "entry must be an object"); }
  void missingField() {
    CHECK_ERROR(bad(R"({"x":{"dtype":"F32","shape":[1]}})"), "tensor \"x\"", "missing \"data_offsets\"");
  }
  void unknownDtype() {
    CHECK_ERROR(bad(R"({"x":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", "abcd"),
                "tensor \"x\"", "unknown dtype \"F33\"", "did you mean F32", "BF16");
  }
  void dtypeNotString() {
    CHECK_ERROR(bad(R"({"x":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", "abcd"),
                "tensor \"x\"", "\"dtype\" must be a string, got number");
  }
  void negativeShape() {
    CHECK_ERROR(bad(R"({"x":{"dtype":"F32","shape":[2,-1],"data_offsets":[0,0]}})"), "tensor \"x\"",
                "\"shape\" [2,-1]: element 1 is negative number -1, expected a non-negative integer");
  }
  void nonIntegerShape() {
    CHECK_ERROR(bad(R"({"x":{"dtype":"F32","shape":[2,2.5],"data_offsets":[0,20]}})"), "tensor \"x\"",
                "element 1 is number 2.5, expected a non-negative integer");
    CHECK_ERROR(bad(R"({"x":{"dtype":"F32","shape":"2","data_offsets":[0,8]}})"), "tensor \"x\"",
                "\"shape\" must be an array of non-negative integers");
  }
  void offsetsMalformed() {
    CHECK_ERROR(bad(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0]}})"), "tensor \"x\"",
                "\"data_offsets\" must hold exactly 2 integers");
    CHECK_ERROR(bad(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})"), "tensor \"x\"",
                "data_offsets [8,4]: begin is after end");
    CHECK_ERROR(bad(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,-4]}})"), "tensor \"x\"",
                "element 1 is negative number -4");
  }
  void offsetsDisagreeWithShape() {
    QCOMPARE(bad(R"({"x":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})", std::string(12, 'a')),
             std::string("bad.safetensors: tensor \"x\": data_offsets [0,12] hold 12 bytes, expected 16 "
                         "(F32, shape [2,2])"));
  }
  void hugeShapeOverflows() {
    CHECK_ERROR(bad(R"({"x":{"dtype":"F64","shape":[4294967296,4294967296,16],"data_offsets":[0,0]}})"),
                "tensor \"x\"", "shape [4294967296,4294967296,16] has too many elements");
    CHECK_ERROR(bad(R"({"x":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,0]}})"),
                "tensor \"x\"", "expected a non-negative integer");
  }
  void overlappingBuffers() {
    CHECK_ERROR(bad(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                    R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
                    std::string(24, 'a')),
                "tensor \"b\": data_offsets [8,24] overlap tensor \"a\" [0,16]");
  }
  void gapBetweenBuffers() {
    CHECK_ERROR(bad(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                    R"("b":{"dtype":"F32","shape":[4],"data_offsets":[20,36]}})",
                    std::string(36, 'a')),
                "tensor \"b\": data_offsets [20,36] leave a gap of 4 bytes after tensor \"a\"", "contiguous");
    CHECK_ERROR(bad(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[4,20]}})", std::string(20, 'a')),
                "tensor \"a\"", "gap of 4 bytes after the start of the data section");
  }
  void duplicateKeys() {
    CHECK_ERROR(bad(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                    R"("x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                    std::string(8, 'a')),
                "duplicate key \"x\" in header");
    CHECK_ERROR(bad(R"({"x":{"dtype":"F32","dtype":"I32","shape":[1],"data_offsets":[0,4]}})", "abcd"),
                "duplicate key \"dtype\" inside \"x\"");
    CHECK_ERROR(bad(R"({"__metadata__":{"format":"pt","format":"np"}})"),
                "duplicate key \"format\" inside \"__metadata__\"");
  }
  void incompleteBuffer() {
    CHECK_ERROR(bad(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::string(6, 'a')),
                "tensors end at byte 4 but the data section holds 6 bytes (MetadataIncompleteBuffer)");
    CHECK_ERROR(bad(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", std::string(6, 'a')),
                "tensor \"x\" ends at byte 8 of the data section, which holds only 6 bytes", "truncated");
  }
  void metadataMustBeStringToString() {
    CHECK_ERROR(bad(R"({"__metadata__":{"format":"pt","step":3}})"),
                "__metadata__[\"step\"] must be a string, got number");
    CHECK_ERROR(bad(R"({"__metadata__":["pt"]})"), "__metadata__ must be an object of string to string");
  }
};

QTEST_GUILESS_MAIN(TestSafetensors)
#include "test_safetensors.moc"
