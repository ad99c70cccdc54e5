// Internal text helpers (UTF-8 sanitizing and bounded copies).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace agenthost::mapper::detail {

/// Copy `s`, replacing invalid UTF-8 with U+FFFD, keeping at most `max_bytes` bytes (cut on a character boundary;
/// "…" is appended when something was cut).
std::string sanitize_utf8(std::string_view s, std::size_t max_bytes = std::string::npos);

/// Length of the common prefix of a and b, in bytes.
inline std::size_t common_prefix(std::string_view a, std::string_view b) noexcept {
  const std::size_t n = a.size() < b.size() ? a.size() : b.size();
  std::size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

/// Transparent hash for the mappers' tables of ids: looked up by the event's string_view without building a
/// std::string. Deliberately not noexcept: libstdc++ caches the hash code in each node only for hashers that are not
/// both "fast" and noexcept, and without the cache every lookup recomputes the hash of each node it passes and
/// compares its key (a fifth of the Codex mapper's time on 50,000 events went to _Hash_bytes and memcmp).
struct string_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

/// The last non-empty line of `s` (without its newline), at most `max_bytes` bytes from its end.
std::string_view last_line(std::string_view s, std::size_t max_bytes = 400) noexcept;

}  // namespace agenthost::mapper::detail
