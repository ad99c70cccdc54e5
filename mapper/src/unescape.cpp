// String unescaping for the mappers: see unescape.hpp.
#include "unescape.hpp"

#include "raw_scan.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace agenthost::mapper::detail {

namespace {

/// The value of the 4 hex digits at `p`, when [p, end) holds them.
bool hex4(const char* p, const char* end, std::uint32_t& out) noexcept {
  if (end - p < 4) return false;
  std::uint32_t v = 0;
  for (const char* q = p; q < p + 4; ++q) {
    const char c = *q;
    v <<= 4;
    if (c >= '0' && c <= '9') v |= static_cast<std::uint32_t>(c - '0');
    else if (c >= 'a' && c <= 'f') v |= static_cast<std::uint32_t>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= static_cast<std::uint32_t>(c - 'A' + 10);
    else return false;
  }
  out = v;
  return true;
}

void put_utf8(char*& d, std::uint32_t cp) noexcept {
  if (cp < 0x80) {
    *d++ = static_cast<char>(cp);
  } else if (cp < 0x800) {
    *d++ = static_cast<char>(0xC0 | (cp >> 6));
    *d++ = static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *d++ = static_cast<char>(0xE0 | (cp >> 12));
    *d++ = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *d++ = static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *d++ = static_cast<char>(0xF0 | (cp >> 18));
    *d++ = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *d++ = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *d++ = static_cast<char>(0x80 | (cp & 0x3F));
  }
}

/// The byte a two-character escape stands for (`\n` → '\n'), or 0 for `u` and for anything that is not an escape.
constexpr std::array<char, 256> kSimpleEscapes = [] {
  std::array<char, 256> t{};
  t['"'] = '"';
  t['\\'] = '\\';
  t['/'] = '/';
  t['b'] = '\b';
  t['f'] = '\f';
  t['n'] = '\n';
  t['r'] = '\r';
  t['t'] = '\t';
  return t;
}();

/// The escape sequence whose backslash is at `p` (in [p, end)), its text written to `d` (at most 4 bytes: a
/// surrogate pair): the position after it, or nullptr when it is malformed. The two-character escapes take one table
/// load; a lone UTF-16 surrogate becomes U+FFFD.
const char* decode_escape(const char* p, const char* end, char*& d) noexcept {
  constexpr std::uint32_t kReplacement = 0xFFFD;
  if (end - p < 2) return nullptr;
  if (const char c = kSimpleEscapes[static_cast<unsigned char>(p[1])]; c != 0) {
    *d++ = c;
    return p + 2;
  }
  std::uint32_t cp = 0;
  if (p[1] != 'u' || !hex4(p + 2, end, cp)) return nullptr;
  p += 6;
  if (cp >= 0xD800 && cp <= 0xDBFF) {
    std::uint32_t low = 0;
    if (end - p >= 2 && p[0] == '\\' && p[1] == 'u' && hex4(p + 2, end, low) && low >= 0xDC00 && low <= 0xDFFF) {
      p += 6;
      put_utf8(d, 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00));
    } else {
      put_utf8(d, kReplacement);
    }
  } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
    put_utf8(d, kReplacement);
  } else {
    put_utf8(d, cp);
  }
  return p;
}

/// Copies the bytes from `p` up to the first one that ends a run (a backslash; with `StringSpecials` also '"' and the
/// control characters, raw::find_string_special's set) to `d`, and returns that byte's position (or `end`); `d` moves
/// past the run. 16-byte blocks are loaded and stored whole (the bytes after the run's end are overwritten later or
/// lie beyond the output), so `d` may be written up to 15 bytes past the run: callers either write into a buffer as
/// long as the input and never run ahead of the input they consumed (lenient_unescape_to), or keep that much slack.
/// (Copying each run with a call to append/memcpy and each escape with push_back cost ~2 cycles per byte of a tool
/// output with a "\n" every few dozen bytes.)
template <bool StringSpecials>
const char* copy_run(const char* p, const char* end, char*& d) noexcept {
#if defined(__SSE2__)
  while (end - p >= 16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d), x);
    const unsigned mask =
        StringSpecials ? raw::string_special_mask(p)
                       : static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))));
    if (mask != 0) {
      const auto i = static_cast<unsigned>(__builtin_ctz(mask));
      d += i;
      return p + i;
    }
    p += 16;
    d += 16;
  }
#endif
  for (; p < end; ++p) {
    const auto c = static_cast<unsigned char>(*p);
    if (c == '\\' || (StringSpecials && (c == '"' || c < 0x20))) break;
    *d++ = static_cast<char>(c);
  }
  return p;
}

}  // namespace

