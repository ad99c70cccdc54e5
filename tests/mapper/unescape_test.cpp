// The string unescaping of the fast paths (mapper/src/unescape.cpp): 16-byte block copies through a stack
// buffer, escapes decoded in place. Checked against a plain decoder of the same rules on bodies whose escapes fall at
// every offset of a block and across the buffer's flushes, and on malformed input.
#include "unescape.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace detail = agenthost::mapper::detail;

namespace {

void put_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::optional<std::uint32_t> hex4(std::string_view s, std::size_t at) {
  if (at + 4 > s.size()) return std::nullopt;
  std::uint32_t v = 0;
  for (std::size_t i = at; i < at + 4; ++i) {
    const char c = s[i];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= static_cast<std::uint32_t>(c - '0');
    else if (c >= 'a' && c <= 'f') v |= static_cast<std::uint32_t>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= static_cast<std::uint32_t>(c - 'A' + 10);
    else return std::nullopt;
  }
  return v;
}

/// The lenient rules, byte by byte: the JSON escapes, surrogate pairs joined, lone surrogates as U+FFFD; every other
/// byte as is. nullopt for a malformed escape.
std::optional<std::string> reference_unescape(std::string_view body) {
  std::string out;
  for (std::size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\') {
      out += body[i];
      continue;
    }
    if (++i == body.size()) return std::nullopt;
    switch (body[i]) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        const auto cp = hex4(body, i + 1);
        if (!cp) return std::nullopt;
        i += 4;
        if (*cp >= 0xD800 && *cp <= 0xDBFF) {
          if (i + 2 < body.size() && body[i + 1] == '\\' && body[i + 2] == 'u') {
            const auto low = hex4(body, i + 3);
            if (low && *low >= 0xDC00 && *low <= 0xDFFF) {
              put_utf8(out, 0x10000 + ((*cp - 0xD800) << 10) + (*low - 0xDC00));
              i += 6;
              break;
            }
          }
          put_utf8(out, 0xFFFD);
        } else if (*cp >= 0xDC00 && *cp <= 0xDFFF) {
          put_utf8(out, 0xFFFD);
        } else {
          put_utf8(out, *cp);
        }
        break;
      }
      default:
        return std::nullopt;
    }
  }
  return out;
}

/// A string body (valid JSON string contents) of about `size` bytes: ASCII runs of every length, every escape kind
/// (pairs, lone surrogates), raw UTF-8.
std::string random_body(std::mt19937& rng, std::size_t size) {
  static const std::vector<std::string> pieces = {
      "\\n", "\\\"", "\\\\", "\\/", "\\t", "\\r", "\\b", "\\f", "\\u00e9", "\\u4F60", "\\ud83d\\ude00", "\\ud83d",
      "\\ude00", "\\u0000", "\xC3\xA9", "\xE4\xBD\xA0", "\xF0\x9F\x98\x80"};
  std::string body;
  while (body.size() < size) {
    if (std::uniform_int_distribution<int>(0, 2)(rng) == 0) {
      body += pieces[std::uniform_int_distribution<std::size_t>(0, pieces.size() - 1)(rng)];
    } else {
      const std::size_t run = std::uniform_int_distribution<std::size_t>(0, 40)(rng);
      for (std::size_t k = 0; k < run; ++k) body += static_cast<char>('a' + (body.size() + k) % 26);
    }
  }
  return body;
}

