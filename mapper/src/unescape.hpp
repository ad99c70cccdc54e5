// Internal: JSON string unescaping for the mappers' fast paths and lenient reads. Lone UTF-16 surrogates (which
// JavaScript's JSON.stringify emits for split pairs) become U+FFFD instead of failing. Runs without escapes are copied
// in 16-byte blocks; the two-character escapes take one table load.
#pragma once

#include "raw_scan.hpp"

#include <cstddef>
#include <string>
#include <string_view>

namespace agenthost::mapper::detail {

/// Unescape the body of a JSON string token (`raw` is the token including its quotes, possibly followed by
/// whitespace). Lone UTF-16 surrogates (which JavaScript's JSON.stringify emits for split pairs) become U+FFFD
/// instead of failing. Returns false on a malformed token.
bool lenient_unescape(std::string_view raw, std::string& out);

/// The same for a string body (the bytes between the quotes), written to `dst` (room for body.size() bytes: an
/// unescaped string is never longer than its body). Returns the end of the output, or nullptr on a malformed escape.
char* lenient_unescape_to(std::string_view body, char* dst) noexcept;

/// The same, appended to `out` (on failure `out` holds a partial result).
bool lenient_unescape_append(std::string_view body, std::string& out);

/// One pass over the string whose opening quote is at `p` (unpadded, [p, end)): checks it as raw::scan_string does
/// and appends its unescaped text (lenient_unescape rules) to `out`. Returns the position after the closing quote, or
/// nullptr (not closed, a raw control character, a malformed escape; `out` then holds a partial result).
const char* scan_unescape_append(const char* p, const char* end, std::string& out);

/// The same from `p` inside a string body (after its opening quote, at the start of an escape sequence or of a
/// character), up to and including the closing quote.
const char* unescape_string_rest(const char* p, const char* end, std::string& out);

/// scan_string_view from `special`, the first '"', '\\' or control character of the body (or `end`), when it is not
/// the closing quote: the escaped (or malformed) case, out of line.
const char* scan_string_view_rest(const char* p, const char* special, const char* end, std::string_view& out,
                                  std::string& buffer);

/// The same check, without a copy for a string that has no escape sequence: `out` is then a view of its body in the
/// input; else `buffer` holds the unescaped text and `out` views it. Returns the position after the closing quote, or
/// nullptr (`out` unchanged). The common case, a string without escapes, is inline: the fast paths read half a dozen
/// short strings (ids) per line, where a call per string is a sizeable part of the cost. `lo`: the start of the line
/// the string is in, or nullptr (see raw::find_string_special).
inline const char* scan_string_view(const char* p, const char* end, std::string_view& out, std::string& buffer,
                                    const char* lo = nullptr) {
  const char* const body = p + 1;
  const char* const q = raw::find_string_special(body, end, lo);
  if (q != end && *q == '"') {
    out = std::string_view(body, static_cast<std::size_t>(q - body));
    return q + 1;
  }
  return scan_string_view_rest(p, q, end, out, buffer);
}

}  // namespace agenthost::mapper::detail
