// Internal text helpers (UTF-8 sanitizing and bounded copies).
#pragma once

#include <agenthost/transport/utf8.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>

namespace agenthost::mapper::detail {

using transport::sanitize_utf8;

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
///
/// Ids of up to 16 bytes (Codex's "item_12", most of a run's lookups) are hashed inline from two overlapping loads
/// and a 64-bit mix (MurmurHash3's finalizer) instead of calling std::hash's out-of-line _Hash_bytes; longer ones use
/// std::hash. Not a defence against chosen collisions: the tables it serves are bounded (open calls, the last 1,024
/// closed ones).
struct string_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const {
    const std::size_t n = s.size();
    if (n > 16) return std::hash<std::string_view>{}(s);
    const char* p = s.data();
    std::uint64_t a = 0, b = 0;
    if (n >= 8) {
      std::memcpy(&a, p, 8);
      std::memcpy(&b, p + n - 8, 8);
    } else if (n >= 4) {
      std::uint32_t x = 0, y = 0;
      std::memcpy(&x, p, 4);
      std::memcpy(&y, p + n - 4, 4);
      a = x;
      b = y;
    } else if (n > 0) {
      a = static_cast<std::uint64_t>(static_cast<unsigned char>(p[0])) << 16 |
          static_cast<std::uint64_t>(static_cast<unsigned char>(p[n / 2])) << 8 |
          static_cast<unsigned char>(p[n - 1]);
    }
    std::uint64_t h = (a * 0x9E3779B97F4A7C15ULL) ^ ((b + n) * 0xC2B2AE3D27D4EB4FULL);
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDULL;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ULL;
    h ^= h >> 33;
    return static_cast<std::size_t>(h);
  }
};

/// The last non-empty line of `s` (without its newline), at most `max_bytes` bytes from its end.
std::string_view last_line(std::string_view s, std::size_t max_bytes = 400) noexcept;

}  // namespace agenthost::mapper::detail
