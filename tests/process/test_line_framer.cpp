#include <agenthost/process/line_framer.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <random>

#include <unistd.h>
#include <string>
#include <vector>

using agenthost::process::line_framer;
using agenthost::process::line_view;

namespace {

struct collected {
  std::string text;
  bool oversize;
  std::size_t total;
  bool operator==(const collected&) const = default;
};

std::vector<collected> frame(line_framer& f, const std::vector<std::string>& chunks) {
  std::vector<collected> out;
  auto sink = [&](const line_view& l) { out.push_back({std::string(l.text), l.oversize, l.total_bytes}); };
  for (const auto& c : chunks) f.feed(c, sink);
  f.finish(sink);
  return out;
}

std::vector<collected> frame(const std::vector<std::string>& chunks, std::size_t max = 1 << 20, std::size_t head = 8) {
  line_framer f(max, head);
  return frame(f, chunks);
}

}  // namespace

TEST(LineFramer, SplitsOnNewlineAndStripsOneCarriageReturn) {
  EXPECT_EQ(frame({"a\nb\r\nc\r\r\n\n"}),
            (std::vector<collected>{{"a", false, 1}, {"b", false, 1}, {"c\r", false, 2}, {"", false, 0}}));
}

TEST(LineFramer, DeliversUnterminatedLastLine) {
  EXPECT_EQ(frame({"one\ntw", "o"}), (std::vector<collected>{{"one", false, 3}, {"two", false, 3}}));
}

TEST(LineFramer, StripsBomOnFirstLineOnlyEvenWhenSplit) {
  EXPECT_EQ(frame({"\xEF", "\xBB", "\xBF{}\n\xEF\xBB\xBFx\n"}),
            (std::vector<collected>{{"{}", false, 2}, {"\xEF\xBB\xBFx", false, 4}}));
  EXPECT_EQ(frame({"\xEF\xBBz\n"}), (std::vector<collected>{{"\xEF\xBBz", false, 3}}));
}

TEST(LineFramer, KeepsUtf8SplitAcrossChunks) {
  // "é" = C3 A9, "你" = E4 BD A0 split between reads.
  EXPECT_EQ(frame({"caf\xC3", "\xA9 \xE4\xBD", "\xA0\n"}), (std::vector<collected>{{"caf\xC3\xA9 \xE4\xBD\xA0", false, 9}}));
}

TEST(LineFramer, OversizeLineReportsHeadAndLengthAndLaterLinesAreIntact) {
  const std::string big(100, 'x');
  // Complete in one chunk, and spread over many chunks.
  EXPECT_EQ(frame({"ok\n" + big + "\nafter\n"}, 50, 8),
            (std::vector<collected>{{"ok", false, 2}, {"xxxxxxxx", true, 100}, {"after", false, 5}}));
  std::vector<std::string> chunks;
  for (int i = 0; i < 10; ++i) chunks.push_back(std::string(10, 'y'));
  chunks.push_back("\r\nnext\n");
  EXPECT_EQ(frame(chunks, 50, 8), (std::vector<collected>{{"yyyyyyyy", true, 100}, {"next", false, 4}}));
  // Unterminated oversize tail at EOF.
  EXPECT_EQ(frame({std::string(60, 'z')}, 50, 4), (std::vector<collected>{{"zzzz", true, 60}}));
}

TEST(LineFramer, LineOfExactlyMaxIsDelivered) {
  const std::string line(50, 'm');
  EXPECT_EQ(frame({line.substr(0, 20), line.substr(20) + "\n"}, 50), (std::vector<collected>{{line, false, 50}}));
  EXPECT_EQ(frame({line + "m\n"}, 50, 2), (std::vector<collected>{{"mm", true, 51}}));
}

TEST(LineFramer, MemoryIsBoundedWhileDiscarding) {
  line_framer f(1024, 16);
  std::size_t lines = 0;
  for (int i = 0; i < 1000; ++i) {
    f.feed(std::string(4096, 'q'), [&](const line_view&) { ++lines; });
    ASSERT_LE(f.buffered_bytes(), 16u);
  }
  std::size_t total = 0;
  f.feed("\n", [&](const line_view& l) {
    ++lines;
    total = l.total_bytes;
    EXPECT_TRUE(l.oversize);
  });
  EXPECT_EQ(lines, 1u);
  EXPECT_EQ(total, 4096u * 1000u);
}

// Resident memory of this process, in bytes (/proc/self/statm's second field, in pages).
static std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t size_pages = 0, resident_pages = 0;
  statm >> size_pages >> resident_pages;
  return resident_pages * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

// The read space is not zero-filled: a host reading 100 agents with 256 KiB read chunks would otherwise keep ~25 MiB
// of zeros resident. A std::vector-backed framer value-initializes what prepare() adds (+64 MiB here).
TEST(LineFramer, SpaceThatNoReadWroteStaysUntouched) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer may write the shadow of a whole new allocation: resident memory says nothing here";
#endif
  constexpr std::size_t kSpace = std::size_t{64} << 20;
  line_framer f(std::size_t{128} << 20);
  const std::size_t before = resident_bytes();
  ASSERT_GT(before, 0u);
  auto space = f.prepare(kSpace);
  ASSERT_EQ(space.size(), kSpace);
  std::memcpy(space.data(), "one\ntw", 6);
  std::vector<std::string> lines;
  f.commit(6, [&](const line_view& l) { lines.emplace_back(l.text); });
  f.feed("o\n", [&](const line_view& l) { lines.emplace_back(l.text); });  // moves the partial line, prepares again
  EXPECT_EQ(lines, (std::vector<std::string>{"one", "two"}));
  // Sanitizer shadow memory (1/8 of the space under ASan) and allocator bookkeeping stay far below this.
  const std::size_t after = resident_bytes();
  EXPECT_LT(after - std::min(before, after), kSpace / 2);
}

