// Agent discovery, the same steps for every agent (what differs is each agent's spec: probe_agents.cpp). Everything of
// one probe runs on its executor; the probe and each version command keep themselves
// alive through the shared_ptrs their pending operations hold. File-system look-ups are synchronous: they are a few
// stat() calls and reads of small files, far below the cost of the version command itself.
#include <agenthost/providers/probe.hpp>

#include <agenthost/process/child.hpp>
#include <agenthost/transport/utf8.hpp>

#include "discovery.hpp"
#include "probe_agents.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <cstdio>
#include <functional>

namespace agenthost::providers {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using boost::system::error_code;

namespace {

using namespace detail;
using handler_type = asio::any_completion_handler<void(error_code, probe_result)>;

constexpr std::size_t max_output_bytes = 8192;
constexpr std::size_t max_version_text = 200;

// ---- output helpers ------------------------------------------------------------------------------------------------

std::string first_line(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    auto line = trim(text.substr(pos, end - pos));
    if (!line.empty()) return line.size() > max_version_text ? line.substr(0, max_version_text) : line;
    pos = end + 1;
  }
  return {};
}

std::string last_line(std::string_view text) {
  const auto t = trim(text);
  const auto nl = t.rfind('\n');
  auto line = nl == std::string::npos ? t : t.substr(nl + 1);
  return line.size() > max_version_text ? line.substr(0, max_version_text) + "…" : line;
}

std::string seconds_text(std::chrono::milliseconds d) {
  char buf[32];
  if (d.count() % 1000 == 0) std::snprintf(buf, sizeof buf, "%lld s", static_cast<long long>(d.count() / 1000));
  else std::snprintf(buf, sizeof buf, "%.3g s", static_cast<double>(d.count()) / 1000.0);
  return buf;
}

// ---- one version command -------------------------------------------------------------------------------------------

struct command_outcome {
  std::optional<spawn_error> start_error{};
  std::string out{};  // the first max_output_bytes of stdout
  std::string err{};  // stderr's tail
  std::optional<process::exit_status> status{};
  bool timed_out = false;
  bool cancelled = false;
  std::vector<int> survivors{};
};

// Runs one short command to its end or to the deadline; always stops (kills) its whole tree before reporting.
class version_command : public std::enable_shared_from_this<version_command> {
 public:
  using done_fn = std::function<void(command_outcome)>;

  version_command(asio::any_io_executor ex, std::chrono::steady_clock::time_point deadline, done_fn done)
      : ex_(std::move(ex)), deadline_timer_(ex_), drain_timer_(ex_), deadline_(deadline), done_(std::move(done)) {}

