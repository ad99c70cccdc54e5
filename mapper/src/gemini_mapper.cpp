// Gemini CLI stream-json → message contract. Two phases per line: extract (simdjson On-Demand into a flat record,
// no state change, so an invalid line changes nothing) and apply (the mapping, on top of mapper_core's bookkeeping).
#include <agenthost/mapper/gemini_mapper.hpp>

#include "mapper_core.hpp"
#include "ondemand_util.hpp"
#include "raw_scan.hpp"
#include "text_util.hpp"

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <cstring>

namespace agenthost::mapper {

namespace {

using nlohmann::json;
using transport::message;
using transport::message_type;
namespace od = simdjson::ondemand;
using simdjson::error_code;

enum class g_kind : std::uint8_t { unknown, init, message, tool_use, tool_result, error, result };

/// A string field: whether it was present as a string, or present with another JSON type (null included).
struct g_string {
  std::string_view value;
  bool present = false;
  bool wrong_type = false;
  [[nodiscard]] bool ok() const noexcept { return present && !wrong_type; }
};

/// One line, as far as the mapping needs it. Views point into the parser's buffers (or the arena) and stay valid
/// until the next parse.
struct g_event {
  g_kind kind = g_kind::unknown;
  g_string type, session_id, model, role, content, tool_id, tool_name, status, output, severity, message;
  bool delta = false;
  bool has_parameters = false;
  json parameters;  // tool_use (any JSON value)
  bool has_error = false;
  json error;  // tool_result / result `error` (an object {type, message} in gemini 0.61.0; kept as given)
  bool has_stats = false;
  std::optional<double> input_tokens, output_tokens, cached, input;

  /// Back to the state of a fresh record, without reallocating (this runs once per line).
  void reset() noexcept {
    kind = g_kind::unknown;
    for (g_string* f : {&type, &session_id, &model, &role, &content, &tool_id, &tool_name, &status, &output, &severity,
                        &message})
      *f = g_string{};
    delta = false;
    has_parameters = false;
    if (!parameters.is_null()) parameters = nullptr;
    has_error = false;
    if (!error.is_null()) error = nullptr;
    has_stats = false;
    input_tokens.reset();
    output_tokens.reset();
    cached.reset();
    input.reset();
  }
};


class g_parser {
 public:
  /// Parse `line` into `ev`. Any error: the line is not a valid event (and `ev` is not used).
  error_code parse(std::string_view line, g_event& ev) {
    if (!arena_.empty()) arena_.clear();
    padded_.reserve(line.size());
    // The fast path sets every field a `message` event is read by (kind, type, role, content, delta); the others keep
    // the previous line's values, which nothing reads for a message (saves the reset on the per-token path).
    if (parse_fast_message(line, ev)) return simdjson::SUCCESS;
    ev.reset();
    od::document doc;
    if (auto e = padded_.iterate(line, doc)) return e;
    od::object root;
    if (auto e = doc.get_object().get(root)) return e;
    for (auto field_result : root) {
      od::field field;
      if (auto e = std::move(field_result).get(field)) return e;
      std::string_view key;
      if (auto e = key_of(field, key)) return e;
      if (auto e = read_field(key, field.value(), ev)) return e;
    }
    if (auto e = detail::check_end(doc)) return e;
    if (!ev.type.ok()) return simdjson::NO_SUCH_FIELD;
    ev.kind = kind_of(ev.type.value);
    return required_fields_ok(ev) ? simdjson::SUCCESS : simdjson::INCORRECT_TYPE;
  }

