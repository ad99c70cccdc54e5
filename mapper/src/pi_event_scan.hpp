// Internal: the member scan shared by the byte-scan fast paths of the pi event parser (pi_event_fast.cpp,
// pi_event_fast_message.cpp): keys without escapes, values read by a callback that returns the position after the
// value or nullptr to give up (the line then goes to the On-Demand path).
#pragma once

#include "pi_event.hpp"
#include "raw_scan.hpp"

#include <cstring>
#include <string_view>
#include <utility>

namespace agenthost::mapper::detail {

namespace pi_scan {

/// A key without escape sequences at `p`, then ':' : returns the position of its value. (Inline, as
/// fast_next_member: a call for each member of every line cost more than the scan of a short key.)
[[gnu::always_inline]] inline const char* fast_key(const char* p, const char* end, std::string_view& key) noexcept {
  if (p >= end || *p != '"') return nullptr;
  const char* body_end = nullptr;
  bool escaped = false;
  const char* next = raw::scan_string(p, end, body_end, escaped);
  if (next == nullptr || escaped) return nullptr;
  key = std::string_view(p + 1, static_cast<std::size_t>(body_end - (p + 1)));
  next = raw::skip_ws(next, end);
  if (next >= end || *next != ':') return nullptr;
  return raw::skip_ws(next + 1, end);
}

/// After a member's value: the next member's value (its key in `key`), or `end_of_object` set after '}'.
[[gnu::always_inline]] inline const char* fast_next_member(const char* p, const char* end, std::string_view& key,
                                                          bool& end_of_object) noexcept {
  p = raw::skip_ws(p, end);
  if (p >= end) return nullptr;
  if (*p == '}') {
    end_of_object = true;
    return p + 1;
  }
  if (*p != ',') return nullptr;
  return fast_key(raw::skip_ws(p + 1, end), end, key);
}

/// The members of a line's root object after its `type` (which ends before `p`), each value read by
/// `read(key, value)` — the position after the value, or nullptr to give up — and nothing but whitespace after the
/// object. false when the scan or a read gives up.
template <class Read>
[[gnu::always_inline]] inline bool fast_members(const char* p, const char* end, Read&& read) {
  std::string_view key;
  for (;;) {
    bool done = false;
    p = fast_next_member(p, end, key, done);
    if (p == nullptr) return false;
    if (done) break;
    p = read(key, p);
    if (p == nullptr) return false;
  }
  return raw::skip_ws(p, end) == end;
}
/// The members of the object at `p` (its '{'), each value read by `read(key, value)` as in fast_members: the position
/// after the object's '}', or nullptr.
template <class Read>
[[gnu::always_inline]] inline const char* fast_object(const char* p, const char* end, Read&& read) {
  if (p >= end || *p != '{') return nullptr;
  p = raw::skip_ws(p + 1, end);
  if (p < end && *p == '}') return p + 1;
  std::string_view key;
  p = fast_key(p, end, key);
  for (;;) {
    if (p == nullptr) return nullptr;
    p = read(key, p);
    if (p == nullptr) return nullptr;
    bool done = false;
    p = fast_next_member(p, end, key, done);
    if (p == nullptr || done) return p;
  }
}

/// The elements of the array at `p` (its '['), each read by `element(p)` — the position after it, or nullptr to give
/// up: the position after the array's ']', or nullptr.
template <class Element>
[[gnu::always_inline]] inline const char* fast_array(const char* p, const char* end, Element&& element) {
  if (p >= end || *p != '[') return nullptr;
  p = raw::skip_ws(p + 1, end);
  if (p < end && *p == ']') return p + 1;
  for (;;) {
    p = element(p);
    if (p == nullptr) return nullptr;
    p = raw::skip_ws(p, end);
    if (p >= end) return nullptr;
    if (*p == ']') return p + 1;
    if (*p != ',') return nullptr;
    p = raw::skip_ws(p + 1, end);
  }
}

/// One of the flags parse_root() reads with opt_bool(): `true` / `false` set `out` (1 / 0); any other valid value
/// leaves it (a wrong type is an absent flag there too). Only the literal is matched here: a byte after it that is not
/// ',', '}' or whitespace makes the caller's next member scan fail, and the line goes to the On-Demand path.
[[gnu::always_inline]] inline const char* fast_flag(const char* p, const char* end, int& out) noexcept {
  const auto n = static_cast<std::size_t>(end - p);
  if (n >= 4 && std::memcmp(p, "true", 4) == 0) {
    out = 1;
    return p + 4;
  }
  if (n >= 5 && std::memcmp(p, "false", 5) == 0) {
    out = 0;
    return p + 5;
  }
  return raw::skip_value(p, end);
}

/// fast_flag() into a bool, as opt_bool(value, bool&): set by `true` / `false`, left by any other value.
[[gnu::always_inline]] inline const char* fast_flag(const char* p, const char* end, bool& out) noexcept {
  int flag = -1;
  p = fast_flag(p, end, flag);
  if (flag >= 0) out = flag == 1;
  return p;
}

}  // namespace pi_scan

// The members after `type` (which ends before `p`) of a line of `kind`, each read by `read` (see fast_members), the
// whole line's UTF-8 checked first; on success the event is of that kind. Its fields are not message_update's.
template <class Read>
bool pi_event_parser::event_members(std::string_view line, const char* p, event_kind kind, Read&& read) {
  if (!valid_utf8(line.data(), line.size())) return false;
  x_event& ev = *ev_;
  ev.only_update_fields = false;
  if (!pi_scan::fast_members(p, line.data() + line.size(), std::forward<Read>(read))) return false;
  ev.kind = kind;
  ev.has_type = true;
  ev.type_members = 1;
  return true;
}

}  // namespace agenthost::mapper::detail