  void start(process::spawn_options options) {
    auto c = process::child::spawn(ex_, std::move(options));
    if (!c) {
      outcome_.start_error = c.error();
      ending_ = true;
      return report();
    }
    child_.emplace(std::move(*c));
    deadline_timer_.expires_at(deadline_);
    deadline_timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (ec || self->ending_) return;
      self->outcome_.timed_out = true;
      self->end();
    });
    read();
    child_->async_wait([self = shared_from_this()](error_code ec, process::exit_status st) {
      if (!ec) self->on_exit(st);
    });
  }

  // Cancellation: kill the tree now and report `cancelled`.
  void abort() {
    if (ending_) return;
    outcome_.cancelled = true;
    end();
  }

 private:
  void read() {
    child_->async_read_lines([self = shared_from_this()](error_code ec, process::line_batch lines) {
      self->on_lines(ec, lines);
    });
  }

  void on_lines(error_code ec, process::line_batch lines) {
    if (ending_) return;
    if (ec) {
      eof_ = true;
      return maybe_end();
    }
    for (const auto& l : lines) {
      if (outcome_.out.size() >= max_output_bytes) break;
      outcome_.out.append(l.text.substr(0, max_output_bytes - outcome_.out.size()));
      outcome_.out += '\n';
    }
    read();  // keep draining so the command never blocks on a full pipe
  }

  void on_exit(process::exit_status st) {
    outcome_.status = st;
    if (eof_) return maybe_end();
    // A descendant may hold stdout open: give it a moment, then kill the tree.
    drain_timer_.expires_after(std::chrono::milliseconds(300));
    drain_timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec) self->end();
    });
  }

  void maybe_end() {
    if (eof_ && outcome_.status) end();
  }

  void end() {
    if (ending_) return;
    ending_ = true;
    deadline_timer_.cancel();
    drain_timer_.cancel();
    auto policy = process::stop_policy::kill_now();
    policy.kill_wait = std::chrono::milliseconds(2000);
    child_->async_stop(policy, [self = shared_from_this()](error_code, process::stop_report r) {
      if (!self->outcome_.status && r.leader_status && !self->outcome_.timed_out && !self->outcome_.cancelled)
        self->outcome_.status = r.leader_status;
      self->outcome_.survivors = r.survivors;
      self->outcome_.err = self->child_->stderr_tail();
      self->report();
    });
  }

  void report() {
    // Posted: never complete inside the caller's frame or the child's handler; the child is destroyed there too, so a
    // read still pending (a survivor holding stdout) is aborted and releases this object.
    asio::post(ex_, [self = shared_from_this()] {
      self->child_.reset();
      auto done = std::move(self->done_);
      done(std::move(self->outcome_));
    });
  }

  asio::any_io_executor ex_;
  asio::steady_timer deadline_timer_, drain_timer_;
  std::chrono::steady_clock::time_point deadline_;
  done_fn done_;
  std::optional<process::child> child_;
  command_outcome outcome_;
  bool eof_ = false;
  bool ending_ = false;
};

// ---- the probe ------------------------------------------------------------------------------------------------------

// One probe of one agent; what differs between agents is in its spec (probe_agents.cpp).
class agent_probe : public std::enable_shared_from_this<agent_probe> {
 public:
  agent_probe(asio::any_io_executor ex, const agent_spec& spec, probe_options o, handler_type h)
      : ex_(std::move(ex)),
        spec_(spec),
        options_(std::move(o)),
        handler_(std::move(h)),
        started_(std::chrono::steady_clock::now()),
        deadline_(started_ + options_.timeout) {
    if (options_.executable.empty()) options_.executable = spec_.name;
    result_.agent = spec_.name;
    result_.features = spec_.features(std::nullopt);
  }

  void connect_cancellation() {
    auto slot = asio::get_associated_cancellation_slot(handler_);
    if (!slot.is_connected()) return;
    slot.assign([w = weak_from_this()](asio::cancellation_type) {
      if (auto self = w.lock()) asio::post(self->ex_, [self] { self->cancel(); });
    });
  }

  void start() {
    if (completed_) return;
    if (cancelled_) return complete();
    env_ = effective_environment(options_.env);
    // The executable as a run finds it (its PATH rule differs from the agent's environment when that filters PATH).
    env_map lookup_env = env_;
    lookup_env["PATH"] = executable_search_path(options_.env);
    const auto found = find_program(options_.executable, lookup_env, true);
    if (found.found.empty()) return not_found(found);
    result_.executable = found.found;
    if (!found.on_path) {
      result_.hints.push_back("found " + found.found.string() + " outside PATH: it is run by that path (with_probe() "
                              "sets the options' executable); add " + found.found.parent_path().string() +
                              " to PATH to run it by name");
    }
    launch_ = detect_node(found.found, env_);
    package_ = npm_package(launch_.script.empty() ? found.found : launch_.script, spec_.package_part);
    if (launch_.uses_node) result_.runtime = runtime_info{.name = "node", .executable = launch_.node};
    if (!options_.run_version_commands) return evaluate();  // what the files say
    if (launch_.uses_node) {
      if (!launch_.node.empty()) {
        return run(launch_.node, [self = shared_from_this()](command_outcome o) {
          const bool timed_out = o.timed_out;
          self->on_node_version(std::move(o));
          if (!timed_out) return self->run_agent_version();
          // No time left for the agent itself: report what we know.
          self->evaluate();
        });
      }
    }
    run_agent_version();
  }

