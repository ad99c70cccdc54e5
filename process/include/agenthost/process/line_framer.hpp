// agenthost/process/line_framer.hpp — sans-I/O splitting of a byte stream into lines.
//
// Rules: split on '\n' only (UTF-8 never contains 0x0A inside a character, so characters split across reads are
// safe); strip one trailing '\r'; strip a UTF-8 BOM at the start of the stream; deliver an unterminated last line at
// finish(). A line longer than `max_line_bytes` is never buffered whole: its first `oversize_head_bytes` are kept and
// it is delivered as an oversize event with its total length; the lines after it are intact. Memory is bounded by
// max_line_bytes plus the largest chunk committed.
//
// The framer owns the read buffer (like an Asio dynamic buffer): prepare() hands out space to read into, commit()
// scans what was read. Lines are views into that buffer — no copy, also for lines spanning several reads — valid until
// the next prepare(), feed() or finish(). Each byte is moved at most once. Thread safety: none (one owner).
#pragma once

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace agenthost::process {

/// One framed line.
struct line_view {
  /// The line without '\n' / "\r\n"; for an oversize line, its head only.
  std::string_view text{};
  /// True when the line exceeded the maximum; `text` is then its head.
  bool oversize = false;
  /// Length of the whole line in bytes as written (without the newline and a trailing '\r').
  std::size_t total_bytes = 0;
};

class line_framer {
 public:
  explicit line_framer(std::size_t max_line_bytes = std::size_t{64} << 20,
                       std::size_t oversize_head_bytes = std::size_t{4} << 10)
      : max_line_bytes_(max_line_bytes), oversize_head_bytes_(oversize_head_bytes) {}

  /// Movable; the moved-from framer is empty, at the start of a new stream.
  line_framer(line_framer&& other) noexcept : line_framer(other.max_line_bytes_, other.oversize_head_bytes_) {
    *this = std::move(other);
  }
  line_framer& operator=(line_framer&& other) noexcept {
    if (this == &other) return *this;
    max_line_bytes_ = other.max_line_bytes_;
    oversize_head_bytes_ = other.oversize_head_bytes_;
    buf_ = std::move(other.buf_);
    capacity_ = std::exchange(other.capacity_, 0);
    begin_ = std::exchange(other.begin_, 0);
    end_ = std::exchange(other.end_, 0);
    scan_ = std::exchange(other.scan_, 0);
    oversize_ = std::exchange(other.oversize_, false);
    heads_[0] = std::move(other.heads_[0]);
    heads_[1] = std::move(other.heads_[1]);
    cur_head_ = std::exchange(other.cur_head_, 0u);
    oversize_total_ = std::exchange(other.oversize_total_, 0);
    stream_start_ = std::exchange(other.stream_start_, true);
    return *this;
  }
  line_framer(const line_framer&) = delete;
  line_framer& operator=(const line_framer&) = delete;
  ~line_framer() = default;

  /// Space for at least `n` more bytes; invalidates the views handed out before.
  std::span<char> prepare(std::size_t n) {
    if (begin_ > 0) {  // drop consumed lines; the partial line moves to the front once
      std::memmove(buf_.get(), buf_.get() + begin_, end_ - begin_);
      scan_ -= begin_;
      end_ -= begin_;
      begin_ = 0;
    }
    if (capacity_ - end_ < n) {
      if (n > SIZE_MAX - end_) throw std::length_error("line_framer::prepare: size overflow");
      grow(end_ + n);
    }
    return {buf_.get() + end_, n};
  }

  /// `n` bytes were written at the start of the last prepare()'s span: calls on_line(line_view) per complete line.
  template <class OnLine>
  void commit(std::size_t n, OnLine&& on_line) {
    end_ += n;
    while (scan_ < end_) {
      const void* nl = std::memchr(buf_.get() + scan_, '\n', end_ - scan_);
      if (nl == nullptr) break;
      const auto pos = static_cast<std::size_t>(static_cast<const char*>(nl) - buf_.get());
      emit({buf_.get() + begin_, pos - begin_}, on_line);
      begin_ = scan_ = pos + 1;
    }
    scan_ = end_;
    if (counted_partial() > max_line_bytes_ || (oversize_ && end_ - begin_ > 1)) spill_to_oversize();
  }

  /// Convenience: copy `chunk` in and commit it.
  template <class OnLine>
  void feed(std::string_view chunk, OnLine&& on_line) {
    auto space = prepare(chunk.size());
    if (!chunk.empty()) std::memcpy(space.data(), chunk.data(), chunk.size());
    commit(chunk.size(), on_line);
  }

  /// End of stream: delivers the unterminated last line, if any, and resets for a new stream.
  template <class OnLine>
  void finish(OnLine&& on_line) {
    if (oversize_ || end_ > begin_) emit({buf_.get() + begin_, end_ - begin_}, on_line);
    begin_ = end_ = scan_ = 0;
    oversize_ = false;
    stream_start_ = true;
  }

  /// Bytes held for the current incomplete line (its head only, in oversize mode): at most max_line_bytes + 4, since a
  /// first line's BOM and a trailing '\r' (maybe the first half of "\r\n") do not count toward the maximum.
  [[nodiscard]] std::size_t buffered_bytes() const noexcept { return oversize_ ? head().size() : end_ - begin_; }

 private:
  template <class OnLine>
  void emit(std::string_view text, OnLine& on_line) {
    if (oversize_) {
      oversize_total_ += text.size();
      if (head().size() < oversize_head_bytes_) head().append(text.substr(0, oversize_head_bytes_ - head().size()));
      std::size_t total = oversize_total_;
      if (!text.empty() && text.back() == '\r') --total;
      oversize_ = false;
      on_line(line_view{strip_bom(head()), true, total});
      return;
    }
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    if (stream_start_) text = strip_bom(text);  // the test here keeps the per-line path free of a call
    if (text.size() > max_line_bytes_) {
      on_line(line_view{text.substr(0, oversize_head_bytes_), true, text.size()});
    } else {
      on_line(line_view{text, false, text.size()});
    }
  }

  std::string_view strip_bom(std::string_view text) {
    if (stream_start_) {
      stream_start_ = false;
      if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
    }
    return text;
  }

  // Bytes of the current partial line that count toward the maximum: not a leading BOM (first line) and not a
  // trailing '\r' (it may be the first half of "\r\n"), exactly as for a line delivered whole.
  [[nodiscard]] std::size_t counted_partial() const noexcept {
    const std::string_view part{buf_.get() + begin_, end_ - begin_};
    std::size_t n = part.size();
    if (stream_start_) {  // a BOM, or the beginning of one still arriving, does not count
      constexpr std::string_view bom = "\xEF\xBB\xBF";
      const std::size_t k = std::min<std::size_t>(part.size(), 3);
      if (part.substr(0, k) == bom.substr(0, k)) n -= k;
    }
    if (!part.empty() && part.back() == '\r') --n;
    return n;
  }

  // The current line is too long: keep its head, drop the rest, count it. A trailing '\r' stays buffered so that the
  // line's length does not depend on where the reads end.
  void spill_to_oversize() {
    std::string_view part{buf_.get() + begin_, end_ - begin_};
    if (!oversize_) {
      oversize_ = true;
      // A new head buffer: the previous one may still be viewed by a line of the current batch (an oversize line
      // completed by this commit), and the views must stay valid until the next prepare().
      cur_head_ ^= 1;
      head().clear();
      oversize_total_ = 0;
      if (stream_start_) {
        stream_start_ = false;
        if (part.substr(0, 3) == "\xEF\xBB\xBF") part.remove_prefix(3);
      }
    }
    const bool keep_cr = !part.empty() && part.back() == '\r';
    if (keep_cr) part.remove_suffix(1);
    if (head().size() < oversize_head_bytes_) head().append(part.substr(0, oversize_head_bytes_ - head().size()));
    oversize_total_ += part.size();
    begin_ = keep_cr ? end_ - 1 : end_;
    scan_ = end_;
  }

  // Space is never zero-filled: read() writes it before commit() looks at it, and a page the kernel never writes is
  // never touched (a 256 KiB read chunk costs a host with 100 agents ~25 MiB of resident zeros otherwise; a
  // std::vector would value-initialize it). Growth is geometric, so a long line read in small chunks is copied
  // O(length) times in total, not once per read.
  void grow(std::size_t needed) {
    const std::size_t capacity = std::max(needed, capacity_ + capacity_ / 2);
    auto bigger = std::make_unique_for_overwrite<char[]>(capacity);
    if (end_ > 0) std::memcpy(bigger.get(), buf_.get(), end_);
    buf_ = std::move(bigger);
    capacity_ = capacity;
  }

  std::string& head() noexcept { return heads_[cur_head_]; }
  [[nodiscard]] const std::string& head() const noexcept { return heads_[cur_head_]; }

  std::size_t max_line_bytes_;
  std::size_t oversize_head_bytes_;
  std::unique_ptr<char[]> buf_;
  std::size_t capacity_ = 0;
  std::size_t begin_ = 0;  // start of the current (incomplete) line
  std::size_t end_ = 0;    // end of valid data
  std::size_t scan_ = 0;   // bytes before this were searched for '\n'
  bool oversize_ = false;  // the current line exceeded the maximum; head() holds its beginning
  std::string heads_[2];   // head() is heads_[cur_head_]; two, so a new oversize line never overwrites a viewed head
  unsigned cur_head_ = 0;
  std::size_t oversize_total_ = 0;
  bool stream_start_ = true;
};

}  // namespace agenthost::process
