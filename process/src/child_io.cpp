// child: stdout (plain and read-coalescing) and stdin (see child_impl.hpp).
#include "child_impl.hpp"

#include "linux/pipe_size.hpp"

#include <boost/asio/write.hpp>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

namespace agenthost::process {

namespace asio = boost::asio;
using boost::system::error_code;
using detail::handler_t;
using detail::post_completion;
using detail::post_completion_keep_slot;
using detail::unique_fd;

void child::impl::adopt_stdout(unique_fd fd) {
  detail::grow_pipe(fd.get(), opts.read_chunk_bytes);
  error_code ec;
  if (opts.read_coalescing.count() <= 0) {
    out.assign(fd.release(), ec);
    out.non_blocking(true, ec);
    return;
  }
  (void)::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) | O_NONBLOCK);
  out_fd = std::move(fd);
  poller = &detail::read_poller::of(ex);
  coalesced = std::make_shared<detail::poll_source>(
      detail::poll_source{.fd = out_fd.get(),
                          .executor = ex,
                          .interval = opts.read_coalescing,
                          .on_ready = [w = weak_from_this()] {
                            if (auto self = w.lock()) self->on_coalesced_ready();
                          },
                          .warm = &impl::warm_read_state,
                          .warm_arg = this,
                          .owner = weak_from_this(),
                          .prepare_read = &impl::batched_prepare,
                          .complete_read = &impl::batched_complete});
}

void child::impl::warm_read_state(const void* p) noexcept {
  const auto* self = static_cast<const impl*>(p);
  // What on_ready → read_coalesced → complete_read touches first: the shared count (weak_ptr::lock, make_shared
  // puts it right before the object), the executor, the read chunk size, the read state block. Addresses only, no
  // load: the child may have been destroyed since the tick saw its pipe, and a prefetch of freed memory is harmless.
  // Measured (bench/README.md#scale, 12 alternated pairs at 100 agents): 0.4–0.6 points of a core less.
  const auto line = [](const void* a) {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(a, 1);
#else
    (void)a;
#endif
  };
  line(reinterpret_cast<const char*>(self) - 16);
  line(&self->ex);
  line(&self->opts.read_chunk_bytes);
  const char* const b = reinterpret_cast<const char*>(&self->framer);
  const char* const e = reinterpret_cast<const char*>(&self->out_full + 1);
  for (const char* a = b; a < e; a += 64) line(a);
  line(e - 1);
  line(&self->shut_down);
}

void child::impl::read_lines(handler_t<void(error_code, line_batch)> h) {
  if (reading || delivering)  // a read's handler not called yet: its lines are still in `batch`
    return post_completion(std::move(h), ex, make_error_code(errc::operation_in_progress), line_batch{});
  if (held_lines) {  // read for the read before, which was cancelled meanwhile (see batched_complete)
    held_lines = false;
    return complete_read(std::move(h), true);
  }
  batch.clear();
  if (out_eof || shut_down)
    return post_completion(std::move(h), ex, error_code(asio::error::eof), line_batch{});
  auto slot = asio::get_associated_cancellation_slot(h);
  reading = true;
  try {
    if (coalesced) return read_lines_coalesced(std::move(h));
    read_cancelled = false;
    if (slot.is_connected()) {
      slot.assign([w = weak_from_this()](asio::cancellation_type) {
        if (auto self = w.lock(); self && self->reading) {
          self->read_cancelled = true;
          error_code ignored;
          self->out.cancel(ignored);
        }
      });
    }
    pending_read.swap(h);  // not operator=: see read_lines_coalesced
    read_more();
  } catch (...) {
    // The read never started (std::bad_alloc from its initiation): its handler goes with the exception, as with any
    // initiating function that throws, and the next read may start. Bytes already read stay in the framer or `batch`.
    if (reading) {
      reading = false;
      (void)take_pending_read();
    }
    if (slot.is_connected()) slot.clear();
    throw;
  }
}