 private:
  // ---- fast path ---------------------------------------------------------------------------------------------------
  //
  // Nearly every line of a run is an assistant text part, printed by gemini 0.61.0 exactly as
  //   {"type":"message","timestamp":"…","role":"assistant","content":"…","delta":true}
  // For those the On-Demand walk (stage 1 over the line, then field by field) costs more than the mapping.
  // parse_fast_message() takes only lines of exactly this shape (role any string without escapes; `delta` true, false
  // or absent) that are strict JSON: valid UTF-8 over the whole line, every string closed without raw control
  // characters, the content's escapes valid, nothing but whitespace after the object. It reads the same values with
  // the same rules as the On-Demand path (lenient unescaping). Anything else returns false and the line goes through
  // On-Demand from scratch, which decides: the set of accepted lines and the events are unchanged.
  bool parse_fast_message(std::string_view line, g_event& ev) {
    static constexpr std::string_view kHead = R"({"type":"message","timestamp":)";
    static constexpr std::string_view kRole = R"(,"role":)";
    static constexpr std::string_view kContent = R"(,"content":)";
    static constexpr std::string_view kDeltaTrue = R"(,"delta":true})";
    static constexpr std::string_view kDeltaFalse = R"(,"delta":false})";
    if (line.substr(0, kHead.size()) != kHead) return false;
    const char* p = line.data() + kHead.size();
    const char* const end = line.data() + line.size();
    const char* body_end = nullptr;
    bool escaped = false;
    if (p >= end || *p != '"' || (p = detail::raw::scan_string(p, end, body_end, escaped)) == nullptr) return false;
    if (!detail::raw::consume(p, end, kRole) || p >= end || *p != '"') return false;
    const char* role_begin = p + 1;
    if ((p = detail::raw::scan_string(p, end, body_end, escaped)) == nullptr || escaped) return false;
    const std::string_view role(role_begin, static_cast<std::size_t>(body_end - role_begin));
    if (!detail::raw::consume(p, end, kContent) || p >= end || *p != '"') return false;
    const char* content_begin = p + 1;
    if ((p = detail::raw::scan_string(p, end, body_end, escaped)) == nullptr) return false;
    std::string_view content(content_begin, static_cast<std::size_t>(body_end - content_begin));
    bool delta = false;
    if (detail::raw::consume(p, end, kDeltaTrue)) {
      delta = true;
    } else if (!detail::raw::consume(p, end, kDeltaFalse) && !detail::raw::consume(p, end, "}")) {
      return false;
    }
    if (detail::raw::skip_ws(p, end) != end) return false;
    if (!detail::valid_utf8(*utf8_, line.data(), line.size())) return false;
    if (escaped) {
      // Unescaped into the line buffer (unused by this path; an unescaped string is never longer than its body).
      char* out_end = detail::lenient_unescape_to(content, padded_.buffer.get());
      if (out_end == nullptr) return false;
      content = std::string_view(padded_.buffer.get(), static_cast<std::size_t>(out_end - padded_.buffer.get()));
    }
    ev.kind = g_kind::message;
    ev.type = {.value = "message", .present = true};
    ev.role = {.value = role, .present = true};
    ev.content = {.value = content, .present = true};
    ev.delta = delta;
    return true;
  }

  // ---- On-Demand path ----------------------------------------------------------------------------------------------

  /// A field's key: a view of the input when it has no escape (the common case, no copy), else unescaped.
  static error_code key_of(od::field& field, std::string_view& key) noexcept {
    const char* begin = reinterpret_cast<const char*>(field.key().raw());
    // The closing quote is there (stage 1 checked the framing) and the buffer is padded.
    const char* q = detail::raw::find_quote_or_backslash_padded(begin);
    if (*q == '"') {
      key = std::string_view(begin, static_cast<std::size_t>(q - begin));
      return simdjson::SUCCESS;
    }
    return field.unescaped_key().get(key);
  }

  static g_kind kind_of(std::string_view t) noexcept {
    if (t == "message") return g_kind::message;
    if (t == "tool_use") return g_kind::tool_use;
    if (t == "tool_result") return g_kind::tool_result;
    if (t == "init") return g_kind::init;
    if (t == "result") return g_kind::result;
    if (t == "error") return g_kind::error;
    return g_kind::unknown;
  }