TEST(LineFramer, AMovedFromFramerStartsANewStream) {
  line_framer a;
  std::vector<std::string> lines;
  const auto collect = [&](const line_view& l) { lines.emplace_back(l.text); };
  a.feed("\xEF\xBB\xBFone\npart", collect);
  line_framer b(std::move(a));
  b.feed("ial\n", collect);
  a.feed("\xEF\xBB\xBF" "fresh\n", collect);  // NOLINT(bugprone-use-after-move): moved-from is specified as empty
  line_framer c;
  c = std::move(b);
  c.feed("last\n", collect);
  EXPECT_EQ(lines, (std::vector<std::string>{"one", "partial", "fresh", "last"}));
}

TEST(LineFramer, ArbitraryChunkBoundariesGiveTheSameLines) {
  std::string stream = "\xEF\xBB\xBF{\"a\":1}\r\n\n";
  for (int i = 0; i < 200; ++i) stream += std::string(static_cast<std::size_t>(i % 37), static_cast<char>('a' + i % 26)) + (i % 3 ? "\n" : "\r\n");
  stream += std::string(300, 'L') + "\nend";
  const auto expected = frame({stream}, 256, 8);
  std::mt19937 rng(42);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::string> chunks;
    std::size_t pos = 0;
    while (pos < stream.size()) {
      const std::size_t n = std::uniform_int_distribution<std::size_t>(1, 64)(rng);
      chunks.push_back(stream.substr(pos, n));
      pos += n;
    }
    ASSERT_EQ(frame(chunks, 256, 8), expected) << "round " << round;
  }
}

// Reads of many lines (each read's newlines found one after another in the same buffer) against a plain split of the
// whole stream: newlines at every offset of a vector block, empty lines, runs of newlines, "\r\n" across read ends.
TEST(LineFramer, ReadsOfManyLinesGiveTheLinesOfAWholeSplit) {
  std::mt19937 rng(7);
  std::string stream;
  std::vector<collected> expected;
  for (int i = 0; i < 3000; ++i) {
    const std::size_t len =
        i % 97 == 0 ? 1500 : std::uniform_int_distribution<std::size_t>(0, i % 5 == 0 ? 200 : 70)(rng);
    std::string line;
    for (std::size_t k = 0; k < len; ++k) line += static_cast<char>('!' + (k * 7 + static_cast<std::size_t>(i)) % 90);
    const bool crlf = i % 4 == 1;
    stream += line + (crlf ? "\r\n" : "\n");
    expected.push_back({line, false, len});
  }
  stream += "tail";
  expected.push_back({"tail", false, 4});
  for (int round = 0; round < 40; ++round) {
    const std::size_t max_chunk = round == 0 ? stream.size() : std::size_t{1} << (3 + round % 10);
    std::vector<std::string> chunks;
    for (std::size_t pos = 0; pos < stream.size();) {
      const std::size_t n = std::uniform_int_distribution<std::size_t>(1, max_chunk)(rng);
      chunks.push_back(stream.substr(pos, n));
      pos += n;
    }
    ASSERT_EQ(frame(chunks), expected) << "round " << round << ", reads of up to " << max_chunk << " bytes";
  }
}

TEST(LineFramer, PrepareCommitDeliversViewsIntoItsOwnBuffer) {
  line_framer f;
  std::vector<std::string> got;
  auto space = f.prepare(16);
  const std::string data = "ab\ncd";
  std::copy(data.begin(), data.end(), space.begin());
  f.commit(data.size(), [&](const line_view& l) { got.emplace_back(l.text); });
  space = f.prepare(16);
  space[0] = '\n';
  f.commit(1, [&](const line_view& l) { got.emplace_back(l.text); });
  EXPECT_EQ(got, (std::vector<std::string>{"ab", "cd"}));
}

// Views are valid until the next prepare(): an oversize line completed by a commit keeps its head even when the same
// commit starts the next oversize line (a consumer that holds a whole read's lines, as child does, saw the second
// line's head in place of the first's).
TEST(LineFramer, OversizeHeadViewSurvivesTheNextOversizeLineOfTheSameCommit) {
  line_framer f(10, 4);
  std::vector<line_view> views;
  auto keep = [&](const line_view& l) { views.push_back(l); };
  f.feed("AAAAAAAAAAAAAAAA", keep);        // spilled: head "AAAA"
  f.feed("AA\nBBBBBBBBBBBBBBBBB", keep);    // completes A's line, spills B's
  ASSERT_EQ(views.size(), 1u);
  EXPECT_EQ(views[0].text, "AAAA");
  EXPECT_TRUE(views[0].oversize);
  EXPECT_EQ(views[0].total_bytes, 18u);
  f.finish(keep);
  ASSERT_EQ(views.size(), 2u);
  EXPECT_EQ(views[0].text, "AAAA");  // still A's head after finish() emitted B's
  EXPECT_EQ(views[1].text, "BBBB");
  EXPECT_EQ(views[1].total_bytes, 17u);
}
