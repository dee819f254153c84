// SPDX-License-Identifier: Apache-2.0
// A driver for builds without libFuzzer: replays every corpus file, then N seeded mutations of
// them (byte flips, truncations, splices), so the fuzz target runs in every test run.
// Usage: fuzz_config <corpus-dir> <mutations>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s <corpus-dir> <mutations>\n", argv[0]);
    return 2;
  }
  std::vector<std::string> corpus;
  for (const auto& e : std::filesystem::directory_iterator(argv[1])) {
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    corpus.push_back(ss.str());
  }
  if (corpus.empty()) {
    std::fprintf(stderr, "empty corpus in %s\n", argv[1]);
    return 2;
  }
  for (const auto& c : corpus)
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(c.data()), c.size());
  std::mt19937 rng(12345);
  long n = std::atol(argv[2]);
  for (long i = 0; i < n; ++i) {
    std::string s = corpus[rng() % corpus.size()];
    int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      size_t at = rng() % s.size();
      switch (rng() % 4) {
        case 0:
          s[at] = static_cast<char>(rng());
          break;
        case 1:
          s.resize(at);
          break;
        case 2:
          s.insert(at, corpus[rng() % corpus.size()]);
          break;
        case 3:
          s.insert(at, 1, "{}[]\",:0\\"[rng() % 9]);
          break;
      }
    }
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  }
  std::printf("%zu corpus inputs and %ld mutations parsed without a crash\n", corpus.size(), n);
  return 0;
}
