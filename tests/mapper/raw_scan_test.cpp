// The byte comparisons the fast paths are built on (mapper/src/raw_scan.hpp): the word-wise compare of long literals
// and of runtime lengths must agree with memcmp for every length and every position of a difference.
#include "raw_scan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace raw = agenthost::mapper::detail::raw;

namespace {

// A literal of each interesting length class: < 8 (memcmp), 8, 9–15, 16, a multiple of 8, and 57–72 like Claude's.
constexpr char k7[] = R"({"type")";
constexpr char k8[] = R"({"type":)";
constexpr char k13[] = R"(,"uuid":null})";
constexpr char k16[] = R"({"type":"error",)";
constexpr char k32[] = R"({"type":"item.completed","item")";
constexpr char k68[] = R"({"type":"stream_event","event":{"type":"content_block_delta","index":)";

template <std::size_t N>
void expect_literal_compare(const char (&lit)[N]) {
  const std::string exact(lit, N - 1);
  const std::string longer = exact + R"(0,"x":1})";
  EXPECT_TRUE(raw::starts_with(exact.data(), exact.data() + exact.size(), lit)) << exact;
  EXPECT_TRUE(raw::starts_with(longer.data(), longer.data() + longer.size(), lit)) << exact;
  // One byte short: never read past the end, always false.
  EXPECT_FALSE(raw::starts_with(exact.data(), exact.data() + exact.size() - 1, lit)) << exact;
  for (std::size_t i = 0; i < exact.size(); ++i) {
    std::string changed = longer;
    changed[i] = static_cast<char>(changed[i] ^ 0x20);
    EXPECT_FALSE(raw::starts_with(changed.data(), changed.data() + changed.size(), lit)) << exact << " at " << i;
    const char* p = changed.data();
    EXPECT_FALSE(raw::consume(p, changed.data() + changed.size(), lit));
    EXPECT_EQ(p, changed.data()) << "consume moved on a mismatch";
  }
  const char* p = longer.data();
  EXPECT_TRUE(raw::consume(p, longer.data() + longer.size(), lit));
  EXPECT_EQ(p, longer.data() + (N - 1));
}

}  // namespace

TEST(RawScan, LiteralsOfEveryLengthClassCompareLikeMemcmp) {
  expect_literal_compare(k7);
  expect_literal_compare(k8);
  expect_literal_compare(k13);
  expect_literal_compare(k16);
  expect_literal_compare(k32);
  expect_literal_compare(k68);
}

TEST(RawScan, EqualBytesFindsADifferenceAtEveryPositionOfEveryLength) {
  const std::string base = "0123456789abcdef-0123456789ABCDEF-session-id-like-bytes-0123456789";
  for (std::size_t n = 0; n <= base.size(); ++n) {
    const std::string a = base.substr(0, n);
    std::string b = a;
    EXPECT_TRUE(raw::equal_bytes(a.data(), b.data(), n)) << n;
    for (std::size_t i = 0; i < n; ++i) {
      b[i] = static_cast<char>(b[i] ^ 0x01);
      EXPECT_FALSE(raw::equal_bytes(a.data(), b.data(), n)) << "length " << n << ", difference at " << i;
      b[i] = a[i];
    }
  }
}

TEST(RawScan, SkipSmallIntAcceptsWhatParseSmallIntAcceptsAndEndsWhereItEnds) {
  const std::string cases[] = {
      "0", "7", "-7", "42,", "1796011996448}", "1796011996448]", "12 ", "123456789012345678", "-123456789012345678",
      // rejected by both: too long, leading zero, -0, no digits, a fraction, an exponent, no delimiter after it
      "1234567890123456789", "01", "-0", "-", "", "x", "1.5", "1e3", "12a", "-01", "+1", "--1"};
  for (const std::string& c : cases) {
    const char* end = c.data() + c.size();
    std::int64_t value = 0;
    const char* parsed = raw::parse_small_int(c.data(), end, value);
    EXPECT_EQ(raw::skip_small_int(c.data(), end), parsed) << '"' << c << '"';
  }
  // Both accept 18 digits and stop before the delimiter; both refuse a 19th digit (the On-Demand path decides).
  const std::string ts = R"(1796011996448,"sessionID")";
  EXPECT_EQ(raw::skip_small_int(ts.data(), ts.data() + ts.size()), ts.data() + 13);
}