  static bool required_fields_ok(const g_event& ev) noexcept {
    switch (ev.kind) {
      case g_kind::unknown: return true;  // not mapped: its fields are not checked
      case g_kind::init: return ev.session_id.ok();
      case g_kind::message: return ev.role.ok() && ev.content.ok();
      case g_kind::tool_use: return ev.tool_id.ok() && ev.tool_name.ok();
      case g_kind::tool_result: return ev.tool_id.ok() && ev.status.ok();
      case g_kind::error: return ev.message.ok();
      case g_kind::result: return ev.status.ok();
    }
    return false;
  }

  error_code read_string(od::value v, g_string& s) {
    od::json_type t{};
    if (auto e = v.type().get(t)) return e;
    s.present = true;
    if (t != od::json_type::string) {
      s.wrong_type = true;  // left unread: On-Demand skips it (its framing was checked by stage 1)
      return simdjson::SUCCESS;
    }
    s.wrong_type = false;  // a later duplicate key wins, as in JSON.parse
    return detail::get_string(v, s.value, arena_);
  }

  error_code read_field(std::string_view key, od::value v, g_event& ev) {
    // Ordered by how often the keys occur (assistant `message` lines are nearly all of a run's lines).
    if (key == "type") return read_string(v, ev.type);
    if (key == "timestamp") return simdjson::SUCCESS;  // not needed: skipped without being parsed
    if (key == "role") return read_string(v, ev.role);
    if (key == "content") return read_string(v, ev.content);
    if (key == "delta") {
      od::json_type t{};
      if (auto e = v.type().get(t)) return e;
      if (t == od::json_type::boolean) return v.get_bool().get(ev.delta);
      ev.delta = false;
      return simdjson::SUCCESS;
    }
    if (key == "tool_id") return read_string(v, ev.tool_id);
    if (key == "tool_name") return read_string(v, ev.tool_name);
    if (key == "parameters") {
      ev.has_parameters = true;
      return detail::to_json(v, ev.parameters, arena_);
    }
    if (key == "status") return read_string(v, ev.status);
    if (key == "output") return read_string(v, ev.output);
    if (key == "error") {
      ev.has_error = true;
      return detail::to_json(v, ev.error, arena_);
    }
    if (key == "severity") return read_string(v, ev.severity);
    if (key == "message") return read_string(v, ev.message);
    if (key == "session_id") return read_string(v, ev.session_id);
    if (key == "model") return read_string(v, ev.model);
    if (key == "stats") return read_stats(v, ev);
    return simdjson::SUCCESS;  // unknown field: ignored
  }

  error_code read_stats(od::value v, g_event& ev) {
    od::json_type t{};
    if (auto e = v.type().get(t)) return e;
    if (t != od::json_type::object) return simdjson::SUCCESS;  // optional: another type counts as absent
    od::object obj;
    if (auto e = v.get_object().get(obj)) return e;
    ev.has_stats = true;
    for (auto field_result : obj) {
      od::field field;
      if (auto e = std::move(field_result).get(field)) return e;
      std::string_view key;
      if (auto e = key_of(field, key)) return e;
      std::optional<double>* slot = key == "input_tokens"    ? &ev.input_tokens
                                    : key == "output_tokens" ? &ev.output_tokens
                                    : key == "cached"        ? &ev.cached
                                    : key == "input"         ? &ev.input
                                                             : nullptr;
      if (slot == nullptr) continue;  // total_tokens, duration_ms, tool_calls, models: not needed
      od::value value = field.value();
      od::json_type vt{};
      if (auto e = value.type().get(vt)) return e;
      if (vt != od::json_type::number) continue;
      double d = 0;
      if (auto e = detail::get_number(value, d)) return e;
      *slot = d;
    }
    return simdjson::SUCCESS;
  }

