// C shims: what a task body calls on its context.
#include "capi/guard.hpp"
#include "capi/structs.hpp"
#include "core/fixed_point.hpp"
#include "runtime/task_context.hpp"

using namespace gf;
using namespace gf::capi;

namespace {

gf_task_ctx &ctx_of(const gf_task_ctx *ctx) {
  if (!ctx) fail(GF_ERR_INVALID_ARGUMENT, "gf_task_ctx is NULL");
  return const_cast<gf_task_ctx &>(*ctx);
}

}  // namespace

extern "C" {

GF_API gf_status gf_task_ctx_input(const void **out_ptr, uint64_t *out_size, gf_task_ctx *ctx,
                                   uint32_t index) {
  return guard([&] {
    require_out(out_ptr, "out_ptr");
    require_out(out_size, "out_size");
    ctx_of(ctx).input(out_ptr, out_size, index);
    return GF_OK;
  });
}

GF_API gf_status gf_task_ctx_output(void **out_ptr, gf_task_ctx *ctx, uint32_t index,
                                    uint64_t size) {
  return guard([&] {
    require_out(out_ptr, "out_ptr");
    gf_task_ctx &c = ctx_of(ctx);
    // A size set now is charged to gpu_memory: keep it convertible (declared sizes already are).
    if (!FixedPoint::bytes_representable(size)) {
      fail(GF_ERR_INVALID_ARGUMENT, c.graph().task_label(c.attempt->task) + " output #" +
                                        std::to_string(index) + ": size " + std::to_string(size) +
                                        " is above " + std::to_string(FixedPoint::kMaxBytes) +
                                        " bytes (GF_MAX_DATA_SIZE)");
    }
    *out_ptr = c.output(index, size);
    return GF_OK;
  });
}

GF_API gf_status gf_task_ctx_set_value(gf_task_ctx *ctx, uint32_t index, void *value,
                                       gf_destroy_fn destroy, uint64_t size_estimate) {
  return guard([&] {
    ctx_of(ctx).set_value(index, value, destroy, size_estimate);
    return GF_OK;
  });
}

GF_API void gf_value_ops_init(gf_value_ops *ops, uint32_t struct_size) {
  const gf_value_ops init = GF_VALUE_OPS_INIT;
  init_bounded(ops, init, struct_size);
}

GF_API gf_status gf_task_ctx_set_device_value(gf_task_ctx *ctx, uint32_t index, void *value,
                                              gf_destroy_fn destroy, uint64_t size,
                                              const gf_value_ops *ops) {
  return guard([&] {
    gf_task_ctx &c = ctx_of(ctx);
    auto where = [&] {
      return c.graph().task_label(c.attempt->task) + " output #" + std::to_string(index);
    };
    if (!FixedPoint::bytes_representable(size)) {
      fail(GF_ERR_INVALID_ARGUMENT, where() + ": size " + std::to_string(size) + " is above " +
                                        std::to_string(FixedPoint::kMaxBytes) +
                                        " bytes (GF_MAX_DATA_SIZE)");
    }
    ValueOps moves;
    if (ops) {
      gf_value_ops o = read_struct(ops, "gf_value_ops");
      if (!o.spill != !o.unspill) {
        fail(GF_ERR_INVALID_ARGUMENT,
             where() + ": gf_value_ops needs both spill and unspill, or neither");
      }
      moves = ValueOps{o.spill, o.unspill, o.user_data};
    }
    c.set_value(index, value, destroy, size, &moves);
    return GF_OK;
  });
}

GF_API gf_status gf_task_ctx_fail(gf_task_ctx *ctx, const char *message) {
  return guard([&] {
    gf_task_ctx &c = ctx_of(ctx);
    c.failed = true;
    c.error = message && *message ? message : "failed (no message given)";
    return GF_OK;
  });
}

GF_API int gf_task_ctx_cancelled(const gf_task_ctx *ctx) {
  return ctx && ctx->cancelled() ? 1 : 0;
}

GF_API gf_status gf_task_ctx_env(gf_task_env *out, const gf_task_ctx *ctx) {
  return guard([&] {
    checked_size(out, "gf_task_env");
    gf_task_env env = GF_TASK_ENV_INIT;
    ctx_of(ctx).env(env);
    write_struct(out, env, "gf_task_env");
    return GF_OK;
  });
}

}  // extern "C"