 private:
  void cancel() {
    if (completed_ || cancelled_) return;
    cancelled_ = true;
    if (current_) current_->abort();  // completes through the command's outcome
  }

  void not_found(const lookup& l) {
    if (!l.not_executable.empty()) {
      result_.executable = l.not_executable;
      result_.problems.push_back(l.not_executable.string() + " is not an executable file");
      result_.hints.push_back("make it executable (`chmod +x " + l.not_executable.string() + "`) or reinstall " +
                              spec_.name);
    } else if (options_.executable.native().find('/') != std::string::npos) {
      result_.problems.push_back(std::string(spec_.name) + " not found at " + l.searched);
      result_.hints.push_back(spec_.install_hint);
    } else {
      result_.problems.push_back("`" + options_.executable.string() +
                                 "` not found on PATH nor in the usual install places (searched " + l.searched + ")");
      result_.hints.push_back(spec_.install_hint);
    }
    complete();
  }

  void run(const fs::path& exe, version_command::done_fn next) {
    if (cancelled_) return complete();
    auto cmd = std::make_shared<version_command>(ex_, deadline_, [self = shared_from_this(), next = std::move(next)](
                                                                      command_outcome o) {
      self->current_.reset();
      if (o.cancelled || self->cancelled_) return self->complete();
      next(std::move(o));
    });
    current_ = cmd;
    cmd->start(process::spawn_options{.executable = exe,
                                      .args = {"--version"},
                                      .env = options_.env,
                                      .stdin_mode = process::stdin_kind::null,
                                      .max_line_bytes = std::size_t{64} << 10,
                                      .oversize_head_bytes = 256,
                                      .read_chunk_bytes = std::size_t{16} << 10,
                                      .stderr_tail_bytes = std::size_t{4} << 10,
                                      .containment = options_.containment,
                                      .reaper_path = options_.reaper_path,
                                      .log = options_.log});
  }

  void run_agent_version() {
    run(result_.executable, [self = shared_from_this()](command_outcome o) { self->on_agent_version(std::move(o)); });
  }

  // Describes a failed command; empty when it succeeded.
  std::string failure(const command_outcome& o, const std::string& what) const {
    if (o.start_error) return "could not start `" + what + "`: " + o.start_error->message;
    if (o.timed_out) return "`" + what + "` timed out after " + seconds_text(options_.timeout) + " (killed)";
    if (!o.status) return "`" + what + "` ended without an exit status";
    if (o.status->success()) return {};
    auto s = "`" + what + "` " + o.status->to_string();
    if (auto line = last_line(o.err); !line.empty()) s += ": " + line;
    return s;
  }

  void on_node_version(command_outcome o) {
    auto& rt = *result_.runtime;
    const auto what = launch_.node.string() + " --version";
    if (auto f = failure(o, what); !f.empty()) {
      rt.version_text = f;
      node_failure_ = f;
      return;
    }
    rt.version_text = first_line(o.out);
    rt.version = version::parse(rt.version_text);
    if (!rt.version) node_failure_ = "`" + what + "` printed no version number: '" + rt.version_text + "'";
  }

  void on_agent_version(command_outcome o) {
    const std::string what = result_.executable.filename().string() + " --version";
    const auto f = failure(o, what);
    result_.version_text = first_line(o.out);
    if (result_.version_text.empty()) result_.version_text = first_line(o.err);
    if (o.timed_out) {
      result_.problems.push_back(f);
      result_.hints.push_back("run `" + result_.executable.string() +
                              " --version` in a terminal to see why it does not answer");
    } else if (!f.empty()) {
      result_.problems.push_back(f);
    } else {
      result_.version = version::parse(o.out);
      if (!result_.version) result_.version = version::parse(o.err);
      if (!result_.version) {
        result_.problems.push_back("`" + what + "` printed no version number: '" + result_.version_text + "'");
        result_.hints.push_back("is " + result_.executable.string() + " really " + spec_.name + "? " +
                                spec_.install_hint);
      }
    }
    if (!o.survivors.empty())
      result_.problems.push_back("processes of `" + what + "` survived the kill (" +
                                 std::to_string(o.survivors.size()) + ")");
    evaluate();
  }