  detail::padded_line padded_;
  const simdjson::implementation* utf8_ = detail::utf8_kernel();  // for validate_utf8 without a dispatch per line
  detail::string_arena arena_;
};

bool contains_ci(std::string_view haystack, std::string_view needle) noexcept {
  if (needle.empty() || haystack.size() < needle.size()) return needle.empty();
  for (std::size_t i = 0; i + needle.size() <= haystack.size(); ++i) {
    std::size_t k = 0;
    while (k < needle.size() &&
           std::tolower(static_cast<unsigned char>(haystack[i + k])) == static_cast<unsigned char>(needle[k]))
      ++k;
    if (k == needle.size()) return true;
  }
  return false;
}

/// Three digits at `p` forming 100–599, not followed by another digit.
std::optional<int> status_at(std::string_view s, std::size_t p) noexcept {
  if (p + 3 > s.size()) return std::nullopt;
  int v = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    const char c = s[p + i];
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  if (p + 3 < s.size() && s[p + 3] >= '0' && s[p + 3] <= '9') return std::nullopt;
  if (v < 100 || v > 599) return std::nullopt;
  return v;
}

/// The text of a JSON value for a tool.failed `error` / terminal text (a string as is, else its JSON).
std::string error_text(const json& error) {
  if (error.is_object()) {
    const auto it = error.find("message");
    if (it != error.end() && it->is_string()) return it->get<std::string>();
    return {};
  }
  if (error.is_string()) return error.get<std::string>();
  return {};
}

std::string error_type(const json& error) {
  if (!error.is_object()) return {};
  const auto it = error.find("type");
  return it != error.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

}  // namespace

std::optional<int> gemini_http_status(std::string_view msg, std::optional<int> exit_code) noexcept {
  // gemini prefixes API errors with "[API Error: "; a status may start the message or follow that prefix.
  static constexpr std::string_view kPrefix = "[API Error: ";
  if (auto s = status_at(msg, 0)) return s;
  if (msg.substr(0, kPrefix.size()) == kPrefix) {
    if (auto s = status_at(msg, kPrefix.size())) return s;
  }
  // The API's JSON error body, embedded as is: {"error":{"code":500,"message":…,"status":"INTERNAL"}}.
  static constexpr std::string_view kCode = "\"code\":";
  for (auto p = msg.find(kCode); p != std::string_view::npos; p = msg.find(kCode, p + 1)) {
    std::size_t q = p + kCode.size();
    while (q < msg.size() && msg[q] == ' ') ++q;
    if (auto s = status_at(msg, q)) return s;
  }
  // gemini exits with the error's numeric code, which the kernel keeps modulo 256.
  if (exit_code && *exit_code >= 144 && *exit_code <= 255) return *exit_code + 256;
  return std::nullopt;
}

bool gemini_error_is_retryable(std::string_view msg, std::string_view type, std::optional<int> http_status) noexcept {
  // gemini's Fatal*Error types (authentication, input, config, sandbox, turn limit, tool execution, untrusted
  // workspace, cancellation) describe the setup or the request, not a transient condition.
  if (type.substr(0, 5) == "Fatal") return false;
  if (http_status) return *http_status == 408 || *http_status == 429 || (*http_status >= 500 && *http_status <= 599);
  static constexpr std::array<std::string_view, 16> transient = {
      "terminated",   "fetch failed",       "econnreset",        "etimedout",  "econnrefused", "eai_again",
      "socket hang up", "premature close",  "network error",     "rate limit", "resource_exhausted",
      "overloaded",   "unavailable",        "deadline exceeded", "timed out",  "too many requests"};
  return std::any_of(transient.begin(), transient.end(), [&](std::string_view t) { return contains_ci(msg, t); });
}

struct gemini_mapper::impl {
  explicit impl(gemini_mapper_options o)
      : options(std::move(o)),
        core(detail::core_options_of(options)) {}

  gemini_mapper_options options;
  detail::mapper_core core;
  g_parser parser;
  g_event ev;

  // The text streamed since the last tool event: the final turn's answer (terminal.completed `text`).
  std::string turn_text;
  // The last `error` event of severity "error" (failure text when the result carries no error object).
  std::string last_error_message;

