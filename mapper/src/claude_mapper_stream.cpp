// Claude Code mapper: one API message as it streams (claude_mapper::impl, see claude_mapper_impl.hpp) — its content
// blocks, text deltas emitted as they come, the replay of an abandoned attempt's text, tool calls, and the full
// `assistant` frames that confirm (or correct) what was streamed.
#include "claude_mapper_impl.hpp"

#include "ondemand_util.hpp"
#include "text_util.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

namespace agenthost::mapper {

claude_mapper::impl::block_state* claude_mapper::impl::block_at(const std::optional<double>& index, bool create) {
  if (!index || !(*index >= 0) || *index > kMaxBlockIndex) return nullptr;
  const auto i = static_cast<std::size_t>(*index);
  if (i >= blocks.size()) {
    if (!create) return nullptr;
    blocks.resize(i + 1);
  }
  return &blocks[i];
}

void claude_mapper::impl::release_held(std::vector<message>& out) {
  for (auto& h : held) core.thought(out, std::move(h.text));
  held.clear();
}

void claude_mapper::impl::complete_thought(block_state& b, std::vector<message>& out) {
  if (b.thought_done) return;
  b.thought_done = true;
  if (b.text.empty()) return;
  if (options.thinking == thinking_mode::stream) {
    core.thought(out, b.text);
  } else {
    held.push_back(held_thought{b.text});
  }
}

void claude_mapper::impl::close_message(std::vector<message>& out, std::size_t abandoned_from) {
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    block_state& b = blocks[i];
    if (b.kind == block_kind::thinking && !b.framed && !b.thought_done) {
      if (i >= abandoned_from) {
        b.thought_done = true;  // a cut attempt's reasoning: the retry thinks again
      } else {
        complete_thought(b, out);
      }
    }
    if (b.kind == block_kind::tool_use && !b.tool_id.empty() && i < abandoned_from) emit_tool_call(b, out, nullptr);
  }
}

void claude_mapper::impl::fold_message_usage() {
  if (!message_usage.any) return;
  detail::add_tokens(closed_usage.input, message_usage.input);
  detail::add_tokens(closed_usage.output, message_usage.output);
  detail::add_tokens(closed_usage.cache_read, message_usage.cache_read);
  detail::add_tokens(closed_usage.cache_write, message_usage.cache_write);
  closed_usage.any = true;
  message_usage = {};
}

void claude_mapper::impl::emit_tool_call(block_state& b, std::vector<message>& out, const json* input) {
  if (b.tool_id.empty() || core.tool_open(b.tool_id)) return;
  json in = json::object();
  if (input != nullptr) {
    in = *input;
  } else if (!b.partial_json.empty()) {
    // Assembled from many lines, so no line's depth check saw it: bounded here as everywhere else.
    in = transport::parse_json_within_depth(b.partial_json, detail::kMaxConvertDepth);
    // Cut mid-input (or nested too deep): keep what came, as text.
    if (in.is_discarded()) in = json{{"partial_json", b.partial_json}};
  }
  core.tool_call(out, b.tool_id, b.tool_name, std::move(in));
}

void claude_mapper::impl::text_delta(block_state& b, std::string_view d, std::vector<message>& out) {
  const std::size_t before = b.received;
  b.received += d.size();
  if (b.received <= b.text.size()) return;  // the frame already gave this part
  if (before < b.text.size()) d.remove_prefix(b.text.size() - before);
  if (!replay.empty()) {
    const std::string_view rest = std::string_view(replay).substr(replay_pos);
    if (rest.substr(0, d.size()) == d) {  // still repeating the abandoned text: already emitted
      replay_pos += d.size();
      b.text.append(d);
      if (replay_pos == replay.size()) end_replay();
      return;
    }
    if (d.substr(0, rest.size()) == rest) {  // repeats the rest, then goes on
      b.text.append(rest);
      d.remove_prefix(rest.size());
      end_replay();
    } else {
      replay_diverged(b, out);
    }
  }
  b.text.append(d);
  core.text(out, d);
}

void claude_mapper::impl::end_replay() {
  replay.clear();
  replay_pos = 0;
  replay_in_retry = false;
}

void claude_mapper::impl::retract_replay(std::vector<message>& out) {
  core.status(out, "warning", "the retried model call's text differs from the abandoned attempt's text, which is void",
              {{"code", "retry_diverged"}, {"retracted_text", replay}});
  text_diverged = true;
  end_replay();
}

void claude_mapper::impl::replay_diverged(block_state& b, std::vector<message>& out) {
  retract_replay(out);
  core.text(out, b.text);
}

