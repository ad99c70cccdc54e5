// Internal helpers around simdjson On-Demand.
#include "ondemand_util.hpp"

#include "message_reuse.hpp"
#include "raw_scan.hpp"
#include "unescape.hpp"

#include <array>
#include <cstdint>
#include <cstring>

namespace agenthost::mapper::detail {

void resize_padded(std::unique_ptr<char[]>& buffer, std::size_t& capacity, od::parser& parser, std::size_t needed) {
  if (capacity > kReleaseBufferAbove && needed < kReleaseBufferAbove / 4) {
    // A huge line grew the buffer and the parser's index: give that memory back.
    buffer.reset();
    capacity = 0;
    parser = od::parser{};
  }
  if (capacity < needed) {
    std::size_t cap = capacity == 0 ? 4096 : capacity;
    while (cap < needed) cap *= 2;
    // Not zeroed: iterate() writes the line and the padding after it, and nothing reads past those. (Zeroing touched
    // every page of the buffer at each growth: 5 % of the pi mapper's time on a run with one 100 KB line.)
    buffer = std::make_unique_for_overwrite<char[]>(cap);
    capacity = cap;
  }
}
simdjson::error_code padded_line::iterate(std::string_view line, od::document& doc) {
  reserve(line.size());
  std::memcpy(buffer.get(), line.data(), line.size());
  std::memset(buffer.get() + line.size(), 0, simdjson::SIMDJSON_PADDING);
  return parser.iterate(buffer.get(), line.size(), capacity).get(doc);
}

simdjson::error_code check_end(od::document& doc) noexcept {
  const char* location = nullptr;
  return doc.current_location().get(location) == simdjson::OUT_OF_BOUNDS ? simdjson::SUCCESS
                                                                         : simdjson::TRAILING_CONTENT;
}

const char* raw_to_json(const char* p, const char* end, nlohmann::json& out, int depth) {
  if (p == end || depth >= kMaxConvertDepth) return nullptr;
  const auto literal = [&](std::string_view word) -> const char* {
    if (!raw::starts_with(p, end, word)) return nullptr;
    const char* q = p + word.size();
    return q == end || raw::is_delimiter(*q) ? q : nullptr;
  };
  // `out` is refilled in place: a mapper converts the same shapes line after line (a tool's input, its metadata), and
  // reusing the previous line's members and buffers saves an allocation per member and per string.
  switch (*p) {
    case '{': {
      const char* const start = p;
      if (!out.is_object()) out = nlohmann::json(nlohmann::json::value_t::object);
      auto& object = out.get_ref<nlohmann::json::object_t&>();
      // Over a previous value, the members written are noted, to drop its other members at the end; an object of
      // more members than that starts empty instead.
      constexpr std::size_t kTracked = 32;
      // Not value-initialized: only [0, count) is read, and zeroing 256 bytes (a `rep stos`) on every object converted
      // cost more than converting a small one.
      std::array<const nlohmann::json*, kTracked> written;  // NOLINT(cppcoreguidelines-pro-type-member-init)
      std::size_t count = 0;
      if (object.size() > kTracked) object.clear();
      const bool reuse = !object.empty();
      ++p;
      if (p != end && *p == '}') {
        object.clear();
        return p + 1;
      }
      for (;;) {
        if (p == end || *p != '"') return nullptr;
        const char* key_end = nullptr;
        bool escaped = false;
        const char* const key_begin = p + 1;
        p = raw::scan_string(p, end, key_end, escaped);
        if (p == nullptr || escaped || p == end || *p != ':') return nullptr;
        const std::string_view key(key_begin, static_cast<std::size_t>(key_end - key_begin));
        auto it = object.find(key);
        if (it == object.end()) it = object.emplace(std::string(key), nullptr).first;
        // As to_json(): a repeated key keeps its last value.
        p = raw_to_json(p + 1, end, it->second, depth + 1);
        if (p == nullptr) return nullptr;
        if (reuse && std::find(written.begin(), written.begin() + count, &it->second) == written.begin() + count) {
          if (count == kTracked) {
            object.clear();
            return raw_to_json(start, end, out, depth);  // more members than noted: convert again into an empty one
          }
          written[count++] = &it->second;
        }
        if (p == end) return nullptr;
        if (*p == '}') break;
        if (*p++ != ',') return nullptr;
      }
      if (reuse && count != object.size()) {
        for (auto it = object.begin(); it != object.end();) {
          if (std::find(written.begin(), written.begin() + count, &it->second) == written.begin() + count)
            it = object.erase(it);
          else
            ++it;
        }
      }
      return p + 1;
    }
    case '[': {
      if (!out.is_array()) out = nlohmann::json(nlohmann::json::value_t::array);
      auto& array = out.get_ref<nlohmann::json::array_t&>();
      std::size_t count = 0;
      ++p;
      if (p != end && *p == ']') {
        array.clear();
        return p + 1;
      }
      for (;;) {
        if (count == array.size()) array.emplace_back();
        p = raw_to_json(p, end, array[count++], depth + 1);
        if (p == nullptr) return nullptr;
        if (p == end) return nullptr;
        if (*p == ']') break;
        if (*p++ != ',') return nullptr;
      }
      array.resize(count);
      return p + 1;
    }
    case '"': {
      if (!out.is_string()) out = nlohmann::json(nlohmann::json::value_t::string);
      auto& s = out.get_ref<std::string&>();
      clear_kept(s, kMaxKeptBytes);  // a large buffer is not kept for every later refill
      return scan_unescape_append(p, end, s);
    }
    case 't':
      out = true;
      return literal("true");
    case 'f':
      out = false;
      return literal("false");
    case 'n':
      out = nullptr;
      return literal("null");
    default: {
      std::int64_t v = 0;
      p = raw::parse_small_int(p, end, v);  // a fraction or an exponent: nullptr
      out = v;
      return p;
    }
  }
}

simdjson::error_code get_string(od::value& v, std::string_view& out, string_arena& arena) noexcept {
  // Most strings have no escape sequence: return a view of the input bytes (validated UTF-8, no control
  // characters: simdjson's first stage checked the whole line) instead of copying them.
  {
    od::raw_json_string raw;
    const auto err = v.get_raw_json_string().get(raw);
    if (err != simdjson::SUCCESS) return err;
    const char* begin = reinterpret_cast<const char*>(raw.raw());
    // The closing quote is there (the document is structurally valid) and the buffer is padded.
    const char* p = raw::find_quote_or_backslash_padded(begin);
    if (*p == '"') {
      out = std::string_view(begin, static_cast<std::size_t>(p - begin));
      return simdjson::SUCCESS;
    }
  }
  const auto err = v.get_string().get(out);
  if (err != simdjson::STRING_ERROR) return err;
  try {
    std::string s;
    if (!lenient_unescape(v.raw_json_token(), s)) return err;
    out = arena.keep(std::move(s));
    return simdjson::SUCCESS;
  } catch (...) {
    return simdjson::MEMALLOC;
  }
}

simdjson::error_code get_number(od::value& v, double& out) noexcept {
  od::number_type nt{};
  if (auto e = v.get_number_type().get(nt)) return e;
  switch (nt) {
    case od::number_type::signed_integer: {
      std::int64_t i = 0;
      if (auto e = v.get_int64().get(i)) return e;
      out = static_cast<double>(i);
      return simdjson::SUCCESS;
    }
    case od::number_type::unsigned_integer: {
      std::uint64_t u = 0;
      if (auto e = v.get_uint64().get(u)) return e;
      out = static_cast<double>(u);
      return simdjson::SUCCESS;
    }
    default:
      return v.get_double().get(out);
  }
}

simdjson::error_code to_json(od::value v, nlohmann::json& out, string_arena& arena, int depth) {
  if (depth > kMaxConvertDepth) return simdjson::DEPTH_ERROR;
  od::json_type t{};
  if (auto e = v.type().get(t)) return e;
  switch (t) {
    case od::json_type::object: {
      od::object obj;
      if (auto e = v.get_object().get(obj)) return e;
      out = nlohmann::json::object();
      for (auto field_result : obj) {
        od::field field;
        if (auto e = std::move(field_result).get(field)) return e;
        std::string_view key;
        if (auto e = field.unescaped_key().get(key)) return e;
        nlohmann::json child;
        if (auto e = to_json(field.value(), child, arena, depth + 1)) return e;
        out[std::string(key)] = std::move(child);
      }
      return simdjson::SUCCESS;
    }
    case od::json_type::array: {
      od::array arr;
      if (auto e = v.get_array().get(arr)) return e;
      out = nlohmann::json::array();
      for (auto element_result : arr) {
        od::value element;
        if (auto e = std::move(element_result).get(element)) return e;
        nlohmann::json child;
        if (auto e = to_json(element, child, arena, depth + 1)) return e;
        out.push_back(std::move(child));
      }
      return simdjson::SUCCESS;
    }
    case od::json_type::string: {
      std::string_view s;
      if (auto e = get_string(v, s, arena)) return e;
      out = std::string(s);
      return simdjson::SUCCESS;
    }
    case od::json_type::number: {
      od::number_type nt{};
      if (auto e = v.get_number_type().get(nt)) return e;
      if (nt == od::number_type::signed_integer) {
        std::int64_t i = 0;
        if (auto e = v.get_int64().get(i)) return e;
        out = i;
      } else if (nt == od::number_type::unsigned_integer) {
        std::uint64_t u = 0;
        if (auto e = v.get_uint64().get(u)) return e;
        out = u;
      } else {
        double d = 0;
        if (auto e = v.get_double().get(d)) return e;
        out = d;
      }
      return simdjson::SUCCESS;
    }
    case od::json_type::boolean: {
      bool b = false;
      if (auto e = v.get_bool().get(b)) return e;
      out = b;
      return simdjson::SUCCESS;
    }
    case od::json_type::null: {
      bool is_null = false;
      if (auto e = v.is_null().get(is_null)) return e;
      if (!is_null) return simdjson::INCORRECT_TYPE;
      out = nullptr;
      return simdjson::SUCCESS;
    }
  }
  return simdjson::INCORRECT_TYPE;
}

simdjson::error_code validate_json(od::value v, string_arena& arena, int depth) {
  // Mirrors to_json(): the same accessors on the same values, so the same errors.
  if (depth > kMaxConvertDepth) return simdjson::DEPTH_ERROR;
  od::json_type t{};
  if (auto e = v.type().get(t)) return e;
  switch (t) {
    case od::json_type::object: {
      od::object obj;
      if (auto e = v.get_object().get(obj)) return e;
      for (auto field_result : obj) {
        od::field field;
        if (auto e = std::move(field_result).get(field)) return e;
        std::string_view key;
        if (auto e = field.unescaped_key().get(key)) return e;
        if (auto e = validate_json(field.value(), arena, depth + 1)) return e;
      }
      return simdjson::SUCCESS;
    }
    case od::json_type::array: {
      od::array arr;
      if (auto e = v.get_array().get(arr)) return e;
      for (auto element_result : arr) {
        od::value element;
        if (auto e = std::move(element_result).get(element)) return e;
        if (auto e = validate_json(element, arena, depth + 1)) return e;
      }
      return simdjson::SUCCESS;
    }
    case od::json_type::string: {
      std::string_view s;
      return get_string(v, s, arena);
    }
    case od::json_type::number: {
      od::number_type nt{};
      if (auto e = v.get_number_type().get(nt)) return e;
      if (nt == od::number_type::signed_integer) {
        std::int64_t i = 0;
        return v.get_int64().get(i);
      }
      if (nt == od::number_type::unsigned_integer) {
        std::uint64_t u = 0;
        return v.get_uint64().get(u);
      }
      double d = 0;
      return v.get_double().get(d);
    }
    case od::json_type::boolean: {
      bool b = false;
      return v.get_bool().get(b);
    }
    case od::json_type::null: {
      bool is_null = false;
      if (auto e = v.is_null().get(is_null)) return e;
      return is_null ? simdjson::SUCCESS : simdjson::INCORRECT_TYPE;
    }
  }
  return simdjson::INCORRECT_TYPE;
}

namespace {

/// A member value that matters only when it is a string: read it (is_string), else validate it as to_json would.
simdjson::error_code string_or_validate(od::value v, int depth, std::string_view& s, bool& is_string,
                                        string_arena& arena) {
  if (depth > kMaxConvertDepth) return simdjson::DEPTH_ERROR;
  od::json_type t{};
  if (auto e = v.type().get(t)) return e;
  if (t != od::json_type::string) {
    is_string = false;
    return validate_json(v, arena, depth);
  }
  is_string = true;
  return get_string(v, s, arena);
}

/// One item of a content array: appended when it is an object whose last `type` is the string "text" and whose last
/// `text` is a string (nlohmann's object keeps the last of duplicate keys).
simdjson::error_code content_item_text(od::value v, int depth, std::string& text, bool& first,
                                       string_arena& arena) {
  if (depth > kMaxConvertDepth) return simdjson::DEPTH_ERROR;
  od::json_type t{};
  if (auto e = v.type().get(t)) return e;
  if (t != od::json_type::object) return validate_json(v, arena, depth);
  od::object obj;
  if (auto e = v.get_object().get(obj)) return e;
  std::string_view type, item_text;
  bool type_is_string = false, text_is_string = false;
  for (auto field_result : obj) {
    od::field field;
    if (auto e = std::move(field_result).get(field)) return e;
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return e;
    if (key == "type") {
      if (auto e = string_or_validate(field.value(), depth + 1, type, type_is_string, arena)) return e;
    } else if (key == "text") {
      if (auto e = string_or_validate(field.value(), depth + 1, item_text, text_is_string, arena)) return e;
    } else if (auto e = validate_json(field.value(), arena, depth + 1)) {
      return e;
    }
  }
  if (type_is_string && type == "text" && text_is_string) {
    if (!first) text += '\n';
    text.append(item_text);
    first = false;
  }
  return simdjson::SUCCESS;
}

/// The text of a `content` value: a string as is, an array's text items joined, anything else "".
simdjson::error_code content_text(od::value v, int depth, std::string& text, string_arena& arena) {
  text.clear();
  if (depth > kMaxConvertDepth) return simdjson::DEPTH_ERROR;
  od::json_type t{};
  if (auto e = v.type().get(t)) return e;
  if (t == od::json_type::string) {
    std::string_view s;
    if (auto e = get_string(v, s, arena)) return e;
    text.assign(s);
    return simdjson::SUCCESS;
  }
  if (t != od::json_type::array) return validate_json(v, arena, depth);
  od::array arr;
  if (auto e = v.get_array().get(arr)) return e;
  bool first = true;
  for (auto element_result : arr) {
    od::value element;
    if (auto e = std::move(element_result).get(element)) return e;
    if (auto e = content_item_text(element, depth + 1, text, first, arena)) return e;
  }
  return simdjson::SUCCESS;
}

}  // namespace

simdjson::error_code tool_result_text(od::value v, std::string& text, string_arena& arena) {
  text.clear();
  od::json_type t{};
  if (auto e = v.type().get(t)) return e;
  if (t != od::json_type::object) return content_text(v, 0, text, arena);
  od::object obj;
  if (auto e = v.get_object().get(obj)) return e;
  for (auto field_result : obj) {
    od::field field;
    if (auto e = std::move(field_result).get(field)) return e;
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return e;
    if (key == "content") {
      if (auto e = content_text(field.value(), 1, text, arena)) return e;  // the last `content` wins
    } else if (auto e = validate_json(field.value(), arena, 1)) {
      return e;
    }
  }
  return simdjson::SUCCESS;
}

}  // namespace agenthost::mapper::detail
