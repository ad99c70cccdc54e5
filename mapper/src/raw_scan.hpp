// Internal: strict byte-level JSON scanning for the mapper's fast path (see pi_event_parser::parse_fast).
//
// These functions accept a strict subset of JSON (RFC 8259 structure; scalars as runs of [0-9A-Za-z+-.]) and report
// anything else as "not handled" (nullptr), never as an error: the caller then falls back to the simdjson On-Demand
// path, which decides. They never read outside [p, end) — or [lo, end) for those that take the line's start `lo` —:
// the input is the caller's line, without padding.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace agenthost::mapper::detail::raw {

/// Deepest nesting the fast path skips; deeper values go to the On-Demand path.
inline constexpr int kMaxSkipDepth = 64;

inline bool is_ws(char c) noexcept { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

inline const char* skip_ws(const char* p, const char* end) noexcept {
  // One compare for the usual case, a byte above the space (compact JSON has no whitespace at all).
  while (p < end && static_cast<unsigned char>(*p) <= ' ' && is_ws(*p)) ++p;
  return p;
}

/// Whether `line` is empty or only JSON whitespace. (A line nearly always starts with its JSON: one byte decides,
/// where find_first_not_of would call memchr over the whitespace set for every byte it looks at.)
inline bool is_blank(std::string_view line) noexcept {
  if (!line.empty() && !is_ws(line.front())) return false;
  return skip_ws(line.data(), line.data() + line.size()) == line.data() + line.size();
}

/// The first byte in [p, end) that is '"', '\\' or a control character (< 0x20), or `end`. `lo`, when given, is the
/// start of the line [p, end) lies in: fewer than 16 bytes before `end` are then read with one 16-byte load ending at
/// `end` (as scan_string does) instead of a byte loop.
inline const char* find_string_special(const char* p, const char* end, const char* lo = nullptr) noexcept;

#if defined(__SSE2__)
/// Bit i set when p[i] is '"', '\\' or a control character (< 0x20); p[0..16) must be readable.
inline unsigned string_special_mask(const char* p) noexcept {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i control = _mm_cmpeq_epi8(_mm_min_epu8(x, _mm_set1_epi8(0x1F)), x);  // x <= 0x1F (unsigned)
  const __m128i hit = _mm_or_si128(
      _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')), _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))), control);
  return static_cast<unsigned>(_mm_movemask_epi8(hit));
}

/// string_special_mask of [p, end), fewer than 16 bytes, when the line's start `lo` leaves 16 readable bytes before
/// `end`: one load of the line's last 16 bytes, those before `p` shifted out (bit k is p[k], k < end - p). False (and
/// `mask` unset) when `lo` is null, [p, end) is empty or the line is shorter than 16 bytes.
inline bool string_special_mask_tail(const char* p, const char* end, const char* lo, unsigned& mask) noexcept {
  if (lo == nullptr || p >= end || end - lo < 16) return false;
  mask = string_special_mask(end - 16) >> (16 - (end - p));
  return true;
}
#endif

inline const char* find_string_special(const char* p, const char* end, const char* lo) noexcept {
#if defined(__SSE2__)
  while (end - p >= 16) {
    const unsigned mask = string_special_mask(p);
    if (mask != 0) return p + __builtin_ctz(mask);
    p += 16;
  }
  if (unsigned mask = 0; string_special_mask_tail(p, end, lo, mask)) return mask != 0 ? p + __builtin_ctz(mask) : end;
#endif
  while (p < end) {
    const auto c = static_cast<unsigned char>(*p);
    if (c == '"' || c == '\\' || c < 0x20) return p;
    ++p;
  }
  return end;
}

/// A JSON string whose opening quote is at `p`: returns the position after its closing quote, or nullptr (not
/// closed, a raw control character, a backslash before a control character). `body_end` is set to the closing quote;
/// `escaped` is set when the body has a backslash. A backslash escapes the byte after it (as in simdjson's stage 1);
/// the escape sequences themselves are checked only where a string is unescaped.
///
/// `lo`, when given, is the start of the line [p, end) lies in (readable up to `end`): a string that ends in the
/// line's last 16 bytes is then found with one 16-byte load ending at `end` (overlapping bytes already scanned)
/// instead of a byte loop — a delta line's text is a few bytes just before the line's `}}`.
[[gnu::always_inline]] inline const char* scan_string(const char* p, const char* end, const char*& body_end,
                                                      bool& escaped, const char* lo = nullptr) noexcept {
  ++p;  // opening quote
  escaped = false;
#if defined(__SSE2__)
  for (;;) {
    const bool tail = end - p < 16;
    unsigned mask = 0;
    if (!tail) {
      mask = string_special_mask(p);
    } else if (!string_special_mask_tail(p, end, lo, mask)) {
      break;  // the byte loop below
    }
    std::ptrdiff_t advance = 16;
    while (mask != 0) {
      const auto i = static_cast<std::ptrdiff_t>(__builtin_ctz(mask));
      if (p[i] == '"') {
        body_end = p + i;
        return p + i + 1;
      }
      if (p[i] != '\\') return nullptr;  // raw control character
      if (end - (p + i) < 2 || static_cast<unsigned char>(p[i + 1]) < 0x20) return nullptr;
      escaped = true;
      if (i == 15) {  // the escaped byte starts the next block (never in the tail: its bit 15 is clear)
        advance = 17;
        break;
      }
      mask &= ~(3U << i);  // the backslash and the byte it escapes
    }
    if (tail) return nullptr;  // not closed before `end`
    p += advance;
  }
#endif
  while (p < end) {
    const auto c = static_cast<unsigned char>(*p);
    if (c == '"') {
      body_end = p;
      return p + 1;
    }
    if (c < 0x20) return nullptr;
    if (c == '\\') {
      if (end - p < 2 || static_cast<unsigned char>(p[1]) < 0x20) return nullptr;
      escaped = true;
      p += 2;
      continue;
    }
    ++p;
  }
  return nullptr;
}

#if defined(__SSE2__)
/// The quotes of a short, plain line as a bitmap, built in one pass over the line, for validating a line whose
/// strings need no escape handling: each string is then the span between two consecutive quotes, found with a bit
/// scan instead of a byte scan per string (which loads the same 16 bytes again for every short key and value that
/// starts in them).
class quote_bitmap {
 public:
  /// Longest line build() accepts (the bitmap lives on the stack).
  static constexpr std::size_t kMaxBytes = 512;

  /// The bitmap of [begin, begin + n), 16 ≤ n ≤ kMaxBytes. False (and nothing to use) when n is out of range or the
  /// line is not plain: a backslash (a string could hold an escaped quote), a control character or a byte ≥ 0x80
  /// anywhere (scan_string() and the UTF-8 check tell those apart). A plain line is valid UTF-8.
  bool build(const char* begin, std::size_t n) noexcept {
    if (n < 16 || n > kMaxBytes) return false;
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(' ');
    __m128i not_plain = _mm_setzero_si128();
    const auto block = [&](const char* p) noexcept -> std::uint64_t {
      const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      // A signed compare: below ' ' are the control characters and, as negative bytes, those >= 0x80.
      not_plain = _mm_or_si128(not_plain, _mm_or_si128(_mm_cmplt_epi8(x, space), _mm_cmpeq_epi8(x, backslash)));
      return static_cast<std::uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(x, quote)));
    };
    std::size_t i = 0;
    for (; i + 64 <= n; i += 64) {
      words_[i >> 6] = block(begin + i) | block(begin + i + 16) << 16 | block(begin + i + 32) << 32 |
                       block(begin + i + 48) << 48;
    }
    std::uint64_t word = 0;
    for (; i + 16 <= n; i += 16) word |= block(begin + i) << (i & 63);
    // The last, partial block: the line's last 16 bytes, shifted so that only the bytes from i on count.
    if (i < n) word |= (block(begin + n - 16) >> (16 - (n - i))) << (i & 63);
    if (i < n || (i & 63) != 0) words_[i >> 6] = word;
    size_ = n;
    return _mm_movemask_epi8(not_plain) == 0;
  }

  /// Index of the first quote at or after index `from`, or the line's size when there is none.
  [[nodiscard]] std::size_t next_quote(std::size_t from) const noexcept {
    if (from >= size_) return size_;
    std::size_t w = from >> 6;
    std::uint64_t bits = words_[w] & (~std::uint64_t{0} << (from & 63));
    const std::size_t last = (size_ - 1) >> 6;
    while (bits == 0) {
      if (++w > last) return size_;
      bits = words_[w];
    }
    return (w << 6) + static_cast<std::size_t>(std::countr_zero(bits));
  }

 private:
  std::uint64_t words_[kMaxBytes / 64];  // only the words up to the line's size are written
  std::size_t size_ = 0;
};
#endif

