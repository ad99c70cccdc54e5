// Internal: extraction of one pi JSONL line into x_event.
#include "pi_event.hpp"

#include "message_reuse.hpp"
#include "ondemand_fields.hpp"
#include "pi_event_readers.hpp"
#include "raw_scan.hpp"

#include <cstring>

namespace agenthost::mapper::detail {

using simdjson::error_code;
using namespace pi_readers;

event_kind classify_event(std::string_view t) noexcept {
  // By length first: a type the mapper does not map (such lines can be most of a stream) is told apart with at most
  // two compares, not one per known type.
  switch (t.size()) {
    case 7:
      if (t == "session") return event_kind::session;
      break;
    case 8:
      if (t == "turn_end") return event_kind::turn_end;
      break;
    case 9:
      if (t == "agent_end") return event_kind::agent_end;
      break;
    case 10:
      if (t == "turn_start") return event_kind::turn_start;
      break;
    case 11:
      if (t == "message_end") return event_kind::message_end;
      if (t == "agent_start") return event_kind::agent_start;
      break;
    case 13:
      if (t == "message_start") return event_kind::message_start;
      if (t == "agent_settled") return event_kind::agent_settled;
      break;
    case 14:
      if (t == "message_update") return event_kind::message_update;
      if (t == "auto_retry_end") return event_kind::auto_retry_end;
      if (t == "compaction_end") return event_kind::compaction_end;
      break;
    case 15:
      if (t == "extension_error") return event_kind::extension_error;
      break;
    case 16:
      if (t == "auto_retry_start") return event_kind::auto_retry_start;
      if (t == "compaction_start") return event_kind::compaction_start;
      break;
    case 18:
      if (t == "tool_execution_end") return event_kind::tool_execution_end;
      break;
    case 19:
      if (t == "auto_compaction_end") return event_kind::compaction_end;
      break;
    case 20:
      if (t == "tool_execution_start") return event_kind::tool_execution_start;
      break;
    case 21:
      if (t == "tool_execution_update") return event_kind::tool_execution_update;
      if (t == "auto_compaction_start") return event_kind::compaction_start;
      break;
    default:
      break;
  }
  return event_kind::unknown;
}

update_kind classify_update(std::string_view t) noexcept {
  if (t == "text_delta") return update_kind::text_delta;
  if (t == "thinking_delta") return update_kind::thinking_delta;
  if (t == "toolcall_delta") return update_kind::toolcall_delta;
  if (t == "text_start") return update_kind::text_start;
  if (t == "text_end") return update_kind::text_end;
  if (t == "thinking_start") return update_kind::thinking_start;
  if (t == "thinking_end") return update_kind::thinking_end;
  if (t == "toolcall_start") return update_kind::toolcall_start;
  if (t == "toolcall_end") return update_kind::toolcall_end;
  return update_kind::unknown;
}

void x_message::reset() {
  present = false;
  clear_views(role, stop_reason, error_message, model, tool_call_id, tool_name);
  has_error_message = false;
  is_error = false;
  has_content = false;
  nblocks = 0;
  if (has_content_json) content_json = nullptr;
  has_content_json = false;
  if (has_details) details = nullptr;
  has_details = false;
  usage = x_usage{};
}

x_block& x_message::add_block() {
  if (nblocks == blocks.size()) blocks.emplace_back();
  x_block& b = blocks[nblocks++];
  b.kind = block_kind::other;
  clear_views(b.text, b.id, b.name);
  if (b.has_arguments) b.arguments = nullptr;
  b.has_arguments = false;
  return b;
}

void x_event::reset() {
  // The update fields (the hot path: one message_update per streamed token).
  kind = event_kind::unknown;
  has_type = false;
  type_members = 0;
  has_update = false;
  update = update_kind::unknown;
  content_index = -1;
  has_delta = has_content = false;
  clear_views(delta, content, update_id, update_tool_name);
  // Not only after a line with a toolCall: one whose parse failed half-way wrote views without setting has_tool_call,
  // and a later toolCall without an `id` or `name` would read them — views into another line's bytes, maybe of a
  // parser destroyed since (the record is per thread). Three views: cheap on this hot, per-thread record.
  if (tool_call.has_arguments) {
    tool_call.arguments = nullptr;
    tool_call.has_arguments = false;
  }
  tool_call.kind = block_kind::other;
  clear_views(tool_call.text, tool_call.id, tool_call.name);
  has_tool_call = false;
  if (snapshot.present) snapshot.reset();
  has_snapshot = false;
  if (only_update_fields) return;  // the previous line was a message_update whose `type` came first
  only_update_fields = true;
  if (message.present) message.reset();
  for (std::size_t i = 0; i < ntool_results; ++i) tool_results[i].reset();
  ntool_results = 0;
  clear_views(session_id, cwd, tool_call_id, tool_name);
  if (has_args) args = nullptr;
  has_args = false;
  if (has_result) result = nullptr;
  has_result = false;
  if (has_partial_text) {
    has_partial_text = false;
    clear_kept(partial_text, kReleaseBufferAbove);
  }
  is_error = false;
  will_retry = aborted = success = -1;
  has_attempt = has_max_attempts = has_delay = false;
  attempt = max_attempts = delay_ms = 0;
  clear_views(error_message, final_error, reason, error);
}

bool x_event::needs_snapshot() const noexcept {
  switch (update) {
    case update_kind::text_delta:
    case update_kind::thinking_delta:
      return !has_delta;
    case update_kind::text_end:
    case update_kind::thinking_end:
      return !has_content;
    default:
      return false;  // never derive text from a *_start snapshot
  }
}

void pi_event_parser::forget_cumulative_text() noexcept {
  // Buffers of an ordinary size are kept for the next tool's output (regrown from nothing, they were reallocated
  // about a dozen times per tool, copying cold memory each time); only a large one is given back.
  constexpr std::size_t kMaxKept = 64 * 1024;
  clear_kept(text_memo_raw_, kMaxKept);
  clear_kept(text_memo_text_, kMaxKept);
}

x_event& pi_event_parser::thread_event() {
  thread_local x_event ev;
  return ev;
}

error_code pi_event_parser::parse(std::string_view line) {
  ev_ = &thread_event();
  ev_->reset();
  if (!arena_.empty()) arena_.clear();
  deferred_partial_ = {};
  deferred_message_ = {};
  const std::size_t had = capacity_;
  reserve_padded(buffer_, capacity_, parser_, line.size() + simdjson::SIMDJSON_PADDING);
  // The buffer was given back after a huge line: so is the deferred parser's index, sized for that line's message.
  if (capacity_ < had) deferred_parser_ = od::parser{};
  took_fast_ = parse_fast(line);
  if (took_fast_) return simdjson::SUCCESS;
  ev_->reset();  // the fast path gave up: whatever it set is discarded

  std::memcpy(buffer_.get(), line.data(), line.size());
  std::memset(buffer_.get() + line.size(), 0, simdjson::SIMDJSON_PADDING);

  const error_code e = parse_ondemand(line.size());
  if (e == simdjson::SUCCESS && (ev_->kind == event_kind::tool_execution_end || ev_->kind == event_kind::turn_end ||
                                 ev_->kind == event_kind::agent_end)) {
    // A tool ended: its output no longer grows, so the memo of its cumulative text goes (a large one is freed: it may
    // hold megabytes, per agent; the next tool's first update rebuilds it).
    forget_cumulative_text();
  }
  if (e == simdjson::SUCCESS && ev_->has_partial_text && ev_->type_members > 1) {
    // The event was reclassified after a partialResult was read as text only: read the line again, building it.
    ev_->reset();
    if (!arena_.empty()) arena_.clear();
    deferred_partial_ = {};
    deferred_message_ = {};
    partial_text_allowed_ = false;
    const error_code again = parse_ondemand(line.size());
    partial_text_allowed_ = true;
    return again;
  }
  return e;
}

error_code pi_event_parser::parse_ondemand(std::size_t size) {
  od::document doc;
  if (auto e = parser_.iterate(buffer_.get(), size, capacity_).get(doc)) return e;
  od::object root;
  if (auto e = doc.get_object().get(root)) return e;
  if (auto e = parse_root(root)) return e;
  if (!ev_->has_type) return simdjson::NO_SUCH_FIELD;
  if (auto e = check_end(doc)) return e;

  // Objects met before we knew whether they were needed.
  x_event& ev = *ev_;
  if (ev.kind == event_kind::message_update) {
    if (ev.has_update && ev.needs_snapshot() && !ev.has_snapshot) {
      const std::string_view raw = !deferred_partial_.empty() ? deferred_partial_ : deferred_message_;
      if (!raw.empty()) {
        if (auto e = parse_deferred(raw, ev.snapshot, true, false)) return e;
        ev.has_snapshot = ev.snapshot.present;
      }
    }
  } else if (!deferred_message_.empty() &&
             (ev.kind == event_kind::message_start || ev.kind == event_kind::message_end ||
              ev.kind == event_kind::turn_end)) {
    if (auto e = parse_deferred(deferred_message_, ev.message, false, ev.kind == event_kind::message_start)) return e;
  }
  return simdjson::SUCCESS;
}

error_code pi_event_parser::parse_deferred(std::string_view raw, x_message& m, bool snapshot_only, bool header_only) {
  // `raw` lies inside buffer_, which has at least SIMDJSON_PADDING bytes after the line.
  const std::size_t offset = static_cast<std::size_t>(raw.data() - buffer_.get());
  od::document doc;
  if (auto e = deferred_parser_.iterate(raw.data(), raw.size(), capacity_ - offset).get(doc)) return e;
  od::value v;
  if (auto e = doc.get_value().get(v)) return e;
  m.reset();
  // Strings now point into deferred_parser_'s buffers, valid until the next line.
  return parse_message(v, m, snapshot_only, header_only);
}

error_code pi_event_parser::parse_root(od::object root) {
  x_event& ev = *ev_;
  for (auto field_result : root) {
    od::field field;
    if (auto e = std::move(field_result).get(field)) return e;
    std::string_view key;
    if (auto e = get_key(field, key)) return e;
    od::value& v = field.value();

    if (key == "type") {
      std::string_view t;
      if (auto e = get_string(v, t, arena_)) return e;  // `type` must be a string
      ev.kind = classify_event(t);
      ev.has_type = true;
      ++ev.type_members;
      continue;
    }
    if (ev.has_type && ev.kind == event_kind::message_update) {
      // Hot path: only two fields matter, everything else (`usage`…) is skipped.
      if (key == "assistantMessageEvent") {
        if (auto e = parse_update(v)) return e;
      } else if (key == "message" && ev.has_update) {
        // The cumulative snapshot (≤ 0.83): read only when the update had neither delta nor final content.
        if (ev.needs_snapshot() && !ev.has_snapshot && deferred_partial_.empty()) {
          if (auto e = parse_message(v, ev.snapshot, true)) return e;
          ev.has_snapshot = ev.snapshot.present;
        }
      } else if (key == "message") {
        od::object obj;  // before assistantMessageEvent: decide after the loop
        const auto e = v.get_object().get(obj);
        if (e == simdjson::SUCCESS) {
          if (auto e2 = obj.raw_json().get(deferred_message_)) return e2;
        } else if (!is_type_mismatch(e)) {
          return e;
        }
      }
      continue;
    }
    if (ev.has_type && ev.kind == event_kind::unknown) continue;  // an event we do not map: skip its fields
    ev.only_update_fields = false;  // a field of another kind of event may be set below
    // Before `type` is known (pi always writes it first) every field is read as if it could matter.
    const bool any = !ev.has_type;
    const event_kind k = ev.kind;

    if (key == "assistantMessageEvent") {
      if (any || k == event_kind::message_update) {
        if (auto e = parse_update(v)) return e;
      }
    } else if (key == "message") {
      if (any) {
        // Not known yet whether (or how) it is needed: keep its raw JSON for after the loop.
        od::object obj;
        const auto e = v.get_object().get(obj);
        if (e == simdjson::SUCCESS) {
          if (auto e2 = obj.raw_json().get(deferred_message_)) return e2;
        } else if (!is_type_mismatch(e)) {
          return e;
        }
      } else if (k == event_kind::message_start || k == event_kind::message_end || k == event_kind::turn_end) {
        // message_start: the mapper reads the role and the model only.
        if (auto e = parse_message(v, ev.message, false, k == event_kind::message_start)) return e;
      }
    } else if (key == "toolResults") {
      if (any || k == event_kind::turn_end) {
        if (auto e = parse_tool_results(v)) return e;
      }
    } else if (key == "messages" || key == "usage") {
      continue;  // agent_end's full transcript, message_update's running usage: not needed
    } else if (key == "id") {
      if (any || k == event_kind::session) {
        if (auto e = opt_string(v, ev.session_id, arena_)) return e;
      }
    } else if (key == "cwd") {
      if (any || k == event_kind::session) {
        if (auto e = opt_string(v, ev.cwd, arena_)) return e;
      }
    } else if (key == "toolCallId") {
      if (auto e = opt_string(v, ev.tool_call_id, arena_)) return e;
    } else if (key == "toolName") {
      if (auto e = opt_string(v, ev.tool_name, arena_)) return e;
    } else if (key == "args") {
      if (any || k == event_kind::tool_execution_start) {
        if (auto e = opt_json(v, ev.args, arena_, ev.has_args)) return e;
      }
    } else if (key == "partialResult" || key == "result") {
      if (any || k == event_kind::tool_execution_update || k == event_kind::tool_execution_end ||
          k == event_kind::compaction_end) {
        if (k == event_kind::compaction_end) continue;
        if (k == event_kind::tool_execution_update && partial_text_allowed_) {
          // Only its text is mapped (tool.update output): no DOM of the (cumulative, often large) partial result.
          if (auto e = tool_result_text(v, ev.partial_text, arena_)) return e;
          ev.has_partial_text = true;
          continue;
        }
        if (auto e = opt_json(v, ev.result, arena_, ev.has_result)) return e;
      }
    } else if (key == "isError") {
      if (auto e = opt_bool(v, ev.is_error)) return e;
    } else if (key == "willRetry") {
      if (auto e = opt_bool(v, ev.will_retry)) return e;
    } else if (key == "aborted") {
      if (auto e = opt_bool(v, ev.aborted)) return e;
    } else if (key == "success") {
      if (auto e = opt_bool(v, ev.success)) return e;
    } else if (key == "attempt") {
      if (auto e = opt_number(v, ev.attempt, &ev.has_attempt)) return e;
    } else if (key == "maxAttempts") {
      if (auto e = opt_number(v, ev.max_attempts, &ev.has_max_attempts)) return e;
    } else if (key == "delayMs") {
      if (auto e = opt_number(v, ev.delay_ms, &ev.has_delay)) return e;
    } else if (key == "errorMessage") {
      if (auto e = opt_string(v, ev.error_message, arena_)) return e;
    } else if (key == "finalError") {
      if (auto e = opt_string(v, ev.final_error, arena_)) return e;
    } else if (key == "reason") {
      if (auto e = opt_string(v, ev.reason, arena_)) return e;
    } else if (key == "error") {
      if (any || k == event_kind::extension_error) {
        if (auto e = opt_string(v, ev.error, arena_)) return e;
      }
    }
  }
  return simdjson::SUCCESS;
}

error_code pi_event_parser::parse_update(od::value v) {
  x_event& ev = *ev_;
  od::object obj;
  if (auto e = v.get_object().get(obj)) return is_type_mismatch(e) ? simdjson::SUCCESS : e;
  ev.has_update = true;
  for (auto field_result : obj) {
    od::field field;
    if (auto e = std::move(field_result).get(field)) return e;
    std::string_view key;
    if (auto e = get_key(field, key)) return e;
    od::value& fv = field.value();
    if (key == "type") {
      std::string_view t;
      if (auto e = opt_string(fv, t, arena_)) return e;
      ev.update = classify_update(t);
    } else if (key == "contentIndex") {
      std::int64_t i = -1;
      const auto e = fv.get_int64().get(i);
      if (e == simdjson::SUCCESS) ev.content_index = i;
      else if (!is_type_mismatch(e)) return e;
    } else if (key == "delta") {
      if (auto e = opt_string(fv, ev.delta, arena_, &ev.has_delta)) return e;
    } else if (key == "content") {
      if (auto e = opt_string(fv, ev.content, arena_, &ev.has_content)) return e;
    } else if (key == "toolCall") {
      od::object tc;
      const auto e = fv.get_object().get(tc);
      if (e == simdjson::SUCCESS) {
        if (auto e2 = parse_block(tc, ev.tool_call, true)) return e2;
        ev.has_tool_call = true;
      } else if (!is_type_mismatch(e)) {
        return e;
      }
    } else if (key == "id") {
      if (auto e = opt_string(fv, ev.update_id, arena_)) return e;
    } else if (key == "toolName") {
      if (auto e = opt_string(fv, ev.update_tool_name, arena_)) return e;
    } else if (key == "partial") {
      // Skipped (the bulky cumulative snapshot) unless this update carries neither a delta nor final content.
      if (ev.update == update_kind::unknown) {
        od::object partial;  // `type` not seen yet: decide after the loop
        const auto e = fv.get_object().get(partial);
        if (e == simdjson::SUCCESS) {
          if (auto e2 = partial.raw_json().get(deferred_partial_)) return e2;
        } else if (!is_type_mismatch(e)) {
          return e;
        }
      } else if (ev.needs_snapshot() && !ev.has_snapshot) {
        if (auto e = parse_message(fv, ev.snapshot, true)) return e;
        ev.has_snapshot = ev.snapshot.present;
      }
    }
  }
  return simdjson::SUCCESS;
}

}  // namespace agenthost::mapper::detail
