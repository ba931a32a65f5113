// Fuzz target: the safetensors reader (header JSON, offsets, dtypes, shapes; docs/formats.md,
// "Validation rules").
#include "core/io/safetensors.h"
#include "tests/fuzz/fuzz_target.h"

FUZZ_BODY({
  auto f = grpo::io::SafetensorsFile::from_bytes(input, "fuzz.safetensors");
  uint64_t sum = 0;
  for (const auto& t : f.tensors()) {
    const uint8_t* p = f.data(t);
    if (t.nbytes() > 0) sum += p[0] + p[t.nbytes() - 1];  // every byte range must be inside
    (void)t.numel();
    (void)f.at(t.name);
  }
  for (const auto& n : f.names()) (void)f.find(n);
  (void)sum;
})
