// Internal: reusing the messages a consumer hands back (event_mapper::recycle). message_pool keeps a few per type;
// object_writer and copy_into refill a recycled message's content in place — its members, their string buffers and
// nested objects are reused, so that a steady stream of events allocates nothing per message.
//
// nlohmann::json allocates for every object member (a std::map node) and every string (a heap std::string, plus its
// buffer past 15 bytes): a tool.completed of four members and a three-member raw_output costs about ten allocations to
// build and as many frees when the consumer drops it. On the short events of Codex and OpenCode that was half of the
// mappers' time. The writer overwrites what is already there instead.
#pragma once

#include "raw_scan.hpp"

#include <agenthost/transport/message.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace agenthost::mapper::detail {

/// The most heap a kept message may hold, and the largest string buffer a refill keeps.
inline constexpr std::size_t kMaxKeptBytes = 32 * 1024;

/// `s = value`, in s's buffer unless that buffer is larger than kMaxKeptBytes (then it is given back): a message that
/// once carried a large output does not keep its buffer through every later refill.
inline void assign_kept(std::string& s, std::string_view value) {
  if (s.capacity() > kMaxKeptBytes) {
    std::string(value).swap(s);
  } else if (value.size() <= s.capacity() &&
             (value.data() + value.size() <= s.data() || value.data() >= s.data() + s.capacity())) {
    // The usual refill: it fits, and does not come from s itself. clear() + append() is a copy and a new length;
    // assign() takes the general replace path (which allows a source inside s), twice the instructions on the
    // handful of short fields every message has.
    s.clear();
    s.append(value.data(), value.size());
  } else {
    s.assign(value);
  }
}

/// Empties `s`, keeping its buffer for the next fill unless that holds more than `max_kept` bytes (then it is given
/// back): a buffer refilled over and over is not regrown each time, and one that once held a large text is not kept.
inline void clear_kept(std::string& s, std::size_t max_kept) noexcept {
  if (s.capacity() > max_kept) std::string().swap(s);
  else s.clear();
}

/// a == b, for a message's keys at every refill: raw::equal_bytes, which needs no memcmp call for 4 bytes or more.
[[gnu::always_inline]] inline bool same_key(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && raw::equal_bytes(a.data(), b.data(), a.size());
}

/// Writes the members of one JSON object in ascending key order (the order std::map keeps them in), each key once.
/// A member that is already there with the same key is overwritten in place (a string keeps its buffer); members
/// the writer skips over are removed; done() removes those after the last one written. So after done() the object
/// holds exactly the members written, whatever it held before — also when it was not an object at all.
class object_writer {
 public:
  explicit object_writer(nlohmann::json& target) {
    if (!target.is_object()) target = nlohmann::json(nlohmann::json::value_t::object);
    object_ = &target.get_ref<nlohmann::json::object_t&>();
    next_ = object_->begin();
  }

  void string(std::string_view key, std::string_view value) {
    nlohmann::json& v = slot(key);
    if (v.is_string()) assign_kept(v.get_ref<std::string&>(), value);
    else v = std::string(value);
  }
  void boolean(std::string_view key, bool value) { slot(key) = value; }
  void integer(std::string_view key, std::int64_t value) { slot(key) = value; }
  void null(std::string_view key) { slot(key) = nullptr; }
  /// Any JSON value, moved in (allocates as the value does: for members that are not on a per-event path).
  void value(std::string_view key, nlohmann::json value) { slot(key) = std::move(value); }
  /// A copy of `value`, made in place (copy_into): no allocation when the member already has the same shape.
  void copy(std::string_view key, const nlohmann::json& value);
  /// A nested object, refilled the same way; call done() on it before writing the next member here.
  [[nodiscard]] object_writer object(std::string_view key) { return object_writer(slot(key)); }

  /// Removes the members after the last one written.
  void done() { next_ = object_->erase(next_, object_->end()); }

 private:
  nlohmann::json& slot(std::string_view key) {
    // Out of order, the result is still right, but each refill erases and re-inserts members (allocations).
    assert(last_key_.empty() || last_key_ < key);
    last_key_ = key;
    // Members before `key` were not written this time: stale ones from the message this object held before.
    while (next_ != object_->end()) {
      if (same_key(next_->first, key)) return (next_++)->second;  // a refill: the same keys in the same order
      if (next_->first.compare(key) > 0) break;
      next_ = object_->erase(next_);
    }
    // A member this object did not have: inserted before `next_`, which stays the next candidate.
    return object_->emplace_hint(next_, std::string(key), nullptr)->second;
  }

