// Where a test finds the source tree's files and the built `grpo` CLI.
//
// The absolute paths are compiled into one small library (test_paths.cpp, target
// grpo_test_paths) and into no test's own compile line: ccache keys an object on its compiler
// arguments, and a -D holding an absolute path tied every test's entry to one clone of the tree,
// so a CI run in a fresh clone recompiled every test however warm the cache was.
#pragma once

namespace grpo_test {
const char* test_data();       // tests/data: golden files from the reference tools
const char* resources();       // resources/: the demo model, presets, reward examples
const char* bench_dir();       // tests/bench: benchmark inputs and baselines
const char* text_test_data();  // tests/text/data: synthetic tokenizers and chat references
const char* run_test_data();   // tests/run/data: the demo model's reference ids
const char* cli();             // the built grpo CLI, for tests that drive it as a user would
}  // namespace grpo_test

#define GRPO_TEST_DATA ::grpo_test::test_data()
#define GRPO_RESOURCES ::grpo_test::resources()
#define GRPO_BENCH_DIR ::grpo_test::bench_dir()
#define GRPO_TEXT_TEST_DATA ::grpo_test::text_test_data()
#define GRPO_RUN_TEST_DATA ::grpo_test::run_test_data()
#define GRPO_CLI ::grpo_test::cli()