void claude_mapper::impl::settle_retry(std::vector<message>& out) {
  if (replay.empty() || !replay_in_retry) return;
  retract_replay(out);
  // A streamed retry's text blocks held back what repeated the abandoned text (while the replay is pending, nothing
  // else of them was emitted); an unstreamed retry's frames were emitted as they came.
  if (!msg_streamed) return;
  for (const block_state& b : blocks)
    if (b.kind == block_kind::text && !b.text.empty()) core.text(out, b.text);
}

void claude_mapper::impl::frame_text(block_state& b, std::size_t index, std::string_view f, std::vector<message>& out) {
  if (!replay.empty() && msg_streamed) {
    // The retry's block is complete: if it still only repeated part of the abandoned text, that text is void.
    if (f.size() > b.text.size() && f.substr(0, b.text.size()) == b.text) {
      text_delta(b, f.substr(b.text.size()), out);
      b.received = b.text.size();
    }
    if (!replay.empty()) replay_diverged(b, out);
    return;
  }
  if (!replay.empty() && replay_in_retry) {
    // The same request sent again without streaming (Claude's fallback after a cut stream): this frame is the retry.
    // What repeats the abandoned text was emitted with it; anything else makes that text void.
    if (f.substr(0, replay.size()) == replay) {
      b.text.assign(replay);
      end_replay();
    } else {
      retract_replay(out);
    }
  }
  if (b.diverged) return;
  if (f.size() >= b.text.size() && f.substr(0, b.text.size()) == b.text) {
    // Emit what the deltas missed (nothing in the usual case).
    const std::string_view missing = f.substr(b.text.size());
    if (!missing.empty()) {
      b.text.append(missing);
      core.text(out, missing);
    }
    return;
  }
  b.diverged = true;
  text_diverged = true;
  core.status(out, "warning",
              "the final text of a content block differs from the streamed text; the streamed text stands",
              {{"code", "text_diverged"}, {"content_index", index}, {"final_text", std::string(f)}});
}

void claude_mapper::impl::on_api_event(const x_event& ev, std::vector<message>& out) {
  switch (ev.api) {
    case api_kind::message_start: {
      if (!ev.api_message_id.empty() && ev.api_message_id == msg_id) return;  // a repeated message_start
      settle_retry(out);  // the retry before this message never said it was done
      fold_message_usage();
      msg_id.assign(ev.api_message_id);
      msg_streamed = true;
      if (!replay.empty()) replay_in_retry = true;
      blocks.clear();
      open_block = -1;
      stop_reason.clear();
      if (!ev.api_model.empty()) core.model.assign(ev.api_model);
      take_usage(ev.usage, message_usage);
      return;
    }
    case api_kind::content_block_start: {
      block_state* b = block_at(ev.index, true);
      if (b == nullptr || b->started) return;
      b->started = true;
      b->kind = ev.content_block.kind;
      if (b->kind == block_kind::tool_use) {
        b->tool_id.assign(ev.content_block.id);
        b->tool_name.assign(ev.content_block.name);
      }
      open_block = static_cast<int>(*ev.index);
      return;
    }
    case api_kind::content_block_delta: {
      block_state* b = block_at(ev.index, true);
      if (b == nullptr) return;
      switch (ev.delta) {
        case delta_kind::text:
          if (b->kind == block_kind::other) b->kind = block_kind::text;
          if (b->kind == block_kind::text) text_delta(*b, ev.delta_text, out);
          return;
        case delta_kind::thinking:
          if (b->kind == block_kind::other) b->kind = block_kind::thinking;
          if (b->kind == block_kind::thinking && !b->framed) b->text.append(ev.delta_text);
          return;
        case delta_kind::input_json:
          if (b->kind == block_kind::tool_use) b->partial_json.append(ev.delta_text);
          return;
        case delta_kind::signature:
        case delta_kind::unknown:
          return;
      }
      return;
    }
    case api_kind::content_block_stop: {
      block_state* b = block_at(ev.index, false);
      if (b == nullptr) return;
      if (open_block == static_cast<int>(*ev.index)) open_block = -1;
      // A retry's text block that ended (no frame came first) having repeated only part of the abandoned text: that
      // text is void, said before whatever the retry does next (its tool call), not at the message's end.
      if (b->kind == block_kind::text && !b->text.empty() && !replay.empty() && replay_in_retry && msg_streamed)
        replay_diverged(*b, out);
      // The frame normally came first; without one the streamed input is complete now.
      if (b->kind == block_kind::tool_use) emit_tool_call(*b, out, nullptr);
      return;
    }
    case api_kind::message_delta:
      if (!ev.stop_reason.empty()) stop_reason.assign(ev.stop_reason);
      take_usage(ev.usage, message_usage);
      return;
    case api_kind::message_stop: {
      if (ev.abandoned) {
        const std::size_t from =
            ev.abandoned_from && *ev.abandoned_from >= 0 && *ev.abandoned_from <= kMaxBlockIndex
                ? static_cast<std::size_t>(*ev.abandoned_from)
                : 0;
        // Text that was streamed but never confirmed by a frame is void if Claude retries the call: remember it so
        // that the retry's repetition of it is not emitted twice.
        std::string abandoned_text;
        for (std::size_t i = from; i < blocks.size(); ++i)
          if (blocks[i].kind == block_kind::text && !blocks[i].framed) abandoned_text += blocks[i].text;
        // A retry cut again while it still repeated the earlier attempt's text (the replay is still running) added
        // nothing the consumer has not seen: the next retry repeats the same text from its start.
        if (!replay.empty()) {
          replay_pos = 0;
        } else if (!abandoned_text.empty()) {
          replay = std::move(abandoned_text);
          replay_pos = 0;
        }
        replay_in_retry = false;
        close_message(out, from);
      } else {
        // The retry ended before it repeated all of the abandoned text (it ran a tool instead, or said less): that
        // text is void, and what the retry did repeat of it (held, not emitted) is the retry's own text. Otherwise a
        // later message would go on matching it: its text swallowed if it began the same way.
        settle_retry(out);
        close_message(out);
        // Buffered thinking is released when a message ends for another reason than to run tools.
        if (!stop_reason.empty() && stop_reason != "tool_use") release_held(out);
      }
      return;
    }
    case api_kind::unknown:
      return;
  }
}