TEST(RawScan, LeadingDigits8StopsAtTheFirstByteThatIsNotADigit) {
  // Every byte value after k digits, followed by bytes that carry when 6 is added (0xFF) or by more digits: the count
  // is the run of digits from the start, whatever comes after the first other byte.
  for (std::size_t k = 0; k <= 8; ++k) {
    for (int b = 0; b < 256; ++b) {
      for (const char fill : {static_cast<char>(0xFF), '9'}) {
        std::string bytes(16, fill);
        for (std::size_t i = 0; i < k; ++i) bytes[i] = static_cast<char>('0' + (i * 7) % 10);
        if (k < 8) bytes[k] = static_cast<char>(b);
        std::size_t expected = 0;
        while (expected < 8 && bytes[expected] >= '0' && bytes[expected] <= '9') ++expected;
        ASSERT_EQ(raw::leading_digits8(bytes.data()), expected) << "k " << k << ", byte " << b << ", fill " << fill;
      }
    }
  }
}

TEST(RawScan, SkipSmallIntOnALongLineMatchesADigitByDigitCount) {
  // Numbers of 1–21 digits with a long tail after them, so that the eight-bytes-at-a-time path reads them.
  for (std::size_t n = 1; n <= 21; ++n) {
    for (const std::string& tail : {std::string(",\"sessionID\":\"ses_1\"}"), std::string("x,\"sessionID\":1}"),
                                   std::string("}\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff")}) {
      std::string line;
      for (std::size_t i = 0; i < n; ++i) line += static_cast<char>('1' + i % 9);
      line += tail;
      const char* end = line.data() + line.size();
      const bool delimited = tail[0] == ',' || tail[0] == '}';
      const char* expected = n <= 18 && delimited ? line.data() + n : nullptr;
      EXPECT_EQ(raw::skip_small_int(line.data(), end), expected) << line;
      const std::string negative = "-" + line;
      EXPECT_EQ(raw::skip_small_int(negative.data(), negative.data() + negative.size()),
                expected == nullptr ? nullptr : negative.data() + n + 1)
          << negative;
    }
  }
}

TEST(RawScan, ParseSmallIntGivesTheValue) {
  const std::pair<std::string, std::int64_t> cases[] = {
      {"0", 0}, {"7,", 7}, {"-7}", -7}, {"1796011996448", 1796011996448}, {"123456789012345678", 123456789012345678},
      {"-123456789012345678]", -123456789012345678}};
  for (const auto& [text, expected] : cases) {
    std::int64_t value = -1;
    const char* end = text.data() + text.size();
    ASSERT_NE(raw::parse_small_int(text.data(), end, value), nullptr) << text;
    EXPECT_EQ(value, expected) << text;
  }
}

