#include "runtime/task_context.hpp"

#include "core/error.hpp"

using gf::DataKind;
using gf::fail;

namespace {

void check_index(const gf_task_ctx &ctx, uint32_t index, uint32_t count, const char *what) {
  if (index >= count) {
    fail(GF_ERR_INVALID_ARGUMENT, ctx.graph().task_label(ctx.attempt->task) + " has " +
                                      std::to_string(count) + " " + what + "s; index " +
                                      std::to_string(index) + " is out of range");
  }
}

}  // namespace

void gf_task_ctx::input(const void **ptr, uint64_t *size, uint32_t index) const {
  check_index(*this, index, task().input_count, "input");
  *ptr = attempt->inputs[index].first;
  *size = attempt->inputs[index].second;
}

void *gf_task_ctx::output(uint32_t index, uint64_t size) {
  check_index(*this, index, task().output_count, "output");
  gf::DataIndex d = graph().outputs(task())[index];
  const gf::DataDesc &desc = graph().data(d);
  // Built only for messages: this is the hot path of every producing task.
  auto where = [&] {
    return graph().task_label(attempt->task) + " output " + graph().data_label(d);
  };
  if (desc.kind != DataKind::kBuffer) {
    fail(GF_ERR_INVALID_ARGUMENT, where() + " is an opaque value: use gf_task_ctx_set_value");
  }
  gf::TaskAttempt::Output &out = attempt->outputs[index];
  if (out.set) {
    if (size != 0 && size != out.size) {
      fail(GF_ERR_INVALID_ARGUMENT,
           where() + " already has " + std::to_string(out.size) + " bytes");
    }
    return out.ptr;
  }
  if (desc.size != 0 && size != 0 && size != desc.size) {
    fail(GF_ERR_INVALID_ARGUMENT, where() + " was declared with " + std::to_string(desc.size) +
                                      " bytes, not " + std::to_string(size));
  }
  uint64_t bytes = desc.size != 0 ? desc.size : size;
  bool dynamic = desc.size == 0;
  if (dynamic && !scheduler->charge_output(*worker, bytes)) {
    fail(GF_ERR_OUT_OF_MEMORY,
         where() + ": " + std::to_string(bytes) + " bytes do not fit on " + worker->name);
  }
  void *ptr = scheduler->backend().allocate(worker->space, bytes);
  if (!ptr) {
    if (dynamic) scheduler->discharge_output(*worker, bytes);
    fail(GF_ERR_OUT_OF_MEMORY,
         where() + ": the system refused " + std::to_string(bytes) + " bytes on " + worker->name);
  }
  out.ptr = ptr;
  out.size = bytes;
  out.set = true;
  out.charged_at_run = dynamic;
  return ptr;
}

void gf_task_ctx::set_value(uint32_t index, void *value, gf_destroy_fn destroy, uint64_t size,
                            const gf::ValueOps *ops) {
  check_index(*this, index, task().output_count, "output");
  gf::DataIndex d = graph().outputs(task())[index];
  auto where = [&] {
    return graph().task_label(attempt->task) + " output " + graph().data_label(d);
  };
  if (graph().data(d).kind != DataKind::kValue) {
    fail(GF_ERR_INVALID_ARGUMENT, where() + " is a buffer: use gf_task_ctx_output");
  }
  gf::TaskAttempt::Output &out = attempt->outputs[index];
  if (out.set) fail(GF_ERR_STATE, where() + " was already set");
  const bool device = ops && worker->space != gf::kHostSpace && size > 0;
  if (device && !scheduler->charge_value(*worker, size)) {
    fail(GF_ERR_OUT_OF_MEMORY,
         "out of memory: " + where() + ": a value of " + std::to_string(size) +
             " bytes does not fit on " + worker->name + ", which has " +
             std::to_string(scheduler->device_memory(worker->device).capacity) +
             " bytes; the rest is held by data no spill can move now");
  }
  if (device) out.value_ops = *ops;
  out.charged_at_run = device;
  out.ptr = value;
  out.size = size;
  out.value_destroy = destroy;
  out.set = true;
}

void gf_task_ctx::env(gf_task_env &out) const {
  out.kind = worker->kind;
  out.device = worker->device;
  out.worker = worker->index;
  out.attempt = attempt->attempt;
  out.stream = stream;
  const std::string &name = graph().task_name(task());
  out.task_name = name.c_str();
}

bool gf_task_ctx::cancelled() const {
  return attempt->run->cancel_requested.load(std::memory_order_relaxed);
}
