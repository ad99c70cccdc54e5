// Internal: pi's On-Demand parse of a whole message (message_start / message_end / turn_end, cumulative snapshots) and
// of turn_end's toolResults. See pi_event.hpp; the rest of the parser is in pi_event.cpp and pi_event_fast.cpp.
#include "pi_event.hpp"

#include "ondemand_fields.hpp"
#include "pi_event_readers.hpp"

namespace agenthost::mapper::detail {

using simdjson::error_code;
using namespace pi_readers;

error_code pi_event_parser::parse_message(od::value v, x_message& m, bool snapshot_only, bool header_only) {
  od::object obj;
  if (auto e = v.get_object().get(obj)) return is_type_mismatch(e) ? simdjson::SUCCESS : e;
  m.present = true;
  // The JSON members (a toolResult's content and details) are checked exactly as to_json reads them but not built
  // when the mapper ignores them: in message_start (only role and model are read), and for the result of a call the
  // mapper closed already (its id came before: pi writes toolCallId before content).
  for (auto field_result : obj) {
    od::field field;
    if (auto e = std::move(field_result).get(field)) return e;
    std::string_view key;
    if (auto e = get_key(field, key)) return e;
    od::value& fv = field.value();
    if (key == "content") {
      if (!snapshot_only && m.role == "user") continue;  // the prompt: not mapped
      if (!snapshot_only && m.role == "toolResult") {
        m.has_content = true;
        if (result_json_ignored(m, header_only)) {
          if (auto e = validate_json(fv, arena_)) return e;
          continue;
        }
        if (auto e = to_json(fv, m.content_json, arena_)) return e;
        m.has_content_json = true;
        continue;
      }
      if (auto e = parse_blocks(fv, m, snapshot_only)) return e;
      continue;
    }
    if (snapshot_only) continue;
    if (key == "role") {
      if (auto e = opt_string(fv, m.role, arena_)) return e;
    } else if (key == "stopReason") {
      if (auto e = opt_string(fv, m.stop_reason, arena_)) return e;
    } else if (key == "errorMessage") {
      if (auto e = opt_string(fv, m.error_message, arena_, &m.has_error_message)) return e;
    } else if (key == "model") {
      if (auto e = opt_string(fv, m.model, arena_)) return e;
    } else if (key == "usage") {
      if (auto e = parse_usage(fv, m.usage)) return e;
    } else if (key == "toolCallId") {
      if (auto e = opt_string(fv, m.tool_call_id, arena_)) return e;
    } else if (key == "toolName") {
      if (auto e = opt_string(fv, m.tool_name, arena_)) return e;
    } else if (key == "isError") {
      if (auto e = opt_bool(fv, m.is_error)) return e;
    } else if (key == "details") {
      if (m.role == "assistant" || m.role == "user") continue;
      if (result_json_ignored(m, header_only)) {
        if (auto e = validate_json(fv, arena_)) return e;
        continue;
      }
      if (auto e = opt_json(fv, m.details, arena_, m.has_details)) return e;
    }
  }
  return simdjson::SUCCESS;
}

error_code pi_event_parser::parse_blocks(od::value v, x_message& m, bool snapshot_only) {
  od::json_type t{};
  if (auto e = v.type().get(t)) return e;
  if (t == od::json_type::string) {  // `content: "text"` (user-style): one text block
    x_block& b = m.add_block();
    b.kind = block_kind::text;
    if (auto e = get_string(v, b.text, arena_)) return e;
    m.has_content = true;
    return simdjson::SUCCESS;
  }
  if (t != od::json_type::array) return simdjson::SUCCESS;  // ignored
  od::array arr;
  if (auto e = v.get_array().get(arr)) return e;
  m.has_content = true;
  for (auto element_result : arr) {
    od::value element;
    if (auto e = std::move(element_result).get(element)) return e;
    x_block& b = m.add_block();
    od::object obj;
    const auto e = element.get_object().get(obj);
    if (e != simdjson::SUCCESS) {
      if (!is_type_mismatch(e)) return e;
      continue;  // not an object: an `other` block
    }
    if (auto e2 = parse_block(obj, b, !snapshot_only)) return e2;
  }
  return simdjson::SUCCESS;
}

error_code pi_event_parser::parse_block(od::object o, x_block& b, bool with_arguments) {
  std::string_view text, thinking;
  for (auto field_result : o) {
    od::field field;
    if (auto e = std::move(field_result).get(field)) return e;
    std::string_view key;
    if (auto e = get_key(field, key)) return e;
    od::value& fv = field.value();
    if (key == "type") {
      std::string_view t;
      if (auto e = opt_string(fv, t, arena_)) return e;
      b.kind = classify_block(t);
    } else if (key == "text") {
      if (auto e = opt_string(fv, text, arena_)) return e;
    } else if (key == "thinking") {
      if (auto e = opt_string(fv, thinking, arena_)) return e;
    } else if (key == "id") {
      if (auto e = opt_string(fv, b.id, arena_)) return e;
    } else if (key == "name") {
      if (auto e = opt_string(fv, b.name, arena_)) return e;
    } else if (key == "arguments" && with_arguments) {
      if (auto e = opt_json(fv, b.arguments, arena_, b.has_arguments)) return e;
    }
  }
  b.text = b.kind == block_kind::thinking ? thinking : text;
  return simdjson::SUCCESS;
}

error_code pi_event_parser::parse_usage(od::value v, x_usage& u) {
  od::object obj;
  if (auto e = v.get_object().get(obj)) return is_type_mismatch(e) ? simdjson::SUCCESS : e;
  u.present = true;
  for (auto field_result : obj) {
    od::field field;
    if (auto e = std::move(field_result).get(field)) return e;
    std::string_view key;
    if (auto e = get_key(field, key)) return e;
    od::value& fv = field.value();
    if (double* const target = token_field(u, key)) {
      if (auto e = opt_number(fv, *target)) return e;
    } else if (key == "reasoning") {
      if (auto e = opt_number(fv, u.reasoning, &u.has_reasoning)) return e;
    } else if (key == "cost") {
      od::object cost;
      const auto e = fv.get_object().get(cost);
      if (e != simdjson::SUCCESS) {
        if (!is_type_mismatch(e)) return e;
        continue;
      }
      u.has_cost = true;
      for (auto cost_field_result : cost) {
        od::field cf;
        if (auto e2 = std::move(cost_field_result).get(cf)) return e2;
        std::string_view ck;
        if (auto e2 = get_key(cf, ck)) return e2;
        if (double* const cost_target = cost_field(u, ck)) {
          if (auto e2 = opt_number(cf.value(), *cost_target)) return e2;
        }
      }
    }
  }
  return simdjson::SUCCESS;
}

error_code pi_event_parser::parse_tool_results(od::value v) {
  od::array arr;
  if (auto e = v.get_array().get(arr)) return is_type_mismatch(e) ? simdjson::SUCCESS : e;
  for (auto element_result : arr) {
    od::value element;
    if (auto e = std::move(element_result).get(element)) return e;
    if (ev_->ntool_results == ev_->tool_results.size()) ev_->tool_results.emplace_back();
    x_message& m = ev_->tool_results[ev_->ntool_results++];
    m.reset();
    if (auto e = parse_message(element, m, false)) return e;
  }
  return simdjson::SUCCESS;
}

}  // namespace agenthost::mapper::detail
