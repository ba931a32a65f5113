// Replays fuzz inputs through a target without libFuzzer: the regression test the normal build
// runs over tests/fuzz/corpus/<target>/ (seeds plus every crash ever found, kept forever).
// Usage: fuzz_replay_<target> FILE_OR_DIR...   Exits non-zero when given nothing to replay; a
// failing input aborts (and ctest shows which file was last announced).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path p(argv[i]);
    if (std::filesystem::is_directory(p)) {
      for (const auto& e : std::filesystem::recursive_directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
    } else if (std::filesystem::is_regular_file(p)) {
      files.push_back(p);
    } else {
      std::fprintf(stderr, "error: %s: no such file or directory\n", argv[i]);
      return 2;
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "error: no inputs to replay (usage: %s FILE_OR_DIR...)\n", argv[0]);
    return 2;
  }
  for (const auto& f : files) {
    std::fprintf(stderr, "replaying %s\n", f.c_str());
    std::ifstream in(f, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("replayed %zu inputs\n", files.size());
  return 0;
}
