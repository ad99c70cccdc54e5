// Internal: reusing the messages a consumer hands back (event_mapper::recycle). message_pool keeps a few per type;
// object_writer and copy_into refill a recycled message's content in place — its members, their string buffers and
// nested objects are reused, so that a steady stream of events allocates nothing per message.
//
// nlohmann::json allocates for every object member (a std::map node) and every string (a heap std::string, plus its
// buffer past 15 bytes): a tool.completed of four members and a three-member raw_output costs about ten allocations to
// build and as many frees when the consumer drops it. On the short events of Codex and OpenCode that was half of the
// mappers' time. The writer overwrites what is already there instead.
#pragma once

#include <agenthost/transport/message.hpp>

#include <nlohmann/json.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace agenthost::mapper::detail {

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
    if (v.is_string()) v.get_ref<std::string&>().assign(value);
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
    // Members before `key` were not written this time: stale ones from the message this object held before.
    while (next_ != object_->end()) {
      const int order = next_->first.compare(key);
      if (order == 0) return (next_++)->second;
      if (order > 0) break;
      next_ = object_->erase(next_);
    }
    // A member this object did not have: inserted before `next_`, which stays the next candidate.
    return object_->emplace_hint(next_, std::string(key), nullptr)->second;
  }

  nlohmann::json::object_t* object_;
  nlohmann::json::object_t::iterator next_;
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
      to.resize(from.size());
      for (std::size_t i = 0; i < from.size(); ++i) copy_into(to[i], from[i]);
      return;
    }
    case nlohmann::json::value_t::string:
      if (target.is_string()) target.get_ref<std::string&>() = source.get_ref<const std::string&>();
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

/// The messages handed back to a mapper, a few per type, for it to refill (not thread-safe: one per mapper).
class message_pool {
 public:
  /// Appends a message of `type` to `out` and returns it: a recycled one when there is one (its content is still the
  /// old one: fill it with an object_writer, whose done() drops what was not rewritten), else one with an empty
  /// object.
  transport::message& start(std::vector<transport::message>& out, transport::message_type type) {
    auto& kept = kept_[static_cast<std::size_t>(type)];
    if (kept.empty()) return out.emplace_back(transport::message{type, nlohmann::json(nlohmann::json::value_t::object)});
    transport::message& m = out.emplace_back(std::move(kept.back()));
    kept.pop_back();
    return m;
  }

  /// Appends {"text": text} as a message of `type` (assistant, assistant.thought), refilling a recycled one.
  void add_text(std::vector<transport::message>& out, transport::message_type type, std::string_view text) {
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

  /// Keeps up to kPerType messages of each type, of at most kMaxBytes each (retains_at_most); empties `used`.
  void recycle(std::vector<transport::message>& used) noexcept {
    for (transport::message& m : used) {
      const auto type = static_cast<std::size_t>(m.type);
      if (type >= kTypes) continue;
      auto& kept = kept_[type];
      std::size_t budget = kMaxBytes;
      if (kept.size() >= kPerType || !m.content.is_object() || !retains_at_most(m.content, budget)) continue;
      if (kept.capacity() == 0) {
        try {
          kept.reserve(kPerType);  // once per type: the pushes below never allocate
        } catch (...) {
          continue;
        }
      }
      kept.push_back(std::move(m));
    }
    used.clear();
  }

  static constexpr std::size_t kPerType = 8;
  static constexpr std::size_t kMaxBytes = 32 * 1024;

 private:
  static constexpr std::size_t kTypes = static_cast<std::size_t>(transport::message_type::terminal_cancelled) + 1;
  std::array<std::vector<transport::message>, kTypes> kept_{};
};

}  // namespace agenthost::mapper::detail
