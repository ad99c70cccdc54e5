// Internal helpers around simdjson On-Demand: lenient string reading, value → nlohmann::json conversion.
#pragma once

#include "raw_scan.hpp"
#include "unescape.hpp"

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>

namespace agenthost::mapper::detail {

namespace od = simdjson::ondemand;

/// The simdjson kernel selected for this CPU, for the fast paths' validate_utf8 of every line: the first
/// simdjson::validate_utf8 call selects it, and calling it directly afterwards saves the dispatch per line.
inline const simdjson::implementation* utf8_kernel() noexcept {
  [[maybe_unused]] const bool selected = simdjson::validate_utf8("", 0);
  return simdjson::get_active_implementation();
}

/// Whether [p, p + n) is valid UTF-8, as `kernel` (utf8_kernel()) says. A short ASCII span — most agent lines — is
/// checked inline: the kernel's call costs more than the check on a line of a few hundred bytes.
/// `lo`: as raw::is_ascii's (a readable address at or before `p`), or nullptr.
inline bool valid_utf8(const simdjson::implementation& kernel, const char* p, std::size_t n,
                       const char* lo = nullptr) noexcept {
  return (n <= 512 && raw::is_ascii(p, n, lo)) || kernel.validate_utf8(p, n);
}

/// Empties each of `views` with one 16-byte store. A chained `a = b = c = {}` reads every view back from the one
/// assigned before it, and a 16-byte load of a view just written as two 8-byte stores is not forwarded from the store
/// buffer (a stall of ~15 cycles, on every line of every event record's reset()); views emptied by two 8-byte stores
/// each move that stall to the next whole-view copy of a field the line did not set.
template <class... View>
inline void clear_views(View&... views) noexcept {
  static constexpr std::string_view empty{};
  (std::memcpy(static_cast<void*>(&views), &empty, sizeof empty), ...);
  static_assert((std::is_same_v<View, std::string_view> && ...));
}

/// Above this size, the padded line buffer and the parser's index are released again once lines are small.
inline constexpr std::size_t kReleaseBufferAbove = std::size_t{16} << 20;

/// reserve_padded()'s work, out of line: it runs only when the buffer must change.
void resize_padded(std::unique_ptr<char[]>& buffer, std::size_t& capacity, od::parser& parser, std::size_t needed);

/// Grows `buffer` (of `capacity` bytes) to hold `needed` bytes, doubling from 4 KiB. After a huge line (a buffer above
/// kReleaseBufferAbove) a line under a quarter of that gives the memory back, the parser's index included. Shared by
/// every mapper's padded line buffer. Inline: nearly every line fits, and then this is two compares, not a call.
inline void reserve_padded(std::unique_ptr<char[]>& buffer, std::size_t& capacity, od::parser& parser,
                           std::size_t needed) {
  if (needed > capacity || capacity > kReleaseBufferAbove) resize_padded(buffer, capacity, parser, needed);
}

/// A mapper's padded copy of the current line (On-Demand reads SIMDJSON_PADDING bytes past the end) and the parser
/// whose index belongs to it.
struct padded_line {
  od::parser parser;
  std::unique_ptr<char[]> buffer;
  std::size_t capacity = 0;

  /// Room for `size` bytes and the padding (reserve_padded's rules: may release a huge buffer).
  void reserve(std::size_t size) { reserve_padded(buffer, capacity, parser, size + simdjson::SIMDJSON_PADDING); }
  /// Copies `line` in (reserving first) and starts iterating it; `doc` is valid until the next call.
  simdjson::error_code iterate(std::string_view line, od::document& doc);
};

/// After the root value was read: TRAILING_CONTENT unless nothing but whitespace follows it.
simdjson::error_code check_end(od::document& doc) noexcept;

/// Deepest JSON nesting converted to nlohmann::json (deeper values make the line invalid; no recursion beyond it).
inline constexpr int kMaxConvertDepth = 256;

/// Owns strings that could not be returned as views into simdjson's buffer (lenient unescaping); cleared per line.
class string_arena {
 public:
  std::string_view keep(std::string s) {
    strings_.push_back(std::move(s));
    return strings_.back();
  }
  void clear() noexcept { strings_.clear(); }
  [[nodiscard]] bool empty() const noexcept { return strings_.empty(); }

 private:
  std::deque<std::string> strings_;
};

/// The compact JSON value at `p` (unpadded, [p, end)) converted to nlohmann::json exactly as to_json() converts it
/// — for the values this accepts: no whitespace, keys without escapes, strings as scan_unescape_append takes them,
/// canonical integers below 10^18, true/false/null, nesting below kMaxConvertDepth. Returns the position after the
/// value, or nullptr for anything else (a fraction, an exponent, …): the caller then lets On-Demand decide. UTF-8 is
/// not checked here (the caller validates the whole line).
const char* raw_to_json(const char* p, const char* end, nlohmann::json& out, int depth = 0);

/// Read a string value; falls back to lenient_unescape when simdjson rejects an escape sequence.
simdjson::error_code get_string(od::value& v, std::string_view& out, string_arena& arena) noexcept;

/// Convert a value (and its children, up to kMaxConvertDepth) to nlohmann::json.
simdjson::error_code to_json(od::value v, nlohmann::json& out, string_arena& arena, int depth = 0);

/// The reads of to_json() without building anything: succeeds exactly when to_json() would.
simdjson::error_code validate_json(od::value v, string_arena& arena, int depth = 0);

/// `text` = the text of a tool result as the mapper reports it (result_text() in pi_mapper.cpp: `content` of an
/// object, or the value itself; a string as is, an array's `{type: "text", text}` items joined with '\n', else ""),
/// read without building the value; succeeds exactly when to_json() of the value would.
simdjson::error_code tool_result_text(od::value v, std::string& text, string_arena& arena);

/// Read a number (integer or floating point) as double.
simdjson::error_code get_number(od::value& v, double& out) noexcept;

}  // namespace agenthost::mapper::detail