bool lenient_unescape(std::string_view raw, std::string& out) {
  if (raw.empty() || raw.front() != '"') return false;
  // The token may carry trailing whitespace: find the closing quote from the end.
  std::size_t end = raw.size();
  while (end > 1 && raw[end - 1] != '"') --end;
  if (end <= 1) return false;
  out.clear();
  return lenient_unescape_append(raw.substr(1, end - 2), out);
}

char* lenient_unescape_to(std::string_view body, char* dst) noexcept {
  const char* p = body.data();
  const char* const end = p + body.size();
  for (;;) {
    p = copy_run<false>(p, end, dst);
    if (p == end) return dst;
    p = decode_escape(p, end, dst);
    if (p == nullptr) return nullptr;
  }
}

namespace {

/// Appends to a std::string through a stack buffer: runs and escapes are written to the buffer with plain stores, and
/// the buffer goes to the string in one append when it fills up and at the end (flush(): the caller's, not a
/// destructor's, since an append may throw std::bad_alloc, which the mappers catch per line).
class appender {
 public:
  static constexpr std::size_t kSize = 1024;

  explicit appender(std::string& out) noexcept : out_(out) {}
  appender(const appender&) = delete;
  appender& operator=(const appender&) = delete;

  /// The write position, with at least `room` bytes of the buffer after it (room <= kSize).
  char*& at(std::size_t room) {
    if (this->room() < room) flush();
    return d_;
  }
  /// Bytes left in the buffer after the write position.
  [[nodiscard]] std::size_t room() const noexcept { return static_cast<std::size_t>(buf_ + kSize - d_); }
  void flush() {
    out_.append(buf_, static_cast<std::size_t>(d_ - buf_));
    d_ = buf_;
  }

 private:
  std::string& out_;
  char buf_[kSize];
  char* d_ = buf_;
};

/// copy_run into an appender: stretches as long as the buffer's room less 16 (the block stores' overshoot), flushing
/// when less than 64 bytes are left.
template <bool StringSpecials>
const char* append_run(const char* p, const char* end, appender& out) {
  for (;;) {
    char*& d = out.at(64);
    const auto stretch = static_cast<std::ptrdiff_t>(out.room()) - 16;
    const char* const stop = p + std::min(end - p, stretch);
    const char* const q = copy_run<StringSpecials>(p, stop, d);
    if (q != stop || stop == end) return q;
    p = q;
  }
}

/// One escape at `p` (a backslash) into `out`: the position after it, or nullptr when it is malformed.
inline const char* append_escape(const char* p, const char* end, appender& out) {
  return decode_escape(p, end, out.at(4));  // an escape's text is at most 4 bytes (a surrogate pair)
}

}  // namespace

bool lenient_unescape_append(std::string_view body, std::string& out) {
  const char* p = body.data();
  const char* const end = p + body.size();
  appender a(out);
  for (;;) {
    p = append_run<false>(p, end, a);
    if (p == end) break;
    p = append_escape(p, end, a);
    if (p == nullptr) return false;  // `out` holds a partial result, as documented
  }
  a.flush();
  return true;
}

namespace {

// The rest of a string body from `p` (inside the string, after its opening quote) up to and including its closing
// quote, checked and unescaped into `out` as scan_unescape_append does.
const char* unescape_rest(const char* p, const char* end, std::string& out) {
  appender a(out);
  for (;;) {
    p = append_run<true>(p, end, a);
    if (p == end) return nullptr;  // not closed (`out` holds a partial result, as documented)
    if (*p == '"') break;
    if (*p != '\\' || end - p < 2 || static_cast<unsigned char>(p[1]) < 0x20) return nullptr;  // control character
    // The sequence ends inside the string: a quote is neither an escape letter nor a hex digit.
    p = append_escape(p, end, a);
    if (p == nullptr) return nullptr;
  }
  a.flush();
  return p + 1;
}

}  // namespace

const char* scan_unescape_append(const char* p, const char* end, std::string& out) {
  return unescape_rest(p + 1, end, out);
}

const char* unescape_string_rest(const char* p, const char* end, std::string& out) {
  return unescape_rest(p, end, out);
}

const char* scan_string_view_rest(const char* p, const char* special, const char* end, std::string_view& out,
                                  std::string& buffer) {
  const char* const body = p + 1;
  const char* q = special;
  // An escape (or an error, which unescape_rest reports): the text so far, then the rest unescaped.
  buffer.assign(body, static_cast<std::size_t>(q - body));
  q = unescape_rest(q, end, buffer);
  if (q != nullptr) out = buffer;
  return q;
}

}  // namespace agenthost::mapper::detail
