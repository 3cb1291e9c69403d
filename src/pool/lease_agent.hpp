// A connected pool's lease agent: holds one lease per device (and one CPU per CPU worker) while
// this process has work for it, so a stream of small tasks pays no round trip each. When a task
// is placed on a worker the pool does not hold, the agent asks the service for that device or
// CPU; the grant lets the worker start tasks. After the device has been idle for a short linger, or
// when the service asks for it back, the agent stops new tasks there, waits for the running ones
// (never kills them) and hands the lease back. If the service goes away, tasks waiting for a device
// fail with an error naming the endpoint; running ones finish. When the link reconnects (a
// restarted service), the agent takes back the leases it held, which the new service kept for
// this still-running process, and goes on with the new connection.
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
#include "client/service_link.hpp"
#include "scheduler/scheduler.hpp"

namespace gf {

class LeaseAgent {
 public:
  struct Device {
    uint32_t worker;  // the scheduler's worker
    int32_t ordinal;  // the service's device ordinal; -1 for a CPU worker (leases one CPU)
  };
  LeaseAgent(Scheduler &scheduler, std::shared_ptr<client::ServiceLink> link,
             std::vector<Device> devices, std::string name, double linger_s);
  ~LeaseAgent();  // stop()
  // Ungrants every device, hands back what is held, joins the thread. Idempotent.
  void stop();

 private:
  enum class State { kIdle, kAsking, kHeld };
  struct Slot {
    Device device;
    State state = State::kIdle;
    uint64_t lease = 0;
    bool granted = false;  // the scheduler lets the worker start tasks
    double last_busy = 0;
    uint64_t asked_on = 0;  // the link's generation the pending question went on
    uint64_t lost = 0;      // the lease held when the connection ended: to take back
  };
  // The service's answer to a lease request, waiting for the agent's thread.
  struct Answer {
    size_t slot = 0;
    uint64_t generation = 0;  // of the connection it came on
    bool reclaim = false;     // to a LeaseReclaim, not a LeaseRequest
    bool granted = false;
    uint64_t lease = 0;
    gf_status status = GF_OK;
    std::string why;
  };
  // What other threads hand the agent: pokes (from the scheduler, under its lock) and answers
  // (from the connection's reader). A leaf: nothing else is locked while its mutex is held, and
  // it outlives the agent, so a late callback finds it and not a dead agent.
  struct Mailbox {
    std::mutex mu;
    std::condition_variable wake;
    bool poked = false;
    bool stopping = false;
    std::vector<Answer> answers;
    void poke();
  };
  void loop();
  void step(Slot &slot, double now);
  void apply(const Answer &answer);
  // The link has a new connection: listen to it, and ask for the lost leases back.
  void adopt_connection();
  client::LeaseClient::GrantDone answer_to(size_t slot, bool reclaim);

  Scheduler &scheduler_;
  std::shared_ptr<client::ServiceLink> link_;
  std::shared_ptr<client::Connection> connection_;  // the agent's thread's own: link_'s, once seen
  uint64_t generation_ = 0;                         // connection_'s
  std::string name_;
  double linger_s_;
  std::shared_ptr<Mailbox> mailbox_ = std::make_shared<Mailbox>();
  std::vector<Slot> slots_;  // the agent's thread's own
  std::thread thread_;
  bool stopped_ = false;
};

}  // namespace gf
