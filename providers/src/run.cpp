// The provider core: one run = child process + mapper + watchdogs. Everything runs on the run's executor; the run
// object keeps itself alive through the shared_ptrs its pending operations hold.
#include <agenthost/providers/run.hpp>

#include <agenthost/process/child.hpp>
#include <agenthost/transport/utf8.hpp>

#include <boost/asio/any_completion_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <string_view>

namespace agenthost::providers {

namespace asio = boost::asio;
using boost::system::error_code;
using transport::message;
using transport::message_type;

message start_failed_message(const std::string& text, const std::string& code_name) {
  // The text names paths and echoes options: bytes, not necessarily UTF-8.
  return {message_type::terminal_failed,
          {{"text", transport::sanitize_utf8(text)},
           {"reason", transport::failure_reason::start_failed},
           {"error", code_name},
           {"stderr", ""},
           {"invalid_output_lines", nlohmann::json::array()},
           {"retryable", false}}};
}

namespace {

using handler_type = asio::any_completion_handler<void(error_code, message)>;

class agent_run : public std::enable_shared_from_this<agent_run> {
 public:
  agent_run(asio::any_io_executor ex, std::unique_ptr<mapper::event_mapper> m, run_options o, message_handler cb,
            handler_type h)
      : ex_(std::move(ex)),
        mapper_(std::move(m)),
        options_(std::move(o)),
        on_message_(std::move(cb)),
        handler_(std::move(h)),
        first_event_timer_(ex_),
        idle_timer_(ex_),
        deadline_timer_(ex_),
        linger_timer_(ex_),
        drain_timer_(ex_),
        eof_timer_(ex_),
        // As Asio's own operations do: the handler's executor has work until the handler ran (an io_context that
        // runs only the completion does not return early).
        handler_work_(asio::prefer(asio::get_associated_executor(handler_, ex_),
                                   asio::execution::outstanding_work.tracked)) {}

  // Called at initiation, so a cancellation emitted before start() is not lost.
  void connect_cancellation() {
    auto slot = asio::get_associated_cancellation_slot(handler_);
    if (slot.is_connected()) {
      // Posted: completing from inside the slot's handler would destroy the handler while it runs.
      slot.assign([w = weak_from_this()](asio::cancellation_type) {
        if (auto self = w.lock()) {
          // Noted at once: a cancellation emitted before the posted start() ran spawns nothing.
          self->cancel_requested_ = true;
          asio::post(self->ex_, [self] { self->end_with({.cancelled = true}); });
        }
      });
    }
  }

  void start(spawn_request spawn) {
    if (completed_ || ending_) return;
    if (cancel_requested_) return end_with({.cancelled = true});  // cancelled before it started: nothing is spawned
    if (!spawn) {
      out_.push_back(start_failed_message(spawn.error(), "invalid_options"));
      deliver();
      return;
    }
    if (options_.stdin_data && spawn->stdin_mode != process::stdin_kind::pipe) {
      out_.push_back(start_failed_message("run_options::stdin_data needs spawn_options::stdin_mode = pipe",
                                          "invalid_options"));
      deliver();
      return;
    }
    auto c = process::child::spawn(ex_, std::move(*spawn));
    if (!c) {
      // Not an exception: the stream gets its terminal like any other run.
      const auto& code = c.error().code;
      out_.push_back(start_failed_message(c.error().message,
                                          code.category() == error_category()
                                              ? std::string(errc_name(static_cast<errc>(code.value())))
                                              : code.message()));
      deliver();
      return;
    }
    child_.emplace(std::move(*c));
    arm(first_event_timer_, first_event_generation_, options_.first_event_timeout, "first_event");
    arm(idle_timer_, idle_generation_, options_.idle_timeout, "idle");
    arm(deadline_timer_, deadline_generation_, options_.deadline, "deadline");
    if (options_.stdin_data) write_stdin_data();
    read();
    child_->async_wait([self = shared_from_this()](error_code ec, process::exit_status st) {
      if (!ec) self->on_leader_exit(st);
    });
  }