  // Conclusions from everything gathered; then completes.
  void evaluate() {
    if (!result_.version && package_ && package_->pkg_version) {
      result_.version = package_->pkg_version;
      result_.hints.push_back(package_->file.string() + " says " + spec_.name + " " +
                              package_->pkg_version->to_string());
    }
    check_node();
    check_version_range();
    spec_.check_configuration(probe_context{.env = env_, .options = options_}, result_);
    complete();
  }

  void check_node() {
    if (!launch_.uses_node) return;
    auto& rt = *result_.runtime;
    rt.required = spec_.node_required(result_.version);
    if (package_ && package_->node_required) rt.required = package_->node_required;
    if (launch_.node.empty()) {
      std::string where = launch_.via_path ? "on PATH" : "";
      result_.problems.push_back(std::string(spec_.name) + " runs on Node.js (" + launch_.how + ") but `node` was not found " +
                                 (where.empty() ? std::string("where the script expects it") : where));
      // Is there one the agent's PATH misses?
      auto elsewhere = find_program("node", env_map{{"PATH", result_.executable.parent_path().string()}}, false);
      if (elsewhere.found.empty()) {
        for (const auto& d : install_places(env_))
          if (check_executable(d / "node") == file_check::ok) {
            elsewhere.found = d / "node";
            break;
          }
      }
      if (!elsewhere.found.empty())
        result_.hints.push_back("a node exists at " + elsewhere.found.string() + ": add " +
                                elsewhere.found.parent_path().string() + " to the agent's PATH");
      else
        result_.hints.push_back("install Node.js " + (rt.required ? ">= " + rt.required->to_string() + " " : "") +
                                "and put it on PATH");
      return;
    }
    if (!node_failure_.empty()) {
      result_.problems.push_back(node_failure_);
      return;
    }
    if (rt.required && rt.version && *rt.version < *rt.required) {
      result_.problems.push_back(std::string(spec_.name) + " " +
                                 (result_.version ? result_.version->to_string() + " " : std::string()) +
                                 "needs Node.js >= " + rt.required->to_string() + ", but " + rt.executable.string() +
                                 " is " + rt.version_text);
      auto hint = "install Node.js " + rt.required->to_string() + " or newer and put it first on PATH";
      if (auto alt = spec_.older_node_alternative(*rt.required); !alt.empty()) hint += ", " + alt;
      result_.hints.push_back(std::move(hint));
    } else if (!rt.required && !result_.version && rt.version) {
      // The version is unknown: say what the newest known version would need.
      if (const auto newest = spec_.node_required(spec_.newest_known); newest && *rt.version < *newest)
        result_.hints.push_back(std::string(spec_.name) + " " + spec_.newest_known.to_string() + " needs Node.js >= " +
                                newest->to_string() + "; " + rt.executable.string() + " is " + rt.version_text);
    }
  }

  void check_version_range() {
    if (!result_.version) return;
    const auto v = std::string(spec_.name) + " " + result_.version->to_string();
    if (*result_.version < spec_.oldest_tested)
      result_.hints.push_back(v + " is older than " + spec_.oldest_tested.to_string() +
                              ", the oldest version agenthost was tested with; upgrade " + spec_.name);
    else if (result_.version->major > spec_.newest_known.major)
      result_.hints.push_back(v + " is newer than any version agenthost knows (" + spec_.newest_known.to_string() +
                              "); " + spec_.when_newer);
  }