void child::impl::read_more() {
  auto space = framer.prepare(opts.read_chunk_bytes);
  out.async_read_some(asio::buffer(space.data(), space.size()),
                      [self = shared_from_this()](error_code ec, std::size_t n) { self->on_stdout(ec, n); });
}

void child::impl::continue_read() {
  // Cancelled or destroyed while a retry was posted: no operation of ours is there to end with operation_aborted.
  if (shut_down || read_cancelled) return on_stdout(error_code(asio::error::operation_aborted), 0);
  try {
    read_more();
  } catch (...) {
    // No memory for the read's operation (std::bad_alloc): try again from a post of its own, and this exception ends
    // here; should that post find no memory either, the exception leaves run() with the read still pending.
    asio::post(ex, [self = shared_from_this()] { self->continue_read(); });
  }
}

void child::impl::on_stdout(error_code ec, std::size_t n) {
  framer.commit(n, [this](const line_view& l) { batch.push(l); });
  if (ec == asio::error::operation_aborted || (ec && shut_down)) {
    reading = false;
    if (!batch.empty()) return complete_read(take_pending_read(), true);
    return post_completion(take_pending_read(), ex, error_code(asio::error::operation_aborted), line_batch{});
  }
  if (ec) {  // EOF (or an error, treated as EOF: nothing more can come)
    if (ec != asio::error::eof) log(log_level::warn, "reading the agent's stdout failed: " + ec.message());
    out_eof = true;
    framer.finish([this](const line_view& l) { batch.push(l); });
    reading = false;
    if (!batch.empty()) return complete_read(take_pending_read(), true);
    return post_completion(take_pending_read(), ex, error_code(asio::error::eof), line_batch{});
  }
  if (batch.empty() && !read_cancelled) return continue_read();
  reading = false;
  if (batch.empty()) {  // cancelled after its bytes were read: they stay in the framer
    return post_completion(take_pending_read(), ex, error_code(asio::error::operation_aborted), line_batch{});
  }
  complete_read(take_pending_read(), true);
}

void child::impl::read_lines_coalesced(handler_t<void(error_code, line_batch)> h) {
  const std::uint64_t id = ++read_id;
  auto slot = asio::get_associated_cancellation_slot(h);
  if (slot.is_connected()) {
    slot.assign([w = weak_from_this(), id](asio::cancellation_type) {
      if (auto self = w.lock()) self->cancel_coalesced(id);
    });
  }
  pending_read.swap(h);  // not operator=: Boost 1.81's move assignment wraps the handler in itself (endless recursion)
  // Bulk output is not throttled by the tick: after a read that filled the chunk, read again at once. (Not while the
  // poller reads into the framer: that read's completion serves this one.)
  if (out_full && !batched_in_flight) return read_coalesced(true);
  poller->arm(coalesced);
}

void child::impl::cancel_coalesced(std::uint64_t id) {
  if (!reading || id != read_id || !pending_read) return;
  poller->disarm(coalesced.get());
  reading = false;
  // The batch is empty (a read completes as soon as it has a line); a partial line stays in the framer: no data is
  // lost. The slot is kept: clearing it here would destroy the function that is running.
  post_completion_keep_slot(take_pending_read(), ex, error_code(asio::error::operation_aborted), line_batch{});
}

void child::impl::on_coalesced_ready() {
  if (!reading || !pending_read || shut_down) return;  // cancelled or destroyed since the tick saw the pipe
  read_coalesced(false);
}

void child::impl::rearm() {
  try {
    poller->arm(coalesced);
  } catch (...) {
    // No memory for the poller's timer (std::bad_alloc): look again from a post of its own, and this exception ends
    // here; should that post find no memory either, the exception leaves run() with the read still pending.
    asio::post(ex, [w = weak_from_this()] {
      if (auto self = w.lock()) self->on_coalesced_ready();
    });
  }
}

void child::impl::frame_read(std::size_t n, std::size_t space_size) {
  framer.commit(n, [this](const line_view& l) { batch.push(l); });
  out_full = n == space_size;
}

