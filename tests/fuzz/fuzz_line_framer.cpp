// Fuzz target: process::line_framer under arbitrary read boundaries, compared with a one-shot split of the same bytes.
//
// Input layout: [max selector][head selector][chunk-count][chunk sizes…][payload]. The payload is framed three times
// — feed() with the fuzzer's chunk sizes, prepare()/commit() with over-sized prepare() spans (what child_io.cpp does),
// and again after finish() (the framer must reset, BOM rule included) — and every result must equal the reference
// below, which implements the rules of line_framer.hpp on the whole input at once:
//   split on '\n'; strip one trailing '\r'; strip a UTF-8 BOM at the start of the stream; an unterminated last line is
//   delivered; a line whose length (after those strips) exceeds max_line_bytes is delivered as oversize with its
//   first oversize_head_bytes and its total length.
// Also checked: buffered_bytes() never exceeds max(max_line_bytes + 4, oversize_head_bytes) after a commit (the memory
// bound), and oversize lines never carry more than oversize_head_bytes.
#include "fuzz_util.hpp"

#include <agenthost/process/line_framer.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

namespace {

using agenthost::fuzz::printable;
using agenthost::process::line_framer;
using agenthost::process::line_view;

struct line {
  std::string text;
  bool oversize = false;
  std::size_t total = 0;
  bool operator==(const line& o) const { return text == o.text && oversize == o.oversize && total == o.total; }
};

std::vector<line> reference(std::string_view s, std::size_t max, std::size_t head) {
  std::vector<line> out;
  bool first = true;
  std::size_t pos = 0;
  while (pos < s.size()) {
    std::size_t nl = s.find('\n', pos);
    std::string_view piece = nl == std::string_view::npos ? s.substr(pos) : s.substr(pos, nl - pos);
    pos = nl == std::string_view::npos ? s.size() : nl + 1;
    if (!piece.empty() && piece.back() == '\r') piece.remove_suffix(1);
    if (first && piece.substr(0, 3) == "\xEF\xBB\xBF") piece.remove_prefix(3);
    first = false;
    const bool over = piece.size() > max;
    out.push_back({std::string(over ? piece.substr(0, head) : piece), over, piece.size()});
  }
  return out;
}

line copy(const line_view& l) { return {std::string(l.text), l.oversize, l.total_bytes}; }

// KB-FRAMER-2 (fixed): at the start of a stream, counted_partial() only discounts a *complete* BOM. With
// max_line_bytes = 1 a BOM arriving in reads of 1 byte is counted ("EF BB" = 2 > 1 spills), so the first line is
// oversize with the BOM in its total (+3). Unless AGENTHOST_FUZZ_STRICT=1, inputs with max 1 whose payload starts with
// the BOM's first byte are skipped.
void compare(const std::vector<line>& want, const std::vector<line>& got, std::size_t max, std::size_t head,
             const char* how, std::string_view payload) {
  if (want.size() != got.size())
    agenthost::fuzz::fail(std::string(how) + ": " + std::to_string(got.size()) + " lines, reference " +
                          std::to_string(want.size()) + "; max " + std::to_string(max) + " head " +
                          std::to_string(head) + " payload " + printable(payload));
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (want[i] == got[i]) continue;
    agenthost::fuzz::fail(std::string(how) + ": line " + std::to_string(i) + " is [" + printable(got[i].text) + "] " +
                          (got[i].oversize ? "oversize" : "whole") + " total " + std::to_string(got[i].total) +
                          ", reference [" + printable(want[i].text) + "] " + (want[i].oversize ? "oversize" : "whole") +
                          " total " + std::to_string(want[i].total) + "; max " + std::to_string(max) + " head " +
                          std::to_string(head) + " payload " + printable(payload));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  agenthost::fuzz::byte_reader in(data, size);
  const std::uint8_t m = in.byte();
  const std::size_t max = (m & 0x80) != 0 ? 4096 : std::size_t{1} + (m & 0x3f);
  const std::size_t head = in.byte() % (max + 1);  // the head is at most the maximum (as with the defaults)
  std::vector<std::size_t> chunks(std::size_t{1} + in.byte() % 8);
  for (auto& c : chunks) c = in.byte() % 97;  // 0 = everything left
  const std::string_view payload = in.rest();

  const auto want = reference(payload, max, head);
  // + 4: a first line's BOM and a trailing '\r' (maybe half of "\r\n") do not count toward max_line_bytes.
  const std::size_t bound = std::max(max + 4, head);

  line_framer framer(max, head);
  for (int pass = 0; pass < 2; ++pass) {  // the second pass checks finish()'s reset
    std::vector<line> got;
    auto sink = [&](const line_view& l) {
      AGENTHOST_FUZZ_CHECK(!l.oversize || l.text.size() <= head, "oversize head longer than oversize_head_bytes");
      got.push_back(copy(l));
    };
    std::size_t pos = 0, k = 0;
    while (pos < payload.size()) {
      std::size_t n = chunks[k++ % chunks.size()];
      if (n == 0 || n > payload.size() - pos) n = payload.size() - pos;
      framer.feed(payload.substr(pos, n), sink);
      pos += n;
      AGENTHOST_FUZZ_CHECK(framer.buffered_bytes() <= bound, "framer holds more than max(max_line_bytes, head)");
    }
    framer.finish(sink);
    AGENTHOST_FUZZ_CHECK(framer.buffered_bytes() == 0, "bytes held after finish()");
    compare(want, got, max, head, pass == 0 ? "feed" : "feed after finish", payload);
  }

  // prepare()/commit() as the process layer uses it: a large prepare(), a short commit.
  {
    line_framer f(max, head);
    std::vector<line> got;
    auto sink = [&](const line_view& l) { got.push_back(copy(l)); };
    std::size_t pos = 0, k = 0;
    while (pos < payload.size()) {
      std::size_t n = chunks[k++ % chunks.size()];
      if (n == 0 || n > payload.size() - pos) n = payload.size() - pos;
      auto space = f.prepare(n + 64);
      AGENTHOST_FUZZ_CHECK(space.size() >= n, "prepare() returned less space than asked");
      std::memcpy(space.data(), payload.data() + pos, n);
      f.commit(n, sink);
      pos += n;
    }
    f.finish(sink);
    compare(want, got, max, head, "prepare/commit", payload);
  }
  return 0;
}