void claude_mapper::impl::on_frame(const x_event& ev, std::vector<message>& out) {
  if (ev.is_api_error_message) {
    // Claude's own report of a failed model call (model "<synthetic>"): the result carries it as the error text.
    for (std::size_t i = 0; i < ev.nblocks; ++i)
      if (ev.blocks[i].kind == block_kind::text) last_api_error.assign(ev.blocks[i].text);
    return;
  }
  if (!ev.has_message) return;
  if (ev.message_id != msg_id) {
    // A message that was not streamed (no message_start with its id): its blocks are new.
    settle_retry(out);
    fold_message_usage();
    msg_id.assign(ev.message_id);
    msg_streamed = false;
    if (!replay.empty()) replay_in_retry = true;
    blocks.clear();
    open_block = -1;
    stop_reason.clear();
  }
  if (!ev.message_model.empty() && ev.message_model != "<synthetic>") core.model.assign(ev.message_model);
  for (std::size_t j = 0; j < ev.nblocks; ++j) {
    const x_block& fb = ev.blocks[j];
    // Claude 2.x: one frame per block, content index 0, sent while that block is open (before content_block_stop).
    // A frame with several blocks holds the message so far (index = position).
    std::size_t index = j;
    if (ev.nblocks == 1) {
      if (open_block >= 0) {
        index = static_cast<std::size_t>(open_block);
      } else {
        index = blocks.size();
        for (std::size_t i = blocks.size(); i-- > 0;) {
          if (blocks[i].started && !blocks[i].framed && blocks[i].kind == fb.kind) {
            index = i;
            break;
          }
        }
      }
    }
    if (index >= blocks.size()) {
      if (index > static_cast<std::size_t>(kMaxBlockIndex)) continue;
      blocks.resize(index + 1);
    }
    block_state& b = blocks[index];
    if (!b.started) {
      b.started = true;
      b.kind = fb.kind;
    }
    if (b.kind != fb.kind) continue;  // does not match what was streamed at that index: not ours to guess
    const bool first_frame = !b.framed;
    b.framed = true;
    switch (fb.kind) {
      case block_kind::text:
        frame_text(b, index, fb.text, out);
        break;
      case block_kind::thinking:
        if (first_frame && !b.thought_done) {
          if (!fb.text.empty()) b.text.assign(fb.text);  // the frame's thinking is complete
          complete_thought(b, out);
        }
        break;
      case block_kind::tool_use:
        if (b.tool_id.empty()) {
          b.tool_id.assign(fb.id);
          b.tool_name.assign(fb.name);
        }
        emit_tool_call(b, out, fb.has_input ? &fb.input : nullptr);
        break;
      case block_kind::tool_result:
      case block_kind::other:
        break;
    }
  }
}

}  // namespace agenthost::mapper