/// The first '"' or '\\' at or after `p`, in a buffer where one is known to come and that stays readable for at least
/// 15 bytes past it (a simdjson-padded document: the strings were validated by stage 1).
inline const char* find_quote_or_backslash_padded(const char* p) noexcept {
#if defined(__SSE2__)
  for (;; p += 16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const auto mask = static_cast<unsigned>(
        _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')), _mm_cmpeq_epi8(x, _mm_set1_epi8('\\')))));
    if (mask != 0) return p + __builtin_ctz(mask);
  }
#else
  while (*p != '"' && *p != '\\') ++p;
  return p;
#endif
}

/// True when [p, p + n) has no byte >= 0x80 (then it is valid UTF-8). `lo`, when given, is a readable address at or
/// before `p` (the line's start): a span shorter than 16 bytes with 16 readable ones before its end is checked with
/// one load ending at its end (the rest of a line after a memoized prefix is often a dozen bytes).
inline bool is_ascii(const char* p, std::size_t n, const char* lo = nullptr) noexcept {
  const char* end = p + n;
#if defined(__SSE2__)
  if (n >= 16) {
    // 16-byte blocks, the last one overlapping the one before (no byte-by-byte tail).
    __m128i acc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(end - 16));
    for (; end - p > 16; p += 16) acc = _mm_or_si128(acc, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm_movemask_epi8(acc) == 0;
  }
  if (lo != nullptr && end - lo >= 16) {
    // Bit i is end[i - 16]; the bytes before `p` are shifted out.
    const __m128i last = _mm_loadu_si128(reinterpret_cast<const __m128i*>(end - 16));
    return (static_cast<unsigned>(_mm_movemask_epi8(last)) >> (16 - n)) == 0;
  }
#endif
  unsigned char bits = 0;
  while (p < end) bits |= static_cast<unsigned char>(*p++);
  return bits < 0x80;
}

inline bool is_scalar_char(char c) noexcept {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '+' ||
         c == '.';
}

/// How many of the 8 bytes at `p` (all readable), from the first, are ASCII digits: 0–8. Little-endian only.
[[gnu::always_inline]] inline unsigned leading_digits8(const char* p) noexcept {
  std::uint64_t x;
  std::memcpy(&x, p, sizeof x);
  constexpr std::uint64_t high = 0xF0F0F0F0F0F0F0F0, zeros = 0x3030303030303030, six = 0x0606060606060606;
  // A byte is a digit when its high nibble is 3 and adding 6 leaves it 3 (its low nibble is at most 9). A byte at or
  // above 0xFA carries into the next one, but only bytes after a non-digit are changed by that: the first non-digit
  // is still found.
  const std::uint64_t not_digit = ((x & high) ^ zeros) | (((x + six) & high) ^ zeros);
  return not_digit == 0 ? 8U : static_cast<unsigned>(std::countr_zero(not_digit)) / 8U;
}

const char* skip_container(const char* p, const char* end, int depth) noexcept;

/// Skip one value starting at `p` (no leading whitespace): returns the position after it, or nullptr. A string or a
/// scalar — nearly every value skipped — is skipped inline; objects and arrays by skip_container().
[[gnu::always_inline]] inline const char* skip_value(const char* p, const char* end, int depth = 0) noexcept {
  if (p >= end) return nullptr;
  if (*p == '"') {
    const char* body_end = nullptr;
    bool escaped = false;
    return scan_string(p, end, body_end, escaped);
  }
  if (*p == '{' || *p == '[') return skip_container(p, end, depth);
  const char* start = p;
  if constexpr (std::endian::native == std::endian::little) {
    if (end - p >= 8) p += leading_digits8(p);  // a number's digits, eight at a time
  }
  while (p < end && is_scalar_char(*p)) ++p;
  return p == start ? nullptr : p;
}

/// The object or array at `p` (its opening bracket), each member's or element's value read by `value(p, depth + 1)`
/// (a position after the value, or nullptr): the position after its closing bracket, or nullptr. A key with an escape
/// sequence is refused when `plain_keys`. Shared by skip_container() and validate_value(), which differ in how they
/// read a value.
template <class Value>
inline const char* walk_container(const char* p, const char* end, int depth, bool plain_keys, Value&& value) noexcept {
  const char* body_end = nullptr;
  bool escaped = false;
  const bool object = *p == '{';
  const char close = object ? '}' : ']';
  p = skip_ws(p + 1, end);
  if (p < end && *p == close) return p + 1;
  for (;;) {
    if (object) {
      if (p >= end || *p != '"') return nullptr;
      p = scan_string(p, end, body_end, escaped);
      if (p == nullptr || (plain_keys && escaped)) return nullptr;
      p = skip_ws(p, end);
      if (p >= end || *p != ':') return nullptr;
      p = skip_ws(p + 1, end);
    }
    p = value(p, depth + 1);
    if (p == nullptr) return nullptr;
    p = skip_ws(p, end);
    if (p >= end) return nullptr;
    if (*p == close) return p + 1;
    if (*p != ',') return nullptr;
    p = skip_ws(p + 1, end);
  }
}

/// skip_value() of the object or array at `p` (out of line: it recurses).
inline const char* skip_container(const char* p, const char* end, int depth) noexcept {
  if (depth >= kMaxSkipDepth) return nullptr;
  return walk_container(p, end, depth, false, [end](const char* q, int d) { return skip_value(q, end, d); });
}

/// The first `c` in [p, end), or `end` (inline: the runs between escapes of a text are short, a memchr call costs
/// more than the search).
inline const char* find_byte(const char* p, const char* end, char c) noexcept {
#if defined(__SSE2__)
  const __m128i needle = _mm_set1_epi8(c);
  while (end - p >= 16) {
    const auto mask = static_cast<unsigned>(
        _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), needle)));
    if (mask != 0) return p + __builtin_ctz(mask);
    p += 16;
  }
