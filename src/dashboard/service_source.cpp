#include "dashboard/service_source.hpp"

#include <map>

#include "core/json_text.hpp"
#include "dashboard/metrics_text.hpp"
#include "service/server.hpp"
#include "status/status_render.hpp"
#include "wire/records.hpp"

namespace gf::dashboard {

namespace {

namespace fb = flatbuffers;

template <class T>
size_t length(const fb::Vector<fb::Offset<T>> *v) {
  return v ? v->size() : 0;
}

template <class T, class Each>
void each(const fb::Vector<fb::Offset<T>> *v, Each each) {
  if (v)
    for (const T *item : *v) each(*item);
}

// The reply in a published snapshot; null when even its least did not fit a frame (the
// snapshot then holds the Error saying so).
const wire::StatusReply *reply_of(const service::Server::BookSnapshot &book) {
  return wire::message_of(book.status)->body_as_StatusReply();
}

}  // namespace

std::string ServiceSource::metrics() const {
  const auto book = server_.book_snapshot();
  const wire::StatusReply *reply = reply_of(*book);
  if (!reply) return "";
  const wire::StatusReply &s = *reply;
  Metrics out;
  std::map<uint64_t, std::string> client_labels;
  each(s.clients(), [&](const wire::ClientStatus &c) {
    client_labels[c.client_id()] = kv("client", std::to_string(c.client_id())) + "," +
                                   kv("user", wire::str(c.user())) + "," +
                                   kv("client_name", wire::str(c.name()));
  });
  out.family("gpuflow_service_clients", "gauge", "Processes connected to the service.");
  out.sample("gpuflow_service_clients", "",
             num(uint64_t{length(s.clients()) + s.clients_omitted()}));
  out.family("gpuflow_service_leases", "gauge", "Leases held, per client.");
  each(s.clients(), [&](const wire::ClientStatus &c) {
    out.sample("gpuflow_service_leases", client_labels[c.client_id()], num(uint64_t{c.leases()}));
  });
  out.family("gpuflow_service_queued_requests", "gauge", "Lease requests waiting, per client.");
  each(s.clients(), [&](const wire::ClientStatus &c) {
    out.sample("gpuflow_service_queued_requests", client_labels[c.client_id()],
               num(uint64_t{c.queued()}));
  });
  out.family("gpuflow_service_client_gpus_in_use", "gauge",
             "GPUs (whole and shares) leased, per client.");
  each(s.clients(), [&](const wire::ClientStatus &c) {
    out.sample("gpuflow_service_client_gpus_in_use", client_labels[c.client_id()],
               num(c.gpus_in_use()));
  });
  out.family("gpuflow_service_client_usage", "gauge",
             "Decayed past use that fair share ranks by, per client.");
  each(s.clients(), [&](const wire::ClientStatus &c) {
    out.sample("gpuflow_service_client_usage", client_labels[c.client_id()], num(c.usage()));
  });
  out.family("gpuflow_service_device_share_in_use", "gauge",
             "Share of each device leased (0 to 1).");
  each(s.devices(), [&](const wire::DeviceStatus &d) {
    out.sample("gpuflow_service_device_share_in_use", kv("device", std::to_string(d.ordinal())),
               num(d.share_in_use()));
  });
  out.family("gpuflow_service_device_memory_bytes", "gauge",
             "Device memory, by kind: capacity and leased.");
  each(s.devices(), [&](const wire::DeviceStatus &d) {
    const std::string dl = kv("device", std::to_string(d.ordinal()));
    out.sample("gpuflow_service_device_memory_bytes", dl + "," + kv("kind", "capacity"),
               num(d.memory()));
    out.sample("gpuflow_service_device_memory_bytes", dl + "," + kv("kind", "leased"),
               num(d.memory_in_use()));
  });
  out.family("gpuflow_service_cpus", "gauge",
             "CPUs the service leases, by kind: capacity and leased.");
  out.sample("gpuflow_service_cpus", kv("kind", "capacity"), num(s.cpus()));
  out.sample("gpuflow_service_cpus", kv("kind", "leased"), num(s.cpus_in_use()));
  return out.take();
}

// {"kind":"service","t":<the book's clock>,"backend":..., then the status JSON's members}; where
// the reply did not fit, "error" says why, with the lists the page reads left empty.
std::string ServiceSource::snapshot_json(double) const {
  const auto book = server_.book_snapshot();
  std::string j = "{\"kind\":\"service\",\"t\":" + jnum(book->now) +
                  ",\"backend\":" + json_quoted(book->backend) + ",";
  if (const wire::StatusReply *reply = reply_of(*book))
    return j + status::json_members(*reply) + "}";
  const wire::Error *e = wire::message_of(book->status)->body_as_Error();
  return j + "\"error\":" + json_quoted(e ? wire::str(e->message()) : "no status") +
         ",\"devices\":[],\"leases\":[],\"ended\":[],\"queued\":[],\"clients\":[]}";
}

}  // namespace gf::dashboard
