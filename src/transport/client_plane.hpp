// A client's end of the data plane: its worker on a progress thread, one endpoint to the
// service, and blocking sends and receives for the caller's threads. When the service goes
// (its control connection closes, or UCX reports the endpoint failed) every waiting operation
// fails at once with a gf::Error naming the service, and later ones fail the same way.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "gpuflow.h"
#include "transport/endpoint.hpp"
#include "transport/progress_thread.hpp"

namespace gf::transport {

class ClientPlane {
 public:
  // `peer` names the service in errors ("the gpuflow service at unix:///…").
  // `net_device` non-empty: a service on another host, reached over UCX's TCP on that device.
  static std::unique_ptr<ClientPlane> create(const std::string &name, std::string peer,
                                             const std::string &net_device = "");
  ~ClientPlane();  // fail()s what waits, closes the endpoint (forced), stops the thread

  const std::vector<uint8_t> &address() const { return address_; }
  // Makes the endpoint to the service's worker. Throws gf::Error.
  void connect(const std::vector<uint8_t> &service_address);
  // A send started now; wait() returns when UCX is done with `data` (which must stay put until
  // then), or throws gf::Error (GF_ERR_SYSTEM) naming the service. A receive (begin) of
  // anything but exactly `size` bytes is an error.
  struct Op;
  using OpHandle = std::shared_ptr<Op>;
  OpHandle start_send(uint64_t tag, const void *data, size_t size);
  // An operation made first and begun later, from whichever thread learns what to move (the
  // connection's reader thread, on the service's answer): the caller sleeps once, in wait().
  // `on_done` runs (on any thread, no lock held) once it ended, begun or abandoned.
  OpHandle prepare(std::function<void()> on_done = {});
  void begin(const OpHandle &op, bool receive, uint64_t tag, void *data, size_t size);
  // Ends an operation never begun, with the status and text wait() throws.
  void abandon(const OpHandle &op, gf_status status, const std::string &why);
  // Throws gf::Error (the abandoning status, else GF_ERR_SYSTEM) when it failed.
  void wait(const OpHandle &op);
  // Waits until it was begun or ended, at most until deadline_ms (steady clock); false if not.
  bool wait_begun(const OpHandle &op, int64_t deadline_ms);
  bool finished(const OpHandle &op);
  // The data plane is gone: waiting operations end with `why`, as will later ones.
  void fail(const std::string &why);
  // Why it is gone ("" while it works).
  std::string failure();
  std::string transports();

 private:
  ClientPlane(std::unique_ptr<ProgressThread> thread, std::string peer);
  void end(const OpHandle &op, gf_status status, const std::string &error);
  void fail_on_thread(const std::string &why);  // progress thread

  std::string peer_;
  std::vector<uint8_t> address_;
  std::unique_ptr<Endpoint> ep_;             // progress thread only
  std::set<std::shared_ptr<Op>> in_flight_;  // progress thread only
  std::mutex mu_;
  std::condition_variable changed_;
  std::string failed_;                      // under mu_: why the plane is gone
  std::unique_ptr<ProgressThread> thread_;  // last: stopped first
};

}  // namespace gf::transport