#endif
  while (p < end && *p != c) ++p;
  return p;
}

inline bool is_delimiter(char c) noexcept { return is_ws(c) || c == ',' || c == '}' || c == ']'; }

inline bool is_hex(char c) noexcept {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/// True when every escape sequence of a string body is one the lenient unescaper accepts (\" \\ \/ \b \f \n \r \t,
/// \u + 4 hex digits; lone surrogates are accepted, they become U+FFFD).
inline bool escapes_valid(const char* p, const char* end) noexcept {
  for (;;) {
    p = find_byte(p, end, '\\');
    if (p == end) return true;
    if (end - p < 2) return false;
    switch (p[1]) {
      case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
        p += 2;
        break;
      case 'u':
        if (end - p < 6 || !is_hex(p[2]) || !is_hex(p[3]) || !is_hex(p[4]) || !is_hex(p[5])) return false;
        p += 6;
        break;
      default:
        return false;
    }
  }
}

/// A value that nlohmann-style full conversion (to_json in ondemand_util) certainly accepts, at `p`: strings with
/// valid escapes, objects with keys without escapes, arrays, true/false/null, and numbers of the form
/// -?(0|[1-9][0-9]{0,17})(.[0-9]{1,17})? followed by a delimiter. Returns the position after it, or nullptr for
/// anything else (also deeper than kMaxSkipDepth below `depth`).
inline const char* validate_value(const char* p, const char* end, int depth) noexcept {
  if (p >= end || depth > kMaxSkipDepth) return nullptr;
  const char* body_end = nullptr;
  bool escaped = false;
  const auto literal = [&](std::string_view word) -> const char* {
    if (static_cast<std::size_t>(end - p) < word.size() || std::memcmp(p, word.data(), word.size()) != 0) return nullptr;
    const char* q = p + word.size();
    return q < end && !is_delimiter(*q) ? nullptr : q;
  };
  switch (*p) {
    case '"': {
      const char* next = scan_string(p, end, body_end, escaped);
      if (next == nullptr || (escaped && !escapes_valid(p + 1, body_end))) return nullptr;
      return next;
    }
    case '{':
    case '[':
      return walk_container(p, end, depth, true, [end](const char* q, int d) { return validate_value(q, end, d); });
    case 't': return literal("true");
    case 'f': return literal("false");
    case 'n': return literal("null");
    default: {
      if (*p == '-') ++p;
      const char* digits = p;
      while (p < end && *p >= '0' && *p <= '9') ++p;
      if (p == digits || p - digits > 18 || (*digits == '0' && p - digits > 1)) return nullptr;
      if (p < end && *p == '.') {
        const char* fraction = ++p;
        while (p < end && *p >= '0' && *p <= '9') ++p;
        if (p == fraction || p - fraction > 17) return nullptr;
      }
      return p < end && !is_delimiter(*p) ? nullptr : p;
    }
  }
}

/// Whether the `n` bytes at `a` and `b` are equal: inline 8-byte loads XORed together for n ≥ 8 (the last one
/// overlapping), two overlapping 4-byte loads for 4–7 bytes. With `n` a constant (a literal) GCC unrolls or vectorizes
/// the loop and folds the literal's loads into constants, where `memcmp` of a constant length above ~32 bytes stays a
/// call; a runtime `n` (an id compared on every line, a message's keys matched at every refill) still saves the call.
[[gnu::always_inline]] inline bool equal_bytes(const char* a, const char* b, std::size_t n) noexcept {
  if (n < 8) {
    if (n < 4) return n == 0 || std::memcmp(a, b, n) == 0;  // an empty view's data() may be null: no memcmp of it
    std::uint32_t a0, a1, b0, b1;
    std::memcpy(&a0, a, 4);
    std::memcpy(&a1, a + n - 4, 4);
    std::memcpy(&b0, b, 4);
    std::memcpy(&b1, b + n - 4, 4);
    return ((a0 ^ b0) | (a1 ^ b1)) == 0;
  }
  const auto load = [](const char* q) noexcept {
    std::uint64_t v;
    std::memcpy(&v, q, sizeof v);
    return v;
  };
  std::uint64_t diff = load(a + n - 8) ^ load(b + n - 8);
  for (std::size_t i = 0; i + 8 < n; i += 8) diff |= load(a + i) ^ load(b + i);
  return diff == 0;
}

/// Whether [p, end) starts with the bytes of `s`.
inline bool starts_with(const char* p, const char* end, std::string_view s) noexcept {
  return static_cast<std::size_t>(end - p) >= s.size() && std::memcmp(p, s.data(), s.size()) == 0;
}

/// starts_with, and then `p` moves past `s`.
inline bool consume(const char*& p, const char* end, std::string_view s) noexcept {
  if (!starts_with(p, end, s)) return false;
  p += s.size();
  return true;
}

/// The same for a string literal: its length is a constant, so the comparison compiles to a few loads instead of a
/// memcmp call (the fast paths compare a dozen literals per line, some of them 60–70 bytes long).
template <std::size_t N>
[[gnu::always_inline]] inline bool starts_with(const char* p, const char* end, const char (&s)[N]) noexcept {
  return static_cast<std::size_t>(end - p) >= N - 1 && equal_bytes(p, s, N - 1);
}
template <std::size_t N>
[[gnu::always_inline]] inline bool consume(const char*& p, const char* end, const char (&s)[N]) noexcept {
  if (!starts_with(p, end, s)) return false;
  p += N - 1;
  return true;
}

/// A canonical JSON integer at `p` ("0" or an optional '-' then 1–18 digits without a leading zero; not "-0"),
/// followed by a delimiter: returns the position after it, or nullptr (anything else). Its value is not computed: no
/// multiply chain per digit, for the numbers a fast path only checks (OpenCode's 13-digit timestamps, three per line,
/// cost a tenth of its mapper's time when converted).
inline const char* skip_small_int(const char* p, const char* end) noexcept {
  const char* const digits_begin = p < end && *p == '-' ? p + 1 : p;
  const char* q = digits_begin;
  if constexpr (std::endian::native == std::endian::little) {
    // Eight bytes at a time where the line is long enough (the timestamps are 13 digits: two steps, not 13).
    while (end - q >= 8) {
      const unsigned n = leading_digits8(q);
      q += n;
      if (n < 8) break;
    }
  }
  while (q < end && static_cast<unsigned char>(*q - '0') < 10) ++q;
  const std::ptrdiff_t digits = q - digits_begin;
  if (digits == 0 || digits > 18) return nullptr;  // more is too long for the fast path
  if (*digits_begin == '0' && (digits > 1 || digits_begin != p)) return nullptr;
  if (q < end && !is_delimiter(*q)) return nullptr;
  return q;
}

/// skip_small_int, and the integer's value in `out`.
inline const char* parse_small_int(const char* p, const char* end, std::int64_t& out) noexcept {
  const char* const q = skip_small_int(p, end);
  if (q == nullptr) return nullptr;
  const bool negative = *p == '-';
  std::int64_t v = 0;
  for (const char* d = negative ? p + 1 : p; d < q; ++d) v = v * 10 + (*d - '0');
  out = negative ? -v : v;
  return q;
}

}  // namespace agenthost::mapper::detail::raw
