// Shared helpers of the fuzz targets. Plain C++ (no clang-only header): the same target sources are compiled with
// clang + libFuzzer (tests/fuzz/CMakeLists.txt) and with the project's compiler into replay programs
// (tests/fuzz/replay.cmake, replay_main.cpp) that run the committed regressions in the ordinary test suite.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace agenthost::fuzz {

/// Reads the fuzzer's bytes front to back; past the end it yields zeros / empty views.
class byte_reader {
 public:
  byte_reader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint8_t byte() { return pos_ < size_ ? data_[pos_++] : std::uint8_t{0}; }
  std::string_view take(std::size_t n) {
    if (n > size_ - pos_) n = size_ - pos_;
    std::string_view v(reinterpret_cast<const char*>(data_) + pos_, n);
    pos_ += n;
    return v;
  }
  std::string_view rest() { return take(size_ - pos_); }
  [[nodiscard]] std::size_t remaining() const { return size_ - pos_; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

/// A violated property: prints it and aborts, which libFuzzer (and the replay program) reports as a crash.
[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz property violated: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

#define AGENTHOST_FUZZ_CHECK(cond, what)                                                     \
  do {                                                                                       \
    if (!(cond)) ::agenthost::fuzz::fail(std::string(#cond) + " — " + std::string(what)); \
  } while (0)

/// AGENTHOST_FUZZ_STRICT=1 also checks the properties whose violation is a known, reported and not yet fixed bug
/// (each is named where it is tolerated). Off by default so that a fuzz run keeps looking for new problems.
inline bool strict() {
  static const bool s = [] {
    const char* v = std::getenv("AGENTHOST_FUZZ_STRICT");
    return v != nullptr && v[0] == '1';
  }();
  return s;
}

/// The lines of `text` (split at '\n'), each copied into its own exact-size allocation kept in `owned`: a fast path
/// that reads past the end of a line is then an ASan error, not a read of the next line.
inline std::vector<std::string_view> owned_lines(std::string_view text, std::vector<std::unique_ptr<char[]>>& owned) {
  std::vector<std::string_view> lines;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    const std::size_t n = nl - pos;
    owned.push_back(std::make_unique<char[]>(n == 0 ? 1 : n));
    std::copy_n(text.data() + pos, n, owned.back().get());
    lines.emplace_back(owned.back().get(), n);
    pos = nl + 1;
  }
  return lines;
}

inline std::string printable(std::string_view s, std::size_t max = 200) {
  std::string r;
  for (char c : s.substr(0, max)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '\\') {
      r += c;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      r += buf;
    }
  }
  if (s.size() > max) r += "…(" + std::to_string(s.size()) + " bytes)";
  return r;
}

}  // namespace agenthost::fuzz