  nlohmann::json::object_t* object_;
  nlohmann::json::object_t::iterator next_;
  std::string_view last_key_;  // the key written last (checked in debug builds: keys come in ascending order)
};

/// `target = source`, reusing what `target` already holds: members with the same keys, strings' buffers, array
/// elements. Allocates only for what `target` lacks.
inline void copy_into(nlohmann::json& target, const nlohmann::json& source) {
  switch (source.type()) {
    case nlohmann::json::value_t::object: {
      object_writer w(target);
      for (const auto& [key, member] : source.get_ref<const nlohmann::json::object_t&>()) w.copy(key, member);
      w.done();
      return;
    }
    case nlohmann::json::value_t::array: {
      const auto& from = source.get_ref<const nlohmann::json::array_t&>();
      if (!target.is_array()) target = nlohmann::json(nlohmann::json::value_t::array);
      auto& to = target.get_ref<nlohmann::json::array_t&>();
      if (to.capacity() > std::max(from.size(), kMaxKeptBytes / sizeof(nlohmann::json)))
        nlohmann::json::array_t().swap(to);  // a large array's buffer is given back, as assign_kept does
      to.resize(from.size());
      for (std::size_t i = 0; i < from.size(); ++i) copy_into(to[i], from[i]);
      return;
    }
    case nlohmann::json::value_t::string:
      if (target.is_string()) assign_kept(target.get_ref<std::string&>(), source.get_ref<const std::string&>());
      else target = source;
      return;
    default:
      target = source;  // scalars and binary: nothing to reuse
      return;
  }
}

inline void object_writer::copy(std::string_view key, const nlohmann::json& value) { copy_into(slot(key), value); }

/// Whether `value` holds at most `budget` bytes of heap (string buffers and a rough size per member / element): a
/// recycled message keeps its buffers, so one that carried a large output is freed rather than kept.
[[nodiscard]] inline bool retains_at_most(const nlohmann::json& value, std::size_t& budget) noexcept {
  auto spend = [&](std::size_t n) {
    if (n > budget) return false;
    budget -= n;
    return true;
  };
  switch (value.type()) {
    case nlohmann::json::value_t::string:
      return spend(sizeof(std::string) + value.get_ref<const std::string&>().capacity());
    case nlohmann::json::value_t::object:
      for (const auto& [key, member] : value.get_ref<const nlohmann::json::object_t&>())
        if (!spend(64 + key.capacity()) || !retains_at_most(member, budget)) return false;
      return true;
    case nlohmann::json::value_t::array:
      for (const auto& element : value.get_ref<const nlohmann::json::array_t&>())
        if (!spend(sizeof(nlohmann::json)) || !retains_at_most(element, budget)) return false;
      return true;
    case nlohmann::json::value_t::binary:
      return spend(value.get_binary().capacity() + 64);
    default:
      return true;
  }
}

/// Empties `v`'s objects and arrays from the leaves up, `depth` levels deep (deeper ones are left to nlohmann's own
/// destructor). nlohmann::json destroys every object or array through a vector it allocates as a stack (no recursion,
/// whatever the depth): for the small, shallow messages a pool drops (a burst of buffered thoughts, thousands at a
/// turn's end), that allocation and the moves into it cost as much as the message's own frees.
inline void release_members(nlohmann::json& v, int depth = 32) noexcept {
  if (depth == 0) return;
  if (v.is_object()) {
    auto& members = v.get_ref<nlohmann::json::object_t&>();
    for (auto& [key, member] : members) {
      if (member.is_structured()) release_members(member, depth - 1);
    }
    members.clear();
  } else if (v.is_array()) {
    auto& elements = v.get_ref<nlohmann::json::array_t&>();
    for (auto& element : elements) {
      if (element.is_structured()) release_members(element, depth - 1);
    }
    elements.clear();
  }
}