 private:
  // A watchdog's handler that was already due when the watchdog was re-armed or called off (its timer expired in the
  // same turn as the line that did it) cannot be cancelled any more: `generation` tells it that it is stale.
  void arm(asio::steady_timer& t, std::uint64_t& generation, std::optional<std::chrono::milliseconds> d,
           const char* what) {
    if (!d) return;
    const auto armed = ++generation;
    t.expires_after(*d);
    t.async_wait([self = shared_from_this(), &t, &generation, armed, d, what](error_code ec) {
      if (ec || armed != generation) return;
      // The agent did talk: its line only waits behind this handler, because the thread was busy (a slow consumer,
      // another agent's burst) when the timer expired. Watch again; that line re-arms or calls off the watchdog.
      if (std::string_view(what) != "deadline" && self->child_ && self->child_->stdout_pending()) {
        self->arm(t, generation, d, what);
        return;
      }
      // Once the agent printed its final event the run counts as what it reported: a deadline still bounds the run
      // (the tree is stopped as by the linger), the other watchdogs have nothing left to watch. (A timer that expired
      // in the same turn as that event's line could not be cancelled any more: checked here.)
      if (self->mapper_->agent_finished()) {
        if (std::string_view(what) == "deadline") self->end_with({.stopped_after_finish = true});
        return;
      }
      self->end_with({.timeout = std::string(what)});
    });
  }

  // The whole of stdin_data, then EOF. The child copies the bytes, so the string can go right away.
  void write_stdin_data() {
    auto data = std::move(*options_.stdin_data);
    options_.stdin_data.reset();
    if (data.empty()) return child_->close_stdin();
    child_->async_write_stdin(asio::buffer(data), [self = shared_from_this()](error_code, std::size_t) {
      // Success, or the agent closed stdin / exited first (its own output and exit tell): EOF either way.
      if (self->child_) self->child_->close_stdin();
    });
  }

  void read() {
    child_->async_read_lines([self = shared_from_this()](error_code ec, process::line_batch lines) {
      self->on_lines(ec, lines);
    });
  }

  void on_lines(error_code ec, process::line_batch lines) {
    if (completed_) return;
    if (ec) {  // EOF (or aborted by the stop)
      stdout_done_ = true;
      if (ending_) {
        if (stopped_end_) finish_stopped();
        return;
      }
      if (!status_ && !mapper_->agent_finished()) {
        // Nothing more can be reported; a leader that keeps running now is hung. (A finished agent has its linger.)
        eof_timer_.expires_after(options_.exit_after_eof);
        eof_timer_.async_wait([self = shared_from_this()](error_code e) {
          if (!e && !self->status_) self->end_with({.timeout = std::string("exit_after_eof")});
        });
      }
      return maybe_finish();
    }
    if (!got_line_) {
      got_line_ = true;
      ++first_event_generation_;
      first_event_timer_.cancel();
    }
    if (options_.idle_timeout && !ending_ && !mapper_->agent_finished())
      arm(idle_timer_, idle_generation_, options_.idle_timeout, "idle");
    for (const auto& l : lines) {
      try {
        if (options_.on_agent_line) options_.on_agent_line(l.text);
        if (l.oversize) {
          mapper_->on_oversize_line(l.text, l.total_bytes, out_);
        } else {
          mapper_->on_line(l.text, out_);
        }
      } catch (...) {
        // Mappers do not throw on bad input; this is std::bad_alloc or a bug. Stop the tree first, then rethrow.
        failure_ = std::current_exception();
        fail_with_exception();
        return;
      }
      // Only an `assistant` text at the end can still grow (the next line's delta merges into it): anything else is
      // delivered now, not at the end of the read. Sooner for the consumer, and few messages alive at a time — with
      // hundreds, glibc's malloc leaves its per-thread cache (bench/README.md, Mapper: Codex 25 % slower).
      if (!out_.empty() && out_.back().type != message_type::assistant && !deliver()) return;
      // A turn's buffered thoughts, a slice at a time: each slice is delivered and its messages are refilled for the
      // next one (event_mapper::take_more).
      try {
        while (mapper_->take_more(out_))
          if (!deliver()) return;
      } catch (...) {
        failure_ = std::current_exception();
        fail_with_exception();
        return;
      }
      // Line by line: a batch that holds a retry and its final event must still restart the linger.
      if (!ending_) watch_finish();
    }
    if (!deliver()) return;
    read();
  }

