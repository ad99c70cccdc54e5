// child: signals, the tree's members and the three-phase stop (see child_impl.hpp).
#include "child_impl.hpp"

#include "linux/launch.hpp"

#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

namespace agenthost::process {

using boost::system::error_code;
using clock_type = std::chrono::steady_clock;
using detail::handler_t;
using detail::post_completion;
using detail::try_reap;

std::vector<detail::proc_entry> child::impl::scan_members(bool thorough) {
  if (mode == containment_kind::reaper && !reaper_lost && !direct_reaped &&
      detail::poll_readable(direct_pidfd.get(), std::chrono::milliseconds{0})) {
    // A dead reaper's children went elsewhere, and one forked by the spawn server is not even reserved by its pidfd
    // (once the server reaps it, its pid can be recycled): its death is handled now, never walked from. During the
    // destruction, which handles it itself, the walk is skipped.
    if (shut_down) return {};
    on_direct_child_exit(false);
  }
  bool complete = true;
  const auto all = detail::scan_processes(&complete);
  forget_departed_members(all);
  if (mode == containment_kind::reaper && !reaper_lost) {
    scan_complete = true;  // the reaper's word decides, not the scan
    if (direct_reaped) return {};  // it said "empty" and exited: nothing is left
    // Members seen now are the roots of the sweeps should the reaper die later.
    auto members = detail::tree_members(all, direct_pid, false, 0);
    for (const auto& m : members)
      if (m.pid != agent_pid) known_members.insert_or_assign(m.pid, m.start_time);
    return members;
  }
  std::vector<detail::proc_entry> roots;
  roots.reserve(known_members.size() + 1);
  for (const auto& [pid, start] : known_members) roots.push_back({.pid = pid, .start_time = start});
  if (mode == containment_kind::reaper) {
    // Not our child, and no pidfd of it: only its start time tells the agent from a process that got its pid.
    if (agent_start_time != 0) roots.push_back({.pid = agent_pid, .start_time = agent_start_time});
  } else if (!direct_reaped) {
    roots.push_back({.pid = agent_pid});
  }
  // The agent's session (its id is the agent's pid) adds the members that lost their parent links, but that id is
  // only ours while something reserves it: the agent's pid held by us (our unreaped child), or a process we identified
  // (pid and start time, or the token) still in the session. An empty session's id can be recycled by a stranger's
  // setsid().
  const bool session_pinned = mode == containment_kind::session && !direct_reaped;
  const int session = session_pinned ? agent_pid : 0;
  auto now = detail::collect_tree(all, roots, session, ::getpid());
  if (thorough || now.empty()) {
    const auto tagged = detail::processes_with_env(all, tree_token);
    if (!tagged.empty()) {
      roots.insert(roots.end(), tagged.begin(), tagged.end());
      now = detail::collect_tree(all, roots, session, ::getpid());
    }
  }
  if (!session_pinned &&
      std::any_of(now.begin(), now.end(), [&](const detail::proc_entry& m) { return m.sid == agent_pid; }))
    now = detail::collect_tree(all, roots, agent_pid, ::getpid());
  for (const auto& m : now)
    if (m.pid != agent_pid) known_members.insert_or_assign(m.pid, m.start_time);  // a recycled pid: the new member
  scan_complete = complete;
  if (!complete) {
    // A scan that missed processes (the host out of file descriptors) cannot show a member gone: the known ones that
    // still exist stay members (forget_departed_members kept them).
    for (const auto& member : known_members) {
      const int pid = member.first;  // (a structured binding cannot be captured before C++20 in clang 14)
      if (std::none_of(now.begin(), now.end(), [pid](const detail::proc_entry& m) { return m.pid == pid; }))
        now.push_back({.pid = pid, .state = 'S', .start_time = member.second});
    }
  }
  return now;
}

void child::impl::forget_departed_members(const std::vector<detail::proc_entry>& all) {
  if (known_members.empty()) return;
  std::unordered_map<int, std::uint64_t> start_of;  // pid -> start time, of every process `all` could read
  start_of.reserve(all.size());
  for (const auto& p : all) start_of.emplace(p.pid, p.start_time);
  std::erase_if(known_members, [&](const auto& member) {
    const auto [pid, start] = member;
    if (const auto it = start_of.find(pid); it != start_of.end()) return it->second != start;  // recycled pid
    // Not in the scan: gone, or its entry was unreadable (the scan gives up on a process it cannot read, as on
    // EMFILE). Only a free pid is proof that it is gone.
    return ::kill(pid, 0) != 0 && errno == ESRCH;
  });
}

error_code child::impl::send_signal(int sig, signal_target target) noexcept {
  try {
    return send_signal_or_throw(sig, target);
  } catch (...) {  // the scans allocate: std::bad_alloc is the only exception on these paths
    return make_error_code(std::errc::not_enough_memory);
  }
}

error_code child::impl::send_signal_or_throw(int sig, signal_target target) {
  // Checked here for every containment: the reaper ignores a number it does not know, which would pass for success.
  if (sig < 0 || sig >= NSIG) return make_error_code(std::errc::invalid_argument);
  if (tree_gone || (mode == containment_kind::session && direct_reaped && target == signal_target::leader))
    return make_error_code(errc::not_running);
  if (mode == containment_kind::reaper && !reaper_lost) {
    if (!control.is_open()) return make_error_code(errc::not_running);
    const char* what = target == signal_target::leader ? "leader" : target == signal_target::group ? "group" : "tree";
    const std::string msg = std::string("signal ") + what + " " + std::to_string(sig);
    if (::send(control.native_handle(), msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
      return {errno, boost::system::system_category()};
    return {};
  }
  switch (target) {
    case signal_target::leader:
      if (mode == containment_kind::reaper) {  // a lost reaper: the agent is not our child
        if (agent_start_time == 0 || !detail::signal_process({.pid = agent_pid, .start_time = agent_start_time}, sig))
          return make_error_code(errc::not_running);
        return {};
      }
      if (detail::pidfd_send_signal(direct_pidfd.get(), sig) != 0) return {errno, boost::system::system_category()};
      return {};
    case signal_target::group:
      // The agent leads its own session and group. The group id stays reserved while its unreaped pid (pinned by our
      // pidfd) or a member of the group does; without the leader, an empty group's id can be recycled, so the group is
      // signalled (at once, forks racing the signal included) only while a member of the tree is still in it.
      if (direct_reaped) {
        const auto members = scan_members(true);
        if (std::none_of(members.begin(), members.end(), [&](const auto& m) { return m.pgid == agent_pid; })) {
          if (!members.empty()) return {};  // nobody left in the group, as after an ESRCH below: the tree runs on
          tree_gone = true;
          return make_error_code(errc::not_running);
        }
      }
      // ESRCH (the leader left its group, which is empty) is not an error: the tree still runs.
      if (::kill(-agent_pid, sig) != 0 && errno != ESRCH) return {errno, boost::system::system_category()};
      return {};
    case signal_target::tree: {
      if (!direct_reaped) detail::pidfd_send_signal(direct_pidfd.get(), sig);
      const auto members = scan_members(true);
      for (const auto& m : members)
        if (m.pid != agent_pid || mode == containment_kind::reaper) detail::signal_process(m, sig);
      if (direct_reaped && members.empty()) {
        tree_gone = true;
        return make_error_code(errc::not_running);
      }
      return {};
    }
  }
  return {};
}

bool child::impl::session_kill_sweep(bool thorough) {
  if (!direct_reaped) detail::pidfd_send_signal(direct_pidfd.get(), SIGKILL);
  auto members = scan_members(thorough);
  // Session mode signals its agent through the pidfd above; a lost reaper's agent is one of the members.
  for (const auto& m : members)
    if (m.pid != agent_pid || mode == containment_kind::reaper) detail::signal_process(m, SIGKILL);
  return members.empty() && direct_reaped && scan_complete;
}

bool child::impl::reap_leader() {
  if (direct_reaped) return true;
  if (!detail::poll_readable(direct_pidfd.get(), std::chrono::milliseconds{0})) return false;  // still running
  record_session_before_reap();
  if (auto st = try_reap(direct_pidfd.get())) {
    direct_reaped = true;
    set_leader_status(*st);
  }
  return direct_reaped;
}

bool child::impl::session_tree_gone(bool thorough) {
  reap_leader();
  // Scan even while the leader lives: members found now stay known after they are reparented.
  const bool members_left = !scan_members(thorough).empty();
  return direct_reaped && !members_left && scan_complete;
}

void child::impl::stop(stop_policy p, handler_t<void(error_code, stop_report)> h) {
  stop_handlers.push_back(std::move(h));
  if (stopping) return;  // joins the running stop
  stopping = true;
  try {
    start_stop(std::move(p));
  } catch (...) {
    // No timer armed and no completion posted (no memory): the exception leaves async_stop, whose handler is not
    // called, and a later stop starts afresh instead of joining one that would never end.
    stopping = false;
    stop_handlers.clear();
    throw;
  }
}

void child::impl::start_stop(stop_policy p) {
  policy = std::move(p);
  stop_start = clock_type::now();
  if (tree_gone || (host_tracks_tree() && tree_known_gone())) {
    tree_gone = true;
    phase = stop_phase::already_gone;
    return finish_stop({});
  }
  phase = stop_phase::interrupt;
  if (!policy.interrupt_bytes.empty() && stdin_open && opts.stdin_mode == stdin_kind::pipe) {
    // Best effort and never blocking: a full or closed stdin must not delay the stop.
    (void)::send(in.native_handle(), policy.interrupt_bytes.data(), policy.interrupt_bytes.size(),
                 MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  if (policy.close_stdin) close_stdin();
  reaper_missed_command = false;
  host_had_kill_wait = false;
  // A reaper that is gone (or going) never forwards it: once its death is handled, the host sends it itself.
  if (policy.interrupt_signal != 0 && send_signal(policy.interrupt_signal, policy.interrupt_target) &&
      mode == containment_kind::reaper)
    reaper_missed_command = true;
  arm_stop_timer(policy.graceful_wait);
}

bool child::impl::tree_known_gone() noexcept {
  try {
    return session_tree_gone(true);
  } catch (...) {  // std::bad_alloc from the scan: not known to be gone, the stop's ticks look again
    return false;
  }
}

std::chrono::milliseconds child::impl::stop_tick() const {
  // Gone meanwhile, inside the tick that is about to wait (the kill phase's sweep can find the reaper dead and handle
  // it there): set_tree_gone() had no wait to cancel, so the next tick must come at once, not at the phase's end.
  if (tree_gone) return std::chrono::milliseconds{0};
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(stop_deadline - clock_type::now());
  if (!host_tracks_tree()) return std::max(left, std::chrono::milliseconds{0});
  // Without a reaper there is no "tree empty" event: poll /proc.
  return std::clamp(left, std::chrono::milliseconds{0}, std::chrono::milliseconds{10});
}

void child::impl::arm_stop_timer(std::chrono::milliseconds phase_length) {
  stop_deadline = deadline_after(phase_length);
  wait_stop_timer();
}

void child::impl::wait_stop_timer() {
  stop_timer.expires_after(stop_tick());
  stop_timer.async_wait([self = shared_from_this()](error_code) { self->run_stop_tick(); });
}

void child::impl::run_stop_tick() {
  try {
    on_stop_tick();
    return;
  } catch (const std::bad_alloc&) {  // the scans and the completion's post allocate
  }
  if (!stopping) return;  // it finished before the failure
  try {
    log(log_level::warn, "stop: a tick failed for want of memory; trying again in 10 ms");
  } catch (...) {
  }
  try {
    stop_timer.expires_after(std::chrono::milliseconds{10});
    stop_timer.async_wait([self = shared_from_this()](error_code) { self->run_stop_tick(); });
  } catch (...) {  // not even the timer's wait could be had: nothing is left that would run the stop
  }
}

void child::impl::on_stop_tick() {
  if (host_tracks_tree() && !tree_gone && session_tree_gone()) tree_gone = true;
  if (tree_gone) return finish_stop({});
  if (host_tracks_tree() && phase == stop_phase::kill) session_kill_sweep();
  if (clock_type::now() < stop_deadline) return wait_stop_timer();
  if (phase == stop_phase::interrupt) {
    // The kill phase and a deadline first: a tick that fails below (and is tried again) resumes in it.
    phase = stop_phase::kill;
    stop_deadline = deadline_after(policy.kill_wait);
    if (mode == containment_kind::reaper) {
      if (control.is_open()) {
        (void)::send(control.native_handle(), "kill", 4, MSG_NOSIGNAL | MSG_DONTWAIT);
      } else {
        host_side_kill_sweep();
      }
    } else {
      session_kill_sweep(true);
    }
    // After the sweep, which can find the reaper dead: this kill phase is then already the host's own. kill_wait
    // counts from after the sweep (a thorough one reads every process's environment).
    host_had_kill_wait = host_tracks_tree();
    stop_deadline = deadline_after(policy.kill_wait);
    return wait_stop_timer();
  }
  // Kill phase timed out: sweep once more ourselves and report what is left.
  host_side_kill_sweep();
  auto survivors = scan_members(true);
  // The reaper died during the kill phase (found now, or late in it): its kill may never have run. The host's own kill
  // gets a whole kill phase of its own.
  if (reaper_lost && !host_had_kill_wait) {
    host_had_kill_wait = true;
    stop_deadline = deadline_after(policy.kill_wait);
    host_side_kill_sweep();
    stop_deadline = deadline_after(policy.kill_wait);  // from after the sweep; the one above is for a retry
    return wait_stop_timer();
  }
  std::vector<int> pids;
  for (const auto& s : survivors) pids.push_back(s.pid);
  if (!direct_reaped && mode == containment_kind::session) pids.push_back(agent_pid);
  if (pids.empty() && (mode == containment_kind::session || direct_reaped) && scan_complete) {
    tree_gone = true;
    return finish_stop({});
  }
  finish_stop(std::move(pids), !scan_complete);
}

void child::impl::host_side_kill_sweep() {
  if (host_tracks_tree()) {
    session_kill_sweep();
    return;
  }
  for (const auto& m : scan_members()) detail::signal_process(m, SIGKILL);
}

void child::impl::complete_stop_handlers(const std::shared_ptr<finished_stop>& done, const executor_type& fallback) {
  while (done->next < done->handlers.size()) {
    const std::size_t i = done->next++;
    const auto hex = boost::asio::get_associated_executor(done->handlers[i], fallback);
    try {
      // Inline when the handler's executor is ours (we run on it), else one hop. The handler leaves `done` only in
      // the hop's function: a hop that found no memory (std::bad_alloc before it ran) destroys that function, and a
      // handler moved into it would be lost with it.
      boost::asio::dispatch(hex, [done, i] {
        auto h = std::move(done->handlers[i]);
        std::move(h)(done->ec, std::move(done->reports[i]));
      });
    } catch (...) {
      // The handler threw (it is gone from `done`: its exception leaves run(), as from any handler), or its hop found
      // no memory (it is still there: the retry starts with it, and the exception ends here). The others get a post
      // of their own, made first.
      const bool ran = !done->handlers[i];
      if (!ran) done->next = i;
      if (done->next < done->handlers.size())
        boost::asio::post(fallback, [done, fallback] { complete_stop_handlers(done, fallback); });
      if (ran) throw;
      return;
    }
  }
}

void child::impl::finish_stop(std::vector<int> survivors, bool unverified) {
  stop_timer.cancel();
  stop_report r;
  r.phase = phase;
  r.elapsed = clock_type::now() - stop_start;
  if (leader_status && leader_exit_time > stop_start) r.leader_exit_after = leader_exit_time - stop_start;
  r.leader_status = leader_status;
  r.survivors = std::move(survivors);
  const bool incomplete = !r.survivors.empty() || unverified;
  error_code ec = incomplete ? make_error_code(errc::stop_incomplete) : error_code{};
  // The child was destroyed during the stop: its destructor's bounded kill took over, and what it left is not known
  // here — the stop is aborted (as every pending operation), not reported done.
  if (shut_down) ec = boost::asio::error::operation_aborted;
  if (incomplete) {
    try {
      log(log_level::error, "stop incomplete: " + std::to_string(r.survivors.size()) + " process(es) survived" +
                                (unverified ? "; the process scan failed (out of file descriptors?): there may be more"
                                            : ""));
    } catch (...) {  // the logger's (or the message's allocation): the report still goes to every handler
    }
  }
  // Everything that allocates comes before the one post that completes the handlers, and they are given back to
  // stop_handlers when it fails: running out of memory leaves them all for the stop's next try (run_stop_tick) or
  // the caller (stop()), never lost.
  auto done = std::make_shared<finished_stop>();
  done->ec = ec;
  done->reports.assign(stop_handlers.size() > 1 ? stop_handlers.size() - 1 : 0, r);
  done->reports.push_back(std::move(r));
  done->handlers = std::move(stop_handlers);
  stop_handlers.clear();
  try {
    boost::asio::post(ex, [done, fallback = ex] { complete_stop_handlers(done, fallback); });
  } catch (...) {
    stop_handlers = std::move(done->handlers);
    throw;
  }
  // A later stop reports "already gone" (or tries again if something survived).
  stopping = false;
}

}  // namespace agenthost::process