/// The messages handed back to a mapper, a few per type, for it to refill (not thread-safe: one per mapper).
///
/// It keeps up to kPerType messages of each type, none holding more than kMaxKeptBytes (retains_at_most). Walking a
/// message to know its size costs about as much as refilling it, so the pool walks a message only once it stops being
/// the next one to refill: when another message of its type is kept on top of it, and every kSweepEvery recycle()
/// calls for the one on top. A steady stream (each message refilled right after it comes back) walks none, and one
/// that carried a large output is still freed soon: at the latest kSweepEvery recycle() calls later, or when it is
/// refilled (assign_kept gives large buffers back).
class message_pool {
 public:
  /// Appends a message of `type` to `out` and returns it: a recycled one when there is one (its content is still the
  /// old one: fill it with an object_writer, whose done() drops what was not rewritten), else one with an empty
  /// object.
  transport::message& start(std::vector<transport::message>& out, transport::message_type type) {
    const auto t = static_cast<std::size_t>(type);
    auto& kept = kept_[t];
    if (kept.empty())
      return out.emplace_back(transport::message{type, nlohmann::json(nlohmann::json::value_t::object)});
    transport::message& m = out.emplace_back(std::move(kept.back()));
    kept.pop_back();
    unchecked_top_[t] = false;  // the rest were checked when they were covered
    return m;
  }

  /// Appends {"text": text} as a message of `type` (assistant, assistant.thought), refilling a recycled one.
  void add_text(std::vector<transport::message>& out, transport::message_type type, std::string_view text) {
    if (kept_[static_cast<std::size_t>(type)].empty()) {
      // None to refill (a burst: a turn's buffered thoughts, all at once): built directly, without the refill's walk,
      // its temporary string and the null member it would overwrite.
      nlohmann::json content(nlohmann::json::value_t::object);
      content.get_ref<nlohmann::json::object_t&>().emplace(std::piecewise_construct, std::forward_as_tuple("text"),
                                                           std::forward_as_tuple(text));
      out.push_back(transport::message{type, std::move(content)});
      return;
    }
    object_writer c(start(out, type).content);
    c.string("text", text);
    c.done();
  }

  /// Appends a tool.update {name, output, tool_call_id}, refilling a recycled one.
  void add_tool_update(std::vector<transport::message>& out, std::string_view name, std::string_view output,
                       std::string_view tool_call_id) {
    object_writer c(start(out, transport::message_type::tool_update).content);
    c.string("name", name);
    c.string("output", output);
    c.string("tool_call_id", tool_call_id);
    c.done();
  }

  /// Keeps what it can of `used` (see the class); empties `used`.
  void recycle(std::vector<transport::message>& used) noexcept {
    for (transport::message& m : used) {
      const auto t = static_cast<std::size_t>(m.type);
      if (t >= kTypes) continue;
      auto& kept = kept_[t];
      if (kept.size() >= kPerType || !m.content.is_object()) {
        release_members(m.content);  // dropped: emptied here, the cheap way (used.clear() destroys the rest)
        continue;
      }
      if (unchecked_top_[t]) check_top(t);  // covered now
      if (kept.capacity() == 0) {
        try {
          kept.reserve(kPerType);  // once per type: the pushes below never allocate
        } catch (...) {
          continue;
        }
      }
      kept.push_back(std::move(m));
      unchecked_top_[t] = true;
    }
    used.clear();
    if (++recycles_ % kSweepEvery == 0) {
      for (std::size_t t = 0; t < kTypes; ++t)
        if (unchecked_top_[t]) check_top(t);
    }
  }

  static constexpr std::size_t kPerType = 8;
  static constexpr std::size_t kSweepEvery = 64;

 private:
  static constexpr std::size_t kTypes = static_cast<std::size_t>(transport::message_type::terminal_cancelled) + 1;

  // The top message of type `t`, never walked: dropped when it holds too much.
  void check_top(std::size_t t) noexcept {
    unchecked_top_[t] = false;
    std::size_t budget = kMaxKeptBytes;
    if (!retains_at_most(kept_[t].back().content, budget)) {
      release_members(kept_[t].back().content);
      kept_[t].pop_back();
    }
  }

  std::array<std::vector<transport::message>, kTypes> kept_{};
  std::array<bool, kTypes> unchecked_top_{};  // kept_[t].back() was not walked yet
  std::size_t recycles_ = 0;
};

}  // namespace agenthost::mapper::detail