  bool result_seen = false;
  std::string result_status;
  std::string result_error_message;
  std::string result_error_type;
  bool result_has_error = false;

  void apply(std::vector<message>& out) {
    switch (ev.kind) {
      case g_kind::unknown: return;
      case g_kind::init:
        // After a synthesized session (content came first) this records the id for the terminal.
        core.session(out, ev.session_id.value, ev.model.ok() ? ev.model.value : "", "");
        return;
      case g_kind::message:
        // role "user" is the prompt echoed back; only the model's text is reported. Every assistant message is one
        // streamed part (`delta: true` in 0.61.0): its content is new text, emitted exactly as printed.
        if (ev.role.value != "assistant") return;
        core.text(out, ev.content.value);
        turn_text.append(ev.content.value);
        return;
      case g_kind::tool_use: {
        const std::size_t before = out.size();
        core.tool_call(out, ev.tool_id.value, ev.tool_name.value,
                       ev.has_parameters ? std::move(ev.parameters) : json::object());
        if (out.size() != before) turn_text.clear();  // a new call ends the turn's text (a repeat changes nothing)
        return;
      }
      case g_kind::tool_result: return tool_result(out);
      case g_kind::error: {
        const std::string_view severity = ev.severity.ok() ? ev.severity.value : std::string_view("error");
        json extra = {{"code", "gemini_error"}, {"severity", std::string(severity)}};
        core.status(out, "warning", ev.message.value, std::move(extra));
        if (severity != "warning") last_error_message = detail::sanitize_utf8(ev.message.value, detail::kMaxStatusBytes);
        return;
      }
      case g_kind::result: return result();
    }
  }

  void tool_result(std::vector<message>& out) {
    const std::string_view id = ev.tool_id.value;
    const bool ok = ev.status.value == "success";
    json raw = {{"status", std::string(ev.status.value)}};
    if (ev.output.ok()) raw["output"] = std::string(ev.output.value);
    if (ev.has_error && !ev.error.is_null()) raw["error"] = ev.error;
    std::string text;
    if (ok) {
      text = std::string(ev.output.value);
    } else {
      text = error_text(ev.error);
      if (text.empty()) text = ev.output.ok() && !ev.output.value.empty() ? std::string(ev.output.value) : "tool error";
    }
    // A result for a call never announced gets a synthesized call; gemini's ids are "<tool name>__<call id>".
    std::string_view name;
    if (!core.tool_open(id)) {
      const auto sep = id.find("__");
      if (sep != std::string_view::npos && sep > 0) name = id.substr(0, sep);
    }
    const std::size_t before = out.size();
    core.tool_close(out, id, name, std::move(text), !ok, std::move(raw));
    if (out.size() != before) turn_text.clear();  // the next text belongs to the model's next turn
  }

  void result() {
    if (result_seen) return;  // a repeated result: the first one is gemini's word
    result_seen = true;
    result_status.assign(ev.status.value);
    result_has_error = ev.has_error && !ev.error.is_null();
    result_error_message = error_text(ev.error);
    result_error_type = error_type(ev.error);
    if (ev.has_stats) {
      // stats.input_tokens counts the cached prompt tokens too; `input` is the uncached part (0.61.0). The contract
      // counts them apart (total = input + output + cache_read + cache_write).
      auto count = [](const std::optional<double>& v) { return v ? detail::tokens_from(*v) : 0LL; };
      const long long cached = count(ev.cached);
      core.usage.input = ev.input ? count(ev.input) : std::max(0LL, count(ev.input_tokens) - cached);
      core.usage.output = count(ev.output_tokens);
      core.usage.cache_read = cached;
      core.usage.any = true;
    }
  }

