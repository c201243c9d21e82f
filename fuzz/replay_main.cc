// The replay driver of the GCC build: runs a fuzz target's LLVMFuzzerTestOneInput over files,
// without libFuzzer, so that every seed and every crash regression input of fuzz/corpus/ runs
// in ctest on every CI run. Arguments: files or directories (every regular file below them, in
// name order). Exits non-zero when it was given nothing to run; a crash is the target's own
// abort.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::vector<std::filesystem::path> inputsOf(const std::filesystem::path& arg) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  if (std::filesystem::is_directory(arg, ec)) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(arg, ec)) {
      if (entry.is_regular_file()) out.push_back(entry.path());
    }
    std::sort(out.begin(), out.end());
  } else if (std::filesystem::is_regular_file(arg, ec)) {
    out.push_back(arg);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  size_t runs = 0;
  for (int i = 1; i < argc; ++i) {
    for (const auto& path : inputsOf(argv[i])) {
      std::ifstream in(path, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (!in.good() && !in.eof()) {
        std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
        return 1;
      }
      // A copy the size of the input exactly, so that ASan (when on) sees reads past its end.
      std::vector<uint8_t> data(bytes.begin(), bytes.end());
      LLVMFuzzerTestOneInput(data.data(), data.size());
      ++runs;
    }
  }
  if (runs == 0) {
    std::fprintf(stderr, "replay: no inputs found (arguments: files or directories)\n");
    return 1;
  }
  std::fprintf(stderr, "replay: %zu inputs ran\n", runs);
  return 0;
}
