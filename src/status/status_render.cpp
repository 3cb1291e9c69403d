#include "status/status_render.hpp"

#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <ctime>

#include "core/bytes_text.hpp"
#include "core/display_text.hpp"
#include "core/json_text.hpp"
#include "core/utf8.hpp"
#include "wire/records.hpp"

namespace gf::status {

namespace {

namespace fb = flatbuffers;
using wire::str;

std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char *fmt, ...) {
  char buffer[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buffer, sizeof buffer, fmt, args);
  va_end(args);
  return buffer;
}

std::string bytes_text(uint64_t bytes) {  // the wire's counts, as core formats every size
  return gf::bytes_text(static_cast<double>(bytes));
}

std::string age_text(int64_t since_ms) {
  const int64_t now_ms = static_cast<int64_t>(std::time(nullptr)) * 1000;
  int64_t s = (now_ms - since_ms) / 1000;
  if (s < 0) s = 0;
  if (s < 120) return format("%" PRId64 "s", s);
  if (s < 7200) return format("%" PRId64 "m", s / 60);
  return format("%" PRId64 "h%02" PRId64 "m", s / 3600, s / 60 % 60);
}

std::string grants_text(const fb::Vector<fb::Offset<wire::DeviceGrant>> *grants) {
  std::string out;
  if (!grants) return out;
  for (const wire::DeviceGrant *g : *grants) {
    if (!out.empty()) out += ",";
    out += format("gpu:%d", g->ordinal());
    if (g->share() < 1) out += format("x%g", g->share());
  }
  return out;
}

// Text another user or program chose (names, users) as one column of the table: escaped (no
// control character reaches the terminal), then cut and padded to `width` characters, counted as
// characters rather than bytes so that a name is never cut inside one.
std::string cell(const fb::String *s, size_t width) {
  const std::string shown = escaped_for_display(str(s));
  std::string out;
  size_t characters = 0;
  for (size_t i = 0; i < shown.size() && characters < width; ++characters) {
    const Utf8Step step = utf8_step(shown, i);  // escaped text is valid UTF-8
    out.append(shown, i, step.length);
    i += step.length;
  }
  return out + std::string(width - characters, ' ');
}

// "(3 more leases not shown)": the service lists at most so many of each (docs/service.md).
std::string omitted_text(uint32_t count, const char *what) {
  return count == 0 ? std::string() : format("(%u more %s not shown)\n", count, what);
}

template <class T>
std::vector<const T *> items(const fb::Vector<fb::Offset<T>> *v) {
  std::vector<const T *> out;
  if (v) out.assign(v->begin(), v->end());
  return out;
}

// How device-resident data moves over a client's data plane: by CUDA IPC or peer copies when UCX
// took a CUDA transport, else staged through host memory (the backend's reused pinned buffers).
const char *device_path(const std::string &transports) {
  return transports.find("cuda") != std::string::npos ? "cuda" : "host-staged";
}

}  // namespace

