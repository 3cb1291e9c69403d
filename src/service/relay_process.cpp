#include "service/relay_process.hpp"

#include <signal.h>

#include <sstream>

#include "core/error.hpp"
#include "transport/hex.hpp"

namespace gf::service {

struct RelayProcess::State {
  uv_process_t process{};
  uv_pipe_t in{}, out{}, err{};
  std::string input, stdout_text, stderr_text;
  OnReady on_ready;
  OnEnd on_end;
  bool detached = false, exited = false, stderr_done = false, ready = false;
  int64_t exit_status = 0;
  int term_signal = 0;
  int open_handles = 0;

  // Freed once libuv has closed every handle and its owner let go, whichever comes last.
  void closed() {
    --open_handles;
    free_if_done();
  }
  void free_if_done() {
    if (open_handles == 0 && detached) delete this;
  }
  void close(uv_handle_t *h) {
    if (uv_is_closing(h)) return;
    uv_close(h, [](uv_handle_t *handle) { static_cast<State *>(handle->data)->closed(); });
  }
  void close_all() {
    close(reinterpret_cast<uv_handle_t *>(&in));
    close(reinterpret_cast<uv_handle_t *>(&out));
    close(reinterpret_cast<uv_handle_t *>(&err));
    if (exited) close(reinterpret_cast<uv_handle_t *>(&process));
  }

  void on_stdout(const char *bytes, size_t n) {
    stdout_text.append(bytes, n);
    const size_t newline = stdout_text.find('\n');
    if (ready || newline == std::string::npos) {
      if (stdout_text.size() > 65536) stdout_text.clear();  // it never said anything sensible
      return;
    }
    ready = true;
    std::istringstream line(stdout_text.substr(0, newline));
    std::string inner, outer;
    line >> inner >> outer;
    Addresses a;
    try {
      a.toward_service = transport::from_hex(inner);
      a.toward_client = transport::from_hex(outer);
    } catch (const Error &) {
      a = {};
    }
    // Out of the member first: the callback may let the RelayProcess go, whose destructor
    // clears the callbacks (this one's closure would be destroyed while it runs).
    OnReady ready_callback = std::move(on_ready);
    on_ready = nullptr;
    if (!detached && ready_callback) ready_callback(std::move(a));  // empty: it said nonsense
  }

  void on_stderr(const char *bytes, size_t n) {
    stderr_text.append(bytes, n);
    if (stderr_text.size() > 8192) stderr_text.erase(0, stderr_text.size() - 4096);
  }

  // Reports the end once it exited and said all it had to say.
  void maybe_report() {
    if (!exited || !stderr_done) return;
    std::string last = stderr_text;
    while (!last.empty() && last.back() == '\n') last.pop_back();
    last = last.substr(last.rfind('\n') + 1);
    std::string how = term_signal != 0 ? "killed by signal " + std::to_string(term_signal)
                                       : "exit status " + std::to_string(exit_status);
    std::string why = "its data-plane relay (pid " + std::to_string(process.pid) + ") ended (" +
                      how + ")" + (last.empty() ? "" : ": " + last);
    OnEnd end = std::move(on_end);
    on_end = nullptr;
    on_ready = nullptr;
    if (!detached && end) end(why);
    close_all();
  }
};

namespace {

void allocate(uv_handle_t *, size_t suggested, uv_buf_t *buf) {
  buf->base = new char[suggested];
  buf->len = suggested;
}

}  // namespace

std::unique_ptr<RelayProcess> RelayProcess::start(uv_loop_t *loop, const std::string &program,
                                                  const std::vector<std::string> &args,
                                                  const std::string &input, OnReady on_ready,
                                                  OnEnd on_end) {
  auto *s = new State;
  s->input = input;
  s->on_ready = std::move(on_ready);
  s->on_end = std::move(on_end);
  for (uv_pipe_t *p : {&s->in, &s->out, &s->err}) {
    uv_pipe_init(loop, p, 0);
    p->data = s;
    ++s->open_handles;
  }
  s->process.data = s;
  std::vector<char *> argv;
  argv.push_back(const_cast<char *>(program.c_str()));
  for (const std::string &a : args) argv.push_back(const_cast<char *>(a.c_str()));
  argv.push_back(nullptr);
  uv_stdio_container_t stdio[3];
  stdio[0].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_READABLE_PIPE);
  stdio[0].data.stream = reinterpret_cast<uv_stream_t *>(&s->in);
  stdio[1].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
  stdio[1].data.stream = reinterpret_cast<uv_stream_t *>(&s->out);
  stdio[2].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
  stdio[2].data.stream = reinterpret_cast<uv_stream_t *>(&s->err);
  uv_process_options_t options{};
  options.file = program.c_str();
  options.args = argv.data();
  options.stdio = stdio;
  options.stdio_count = 3;
  options.exit_cb = [](uv_process_t *p, int64_t status, int signal) {
    auto *state = static_cast<State *>(p->data);
    state->exited = true;
    state->exit_status = status;
    state->term_signal = signal;
    ++state->open_handles;  // the process handle, closed with the rest
    state->maybe_report();
  };
  int rc = uv_spawn(loop, &s->process, &options);
  if (rc != 0) {
    s->detached = true;
    s->exited = true;  // nothing to wait for; the process handle is closed with the pipes
    ++s->open_handles;
    s->close_all();
    fail(GF_ERR_SYSTEM, "starting " + program + ": " + uv_strerror(rc));
  }
  uv_buf_t line = uv_buf_init(s->input.data(), static_cast<unsigned>(s->input.size()));
  auto *write = new uv_write_t;
  if (uv_write(write, reinterpret_cast<uv_stream_t *>(&s->in), &line, 1,
               [](uv_write_t *w, int) { delete w; }) != 0) {
    delete write;
  }
  uv_read_start(reinterpret_cast<uv_stream_t *>(&s->out), allocate,
                [](uv_stream_t *stream, ssize_t n, const uv_buf_t *buf) {
                  std::unique_ptr<char[]> owned(buf->base);
                  auto *state = static_cast<State *>(stream->data);
                  if (n > 0) state->on_stdout(buf->base, static_cast<size_t>(n));
                  if (n < 0) uv_read_stop(stream);
                });
  uv_read_start(reinterpret_cast<uv_stream_t *>(&s->err), allocate,
                [](uv_stream_t *stream, ssize_t n, const uv_buf_t *buf) {
                  std::unique_ptr<char[]> owned(buf->base);
                  auto *state = static_cast<State *>(stream->data);
                  if (n > 0) state->on_stderr(buf->base, static_cast<size_t>(n));
                  if (n < 0) {
                    uv_read_stop(stream);
                    state->stderr_done = true;
                    state->maybe_report();
                  }
                });
  return std::unique_ptr<RelayProcess>(new RelayProcess(s));
}

RelayProcess::~RelayProcess() {
  State *s = state_;
  s->detached = true;
  s->on_ready = nullptr;
  s->on_end = nullptr;
  // Its stdin closing ends it; SIGTERM in case it is stuck in UCX.
  // Nothing in the relay needs a graceful end, and SIGTERM can be ignored or wait behind UCX:
  // the service's stop must not hang on it.
  if (!s->exited) uv_process_kill(&s->process, SIGKILL);
  s->close(reinterpret_cast<uv_handle_t *>(&s->in));
  s->free_if_done();  // it ended on its own before: every handle is closed already
}

int RelayProcess::pid() const {
  return state_->process.pid;
}

}  // namespace gf::service