  // The agent's final event starts the linger, and the idle watchdog has nothing left to watch. An agent can go on
  // after it (pi's agent_end, then auto_retry_start or compaction_start): the linger is then called off and the idle
  // watchdog watches again, so that the next final event starts a linger of its own (a linger that fired in between,
  // finding the agent busy, would otherwise leave a hung agent running forever).
  void watch_finish() {
    const bool finished = mapper_->agent_finished();
    if (finished == linger_armed_) return;
    linger_armed_ = finished;
    const auto generation = ++linger_generation_;  // a linger already due when called off must not end the run
    if (!finished) {
      linger_timer_.cancel();
      arm(idle_timer_, idle_generation_, options_.idle_timeout, "idle");
      return;
    }
    ++idle_generation_;
    idle_timer_.cancel();
    linger_timer_.expires_after(options_.linger_after_finish);
    linger_timer_.async_wait([self = shared_from_this(), generation](error_code e) {
      if (!e && generation == self->linger_generation_ && self->mapper_->agent_finished())
        self->end_with({.stopped_after_finish = true});
    });
  }

  void on_leader_exit(process::exit_status st) {
    status_ = st;
    // While the tree is being stopped, the stop's completion finishes the run (its drain wait must not be replaced).
    if (ending_) return;
    if (stdout_done_) return maybe_finish();
    // A descendant may hold stdout open after the leader exited: give it a moment, then stop the tree.
    drain_timer_.expires_after(options_.drain_after_exit);
    drain_timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec && !self->stdout_done_) self->end_with({});
    });
  }

  // Natural end: stdout EOF and leader exit both seen; stop whatever of the tree remains, then finish.
  void maybe_finish() {
    if (ending_ || !stdout_done_ || !status_) return;
    end_with({});
  }

  // Stops the tree (always to the end, whatever the caller's cancellation did), then asks the mapper for the terminal.
  void end_with(mapper::run_end end) {
    if (ending_ || completed_) return;
    ending_ = true;
    cancel_timers();
    if (!child_) return finish(std::move(end));
    const bool natural = !end.cancelled && !end.timeout && !end.stopped_after_finish;
    auto policy = natural ? process::stop_policy::kill_now() : options_.stop;
    child_->async_stop(policy, [self = shared_from_this(), end = std::move(end)](error_code,
                                                                                process::stop_report r) mutable {
      if (!self->status_ && r.leader_status) self->status_ = r.leader_status;
      self->stopped_end_ = std::move(end);
      if (self->stdout_done_) return self->finish_stopped();
      // The reads went on during the stop: what an agent prints when interrupted (Claude Code's `result`, with the
      // usage and cost of the turn) is mapped too. The tree is gone, so stdout's EOF is imminent; the wait is bounded
      // in case something outside the tree holds the pipe.
      self->drain_timer_.expires_after(self->options_.drain_after_exit);
      self->drain_timer_.async_wait([self](error_code ec) {
        if (!ec) self->finish_stopped();
      });
    });
  }

  // After the stop, at stdout's EOF or when the drain wait ran out, whichever is first: finish() delivers the terminal,
  // which completes the run, so the second caller returns here.
  void finish_stopped() {
    if (completed_) return;
    drain_timer_.cancel();
    finish(std::move(*stopped_end_));
  }

  void finish(mapper::run_end end) {
    // Also after a cancellation or a timeout: how the agent exited once stopped is worth reporting (the terminal's
    // kind is decided by the cause first).
    end.status = status_;
    if (child_) end.stderr_tail = child_->stderr_tail();
    // stdout was read to EOF (or for drain_after_exit after the tree was gone): nothing the agent printed is lost.
    mapper_->finish(end, out_);
    cancelled_ = end.cancelled;
    deliver();
  }

  void cancel_timers() {
    first_event_timer_.cancel();
    idle_timer_.cancel();
    deadline_timer_.cancel();
    linger_timer_.cancel();
    drain_timer_.cancel();
    eof_timer_.cancel();
  }

  // Passes queued messages to the caller; false when the run is over (terminal delivered, or the callback threw).
  bool deliver() {
    // The batch is a local (a callback that cancels can re-enter deliver() through finish); out_ takes the spare
    // vector's capacity, and the delivered messages go back to the mapper for reuse.
    auto batch = std::move(out_);
    out_ = std::move(spare_);
    out_.clear();
    for (auto& m : batch) {
      if (completed_) return false;
      try {
        if (on_message_) on_message_(m);
      } catch (...) {
        // Stop the process first, then rethrow unchanged.
        failure_ = std::current_exception();
        fail_with_exception();
        return false;
      }
      if (m.is_terminal()) {
        complete(std::move(m));
        return false;
      }
    }
    mapper_->recycle(batch);  // empties it
    if (spare_.capacity() == 0) spare_ = std::move(batch);
    return true;
  }

  void fail_with_exception() {
    if (completed_) return;
    completed_ = true;
    cancel_timers();
    auto rethrow = [self = shared_from_this()](error_code = {}, process::stop_report = {}) {
      auto h = std::move(self->handler_);
      asio::get_associated_cancellation_slot(h).clear();
      self->handler_work_ = {};
      std::rethrow_exception(self->failure_);
    };
    if (child_) {
      child_->async_stop(options_.stop, rethrow);
    } else {
      asio::post(ex_, [rethrow]() mutable { rethrow(); });
    }
  }

  void complete(message terminal) {
    if (completed_) return;
    completed_ = true;
    cancel_timers();
    auto h = std::move(handler_);
    asio::get_associated_cancellation_slot(h).clear();
    const error_code ec = cancelled_ ? error_code(asio::error::operation_aborted) : error_code{};
    auto hex = asio::get_associated_executor(h, ex_);
    // The child goes first, in the posted step (not inside its own read handler): a read still pending — the run
    // ended by the drain wait while something outside the tree holds stdout — is aborted and releases this object.
    // Otherwise that read would keep the executor busy (run_agent's io_context::run() would not return) until the
    // pipe closes.
    asio::post(ex_, [self = shared_from_this(), h = std::move(h), hex, ec, terminal = std::move(terminal)]() mutable {
      self->child_.reset();
      asio::dispatch(hex, [h = std::move(h), ec, terminal = std::move(terminal),
                           work = std::move(self->handler_work_)]() mutable { std::move(h)(ec, std::move(terminal)); });
    });
  }

  asio::any_io_executor ex_;
  std::unique_ptr<mapper::event_mapper> mapper_;
  run_options options_;
  message_handler on_message_;
  handler_type handler_;
  std::optional<process::child> child_;
  asio::steady_timer first_event_timer_, idle_timer_, deadline_timer_, linger_timer_, drain_timer_, eof_timer_;
  std::vector<message> out_;
  std::vector<message> spare_;  // an emptied batch, kept for its capacity
  std::optional<process::exit_status> status_;
  bool got_line_ = false;
  bool stdout_done_ = false;
  bool linger_armed_ = false;
  std::uint64_t linger_generation_ = 0;
  std::uint64_t first_event_generation_ = 0, idle_generation_ = 0, deadline_generation_ = 0;  // see arm()
  bool ending_ = false;                       // the tree is being stopped; its output is still mapped
  std::optional<mapper::run_end> stopped_end_;  // set once the stop completed: why the run ends
  bool completed_ = false;
  bool cancelled_ = false;
  bool cancel_requested_ = false;
  asio::any_completion_executor handler_work_;
  std::exception_ptr failure_;
};

}  // namespace

namespace detail {
void async_run_agent_impl(asio::any_io_executor ex, spawn_request spawn,
                          std::unique_ptr<mapper::event_mapper> m, run_options options, message_handler on_message,
                          handler_type h) {
  auto run = std::make_shared<agent_run>(ex, std::move(m), std::move(options), std::move(on_message), std::move(h));
  run->connect_cancellation();
  // Start on the executor, never inline in the caller's frame.
  asio::post(ex, [run, spawn = std::move(spawn)]() mutable { run->start(std::move(spawn)); });
}
}  // namespace detail

message run_agent(spawn_request spawn, std::unique_ptr<mapper::event_mapper> mapper, run_options options,
                  const message_handler& on_message) {
  asio::io_context io;
  std::optional<message> terminal;
  async_run_agent(io.get_executor(), std::move(spawn), std::move(mapper), std::move(options), on_message,
                  [&](error_code, message m) { terminal = std::move(m); });
  io.run();
  return terminal.value_or(start_failed_message("the run ended without a terminal message", "internal"));
}

}  // namespace agenthost::providers