std::string text(const wire::StatusReply &s) {
  std::string out = format("gpuflow service at %s (pid %u, up %s)\n", str(s.endpoint()).c_str(),
                           s.service_pid(), age_text(s.started_ms()).c_str());
  if (s.devices_source()) {
    out += format("devices: %u (%s)\n", s.devices() ? s.devices()->size() : 0u,
                  str(s.devices_source()).c_str());
  }
  if (s.job_tracking()) out += "jobs followed as " + str(s.job_tracking()) + "\n";
  out += "\nDEVICE  NAME                           MEMORY      IN USE  MEMORY IN USE  UUID\n";
  for (const wire::DeviceStatus *d : items(s.devices())) {
    out += format("gpu:%-3d %-30.30s %-11s %5.0f%%  %-13s  %s\n", d->ordinal(),
                  (str(d->name()) + (d->emulated() ? " (emulated)" : "")).c_str(),
                  bytes_text(d->memory()).c_str(), d->share_in_use() * 100,
                  bytes_text(d->memory_in_use()).c_str(), str(d->uuid()).c_str());
  }
  out += format("cpus: %g of %g in use\n", s.cpus_in_use(), s.cpus());
  out += "\nLEASE  HOLDER                    PID      USER        DEVICES          CPUS  SINCE\n";
  if (items(s.leases()).empty()) out += "(none)\n";
  for (const wire::LeaseStatus *l : items(s.leases())) {
    out += format("%-6" PRIu64 " %s %-8u %s %-16.16s %-5g %s%s\n", l->lease_id(),
                  cell(l->name(), 25).c_str(), l->pid(), cell(l->user(), 11).c_str(),
                  grants_text(l->devices()).c_str(), l->cpus(), age_text(l->since_ms()).c_str(),
                  l->revoking() ? "  (asked back)" : "");
  }
  out += omitted_text(s.leases_omitted(), "leases");
  out +=
      "\nQUEUED  REQUEST                   PID      USER        GPUS   MEMORY      CPUS  WAITING\n";
  if (items(s.queued()).empty()) out += "(none)\n";
  for (const wire::QueuedStatus *q : items(s.queued())) {
    out += format("%-7u %s %-8u %s %-6g %-11s %-5g %s%s\n", q->position(),
                  cell(q->name(), 25).c_str(), q->pid(), cell(q->user(), 11).c_str(), q->gpus(),
                  q->gpu_memory() ? bytes_text(q->gpu_memory()).c_str() : "-", q->cpus(),
                  age_text(q->since_ms()).c_str(), q->reserved() ? "  (reserved)" : "");
  }
  out += omitted_text(s.queued_omitted(), "queued requests");
  out +=
      "\nCLIENT  NAME                      PID      USER        WEIGHT  LEASES  QUEUED  GPUS   "
      "SHARE\n";
  for (const wire::ClientStatus *c : items(s.clients())) {
    out += format("%-7" PRIu64 " %s %-8u %s %-7g %-7u %-7u %-6g %.0f%%\n", c->client_id(),
                  cell(c->name(), 25).c_str(), c->pid(), cell(c->user(), 11).c_str(), c->weight(),
                  c->leases(), c->queued(), c->gpus_in_use(), c->dominant_share() * 100);
  }
  out += omitted_text(s.clients_omitted(), "clients");
  // The data plane: only when some client has one, so the table above stays as is.
  bool planes = false;
  for (const wire::ClientStatus *c : items(s.clients()))
    if (c->data_plane()) planes = true;
  if (planes) {
    out += "\nDATA PLANE (UCX)\nCLIENT  BLOBS        DEVICE DATA   TRANSPORTS\n";
    for (const wire::ClientStatus *c : items(s.clients())) {
      if (!c->data_plane()) continue;
      out += format("%-7" PRIu64 " %-12s %-13s %s\n", c->client_id(),
                    bytes_text(c->blob_bytes()).c_str(), device_path(str(c->data_plane())),
                    str(c->data_plane()).c_str());
    }
  }
  return out;
}

