// Runs a fuzz target without libFuzzer (any compiler): every corpus file as
// is, then a fixed number of deterministic mutations of each (byte flips,
// truncations, duplicated and deleted spans). Linked into the ctest replays
// `fuzz.config_replay` and `fuzz.api_<family>_replay` (one per API target).
//
//   kvpool_config_fuzz_replay MUTATIONS_PER_FILE FILE...
//   kvpool_api_fuzz_replay_<family> MUTATIONS_PER_FILE FILE...
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void run(const std::string& input) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

std::string mutate(std::string s, std::mt19937_64& rng) {
  const char* interesting[] = {"{", "}", "[", "]", ",", ":", "\"", "-1", "0", "1e308", "null", "true", "4096",
                               "\"fp4_e2m1\"", "\"swa\"", "\"hybrid_linear\"", "\"nsa\"", "\"mla\"", "65536"};
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits && !s.empty(); ++e) {
    const size_t at = rng() % s.size();
    switch (rng() % 5) {
      case 0: s[at] = static_cast<char>(rng()); break;                                // flip a byte
      case 1: s.resize(at); break;                                                     // truncate
      case 2: s.erase(at, 1 + rng() % 8); break;                                       // delete a span
      case 3: s.insert(at, s.substr(at, 1 + rng() % 16)); break;                       // duplicate a span
      default: s.insert(at, interesting[rng() % (sizeof(interesting) / sizeof(*interesting))]); break;
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MUTATIONS_PER_FILE FILE...\n", argv[0]);
    return 2;
  }
  const long mutations = std::strtol(argv[1], nullptr, 10);
  std::mt19937_64 rng(20261121);  // fixed seed: failures reproduce
  long runs = 0;
  for (int i = 2; i < argc; ++i) {
    std::ifstream file(argv[i], std::ios::binary);
    if (!file) {
      std::fprintf(stderr, "cannot read %s\n", argv[i]);
      return 1;
    }
    std::stringstream text;
    text << file.rdbuf();
    run(text.str());
    for (long m = 0; m < mutations; ++m, ++runs) run(mutate(text.str(), rng));
  }
  std::printf("ran %ld mutated inputs over %d files without a crash\n", runs, argc - 2);
  return 0;
}