  detail::terminal_draft decide(const run_end& end) const {
    using detail::terminal_draft;
    const process::exited* exited = end.status ? end.status->as_exited() : nullptr;
    const std::optional<int> exit_code = exited != nullptr ? std::optional<int>(exited->code) : std::nullopt;
    const bool forced_after_finish = end.stopped_after_finish && result_seen;
    if (!result_seen) {
      if (exit_code && *exit_code != 0) {
        terminal_draft d = core.exited_draft(end, *exit_code, last_error_message);
        if (auto status = gemini_http_status(last_error_message, exit_code)) {
          d.content["http_status"] = *status;
          d.content["retryable"] = gemini_error_is_retryable(last_error_message, {}, status);
        }
        return d;
      }
      return core.no_terminal_draft(end, "result");
    }
    if (result_status == "success") {
      if (!forced_after_finish && exit_code && *exit_code != 0)
        return core.exited_draft(end, *exit_code, "after a success result");
      return terminal_draft{.type = message_type::terminal_completed, .text = turn_text};
    }
    if (result_status == "error") {
      std::string text = !result_error_message.empty() ? result_error_message : last_error_message;
      if (text.empty()) text = options.agent + " reported an error without a message";
      terminal_draft d{.reason = std::string(transport::failure_reason::agent_error), .text = text};
      d.content["error_message"] = detail::sanitize_utf8(text, detail::kMaxStatusBytes);
      if (!result_error_type.empty()) d.content["error_type"] = result_error_type;
      const auto status = gemini_http_status(text, forced_after_finish ? std::nullopt : exit_code);
      if (status) d.content["http_status"] = *status;
      d.content["retryable"] = gemini_error_is_retryable(text, result_error_type, status);
      if (exit_code && !forced_after_finish) d.content["exit_code"] = *exit_code;
      return d;
    }
    return terminal_draft{.reason = std::string(transport::failure_reason::protocol),
                          .text = options.agent + "'s result has an unknown status '" +
                                  detail::sanitize_utf8(result_status, 200) + "'"};
  }

  void finish(const run_end& end, std::vector<message>& out) {
    if (!core.begin_finish()) return;
    detail::terminal_draft d;
    if (auto common = core.common_end(end, result_seen)) {
      d = std::move(*common);
    } else {
      d = decide(end);
    }
    if (end.stopped_after_finish && result_seen && d.type != message_type::terminal_cancelled)
      d.content["stopped_after_finish"] = true;
    core.emit_terminal(out, std::move(d), end);
  }
};

gemini_mapper::gemini_mapper(gemini_mapper_options options) : impl_(std::make_unique<impl>(std::move(options))) {}
gemini_mapper::~gemini_mapper() = default;
gemini_mapper::gemini_mapper(gemini_mapper&&) noexcept = default;
gemini_mapper& gemini_mapper::operator=(gemini_mapper&&) noexcept = default;

void gemini_mapper::recycle(std::vector<message>& used) { impl_->core.recycle(used); }

void gemini_mapper::on_line(std::string_view line, std::vector<message>& out) {
  impl& m = *impl_;
  if (!m.core.begin_line(line)) return;  // after finish(), or a blank line
  try {
    if (m.parser.parse(line, m.ev) != simdjson::SUCCESS) {
      m.core.record_invalid(line);
      return;
    }
    m.core.saw_event = true;
    m.apply(out);
  } catch (const std::exception&) {
    // Only allocation failures (or a bug) get here: keep the stream alive and report the line.
    m.core.record_invalid(line);
  }
}

void gemini_mapper::on_oversize_line(std::string_view head, std::size_t total_bytes, std::vector<message>& /*out*/) {
  impl_->core.oversize_line(head, total_bytes);
}

bool gemini_mapper::agent_finished() const noexcept { return impl_->result_seen; }

void gemini_mapper::finish(const run_end& end, std::vector<message>& out) { impl_->finish(end, out); }

const mapper_stats& gemini_mapper::stats() const noexcept { return impl_->core.stats(); }

const std::string& gemini_mapper::session_id() const noexcept { return impl_->core.session_id(); }

}  // namespace agenthost::mapper