TEST(Unescape, AgreesWithAPlainDecoderAtEveryOffsetAndAcrossFlushes) {
  std::mt19937 rng(11);
  for (int round = 0; round < 400; ++round) {
    const std::size_t size =
        round < 100 ? static_cast<std::size_t>(round) : std::uniform_int_distribution<std::size_t>(0, 3000)(rng);
    const std::string body = random_body(rng, size);
    const auto expected = reference_unescape(body);
    ASSERT_TRUE(expected.has_value()) << body;

    std::string appended = "kept:";
    ASSERT_TRUE(detail::lenient_unescape_append(body, appended)) << body;
    EXPECT_EQ(appended, "kept:" + *expected) << body;

    std::string whole;
    ASSERT_TRUE(detail::lenient_unescape("\"" + body + "\"  ", whole)) << body;
    EXPECT_EQ(whole, *expected);

    // Into a buffer exactly as long as the body (the documented room), with a guard after it that must stay intact.
    std::vector<char> buffer(body.size() + 32, '#');
    char* const out_end = detail::lenient_unescape_to(body, buffer.data());
    ASSERT_NE(out_end, nullptr);
    EXPECT_EQ(std::string(buffer.data(), out_end), *expected);
    EXPECT_EQ(std::string(buffer.begin() + static_cast<std::ptrdiff_t>(body.size()), buffer.end()),
              std::string(32, '#'))
        << "wrote past the body's length";

    const std::string quoted = "\"" + body + "\",\"next\":1}";
    const char* const qend = quoted.data() + quoted.size();
    const char* const after = quoted.data() + body.size() + 2;
    std::string scanned = "x";
    EXPECT_EQ(detail::scan_unescape_append(quoted.data(), qend, scanned), after);
    EXPECT_EQ(scanned, "x" + *expected);
    std::string_view view;
    std::string view_buffer;
    EXPECT_EQ(detail::scan_string_view(quoted.data(), qend, view, view_buffer), after);
    EXPECT_EQ(view, *expected);
    // From inside a body, where one of its pieces ends (the head's text is already in the output).
    const std::string tail = "Z" + random_body(rng, size / 3);
    const std::string joined = "\"" + body + tail + "\"}";
    std::string rest = *expected;
    EXPECT_EQ(detail::unescape_string_rest(joined.data() + 1 + body.size(), joined.data() + joined.size(), rest),
              joined.data() + joined.size() - 1);
    EXPECT_EQ(rest, *expected + *reference_unescape(tail));
  }
}

TEST(Unescape, RejectsMalformedEscapesAndUnclosedOrControlCharacterStrings) {
  std::mt19937 rng(5);
  for (int round = 0; round < 200; ++round) {
    const std::string head = random_body(rng, static_cast<std::size_t>(round) * 7 % 1500);
    for (const std::string bad : {"\\x", "\\u12", "\\u12g4", "\\"}) {
      const std::string body = head + bad;
      std::string out;
      EXPECT_FALSE(detail::lenient_unescape_append(body, out)) << bad;
      std::vector<char> buffer(body.size() + 1);
      EXPECT_EQ(detail::lenient_unescape_to(body, buffer.data()), nullptr) << bad;
      const std::string quoted = "\"" + body + (bad == "\\" ? "" : "\"");
      out.clear();
      EXPECT_EQ(detail::scan_unescape_append(quoted.data(), quoted.data() + quoted.size(), out), nullptr) << bad;
    }
    const std::string unclosed = "\"" + head;
    std::string out;
    EXPECT_EQ(detail::scan_unescape_append(unclosed.data(), unclosed.data() + unclosed.size(), out), nullptr);
    const std::string control = "\"" + head + "\x01" + "tail\"";
    out.clear();
    EXPECT_EQ(detail::scan_unescape_append(control.data(), control.data() + control.size(), out), nullptr);
    const std::string escaped_control = "\"" + head + "\\\x01" + "tail\"";
    out.clear();
    const char* const escaped_end = escaped_control.data() + escaped_control.size();
    EXPECT_EQ(detail::scan_unescape_append(escaped_control.data(), escaped_end, out), nullptr);
  }
}

TEST(Unescape, ABodyWithRawControlCharactersIsCopiedAsIs) {
  // lenient_unescape_to / _append take bodies On-Demand validated; only escapes are special there.
  const std::string body = std::string("a\x01") + "b\\n" + std::string(40, '\x1f') + "\\u00e9";
  std::string out;
  ASSERT_TRUE(detail::lenient_unescape_append(body, out));
  EXPECT_EQ(out, *reference_unescape(body));
}

}  // namespace