  void complete() {
    if (completed_) return;
    completed_ = true;
    if (cancelled_) result_.problems.push_back("probe cancelled");
    result_.features = spec_.features(result_.version);
    result_.available = result_.problems.empty();
    result_.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started_);
    auto h = std::move(handler_);
    asio::get_associated_cancellation_slot(h).clear();
    const error_code ec = cancelled_ ? error_code(asio::error::operation_aborted) : error_code{};
    auto hex = asio::get_associated_executor(h, ex_);
    asio::post(ex_, [h = std::move(h), hex, ec, r = std::move(result_)]() mutable {
      asio::dispatch(hex, [h = std::move(h), ec, r = std::move(r)]() mutable { std::move(h)(ec, std::move(r)); });
    });
  }

  asio::any_io_executor ex_;
  const agent_spec& spec_;
  probe_options options_;
  handler_type handler_;
  std::chrono::steady_clock::time_point started_, deadline_;
  env_map env_;
  node_launch launch_;
  std::optional<package_info> package_;
  std::string node_failure_;
  std::shared_ptr<version_command> current_;
  probe_result result_;
  bool cancelled_ = false;
  bool completed_ = false;
};

nlohmann::json version_json(const std::optional<version>& v) {
  return v ? nlohmann::json(v->to_string()) : nlohmann::json(nullptr);
}

}  // namespace

nlohmann::json to_json(const probe_result& r) {
  // Paths and an agent's --version output are bytes, not necessarily UTF-8 (a Latin-1 directory name, a line cut
  // inside a character): made valid here, so that dump() never throws.
  const auto text = [](std::string_view s) { return transport::sanitize_utf8(s); };
  const auto texts = [&](const std::vector<std::string>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& s : v) a.push_back(text(s));
    return a;
  };
  nlohmann::json features = nlohmann::json::array();
  for (const auto& f : r.features)
    features.push_back({{"name", text(f.name)},
                        {"supported", f.supported},
                        {"since", version_json(f.since)},
                        {"description", text(f.description)}});
  nlohmann::json runtime = nullptr;
  if (r.runtime) {
    runtime = {{"name", text(r.runtime->name)},
               {"executable", text(r.runtime->executable.native())},
               {"version", version_json(r.runtime->version)},
               {"version_text", text(r.runtime->version_text)},
               {"required", version_json(r.runtime->required)}};
  }
  return {{"agent", text(r.agent)},
          {"available", r.available},
          {"executable", text(r.executable.native())},
          {"version", version_json(r.version)},
          {"version_text", text(r.version_text)},
          {"features", std::move(features)},
          {"problems", texts(r.problems)},
          {"hints", texts(r.hints)},
          {"runtime", std::move(runtime)},
          {"elapsed_ms", r.elapsed.count()}};
}

void to_json(nlohmann::json& j, const probe_result& r) { j = to_json(r); }

bool supports(const probe_result& r, std::string_view name) {
  for (const auto& f : r.features)
    if (f.name == name) return f.supported;
  return false;
}

std::string_view to_string(agent_kind agent) noexcept { return spec_for(agent).name; }

std::optional<agent_kind> agent_kind_from_string(std::string_view name) noexcept {
  for (const auto a : all_agent_kinds)
    if (name == to_string(a)) return a;
  return std::nullopt;
}

probe_options probe_options_for(const pi_options& o) { return detail::probe_options_from(o); }

pi_options with_probe(pi_options options, const probe_result& result) {
  if (result.version) options.pi_version = result.version;
  if (!result.executable.empty()) options.executable = result.executable;
  return options;
}

namespace detail {
void async_probe_impl(asio::any_io_executor ex, agent_kind agent, probe_options options, handler_type handler) {
  auto probe = std::make_shared<agent_probe>(ex, spec_for(agent), std::move(options), std::move(handler));
  probe->connect_cancellation();
  asio::post(ex, [probe] { probe->start(); });  // never inline in the caller's frame
}
}  // namespace detail

probe_result probe(agent_kind agent, const probe_options& options) {
  asio::io_context io;
  probe_result result;
  async_probe(io.get_executor(), agent, options, [&](error_code, probe_result r) { result = std::move(r); });
  io.run();
  return result;
}

probe_result probe_pi(const probe_options& options) { return probe(agent_kind::pi, options); }

}  // namespace agenthost::providers
