#include "claude_event.hpp"

#include "ondemand_fields.hpp"

namespace agenthost::mapper::detail::claude {

using simdjson::error_code;

namespace {


line_kind classify(std::string_view t) noexcept {
  if (t == "stream_event") return line_kind::stream_event;
  if (t == "assistant") return line_kind::assistant;
  if (t == "user") return line_kind::user;
  if (t == "system") return line_kind::system;
  if (t == "result") return line_kind::result;
  return line_kind::unknown;
}

api_kind classify_api(std::string_view t) noexcept {
  if (t == "content_block_delta") return api_kind::content_block_delta;
  if (t == "content_block_start") return api_kind::content_block_start;
  if (t == "content_block_stop") return api_kind::content_block_stop;
  if (t == "message_start") return api_kind::message_start;
  if (t == "message_delta") return api_kind::message_delta;
  if (t == "message_stop") return api_kind::message_stop;
  return api_kind::unknown;
}

delta_kind classify_delta(std::string_view t) noexcept {
  if (t == "text_delta") return delta_kind::text;
  if (t == "thinking_delta") return delta_kind::thinking;
  if (t == "input_json_delta") return delta_kind::input_json;
  if (t == "signature_delta") return delta_kind::signature;
  return delta_kind::unknown;
}

}  // namespace

block_kind classify_block(std::string_view t) noexcept {
  if (t == "text") return block_kind::text;
  if (t == "thinking") return block_kind::thinking;
  if (t == "tool_use") return block_kind::tool_use;
  if (t == "tool_result") return block_kind::tool_result;
  return block_kind::other;
}

void x_event::reset() {
  kind = line_kind::unknown;
  has_type = false;
  clear_views(subtype, session_id, uuid);
  from_subagent = false;
  api = api_kind::unknown;
  index.reset();
  delta = delta_kind::unknown;
  delta_text = {};
  if (!cold_dirty) return;
  cold_dirty = false;
  clear_views(model, cwd);
  attempt.reset();
  max_retries.reset();
  retry_delay_ms.reset();
  error_status.reset();
  error = {};
  clear_views(api_message_id, api_model, stop_reason);
  // Field by field: assigning a fresh x_block would rebuild its JSON member on every line.
  content_block.kind = block_kind::other;
  clear_views(content_block.text, content_block.id, content_block.name);
  if (content_block.has_input) content_block.input = nullptr;
  content_block.has_input = false;
  content_block.is_error = false;
  usage = x_usage{};
  abandoned = false;
  abandoned_from.reset();
  abandoned_message_id = {};
  has_message = false;
  clear_views(message_id, message_model);
  nblocks = 0;
  if (blocks.size() > kKeptBlocks) {  // after a line with many blocks: not kept for the mapper's lifetime
    blocks.resize(kKeptBlocks);
    blocks.shrink_to_fit();
  }
  is_api_error_message = false;
  if (has_tool_use_result) tool_use_result = nullptr;
  has_tool_use_result = false;
  is_error.reset();
  has_result_text = false;
  result_text = {};
  api_error_status.reset();
  terminal_reason = {};
  num_turns.reset();
  total_cost_usd.reset();
  errors.clear();
}

event_parser::event_parser(bool fast_path) : fast_path_(fast_path) {
  ev_.blocks.reserve(4);
}

error_code event_parser::parse(std::string_view line) {
  ev_.reset();
  if (!arena_.empty()) arena_.clear();
  took_fast_ = fast_path_ && parse_fast(line);
  if (took_fast_) return simdjson::SUCCESS;
  ev_.reset();  // the fast path gave up: whatever it set is discarded
  if (!arena_.empty()) arena_.clear();
  ev_.cold_dirty = true;
  od::document doc;
  if (auto e = padded_.iterate(line, doc)) return e;
  od::object root;
  if (auto e = doc.get_object().get(root)) return e;
  if (auto e = parse_root(root)) return unknown_kind_or(e, line);
  if (!ev_.has_type) return simdjson::NO_SUCH_FIELD;
  return check_end(doc);
}

error_code event_parser::unknown_kind_or(error_code e, std::string_view line) {
  // parse_root reads the fields of every kind of line whatever `type` says, so a field of a type the mapper does not
  // expect failed the line. A line of an unknown kind is ignored (docs/contract.md §5.1) whatever its fields hold,
  // provided it is JSON: a second pass, only on this error path, validates the whole line and reads `type`.
  ev_.reset();
  if (!arena_.empty()) arena_.clear();
  od::document doc;
  od::object root;
  if (padded_.iterate(line, doc) || doc.get_object().get(root)) return e;
  std::string_view type;
  bool has_type = false;
  for (auto field_result : root) {
    od::field field;
    std::string_view key;
    if (std::move(field_result).get(field) || get_key(field, key)) return e;
    if (key == "type") {
      if (get_string(field.value(), type, arena_)) return e;
      has_type = true;
    } else if (validate_json(field.value(), arena_)) {
      return e;
    }
  }
  if (check_end(doc) || !has_type || classify(type) != line_kind::unknown) return e;
  ev_.reset();
  ev_.kind = line_kind::unknown;
  ev_.has_type = true;
  return simdjson::SUCCESS;
}

error_code event_parser::parse_root(od::object root) {
  x_event& ev = ev_;
  for (auto field_result : root) {
    od::field field;
    if (auto e = std::move(field_result).get(field)) return e;
    std::string_view key;
    if (auto e = get_key(field, key)) return e;
    od::value& v = field.value();
    // Keys are read whatever `type` says (Claude writes `type` first, except on `result`, where it comes late): every
    // key below belongs to one kind of line only, and the mapper looks only at the fields of the line's kind.
    if (key == "type") {
      std::string_view t;
      if (auto e = get_string(v, t, arena_)) return e;  // `type` must be a string
      ev.kind = classify(t);
      ev.has_type = true;
    } else if (key == "event") {
      if (auto e = parse_api_event(v)) return e;
    } else if (key == "parent_tool_use_id") {
      std::string_view parent;
      if (auto e = read_string(v, parent, arena_)) return e;
      ev.from_subagent = !parent.empty();
    } else if (key == "session_id") {
      if (auto e = read_string(v, ev.session_id, arena_)) return e;
    } else if (key == "uuid") {
      if (auto e = read_string(v, ev.uuid, arena_)) return e;
    } else if (key == "subtype") {
      if (auto e = read_string(v, ev.subtype, arena_)) return e;
    } else if (key == "message") {
      if (auto e = parse_message(v)) return e;
    } else if (key == "tool_use_result") {
      if (auto e = to_json(v, ev.tool_use_result, arena_)) return e;
      ev.has_tool_use_result = !ev.tool_use_result.is_null();
    } else if (key == "is_api_error_message") {
      std::optional<bool> b;
      if (auto e = read_bool(v, b)) return e;
      ev.is_api_error_message = b.value_or(false);
    } else if (key == "abandoned_blocks") {
      if (auto e = parse_abandoned(v)) return e;
    } else if (key == "model") {
      if (auto e = read_string(v, ev.model, arena_)) return e;
    } else if (key == "cwd") {
      if (auto e = read_string(v, ev.cwd, arena_)) return e;
    } else if (key == "attempt") {
      if (auto e = read_double(v, ev.attempt)) return e;
    } else if (key == "max_retries") {
      if (auto e = read_double(v, ev.max_retries)) return e;
    } else if (key == "retry_delay_ms") {
      if (auto e = read_double(v, ev.retry_delay_ms)) return e;
    } else if (key == "error_status") {
      if (auto e = read_double(v, ev.error_status)) return e;
    } else if (key == "error") {
      // api_retry's error category; synthetic assistant frames carry one too. Only a string is used.
      od::json_type t{};
      if (auto e = v.type().get(t)) return e;
      if (t == od::json_type::string) {
        if (auto e = get_string(v, ev.error, arena_)) return e;
      }
    } else if (key == "is_error") {
      if (auto e = read_bool(v, ev.is_error)) return e;
    } else if (key == "result") {
      if (is_null(v)) continue;
      if (auto e = get_string(v, ev.result_text, arena_)) return e;
      ev.has_result_text = true;
    } else if (key == "api_error_status") {
      if (auto e = read_double(v, ev.api_error_status)) return e;
    } else if (key == "stop_reason") {
      if (auto e = read_string(v, ev.stop_reason, arena_)) return e;
    } else if (key == "terminal_reason") {
      if (auto e = read_string(v, ev.terminal_reason, arena_)) return e;
    } else if (key == "num_turns") {
      if (auto e = read_double(v, ev.num_turns)) return e;
    } else if (key == "total_cost_usd") {
      if (auto e = read_double(v, ev.total_cost_usd)) return e;
    } else if (key == "usage") {
      if (auto e = parse_usage(v, ev.usage)) return e;
    } else if (key == "errors") {
      if (auto e = parse_errors(v)) return e;
    }
  }
  return simdjson::SUCCESS;
}

error_code event_parser::parse_api_event(od::value v) {
  if (is_null(v)) return simdjson::SUCCESS;  // null counts as absent (docs/contract.md §5.6)
  od::object obj;
  if (auto e = v.get_object().get(obj)) return e;
  for (auto field_result : obj) {
    od::field field;
    if (auto e = std::move(field_result).get(field)) return e;
    std::string_view key;
    if (auto e = get_key(field, key)) return e;
    od::value& fv = field.value();
    if (key == "type") {
      std::string_view t;
      if (auto e = get_string(fv, t, arena_)) return e;
      ev_.api = classify_api(t);
    } else if (key == "index") {
      if (auto e = read_double(fv, ev_.index)) return e;
    } else if (key == "delta") {
      if (auto e = parse_delta(fv)) return e;
    } else if (key == "content_block") {
      if (auto e = parse_block(fv, ev_.content_block)) return e;
    } else if (key == "usage") {
      if (auto e = parse_usage(fv, ev_.usage)) return e;
    } else if (key == "message") {  // message_start: the API message's id, model and initial usage
      if (is_null(fv)) continue;
      od::object m;
      if (auto e = fv.get_object().get(m)) return e;
      for (auto mf_result : m) {
        od::field mf;
        if (auto e = std::move(mf_result).get(mf)) return e;
        std::string_view mk;
        if (auto e = get_key(mf, mk)) return e;
        od::value& mv = mf.value();
        if (mk == "id") {
          if (auto e = read_string(mv, ev_.api_message_id, arena_)) return e;
        } else if (mk == "model") {
          if (auto e = read_string(mv, ev_.api_model, arena_)) return e;
        } else if (mk == "usage") {
          if (auto e = parse_usage(mv, ev_.usage)) return e;
        }
      }
    }
  }
  return simdjson::SUCCESS;
}

error_code event_parser::parse_delta(od::value v) {
  if (is_null(v)) return simdjson::SUCCESS;
  od::object obj;
  if (auto e = v.get_object().get(obj)) return e;
  for (auto field_result : obj) {
    od::field field;
    if (auto e = std::move(field_result).get(field)) return e;
    std::string_view key;
    if (auto e = get_key(field, key)) return e;
    od::value& fv = field.value();
    if (key == "type") {
      std::string_view t;
      if (auto e = get_string(fv, t, arena_)) return e;
      ev_.delta = classify_delta(t);
    } else if (key == "text" || key == "thinking" || key == "partial_json") {
      if (auto e = read_string(fv, ev_.delta_text, arena_)) return e;
    } else if (key == "stop_reason") {  // message_delta
      if (auto e = read_string(fv, ev_.stop_reason, arena_)) return e;
    }
  }
  return simdjson::SUCCESS;
}

error_code event_parser::parse_block(od::value v, x_block& b) {
  if (is_null(v)) return simdjson::SUCCESS;
  od::object obj;
  if (auto e = v.get_object().get(obj)) return e;
  for (auto field_result : obj) {
    od::field field;
    if (auto e = std::move(field_result).get(field)) return e;
    std::string_view key;
    if (auto e = get_key(field, key)) return e;
    od::value& fv = field.value();
    if (key == "type") {
      std::string_view t;
      if (auto e = get_string(fv, t, arena_)) return e;
      b.kind = classify_block(t);
    } else if (key == "text" || key == "thinking") {
      if (auto e = read_string(fv, b.text, arena_)) return e;
    } else if (key == "id" || key == "tool_use_id") {
      if (auto e = read_string(fv, b.id, arena_)) return e;
    } else if (key == "name") {
      if (auto e = read_string(fv, b.name, arena_)) return e;
    } else if (key == "input" || key == "content") {
      // tool_use input / tool_result content: emitted content, built as JSON.
      if (auto e = to_json(fv, b.input, arena_)) return e;
      b.has_input = true;
    } else if (key == "is_error") {
      std::optional<bool> err;
      if (auto e = read_bool(fv, err)) return e;
      b.is_error = err.value_or(false);
    }
  }
  return simdjson::SUCCESS;
}

error_code event_parser::parse_message(od::value v) {
  if (is_null(v)) return simdjson::SUCCESS;
  od::object obj;
  if (auto e = v.get_object().get(obj)) return e;
  ev_.has_message = true;
  for (auto field_result : obj) {
    od::field field;
    if (auto e = std::move(field_result).get(field)) return e;
    std::string_view key;
    if (auto e = get_key(field, key)) return e;
    od::value& fv = field.value();
    if (key == "id") {
      if (auto e = read_string(fv, ev_.message_id, arena_)) return e;
    } else if (key == "model") {
      if (auto e = read_string(fv, ev_.message_model, arena_)) return e;
    } else if (key == "content") {
      od::json_type t{};
      if (auto e = fv.type().get(t)) return e;
      if (t == od::json_type::string || t == od::json_type::null) continue;  // a plain user prompt: nothing to map
      od::array arr;
      if (auto e = fv.get_array().get(arr)) return e;
      std::size_t position = 0;
      for (auto element_result : arr) {
        od::value element;
        if (auto e = std::move(element_result).get(element)) return e;
        if (ev_.nblocks == ev_.blocks.size()) ev_.blocks.emplace_back();
        x_block& b = ev_.blocks[ev_.nblocks];
        b = x_block{};
        if (auto e = parse_block(element, b)) return e;
        // Each block read is 88 bytes and more: an array of 20 million `{}` (a 64 MiB line) would take gigabytes.
        // Past the last position an assistant message is followed at, only what is read at any position is kept
        // (a user message's tool results, an error message's text), so the first positions stay where they are.
        if (position++ <= kMaxBlockPosition || b.kind == block_kind::text || b.kind == block_kind::tool_result)
          ++ev_.nblocks;
      }
    }
  }
  return simdjson::SUCCESS;
}

error_code event_parser::parse_usage(od::value v, x_usage& u) {
  if (is_null(v)) return simdjson::SUCCESS;
  od::object obj;
  if (auto e = v.get_object().get(obj)) return e;
  u.present = true;
  for (auto field_result : obj) {
    od::field field;
    if (auto e = std::move(field_result).get(field)) return e;
    std::string_view key;
    if (auto e = get_key(field, key)) return e;
    od::value& fv = field.value();
    if (key == "input_tokens") {
      if (auto e = read_double(fv, u.input)) return e;
    } else if (key == "output_tokens") {
      if (auto e = read_double(fv, u.output)) return e;
    } else if (key == "cache_read_input_tokens") {
      if (auto e = read_double(fv, u.cache_read)) return e;
    } else if (key == "cache_creation_input_tokens") {
      if (auto e = read_double(fv, u.cache_write)) return e;
    }
  }
  return simdjson::SUCCESS;
}

error_code event_parser::parse_abandoned(od::value v) {
  if (is_null(v)) return simdjson::SUCCESS;
  od::object obj;
  if (auto e = v.get_object().get(obj)) return e;
  ev_.abandoned = true;
  for (auto field_result : obj) {
    od::field field;
    if (auto e = std::move(field_result).get(field)) return e;
    std::string_view key;
    if (auto e = get_key(field, key)) return e;
    od::value& fv = field.value();
    if (key == "from_block_index") {
      if (auto e = read_double(fv, ev_.abandoned_from)) return e;
    } else if (key == "api_message_id") {
      if (auto e = read_string(fv, ev_.abandoned_message_id, arena_)) return e;
    }
  }
  return simdjson::SUCCESS;
}

error_code event_parser::parse_errors(od::value v) {
  if (is_null(v)) return simdjson::SUCCESS;
  od::array arr;
  if (auto e = v.get_array().get(arr)) return e;
  for (auto element_result : arr) {
    od::value element;
    if (auto e = std::move(element_result).get(element)) return e;
    std::string_view s;
    if (auto e = get_string(element, s, arena_)) return e;
    if (!ev_.errors.empty()) ev_.errors += "; ";
    ev_.errors.append(s);
  }
  return simdjson::SUCCESS;
}

}  // namespace agenthost::mapper::detail::claude
