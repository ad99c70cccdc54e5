// Internal: reading the fields of an On-Demand object the way every mapper's parser does. A field the mapper reads
// must have its JSON type; null counts as absent. A value of another type is a *type mismatch*: `note()` records it in
// the event's `wrong_type` flag and the walk goes on (the mapper decides whether the line is invalid: only for the
// event types it maps), while anything else (structure, a malformed string) fails the line at once.
#pragma once

#include "ondemand_util.hpp"
#include "raw_scan.hpp"

#include <optional>
#include <string_view>

namespace agenthost::mapper::detail {

/// INCORRECT_TYPE / NUMBER_ERROR / NUMBER_OUT_OF_RANGE: the value is there but not of the type the field needs.
inline bool is_type_mismatch(simdjson::error_code e) noexcept {
  return e == simdjson::INCORRECT_TYPE || e == simdjson::NUMBER_ERROR || e == simdjson::NUMBER_OUT_OF_RANGE;
}

/// A type mismatch sets `wrong_type` and is not an error; any other error is returned.
inline simdjson::error_code note(simdjson::error_code e, bool& wrong_type) noexcept {
  if (is_type_mismatch(e)) {
    wrong_type = true;
    return simdjson::SUCCESS;
  }
  return e;
}

/// The key of a field: a view of the raw bytes when it has no escape sequence (the usual case, no copy), else the
/// unescaped key.
inline simdjson::error_code get_key(od::field& field, std::string_view& out) noexcept {
  const char* raw = field.key().raw();
  // The document is structurally valid and padded: the closing quote is there.
  const char* p = raw::find_quote_or_backslash_padded(raw);
  if (*p == '\\') return field.unescaped_key().get(out);
  out = std::string_view(raw, static_cast<std::size_t>(p - raw));
  return simdjson::SUCCESS;
}

/// True (and the value consumed) when it is JSON null: the field counts as absent. False on an error too: the read
/// that follows reports it.
inline bool is_null(od::value& v) noexcept {
  od::json_type t{};
  if (v.type().get(t) != simdjson::SUCCESS) return false;
  return t == od::json_type::null;
}

/// The value's JSON type; `null` is true (and the value consumed) for JSON null.
inline simdjson::error_code type_or_null(od::value& v, od::json_type& t, bool& null) noexcept {
  if (auto e = v.type().get(t)) return e;
  null = t == od::json_type::null;
  return simdjson::SUCCESS;
}

/// A string field (`has` set when present). The view lives until the next line (simdjson's buffer or `arena`).
inline simdjson::error_code read_string(od::value& v, std::string_view& out, string_arena& arena,
                                        bool* has = nullptr) noexcept {
  od::json_type t{};
  bool null = false;
  if (auto e = type_or_null(v, t, null); e || null) return e;
  if (t != od::json_type::string) return simdjson::INCORRECT_TYPE;
  if (auto e = get_string(v, out, arena)) return e;
  if (has != nullptr) *has = true;
  return simdjson::SUCCESS;
}

/// A number field, integer or not.
inline simdjson::error_code read_double(od::value& v, std::optional<double>& out) noexcept {
  od::json_type t{};
  bool null = false;
  if (auto e = type_or_null(v, t, null); e || null) return e;
  if (t != od::json_type::number) return simdjson::INCORRECT_TYPE;
  double d = 0;
  if (auto e = get_number(v, d)) return e;
  out = d;
  return simdjson::SUCCESS;
}

/// An integer field (counts, codes): an integral number within ±9·10^15 (12.0 counts; 1.5 or 1e300 is a wrong value,
/// not something to round silently).
inline simdjson::error_code read_int(od::value& v, std::optional<long long>& out) noexcept {
  std::optional<double> d;
  if (auto e = read_double(v, d); e || !d) return e;
  if (*d < -9.0e15 || *d > 9.0e15 || *d != static_cast<double>(static_cast<long long>(*d))) return simdjson::NUMBER_ERROR;
  out = static_cast<long long>(*d);
  return simdjson::SUCCESS;
}

/// A count: read_int, absent = 0.
inline simdjson::error_code read_count(od::value& v, long long& out) noexcept {
  std::optional<long long> n;
  if (auto e = read_int(v, n)) return e;
  out = n.value_or(0);
  return simdjson::SUCCESS;
}

inline simdjson::error_code read_bool(od::value& v, std::optional<bool>& out) noexcept {
  od::json_type t{};
  bool null = false;
  if (auto e = type_or_null(v, t, null); e || null) return e;
  if (t != od::json_type::boolean) return simdjson::INCORRECT_TYPE;
  bool b = false;
  if (auto e = v.get_bool().get(b)) return e;
  out = b;
  return simdjson::SUCCESS;
}

/// An object field: f(od::object) reads it; null is absent, another type a mismatch.
template <class F>
simdjson::error_code read_object(od::value& v, F&& f) {
  od::json_type t{};
  bool null = false;
  if (auto e = type_or_null(v, t, null); e || null) return e;
  if (t != od::json_type::object) return simdjson::INCORRECT_TYPE;
  od::object obj;
  if (auto e = v.get_object().get(obj)) return e;
  return f(obj);
}

/// Calls f(key, value) for every field of `obj`; f returns an error_code, of which a type mismatch is noted in
/// `wrong_type` and the walk goes on.
template <class F>
simdjson::error_code for_fields(od::object& obj, bool& wrong_type, F&& f) {
  for (auto field_result : obj) {
    od::field field;
    if (auto e = std::move(field_result).get(field)) return e;
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return e;
    od::value v = field.value();
    if (auto e = note(f(key, v), wrong_type)) return e;
  }
  return simdjson::SUCCESS;
}

}  // namespace agenthost::mapper::detail
