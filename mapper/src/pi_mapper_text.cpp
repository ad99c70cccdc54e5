// The pi mapper's state machine, continued: the text of the assistant message (deltas, snapshots, cross-turn replay,
// pi's retries) and its blocks. See pi_mapper_impl.hpp.
#include "pi_mapper_impl.hpp"

namespace agenthost::mapper {

using transport::message;
using transport::message_type;
using json = nlohmann::json;
using namespace detail;

// ---- assistant text --------------------------------------------------------------------------------------------

/// Text pi streamed for the current message, through the cross-turn replay filter. A replay arrives as text that
/// was already accumulated: the message's first text (`snapshot`: a cumulative snapshot or a final content, or a
/// single delta) already holds the previous tool-use turn's whole text followed by more. Text generated in deltas
/// (a first delta that is only a part of, or exactly, the previous text) is a new message and is emitted whole.
void pi_mapper::impl::emit_assistant_chunk(std::vector<message>& out, std::string_view chunk, bool snapshot) {
  if (chunk.empty()) return;
  if (replay_active) {
    const std::string_view ref = replay_ref;
    if (replay_pos > 0) {  // a snapshot equal to the previous text was held and the message goes on: a replay
      replay_active = false;
      replay_pos = 0;
      emit_visible(out, chunk);
      return;
    }
    replay_active = false;  // the message's first text decides
    if (chunk.size() >= ref.size() && chunk.substr(0, ref.size()) == ref) {
      if (chunk.size() > ref.size()) {  // the previous text at once, and more: drop the replay
        emit_visible(out, chunk.substr(ref.size()));
        return;
      }
      if (snapshot) {  // a snapshot equal to the previous text: a replay only if the message goes on
        replay_active = true;
        replay_pos = ref.size();
        return;
      }
    }
  }
  emit_visible(out, chunk);
}

/// Assistant text, through the auto-retry filter: a retried message's text that repeats what the failed attempt
/// already streamed is not emitted again, only what extends it; a retry that diverges voids the earlier partial
/// text with a warning (`retracted_text`), then its text is emitted from its start.
void pi_mapper::impl::emit_visible(std::vector<message>& out, std::string_view chunk) {
  if (chunk.empty()) return;
  if (retry_active) {
    const std::string_view rest = std::string_view(retry_ref).substr(retry_pos);
    const std::size_t n = common_prefix(chunk, rest);
    if (n == chunk.size()) {  // repeats the failed attempt's text: already streamed
      retry_pos += n;
      return;
    }
    retry_active = false;
    if (n == rest.size()) {  // the retry repeated all of it and goes on: only the new part
      emit_text(out, chunk.substr(n));
      return;
    }
    std::string whole = retry_ref.substr(0, retry_pos);
    whole.append(chunk);
    retract_failed_attempt(out);
    emit_text(out, whole);
    return;
  }
  emit_text(out, chunk);
}

void pi_mapper::impl::retract_failed_attempt(std::vector<message>& out) {
  any_diverged = true;
  status(out, "warning",
         "pi retried a failed model call and the retry's text differs from the partial text already streamed: "
         "that partial text is void, the assistant text after this status replaces it (terminal.completed `text` "
         "is authoritative)",
         json{{"code", "retry_diverged"}, {"retracted_text", retry_ref}});
  message_visible.clear();
}

/// The retried message ended (not with an error): if it repeated only a part of the failed attempt's text (or
/// none), the rest of what was streamed is void — say so, then emit the retry's text.
void pi_mapper::impl::settle_retry(std::vector<message>& out) {
  if (retry_active) {
    retry_active = false;
    if (retry_pos < retry_ref.size()) {
      retract_failed_attempt(out);
      emit_text(out, std::string_view(retry_ref).substr(0, retry_pos));
    }
  }
  retry_ref.clear();
  retry_pos = 0;
}

/// End of the current message while text is still held: it was equal to the previous text — a new message, not a
/// replay with something added. Emit it.
void pi_mapper::impl::flush_replay(std::vector<message>& out) {
  if (replay_active && replay_pos > 0) emit_visible(out, std::string_view(replay_ref).substr(0, replay_pos));
  replay_active = false;
  replay_pos = 0;
}

/// A text block ended, or a non-text block started, while text was held: the message is not a replay.
void pi_mapper::impl::flush_replay_if_holding(std::vector<message>& out) {
  if (replay_active && replay_pos > 0) flush_replay(out);
}

void pi_mapper::impl::append_text(std::vector<message>& out, std::size_t index, std::string_view chunk, bool snapshot) {
  if (chunk.empty()) return;
  blocks[index].text.append(chunk);
  if (!replay_active && !retry_active) {  // neither filter is holding text back (nearly every delta)
    emit_text(out, chunk);
    return;
  }
  emit_assistant_chunk(out, chunk, snapshot);
}

void pi_mapper::impl::diverged(std::vector<message>& out, std::size_t index, std::string_view final_text) {
  message_diverged = true;
  any_diverged = true;
  status(out, "warning",
         "pi's final text for this message differs from the streamed text; the final text is authoritative "
         "(terminal.completed `text`)",
         json{{"code", "text_diverged"}, {"content_index", index}, {"final_text", std::string(final_text)}});
}

/// `final_text` is authoritative for the block: emit what is missing, or report a divergence.
void pi_mapper::impl::reconcile_final(std::vector<message>& out, std::size_t index, std::string_view final_text) {
  block_state& b = blocks[index];
  if (b.text.size() == final_text.size() && b.text == final_text) return;
  if (final_text.size() > b.text.size() && final_text.compare(0, b.text.size(), b.text) == 0) {
    append_text(out, index, final_text.substr(b.text.size()), true);
    return;
  }
  diverged(out, index, final_text);
  blocks[index].text.assign(final_text);
}

/// A cumulative snapshot of the block (≤ 0.83 without delta): emit only the new suffix.
void pi_mapper::impl::reconcile_snapshot_text(std::vector<message>& out, std::size_t index, std::string_view snap) {
  block_state& b = blocks[index];
  if (snap.size() >= b.text.size() && snap.compare(0, b.text.size(), b.text) == 0) {
    append_text(out, index, snap.substr(b.text.size()), true);
  } else if (b.text.size() > snap.size() && std::string_view(b.text).substr(0, snap.size()) == snap) {
    // an older snapshot: nothing new
  } else {
    diverged(out, index, snap);
    blocks[index].text.assign(snap);
  }
}

// ---- blocks and messages ---------------------------------------------------------------------------------------

/// Index of the block for `content_index`, or (no usable index) of the last open block of that kind / a new one.
std::size_t pi_mapper::impl::resolve_block(std::int64_t content_index, block_kind kind) {
  if (content_index >= 0 && content_index < kMaxContentIndex) {
    const auto i = static_cast<std::size_t>(content_index);
    blocks.grow_to(i + 1);
    if (blocks[i].kind == block_kind::other) blocks[i].kind = kind;
    return i;
  }
  for (std::size_t j = blocks.size(); j-- > 0;) {
    if (blocks[j].kind == kind && !blocks[j].ended) return j;
  }
  blocks.emplace_back();
  blocks.back().kind = kind;
  return blocks.size() - 1;
}

void pi_mapper::impl::begin_message() {
  message_open = true;
  blocks.clear();
  message_diverged = false;
  replay_active = options.dedupe_replayed_text && !replay_ref.empty();
  replay_pos = 0;
  retry_active = retry_armed;
  retry_armed = false;
  retry_pos = 0;
  if (retry_active) {
    message_visible = retry_ref;
  } else {
    message_visible.clear();
    retry_ref.clear();
  }
}

void pi_mapper::impl::ensure_message_open() {
  if (!message_open) begin_message();
}

void pi_mapper::impl::release_thought_block(std::vector<message>& out, block_state& b) {
  if (b.released) return;
  b.released = true;
  emit_thought(out, b.text);
  b.text.clear();
}

/// Move the current message's thinking to its destination (stream: emitted now; buffered: pending).
void pi_mapper::impl::collect_thinking(std::vector<message>& out) {
  for (auto& b : blocks) {
    if (b.kind != block_kind::thinking) continue;
    if (options.thinking == thinking_mode::stream) {
      release_thought_block(out, b);
    } else if (!b.released && !b.text.empty()) {
      pending_thoughts.push_back(b.text);  // a copy: b.text's buffer stays for the next message's blocks
      b.text.clear();
      b.released = true;
    }
  }
}

void pi_mapper::impl::release_pending_thoughts(std::vector<message>& out) {
  for (auto& t : pending_thoughts) emit_thought(out, std::move(t));
  pending_thoughts.clear();
}

/// The assistant message ended without message_end (a new message_start, or finish()).
void pi_mapper::impl::abandon_message(std::vector<message>& out) {
  if (!message_open) return;
  flush_replay(out);
  settle_retry(out);
  collect_thinking(out);
  message_open = false;
  blocks.clear();
}

/// After a message ended (no message_start since): a text_end / thinking_end that repeats its block, or any
/// tool-call update (the call is already known), belongs to the ended message — pi printed it again.
bool pi_mapper::impl::repeats_ended_message(const x_event& ev) const {
  if (!after_end || message_open) return false;
  switch (ev.update) {
    case update_kind::text_end:
    case update_kind::thinking_end: {
      if (!ev.has_content || ev.content_index < 0 ||
          static_cast<std::size_t>(ev.content_index) >= ended_blocks.size())
        return false;
      const auto& b = ended_blocks[static_cast<std::size_t>(ev.content_index)];
      const block_kind kind = ev.update == update_kind::text_end ? block_kind::text : block_kind::thinking;
      return b.first == kind && b.second == ev.content;
    }
    case update_kind::toolcall_start:
    case update_kind::toolcall_delta:
      return true;
    default:
      return false;
  }
}

bool pi_mapper::impl::repeats_ended_message(const x_message& m) const {
  if (!after_end || !m.has_content || m.stop_reason != ended_stop_reason || m.nblocks != ended_blocks.size())
    return false;
  for (std::size_t i = 0; i < m.nblocks; ++i) {
    const x_block& b = m.blocks[i];
    if (b.kind != ended_blocks[i].first) return false;
    if ((b.kind == block_kind::tool_call ? b.id : b.text) != ended_blocks[i].second) return false;
  }
  return true;
}

void pi_mapper::impl::on_update(const x_event& ev, std::vector<message>& out) {
  if (repeats_ended_message(ev)) return;
  if (ev.update == update_kind::toolcall_end && after_end && !message_open) {
    if (ev.has_tool_call) {  // the ended message's call again (ignored), or a call not seen yet
      const x_block& tc = ev.tool_call;
      ensure_call(out, tc.id, tc.name, tc.has_arguments ? &tc.arguments : nullptr, false);
    }
    return;
  }
  if (ev.update == update_kind::text_delta || ev.update == update_kind::thinking_delta) after_end = false;
  ensure_message_open();
  switch (ev.update) {
    case update_kind::text_start:
      resolve_block(ev.content_index, block_kind::text);
      break;
    case update_kind::thinking_start:
      flush_replay_if_holding(out);
      resolve_block(ev.content_index, block_kind::thinking);
      break;
    case update_kind::toolcall_start:
    case update_kind::toolcall_delta:
      flush_replay_if_holding(out);
      resolve_block(ev.content_index, block_kind::tool_call);
      break;
    case update_kind::text_delta: {
      if (ev.has_delta) {
        append_text(out, resolve_block(ev.content_index, block_kind::text), ev.delta, false);
      } else if (ev.has_snapshot) {
        apply_snapshot(ev.snapshot, out);
      }
      break;
    }
    case update_kind::text_end: {
      const std::size_t i = resolve_block(ev.content_index, block_kind::text);
      if (ev.has_content) {
        reconcile_final(out, i, ev.content);
      } else if (ev.has_snapshot) {
        apply_snapshot(ev.snapshot, out);
      }
      blocks[i].ended = true;
      flush_replay_if_holding(out);
      break;
    }
    case update_kind::thinking_delta: {
      if (ev.has_delta) {
        blocks[resolve_block(ev.content_index, block_kind::thinking)].text.append(ev.delta);
      } else if (ev.has_snapshot) {
        apply_snapshot(ev.snapshot, out);
      }
      break;
    }
    case update_kind::thinking_end: {
      const std::size_t i = resolve_block(ev.content_index, block_kind::thinking);
      if (ev.has_content) {
        blocks[i].text.assign(ev.content);
      } else if (ev.has_snapshot) {
        apply_snapshot(ev.snapshot, out);
      }
      blocks[i].ended = true;
      if (options.thinking == thinking_mode::stream) release_thought_block(out, blocks[i]);
      break;
    }
    case update_kind::toolcall_end: {
      const std::size_t i = resolve_block(ev.content_index, block_kind::tool_call);
      blocks[i].ended = true;
      if (ev.has_tool_call) {
        const x_block& tc = ev.tool_call;
        ensure_call(out, tc.id, tc.name, tc.has_arguments ? &tc.arguments : nullptr, false);
      }
      break;
    }
    case update_kind::unknown:
      break;
  }
}

void pi_mapper::impl::apply_snapshot(const x_message& snap, std::vector<message>& out) {
  const std::size_t n = snap.nblocks < static_cast<std::size_t>(kMaxContentIndex)
                            ? snap.nblocks
                            : static_cast<std::size_t>(kMaxContentIndex);
  for (std::size_t i = 0; i < n; ++i) {
    const x_block& sb = snap.blocks[i];
    if (sb.kind == block_kind::text) {
      const std::size_t bi = resolve_block(static_cast<std::int64_t>(i), block_kind::text);
      if (blocks[bi].kind == block_kind::text) reconcile_snapshot_text(out, bi, sb.text);
    } else if (sb.kind == block_kind::thinking) {
      const std::size_t bi = resolve_block(static_cast<std::int64_t>(i), block_kind::thinking);
      block_state& b = blocks[bi];
      if (b.kind == block_kind::thinking && !b.released) {
        const bool older =
            b.text.size() > sb.text.size() && std::string_view(b.text).substr(0, sb.text.size()) == sb.text;
        if (!older) b.text.assign(sb.text);
      }
    }
  }
}

void pi_mapper::impl::on_assistant_end(const x_message& m, std::vector<message>& out) {
  ensure_message_open();
  if (!m.model.empty()) last.model.assign(m.model);
  std::string final_text;
  if (m.has_content) {
    const std::size_t n = m.nblocks < static_cast<std::size_t>(kMaxContentIndex)
                              ? m.nblocks
                              : static_cast<std::size_t>(kMaxContentIndex);
    for (std::size_t i = 0; i < n; ++i) {
      const x_block& fb = m.blocks[i];
      if (fb.kind == block_kind::text) {
        const std::size_t bi = resolve_block(static_cast<std::int64_t>(i), block_kind::text);
        if (blocks[bi].kind == block_kind::text) reconcile_final(out, bi, fb.text);
        final_text.append(fb.text);
      } else if (fb.kind == block_kind::thinking) {
        const std::size_t bi = resolve_block(static_cast<std::int64_t>(i), block_kind::thinking);
        if (blocks[bi].kind == block_kind::thinking && !blocks[bi].released) blocks[bi].text.assign(fb.text);
      } else if (fb.kind == block_kind::tool_call) {
        ensure_call(out, fb.id, fb.name, fb.has_arguments ? &fb.arguments : nullptr, false);
      }
    }
    // Text that was streamed but is absent from the final message.
    for (std::size_t j = 0; j < blocks.size(); ++j) {
      if (blocks[j].kind != block_kind::text || blocks[j].text.empty()) continue;
      if (j >= n || m.blocks[j].kind != block_kind::text) {
        diverged(out, j, "");
        blocks[j].text.clear();
      }
    }
  } else {
    for (const auto& b : blocks) {
      if (b.kind == block_kind::text) final_text.append(b.text);
    }
  }
  const std::size_t thoughts_before = pending_thoughts.size();
  flush_replay(out);
  const bool failed = m.stop_reason == "error";
  if (failed) {
    // pi may retry this model call (auto_retry_start): remember what the consumer saw of it.
    failed_text = std::move(message_visible);
    retry_active = false;
    retry_ref.clear();
  } else {
    settle_retry(out);
    failed_text.clear();
  }
  message_visible.clear();
  collect_thinking(out);

  last.present = true;
  last.stop_reason.assign(m.stop_reason);
  last.has_error_message = m.has_error_message;
  // Bounded as every other mapper's error text: an agent's error can carry a whole response body.
  if (m.error_message.size() <= kMaxStatusBytes) last.error_message.assign(m.error_message);
  else last.error_message = sanitize_utf8(m.error_message, kMaxStatusBytes);
  usage.add(m.usage);

  // What a repeat of this message_end would carry (see repeats_ended_message).
  after_end = true;
  ended_stop_reason.assign(m.stop_reason);
  ended_blocks.clear();
  if (m.has_content) {
    for (std::size_t i = 0; i < m.nblocks; ++i) {
      const x_block& b = m.blocks[i];
      ended_blocks.emplace_back(b.kind, b.kind == block_kind::tool_call ? b.id : b.text);
    }
  }

  failed_thoughts_from.reset();
  if (m.stop_reason == "toolUse") {
    if (!final_text.empty()) replay_ref = final_text;
  } else if (failed) {
    // Buffered thinking of a failed call is held until we know whether pi retries it (auto_retry_start drops it)
    // or not (released at the end of the run, or with the next final message).
    failed_thoughts_from = thoughts_before;
  } else {
    replay_ref.clear();
    if (options.thinking == thinking_mode::buffered) release_pending_thoughts(out);
  }
  last.text = std::move(final_text);
  message_open = false;
  blocks.clear();
}

}  // namespace agenthost::mapper
