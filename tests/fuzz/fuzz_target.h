// Shared by the fuzz targets: the libFuzzer entry point's contract. A parser of untrusted input
// may reject it only with grpo::Error (a clear message naming the input); any other exception
// escaping, a crash, a sanitizer report or a hang is a bug. FUZZ_BODY wraps a target's body so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "core/common/error.h"

#define FUZZ_BODY(...)                                                                       \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {                 \
    const std::string input(reinterpret_cast<const char*>(data), size);                      \
    try {                                                                                    \
      __VA_ARGS__                                                                            \
    } catch (const ::grpo::Error& e) {                                                       \
      /* a clear rejection: fine */                                                          \
    } catch (const std::exception& e) {                                                      \
      std::fprintf(stderr, "unexpected exception (not grpo::Error): %s\n", e.what());      \
      std::abort();                                                                          \
    }                                                                                        \
    return 0;                                                                                \
  }
