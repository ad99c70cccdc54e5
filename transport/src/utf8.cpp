// sanitize_utf8 (see agenthost/transport/utf8.hpp).
#include <agenthost/transport/utf8.hpp>

#include <cstdint>

namespace agenthost::transport {
namespace {

/// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is invalid.
std::size_t utf8_sequence(std::string_view s, std::size_t i) noexcept {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return 1;
  std::size_t len = 0;
  std::uint32_t cp = 0;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2;
    cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3;
    cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4;
    cp = b0 & 0x07;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  // Overlong forms, surrogates and values beyond U+10FFFF are invalid.
  if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
      (cp >= 0xD800 && cp <= 0xDFFF)) {
    return 0;
  }
  return len;
}

}  // namespace

std::string sanitize_utf8(std::string_view s, std::size_t max_bytes) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  static constexpr std::string_view kEllipsis = "\xE2\x80\xA6";
  std::string out;
  out.reserve(s.size() < max_bytes ? s.size() : max_bytes);
  std::size_t i = 0;
  while (i < s.size()) {
    const std::size_t len = utf8_sequence(s, i);
    const std::string_view piece = len == 0 ? kReplacement : s.substr(i, len);
    if (out.size() + piece.size() > max_bytes) {
      out += kEllipsis;
      return out;
    }
    out += piece;
    i += len == 0 ? 1 : len;
  }
  return out;
}

}  // namespace agenthost::transport
