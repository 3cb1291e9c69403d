#include "service/dispatch.hpp"

#include <array>
#include <cstddef>
#include <tuple>

namespace gf::service {

namespace {

// The handler class and the body type of a member `void on_x(Client &, const Body &)`.
template <typename>
struct Member;
template <typename H, typename B>
struct Member<void (H::*)(Client &, const B &)> {
  using Handler = H;
  using Body = B;
};

using Route = void (*)(Handlers &, Client &, const wire::Message &);

template <auto on>
void route(Handlers &h, Client &c, const wire::Message &m) {
  using M = Member<decltype(on)>;
  auto &handler =
      std::get<typename M::Handler &>(std::tie(h.greeter, h.leases, h.plane, h.runs, h.status));
  (handler.*on)(c, *m.template body_as<typename M::Body>());
}

struct Entry {
  wire::Body body;
  Route route;
};

// What a greeted client may send. Hello is the greeting's (before it); the rest are the
// service's own messages.
constexpr Entry kRoutes[] = {
    {wire::Body::LeaseRequest, route<&LeaseHandler::on_lease_request>},
    {wire::Body::LeaseRelease, route<&LeaseHandler::on_lease_release>},
    {wire::Body::LeaseCancel, route<&LeaseHandler::on_lease_cancel>},
    {wire::Body::LeaseBind, route<&LeaseHandler::on_lease_bind>},
    {wire::Body::LeaseReclaim, route<&LeaseHandler::on_lease_reclaim>},
    {wire::Body::StatusRequest, route<&StatusHandler::on_status_request>},
    {wire::Body::DataPlaneHello, route<&PlaneHandler::on_data_plane_hello>},
    {wire::Body::BlobPut, route<&PlaneHandler::on_blob_put>},
    {wire::Body::BlobGet, route<&PlaneHandler::on_blob_get>},
    {wire::Body::BlobDrop, route<&PlaneHandler::on_blob_drop>},
    {wire::Body::GraphSubmit, route<&RunHandler::on_graph_submit>},
    {wire::Body::RunCancel, route<&RunHandler::on_run_cancel>},
};

constexpr size_t kBodies = static_cast<size_t>(wire::Body::MAX) + 1;

constexpr std::array<Route, kBodies> by_body() {
  std::array<Route, kBodies> table{};
  for (const Entry &e : kRoutes) table[static_cast<size_t>(e.body)] = e.route;
  return table;
}

constexpr std::array<Route, kBodies> kTable = by_body();

}  // namespace

Refusal dispatch(Handlers &handlers, Connection &c, const wire::Message &m) {
  const wire::Body body = m.body_type();
  if (!c.greeted) {
    const auto *hello = m.body_as_Hello();
    if (!hello) {
      return {GF_ERR_INVALID_ARGUMENT,
              std::string("a ") + wire::body_name(body) + " message before Hello"};
    }
    return handlers.greeter.on_hello(c, *hello);
  }
  // A verified message's body type is one the schema knows (wire::check_message).
  const size_t index = static_cast<size_t>(body);
  if (index >= kBodies || !kTable[index]) {
    return {GF_ERR_INVALID_ARGUMENT, std::string("a ") + wire::body_name(body) +
                                         " message, which clients do not send" +
                                         (body == wire::Body::Hello ? " twice" : "")};
  }
  kTable[index](handlers, c, m);
  return {};
}

}  // namespace gf::service