namespace {

TEST(RawScan, IsAsciiFindsANonAsciiByteAtEveryPositionOfEveryLength) {
  // Lengths around the 16-byte blocks (the last block overlaps the one before it).
  for (std::size_t n = 0; n <= 70; ++n) {
    std::string s(n, 'a');
    ASSERT_TRUE(raw::is_ascii(s.data(), n)) << n;
    for (std::size_t i = 0; i < n; ++i) {
      for (const char c : {static_cast<char>(0x80), static_cast<char>(0xFF)}) {
        s[i] = c;
        EXPECT_FALSE(raw::is_ascii(s.data(), n)) << "length " << n << ", byte at " << i;
        s[i] = 'a';
      }
    }
  }
}

TEST(RawScan, IsAsciiWithTheLineStartLooksOnlyAtItsSpan) {
  // A span shorter than 16 bytes at the end of a line of at least 16 (the rest after pi's memoized prefix) is checked
  // with one load ending at the line's end: bytes before the span, ASCII or not, must not change the answer. The line
  // is allocated at its exact size (ASan: no read past its end or before its start).
  for (std::size_t size = 16; size <= 34; ++size) {
    for (std::size_t n = 0; n < 16; ++n) {
      const std::size_t at = size - n;
      for (const bool dirty_before : {false, true}) {
        std::vector<char> line(size, 'a');
        if (dirty_before) std::fill(line.begin(), line.begin() + static_cast<std::ptrdiff_t>(at), '\xC3');
        EXPECT_TRUE(raw::is_ascii(line.data() + at, n, line.data())) << size << " " << n;
        for (std::size_t i = at; i < size; ++i) {
          line[i] = static_cast<char>(0x80);
          EXPECT_FALSE(raw::is_ascii(line.data() + at, n, line.data())) << size << " " << n << " at " << i;
          line[i] = 'a';
        }
      }
    }
  }
}

TEST(RawScan, ScanStringWithTheLineStartAgreesWithTheByteLoop) {
  // scan_string (and find_string_special) with `lo` finds a string ending in the line's last 16 bytes with one load ending at the line's end
  // (bytes before the opening quote shifted out); without `lo` the same tail is read byte by byte. Both must agree on
  // the end, the closing quote and `escaped`, for random bodies of quotes, backslashes, control and other bytes, with
  // random bytes before the string. Exact-size allocations (ASan).
  std::mt19937 random(20261203);
  const char alphabet[] = {'a', 'b', '"', '\\', '\n', '\x01', '\x1f', ' ', '\x80', 'u'};
  for (int round = 0; round < 20000; ++round) {
    const std::size_t before = random() % 24;
    const std::size_t body = random() % 20;
    std::vector<char> line(before + 1 + body);
    for (std::size_t i = 0; i < before; ++i) line[i] = alphabet[random() % sizeof alphabet];
    line[before] = '"';
    for (std::size_t i = before + 1; i < line.size(); ++i) line[i] = alphabet[random() % sizeof alphabet];
    const char* end = line.data() + line.size();
    const char* expected_body_end = nullptr;
    const char* body_end = nullptr;
    bool expected_escaped = false;
    bool escaped = false;
    const char* expected = raw::scan_string(line.data() + before, end, expected_body_end, expected_escaped);
    const char* got = raw::scan_string(line.data() + before, end, body_end, escaped, line.data());
    const std::string text(line.begin(), line.end());
    ASSERT_EQ(got, expected) << text;
    const char* body_begin = line.data() + before + 1;
    EXPECT_EQ(raw::find_string_special(body_begin, end, line.data()), raw::find_string_special(body_begin, end)) << text;
    if (expected != nullptr) {
      EXPECT_EQ(body_end, expected_body_end) << text;
      EXPECT_EQ(escaped, expected_escaped) << text;
    }
  }
}

TEST(RawScan, SkipWsStopsAtTheFirstByteThatIsNotJsonWhitespace) {
  const std::string s = " \t\r\n x";
  EXPECT_EQ(raw::skip_ws(s.data(), s.data() + s.size()), s.data() + 5);
  const std::string control = " \x01 x";  // a control character is not whitespace
  EXPECT_EQ(raw::skip_ws(control.data(), control.data() + control.size()), control.data() + 1);
  const std::string only = "  \n";
  EXPECT_EQ(raw::skip_ws(only.data(), only.data() + only.size()), only.data() + only.size());
}

TEST(RawScan, SkipValueEndsAfterTheValueWithAndWithoutBytesAfterIt) {
  // {value, its length (0: rejected)}. Each accepted one is also tried followed by a long tail, where numbers are
  // read eight digits at a time.
  const std::pair<std::string, std::size_t> cases[] = {
      {"0", 1}, {"7", 1}, {"-12", 3}, {"12345678", 8}, {"123456789", 9}, {"1234567890123456789012", 22},
      {"1.5e-3", 6}, {"true", 4}, {"null", 4}, {R"("")", 2}, {R"("a\"b")", 6}, {R"("xxxxxxxxxxxxxxxxxxxxxxx")", 25},
      {"{}", 2}, {"[]", 2}, {R"({"a":1,"b":[1,{"c":"d"}]})", 25}, {R"([ 1 , "x" , { } ])", 17},
      {R"("unclosed)", 0}, {"{", 0}, {"[1,", 0}, {R"({"a" 1})", 0}, {"", 0}, {",", 0}, {"}", 0}};
  for (const auto& [value, length] : cases) {
    for (const std::string& tail : {std::string(), std::string(",\"next\":\"0123456789abcdef\"}")}) {
      const std::string text = value + tail;
      const char* end = text.data() + text.size();
      const char* expected = length == 0 ? nullptr : text.data() + length;
      if (length == 0 && !tail.empty()) continue;  // a rejected value is tried alone (a tail could complete it)
      EXPECT_EQ(raw::skip_value(text.data(), end), expected) << "'" << text << "'";
    }
  }
}

}  // namespace

#if defined(__SSE2__)
TEST(RawScan, QuoteBitmapFindsEveryQuoteAtEveryPositionOfEveryLength) {
  // Lengths around the 16-byte blocks and the 64-bit words, up to the maximum; quotes at a changing set of positions.
  for (std::size_t n = 16; n <= raw::quote_bitmap::kMaxBytes; n += n < 200 ? 1 : 37) {
    for (std::size_t stride : {1U, 2U, 7U, 64U, 1000U}) {
      std::string s(n, 'a');
      for (std::size_t i = stride % n; i < n; i += stride) s[i] = '"';
      raw::quote_bitmap quotes;
      ASSERT_TRUE(quotes.build(s.data(), n)) << n;
      std::size_t expected = n;  // the next quote at or after `from`, computed from the end
      for (std::size_t from = n; from-- > 0;) {
        if (s[from] == '"') expected = from;
        ASSERT_EQ(quotes.next_quote(from), expected) << "length " << n << ", stride " << stride << ", from " << from;
      }
      EXPECT_EQ(quotes.next_quote(n), n);
    }
  }
}

TEST(RawScan, QuoteBitmapRefusesALineThatIsNotPlainWhereverTheByteIs) {
  raw::quote_bitmap quotes;
  for (std::size_t n : {16U, 17U, 31U, 64U, 65U, 100U, 127U, 128U, 511U, 512U}) {
    std::string s(n, 'a');
    ASSERT_TRUE(quotes.build(s.data(), n)) << n;
    for (std::size_t i = 0; i < n; ++i) {
      for (const char c : {'\\', '\0', '\n', '\t', '\x1F', static_cast<char>(0x80), static_cast<char>(0xFF)}) {
        s[i] = c;
        EXPECT_FALSE(quotes.build(s.data(), n)) << "length " << n << ", byte " << int(static_cast<unsigned char>(c))
                                                << " at " << i;
      }
      for (const char c : {' ', '\x7F', '"', '{', '}'}) {  // plain bytes
        s[i] = c;
        EXPECT_TRUE(quotes.build(s.data(), n)) << "length " << n << ", byte " << int(c) << " at " << i;
      }
      s[i] = 'a';
    }
  }
  const std::string too_long(raw::quote_bitmap::kMaxBytes + 1, 'a');
  EXPECT_FALSE(quotes.build(too_long.data(), too_long.size()));
  EXPECT_FALSE(quotes.build(too_long.data(), 15));
}
#endif
