// Internal: the lenient field readers of pi's On-Demand parser (pi_event.cpp, pi_event_message.cpp).
#pragma once

#include "ondemand_fields.hpp"
#include "pi_event.hpp"

#include <nlohmann/json.hpp>

#include <string_view>

namespace agenthost::mapper::detail::pi_readers {

using simdjson::error_code;

// The fields pi's parser reads leniently: a field of the wrong JSON type is treated as absent; anything else
// (structure, depth, strings) fails the line.
inline error_code opt_string(od::value& v, std::string_view& out, string_arena& arena, bool* has = nullptr) {
  std::string_view s;
  const auto e = get_string(v, s, arena);
  if (e == simdjson::SUCCESS) {
    out = s;
    if (has != nullptr) *has = true;
    return e;
  }
  return is_type_mismatch(e) ? simdjson::SUCCESS : e;
}

inline error_code opt_bool(od::value& v, int& out) {
  bool b = false;
  const auto e = v.get_bool().get(b);
  if (e == simdjson::SUCCESS) {
    out = b ? 1 : 0;
    return e;
  }
  return is_type_mismatch(e) ? simdjson::SUCCESS : e;
}

inline error_code opt_bool(od::value& v, bool& out) {
  int b = -1;
  const auto e = opt_bool(v, b);
  if (b >= 0) out = b == 1;
  return e;
}

inline error_code opt_number(od::value& v, double& out, bool* has = nullptr) {
  double d = 0;
  const auto e = get_number(v, d);
  if (e == simdjson::SUCCESS) {
    out = d;
    if (has != nullptr) *has = true;
    return e;
  }
  return is_type_mismatch(e) ? simdjson::SUCCESS : e;
}

inline error_code opt_json(od::value& v, nlohmann::json& out, string_arena& arena, bool& has) {
  if (const auto e = to_json(v, out, arena)) return e;
  has = true;
  return simdjson::SUCCESS;
}

/// The token count of usage named `key` (input, output, cacheRead, cacheWrite, totalTokens), or nullptr.
inline double* token_field(x_usage& u, std::string_view key) noexcept {
  if (key == "input") return &u.input;
  if (key == "output") return &u.output;
  if (key == "cacheRead") return &u.cache_read;
  if (key == "cacheWrite") return &u.cache_write;
  if (key == "totalTokens") return &u.total_tokens;
  return nullptr;
}

/// The cost of usage.cost named `key` (input, output, cacheRead, cacheWrite, total), or nullptr.
inline double* cost_field(x_usage& u, std::string_view key) noexcept {
  if (key == "input") return &u.cost_input;
  if (key == "output") return &u.cost_output;
  if (key == "cacheRead") return &u.cost_cache_read;
  if (key == "cacheWrite") return &u.cost_cache_write;
  if (key == "total") return &u.cost_total;
  return nullptr;
}

inline block_kind classify_block(std::string_view t) noexcept {
  if (t == "text") return block_kind::text;
  if (t == "thinking") return block_kind::thinking;
  if (t == "toolCall") return block_kind::tool_call;
  return block_kind::other;
}

}  // namespace agenthost::mapper::detail::pi_readers