std::string json_members(const wire::StatusReply &s) {
  auto grants_json = [](const fb::Vector<fb::Offset<wire::DeviceGrant>> *grants) {
    std::string out = "[";
    for (const wire::DeviceGrant *g : items(grants)) {
      if (out.size() > 1) out += ",";
      out += "{\"ordinal\":" + std::to_string(g->ordinal()) +
             ",\"uuid\":" + json_quoted(str(g->uuid())) + ",\"share\":" + json_number(g->share()) +
             ",\"memory\":" + std::to_string(g->memory()) + "}";
    }
    return out + "]";
  };
  std::string out = "\"endpoint\":" + json_quoted(str(s.endpoint())) +
                    ",\"service_pid\":" + std::to_string(s.service_pid()) +
                    ",\"started_ms\":" + std::to_string(s.started_ms()) +
                    ",\"cpus\":" + json_number(s.cpus()) +
                    ",\"cpus_in_use\":" + json_number(s.cpus_in_use()) +
                    ",\"blob_bytes\":" + std::to_string(s.blob_bytes()) +
                    ",\"devices_source\":" + json_quoted(str(s.devices_source())) +
                    ",\"job_tracking\":" + json_quoted(str(s.job_tracking())) +
                    ",\"leases_omitted\":" + std::to_string(s.leases_omitted()) +
                    ",\"queued_omitted\":" + std::to_string(s.queued_omitted()) +
                    ",\"clients_omitted\":" + std::to_string(s.clients_omitted()) +
                    ",\"ended_omitted\":" + std::to_string(s.ended_omitted()) + ",\"devices\":[";
  bool first = true;
  for (const wire::DeviceStatus *d : items(s.devices())) {
    out += std::string(first ? "" : ",") + "{\"ordinal\":" + std::to_string(d->ordinal()) +
           ",\"uuid\":" + json_quoted(str(d->uuid())) + ",\"name\":" + json_quoted(str(d->name())) +
           ",\"memory\":" + std::to_string(d->memory()) +
           ",\"share_in_use\":" + json_number(d->share_in_use()) +
           ",\"memory_in_use\":" + std::to_string(d->memory_in_use()) +
           ",\"emulated\":" + (d->emulated() ? "true" : "false") + "}";
    first = false;
  }
  auto leases_json = [&](const auto *leases, bool ended) {
    std::string list;
    for (const wire::LeaseStatus *l : items(leases)) {
      list +=
          std::string(list.empty() ? "" : ",") + "{\"lease_id\":" + std::to_string(l->lease_id()) +
          ",\"client_id\":" + std::to_string(l->client_id()) +
          ",\"pid\":" + std::to_string(l->pid()) + ",\"uid\":" + std::to_string(l->uid()) +
          ",\"user\":" + json_quoted(str(l->user())) + ",\"name\":" + json_quoted(str(l->name())) +
          ",\"since_ms\":" + std::to_string(l->since_ms()) +
          (ended ? ",\"until_ms\":" + std::to_string(l->until_ms()) : std::string()) +
          ",\"devices\":" + grants_json(l->devices()) + ",\"cpus\":" + json_number(l->cpus()) +
          (ended ? std::string()
                 : std::string(",\"revoking\":") + (l->revoking() ? "true" : "false")) +
          "}";
    }
    return list;
  };
  out += "],\"leases\":[" + leases_json(s.leases(), false);
  out += "],\"ended\":[" + leases_json(s.ended(), true);
  out += "],\"queued\":[";
  first = true;
  for (const wire::QueuedStatus *q : items(s.queued())) {
    out += std::string(first ? "" : ",") + "{\"request_id\":" + std::to_string(q->request_id()) +
           ",\"client_id\":" + std::to_string(q->client_id()) +
           ",\"position\":" + std::to_string(q->position()) +
           ",\"pid\":" + std::to_string(q->pid()) + ",\"uid\":" + std::to_string(q->uid()) +
           ",\"user\":" + json_quoted(str(q->user())) + ",\"name\":" + json_quoted(str(q->name())) +
           ",\"since_ms\":" + std::to_string(q->since_ms()) +
           ",\"gpus\":" + json_number(q->gpus()) +
           ",\"gpu_memory\":" + std::to_string(q->gpu_memory()) +
           ",\"cpus\":" + json_number(q->cpus()) +
           ",\"reserved\":" + (q->reserved() ? "true" : "false") + "}";
    first = false;
  }
  out += "],\"clients\":[";
  first = true;
  for (const wire::ClientStatus *c : items(s.clients())) {
    out += std::string(first ? "" : ",") + "{\"client_id\":" + std::to_string(c->client_id()) +
           ",\"pid\":" + std::to_string(c->pid()) + ",\"uid\":" + std::to_string(c->uid()) +
           ",\"user\":" + json_quoted(str(c->user())) + ",\"name\":" + json_quoted(str(c->name())) +
           ",\"weight\":" + json_number(c->weight()) +
           ",\"since_ms\":" + std::to_string(c->since_ms()) +
           ",\"leases\":" + std::to_string(c->leases()) +
           ",\"queued\":" + std::to_string(c->queued()) +
           ",\"gpus_in_use\":" + json_number(c->gpus_in_use()) +
           ",\"dominant_share\":" + json_number(c->dominant_share()) +
           ",\"usage\":" + json_number(c->usage()) +
           ",\"data_plane\":" + json_quoted(str(c->data_plane())) + ",\"device_data\":" +
           json_quoted(c->data_plane() ? device_path(str(c->data_plane())) : "") +
           ",\"blob_bytes\":" + std::to_string(c->blob_bytes()) + "}";
    first = false;
  }
  return out + "]";
}

std::string json(const wire::StatusReply &reply) {
  return "{" + json_members(reply) + "}";
}

}  // namespace gf::status