std::span<char> child::impl::batched_prepare(void* p) {
  auto* self = static_cast<impl*>(p);
  if (!self->reading || !self->pending_read || self->shut_down) return {};
  const auto space = self->framer.prepare(self->opts.read_chunk_bytes);
  self->batched_in_flight = true;
  self->batched_space = space.size();
  return space;
}

void child::impl::batched_complete(void* p, long result) {
  auto* self = static_cast<impl*>(p);
  self->batched_in_flight = false;
  if (self->shut_down) return;  // destroyed by an earlier handler of the tick: nobody will read
  if (!self->reading || !self->pending_read) {
    // Cancelled by an earlier handler of the tick, after the poller took these bytes out of the pipe: frame them now
    // and hand the lines to the next read. (End of file and errors are left to the next read: a pipe reports them
    // again.)
    if (result > 0) {
      self->frame_read(static_cast<std::size_t>(result), self->batched_space);
      self->held_lines = !self->batch.empty();
    }
    return;
  }
  self->read_coalesced(false, result);
}

void child::impl::read_coalesced(bool from_initiation, long first) {
  for (int reads = 0; reads < 16;) {
    long n;
    std::size_t space_size;
    if (first != kNotRead) {  // the poller's batched read
      n = first;
      space_size = batched_space;
      first = kNotRead;
    } else {
      const auto space = framer.prepare(opts.read_chunk_bytes);
      space_size = space.size();
      const ssize_t r = ::read(out_fd.get(), space.data(), space.size());
      n = r < 0 ? -static_cast<long>(errno) : static_cast<long>(r);
    }
    if (n > 0) {
      ++reads;
      frame_read(static_cast<std::size_t>(n), space_size);
      if (!batch.empty() || !out_full) break;
      continue;
    }
    if (n == -EINTR) continue;
    out_full = false;
    if (n == -EAGAIN || n == -EWOULDBLOCK) break;  // nothing after all: wait for the next tick
    // EOF, or an error: exactly the normal path's handling (on_stdout posts).
    const error_code ec = n == 0 ? error_code(asio::error::eof)
                                 : error_code(static_cast<int>(-n), boost::system::system_category());
    return on_stdout(ec, 0);
  }
  if (batch.empty()) {
    if (!out_full) return from_initiation ? poller->arm(coalesced) : rearm();
    // A very long line: go on after the other handlers had their turn, without waiting for a tick.
    return asio::post(ex, [w = weak_from_this()] {
      if (auto self = w.lock()) self->on_coalesced_ready();
    });
  }
  reading = false;
  complete_read(take_pending_read(), from_initiation);
}

void child::impl::complete_read(handler_t<void(error_code, line_batch)> h, bool post) {
  asio::get_associated_cancellation_slot(h).clear();
  delivering.swap(h);  // not operator=: see read_lines_coalesced
  deliver_read(post);
}

void child::impl::deliver_read(bool post) {
  // The handler stays in `delivering` until the function that calls it runs: a post or dispatch that finds no memory
  // (std::bad_alloc before that function ran) destroys the function, and a handler moved into it would be lost with
  // it — a read that never completes, and a child whose stdout_pending() is true forever.
  const std::uint64_t called_before = deliveries_called;
  try {
    if (post) return asio::post(ex, [self = shared_from_this()] { self->deliver_read(false); });
    const auto hex = asio::get_associated_executor(delivering, ex);
    detail::run_here_or_dispatch(hex, [self = shared_from_this(), lines = batch.view()] {
      handler_t<void(error_code, line_batch)> h;
      h.swap(self->delivering);
      // A retry's call after all: a strand can queue a function and then find no memory to schedule itself.
      if (!h) return;
      ++self->deliveries_called;
      if (self->shut_down) return std::move(h)(error_code(asio::error::operation_aborted), line_batch{});
      std::move(h)(error_code{}, lines);
    });
  } catch (...) {
    if (deliveries_called != called_before) throw;  // the handler ran and threw: that leaves run(), as from any handler
    // No memory to schedule the call: try again from a post of its own, and this exception ends here. Should that
    // post find no memory either, the read gives up its handler (an initiating function throws: the operation never
    // started) and its lines wait in `batch` for the next read.
    try {
      asio::post(ex, [self = shared_from_this()] { self->deliver_read(false); });
    } catch (...) {
      handler_t<void(error_code, line_batch)> lost;
      lost.swap(delivering);
      held_lines = true;
      throw;
    }
  }
}

