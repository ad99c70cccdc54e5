// The library creates no file: no temp file, no FIFO, no socket path, no directory — while spawning (reaper and
// session containment), streaming, writing stdin, stopping, cancelling, failing to start.
//
// How: this test program interposes every libc function that can create a path (open/openat/creat with O_CREAT or
// O_TMPFILE, fopen in a writing mode, mkdir, mkfifo, mknod, mkstemp and friends, tmpfile, bind to a path, link,
// symlink) and records the calls made while a window is open; the library's runs happen inside the window. A
// self-test proves the interposition sees mkstemp, open(O_CREAT) and std::ofstream. Own program, so that the
// interposers touch no other suite. The helper programs (reaper, fake agent) are checked elsewhere
// (test_reaper_args.cpp: the reaper holds no path but /dev/null).
#include "hardening_util.hpp"

#include <dlfcn.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <atomic>
#include <cstdarg>
#include <cstring>

namespace {

std::atomic<bool> watching{false};
std::atomic<int> recorded{0};
char records[64][320];

void note(const char* what, const char* path) {
  if (!watching.load()) return;
  const int i = recorded.fetch_add(1);
  if (i >= 64) return;
  std::snprintf(records[i], sizeof records[i], "%s(%s)", what, path != nullptr ? path : "(null)");
}

template <class F>
F real(const char* name) {
  return reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
}

bool creates(int flags) { return (flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE; }
bool writes(const char* mode) { return mode != nullptr && std::strpbrk(mode, "wa+") != nullptr; }

}  // namespace

extern "C" {
// NOLINTBEGIN — libc's own names and signatures.
int open(const char* path, int flags, ...) {
  mode_t mode = 0;
  if (creates(flags)) {
    va_list ap;
    va_start(ap, flags);
    mode = va_arg(ap, mode_t);
    va_end(ap);
    note("open", path);
  }
  static auto f = real<int (*)(const char*, int, ...)>("open");
  return f(path, flags, mode);
}
int open64(const char* path, int flags, ...) {
  mode_t mode = 0;
  if (creates(flags)) {
    va_list ap;
    va_start(ap, flags);
    mode = va_arg(ap, mode_t);
    va_end(ap);
    note("open64", path);
  }
  static auto f = real<int (*)(const char*, int, ...)>("open64");
  return f(path, flags, mode);
}
int openat(int dirfd, const char* path, int flags, ...) {
  mode_t mode = 0;
  if (creates(flags)) {
    va_list ap;
    va_start(ap, flags);
    mode = va_arg(ap, mode_t);
    va_end(ap);
    note("openat", path);
  }
  static auto f = real<int (*)(int, const char*, int, ...)>("openat");
  return f(dirfd, path, flags, mode);
}
int openat64(int dirfd, const char* path, int flags, ...) {
  mode_t mode = 0;
  if (creates(flags)) {
    va_list ap;
    va_start(ap, flags);
    mode = va_arg(ap, mode_t);
    va_end(ap);
    note("openat64", path);
  }
  static auto f = real<int (*)(int, const char*, int, ...)>("openat64");
  return f(dirfd, path, flags, mode);
}
int creat(const char* path, mode_t mode) {
  note("creat", path);
  static auto f = real<int (*)(const char*, mode_t)>("creat");
  return f(path, mode);
}
int creat64(const char* path, mode_t mode) {
  note("creat64", path);
  static auto f = real<int (*)(const char*, mode_t)>("creat64");
  return f(path, mode);
}
FILE* fopen(const char* path, const char* mode) {
  if (writes(mode)) note("fopen", path);
  static auto f = real<FILE* (*)(const char*, const char*)>("fopen");
  return f(path, mode);
}
FILE* fopen64(const char* path, const char* mode) {
  if (writes(mode)) note("fopen64", path);
  static auto f = real<FILE* (*)(const char*, const char*)>("fopen64");
  return f(path, mode);
}
int mkdir(const char* path, mode_t mode) {
  note("mkdir", path);
  static auto f = real<int (*)(const char*, mode_t)>("mkdir");
  return f(path, mode);
}
int mkdirat(int dirfd, const char* path, mode_t mode) {
  note("mkdirat", path);
  static auto f = real<int (*)(int, const char*, mode_t)>("mkdirat");
  return f(dirfd, path, mode);
}
int mkfifo(const char* path, mode_t mode) {
  note("mkfifo", path);
  static auto f = real<int (*)(const char*, mode_t)>("mkfifo");
  return f(path, mode);
}
int mkfifoat(int dirfd, const char* path, mode_t mode) {
  note("mkfifoat", path);
  static auto f = real<int (*)(int, const char*, mode_t)>("mkfifoat");
  return f(dirfd, path, mode);
}
int mknod(const char* path, mode_t mode, dev_t dev) {
  note("mknod", path);
  static auto f = real<int (*)(const char*, mode_t, dev_t)>("mknod");
  return f(path, mode, dev);
}
int mkstemp(char* tmpl) {
  note("mkstemp", tmpl);
  static auto f = real<int (*)(char*)>("mkstemp");
  return f(tmpl);
}
int mkstemp64(char* tmpl) {
  note("mkstemp64", tmpl);
  static auto f = real<int (*)(char*)>("mkstemp64");
  return f(tmpl);
}
int mkostemp(char* tmpl, int flags) {
  note("mkostemp", tmpl);
  static auto f = real<int (*)(char*, int)>("mkostemp");
  return f(tmpl, flags);
}
int mkstemps(char* tmpl, int suffixlen) {
  note("mkstemps", tmpl);
  static auto f = real<int (*)(char*, int)>("mkstemps");
  return f(tmpl, suffixlen);
}
int mkostemps(char* tmpl, int suffixlen, int flags) {
  note("mkostemps", tmpl);
  static auto f = real<int (*)(char*, int, int)>("mkostemps");
  return f(tmpl, suffixlen, flags);
}
char* mkdtemp(char* tmpl) {
  note("mkdtemp", tmpl);
  static auto f = real<char* (*)(char*)>("mkdtemp");
  return f(tmpl);
}
FILE* tmpfile() {
  note("tmpfile", nullptr);
  static auto f = real<FILE* (*)()>("tmpfile");
  return f();
}
FILE* tmpfile64() {
  note("tmpfile64", nullptr);
  static auto f = real<FILE* (*)()>("tmpfile64");
  return f();
}
int link(const char* from, const char* to) {
  note("link", to);
  static auto f = real<int (*)(const char*, const char*)>("link");
  return f(from, to);
}
int symlink(const char* from, const char* to) {
  note("symlink", to);
  static auto f = real<int (*)(const char*, const char*)>("symlink");
  return f(from, to);
}
int bind(int fd, const struct sockaddr* addr, socklen_t len) {
  if (addr != nullptr && addr->sa_family == AF_UNIX && len > sizeof(sa_family_t)) {
    const auto* un = reinterpret_cast<const sockaddr_un*>(addr);
    if (un->sun_path[0] != '\0') note("bind", un->sun_path);  // abstract sockets create no path
  }
  static auto f = real<int (*)(int, const struct sockaddr*, socklen_t)>("bind");
  return f(fd, addr, len);
}
// NOLINTEND
}

using namespace agenthost;
using namespace agenthost::test;
using transport::message_type;

namespace {

const std::string tool_turn = std::string(AGENTHOST_FIXTURES_DIR) + "/pi/pi-0.73.1-json-tool-turn.jsonl";

class NoFiles : public provider_fixture {
 protected:
  void open_window() {
    recorded = 0;
    watching = true;
  }
  std::vector<std::string> close_window() {
    watching = false;
    std::vector<std::string> r;
    for (int i = 0; i < std::min(recorded.load(), 64); ++i) r.emplace_back(records[i]);
    return r;
  }
};

TEST_F(NoFiles, TheInterpositionSeesFileCreation) {
  open_window();
  std::string tmpl = dir + "/selftest-XXXXXX";
  const int fd = ::mkstemp(tmpl.data());
  const int fd2 = ::open((dir + "/selftest-open").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  { std::ofstream(dir + "/selftest-ofstream") << "x"; }
  const int fd3 = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // not a creation
  const auto seen = close_window();
  ::close(fd);
  ::close(fd2);
  ::close(fd3);
  ASSERT_EQ(seen.size(), 3u) << "the interposers do not work in this build";
  EXPECT_EQ(seen[0].rfind("mkstemp(", 0), 0u);
  EXPECT_EQ(seen[1].rfind("open(", 0), 0u);
  EXPECT_NE(seen[2].find("selftest-ofstream"), std::string::npos);
}

TEST_F(NoFiles, SpawnStreamStopCancelAndFailCreateNoFile) {
  // A private TMPDIR for the whole window: it must stay empty too.
  const std::string tmp = dir + "/tmpdir";
  std::filesystem::create_directory(tmp);
  const char* old_tmpdir = std::getenv("TMPDIR");
  const std::string saved = old_tmpdir != nullptr ? old_tmpdir : "";
  ::setenv("TMPDIR", tmp.c_str(), 1);

  open_window();
  // 1. A natural run under the reaper (spawn, stream, stop, reap).
  auto a = run(fake({"replay", tool_turn}));
  // 2. Cancelled mid-stream with a tool child that ignores SIGTERM (the kill phase).
  {
    run_result r;
    asio::cancellation_signal sig;
    providers::run_options o{.stop = process::stop_policy::sigterm()};
    o.stop.graceful_wait = std::chrono::milliseconds(100);
    providers::async_run_agent(io.get_executor(),
                               fake({"ignore-sigterm", "setsid-child", "replay", tool_turn, "--delay-ms", "5", "never-exit"}),
                               providers::make_pi_mapper({}), o,
                               [&](const transport::message& m) {
                                 r.messages.push_back(m);
                                 if (m.type == message_type::tool_call) sig.emit(asio::cancellation_type::terminal);
                               },
                               asio::bind_cancellation_slot(sig.slot(), [&](boost::system::error_code, transport::message t) {
                                 r.terminal = std::move(t);
                                 r.done = true;
                               }));
    EXPECT_TRUE(run_until(io, [&] { return r.done; }, std::chrono::seconds(30)));
    EXPECT_EQ(r.terminal.type, message_type::terminal_cancelled);
  }
  // 3. Session containment (no helper): the /proc walk and the environment token.
  auto s = fake({"setsid-child", "replay", tool_turn});
  s.containment = process::containment_kind::session;
  auto b = run(std::move(s));
  // 4. A start failure.
  auto missing = fake({});
  missing.executable = dir + "/no-such-agent";
  auto c = run(std::move(missing));
  // 5. stdin writes through the process layer.
  {
    auto ch = process::child::spawn(io.get_executor(), {.executable = AGENTHOST_FAKE_AGENT,
                                                        .args = {"read-stdin"},
                                                        .env = {.set = {{"AGENTHOST_TEST_TOKEN", token}}},
                                                        .reaper_path = AGENTHOST_REAPER});
    ASSERT_TRUE(ch.has_value());
    bool written = false, eof = false;
    ch->async_write_stdin(asio::buffer(std::string_view("hello\n")), [&](boost::system::error_code, std::size_t) {
      written = true;
      ch->close_stdin();
    });
    std::function<void()> read = [&] {
      ch->async_read_lines([&](boost::system::error_code ec, process::line_batch) {
        if (ec) eof = true;
        else read();
      });
    };
    read();
    EXPECT_TRUE(run_until(io, [&] { return written && eof; }));
  }
  const auto created = close_window();

  if (old_tmpdir != nullptr) ::setenv("TMPDIR", saved.c_str(), 1);
  else ::unsetenv("TMPDIR");
  EXPECT_EQ(a.terminal.type, message_type::terminal_completed);
  EXPECT_EQ(b.terminal.type, message_type::terminal_completed);
  EXPECT_EQ(c.reason(), "start_failed");
  EXPECT_EQ(created, std::vector<std::string>{}) << "the library created paths";
  EXPECT_TRUE(std::filesystem::is_empty(tmp)) << "something was created in TMPDIR";
  report_figure("no_files: " + std::to_string(created.size()) + " path creations by the library over 5 runs");
}

}  // namespace
