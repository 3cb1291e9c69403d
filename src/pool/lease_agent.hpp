// A connected pool's lease agent: holds one lease per device while this process has work for
// it, so a stream of small tasks pays no round trip each. When a task is placed on a device
// the pool does not hold, the agent asks the service for that device; the grant lets the
// device's worker start tasks. After the device has been idle for a short linger, or when the
// service asks for it back, the agent stops new tasks there, waits for the running ones (never
// kills them) and hands the lease back. If the service goes away, tasks waiting for a device
// fail with an error naming the endpoint; running ones finish.
//
// Whole devices only, for now: a connected pool's tasks may share a device among themselves
// (its own ledger does that), but two processes never share one at once.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client/connection.hpp"
#include "scheduler/scheduler.hpp"

namespace gf {

class LeaseAgent {
 public:
  struct Device {
    uint32_t worker;  // the scheduler's worker for this device
    int32_t ordinal;  // the service's device ordinal
  };
  LeaseAgent(Scheduler &scheduler, std::shared_ptr<client::Connection> connection,
             std::vector<Device> devices, std::string name, double linger_s);
  ~LeaseAgent();  // stop()
  // Ungrants every device, hands back what is held, joins the thread. Idempotent.
  void stop();
  void poke();  // something changed: look now (safe under the scheduler's lock)

 private:
  enum class State { kIdle, kAsking, kHeld };
  struct Slot {
    Device device;
    State state = State::kIdle;
    uint64_t lease = 0;
    bool granted = false;  // the scheduler lets the worker start tasks
    double last_busy = 0;
    std::string refused;  // why the service refused the device: loop() fails what waits there
  };
  // Callbacks from the connection's reader thread and the scheduler reach the agent through
  // this, so none can land on an agent that has stopped. The scheduler calls in with its lock
  // held, so nothing may call the scheduler while holding this: granted() only records the
  // answer, and loop() acts on it.
  struct Guard {
    std::mutex mu;
    LeaseAgent *agent = nullptr;
  };
  void loop();
  void step(size_t slot, double now);
  void granted(size_t slot, const client::Grant *grant, gf_status status, const std::string &why);

  Scheduler &scheduler_;
  std::shared_ptr<client::Connection> connection_;
  std::string name_;
  double linger_s_;
  std::shared_ptr<Guard> guard_ = std::make_shared<Guard>();
  std::mutex mu_;  // never held while calling the scheduler (its lock comes first)
  std::condition_variable wake_;
  bool poked_ = false;
  bool stopping_ = false;
  std::vector<Slot> slots_;  // a kAsking slot is granted()'s to change; the others, loop()'s
  std::thread thread_;
};

}  // namespace gf