bool child::impl::stdout_pending() noexcept {
  // Lines on their way to a handler, or held for the next read: the thread was busy, not the agent silent. Lines the
  // framer cut from bytes already read are always in one of these; what it keeps is a partial line, which is no line.
  if (delivering || held_lines) return true;
  if (out_eof || shut_down) return false;
  // Bytes in the pipe: the coalescing poller's next tick, or (plain reads) the reactor's next turn, will read them.
  const int fd = coalesced ? out_fd.get() : out.native_handle();
  if (fd < 0) return false;
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

void child::impl::write_stdin(asio::const_buffer data, handler_t<void(error_code, std::size_t)> h) {
  if (opts.stdin_mode != stdin_kind::pipe)
    return post_completion(std::move(h), ex, make_error_code(errc::stdin_not_piped), std::size_t{0});
  if (!stdin_open) return post_completion(std::move(h), ex, make_error_code(errc::stdin_closed), std::size_t{0});
  const std::uint64_t id = next_write_id++;
  auto slot = asio::get_associated_cancellation_slot(h);
  if (slot.is_connected()) {
    slot.assign([w = weak_from_this(), id](asio::cancellation_type) {
      if (auto self = w.lock()) self->cancel_write(id);
    });
  }
  writes.push_back({id, std::string(static_cast<const char*>(data.data()), data.size()), std::move(h)});
  if (writes.size() == 1) write_next();
}

void child::impl::cancel_write(std::uint64_t id) {
  const auto it = std::find_if(writes.begin(), writes.end(), [id](const pending_write& w) { return w.id == id; });
  if (it == writes.end()) return;  // completed meanwhile
  if (it == writes.begin()) {
    // The only operation on the socket: its async_write completes with operation_aborted and the bytes it sent.
    error_code ignored;
    in.cancel(ignored);
    return;
  }
  auto h = std::move(it->handler);
  writes.erase(it);
  // Inside the slot's own handler: clearing the slot would destroy the running function.
  post_completion_keep_slot(std::move(h), ex, error_code(asio::error::operation_aborted), std::size_t{0});
}

void child::impl::write_next() {
  if (writes.empty()) return;
  asio::async_write(in, asio::buffer(writes.front().data), [self = shared_from_this()](error_code ec, std::size_t n) {
    auto w = std::move(self->writes.front());
    self->writes.pop_front();
    if (ec && self->shut_down) {
      ec = asio::error::operation_aborted;  // the child was destroyed: every pending operation is aborted
    } else if (ec == asio::error::broken_pipe || ec == asio::error::connection_reset ||
               ec == asio::error::bad_descriptor || (ec && !self->stdin_open)) {
      ec = make_error_code(errc::stdin_closed);
    }
    post_completion(std::move(w.handler), self->ex, ec, n);
    if (self->shut_down || ec == errc::stdin_closed) {
      // Everything queued behind fails the same way.
      const error_code rest_ec = self->shut_down ? error_code(asio::error::operation_aborted) : ec;
      auto rest = std::move(self->writes);
      self->writes.clear();
      for (auto& r : rest) post_completion(std::move(r.handler), self->ex, rest_ec, std::size_t{0});
      return;
    }
    self->write_next();
  });
}

void child::impl::close_stdin() noexcept {
  if (!stdin_open) return;
  stdin_open = false;
  error_code ignored;
  in.shutdown(asio::socket_base::shutdown_send, ignored);
  in.close(ignored);  // pending writes complete with operation_aborted → stdin_closed
}

}  // namespace agenthost::process
