// The node's service as a dashboard source: the lease book as the service last published it
// (Server::book_snapshot, every 250 ms), as its StatusReply. The snapshot's members are the
// status JSON's own (status/status_render.hpp), so the page, /snapshot.json and `gpuflow status
// --json` read one rendering of the book; /metrics reads the same reply.
#pragma once

#include <string>

#include "dashboard/source.hpp"

namespace gf::service {
class Server;
}

namespace gf::dashboard {

class ServiceSource final : public Source {
 public:
  // The server must outlive the source (the C shims stop a service's dashboard first).
  explicit ServiceSource(service::Server &server) : server_(server) {}

  std::string metrics() const override;
  std::string snapshot_json(double since) const override;
  double now_s() const override { return 0; }

 private:
  service::Server &server_;
};

}  // namespace gf::dashboard
