// C shims: named kernels, plugins and external-command descriptors.
#include "capi/guard.hpp"
#include "capi/objects.hpp"
#include "capi/structs.hpp"

using namespace gf;
using namespace gf::capi;

extern "C" {

GF_API void gf_kernel_desc_init(gf_kernel_desc *desc, uint32_t struct_size) {
  gf_kernel_desc init = GF_KERNEL_DESC_INIT;
  init_bounded(desc, init, struct_size);
}

GF_API void gf_command_desc_init(gf_command_desc *desc, uint32_t struct_size) {
  gf_command_desc init = GF_COMMAND_DESC_INIT;
  init_bounded(desc, init, struct_size);
}

GF_API gf_status gf_pool_register_kernel(gf_pool *pool, const gf_kernel_desc *desc) {
  return guard([&] {
    gf_kernel_desc d = read_struct(desc, "gf_kernel_desc");
    pool_of(pool).kernels().add(d);
    return GF_OK;
  });
}

GF_API gf_status gf_pool_load_plugin(gf_pool *pool, const char *path) {
  return guard([&] {
    require_out(path, "path");
    pool_of(pool).kernels().load_plugin(path);
    return GF_OK;
  });
}

GF_API gf_status gf_pool_kernel_count(uint32_t *out, const gf_pool *pool) {
  return guard([&] {
    require_out(out, "out");
    *out = static_cast<uint32_t>(pool_of(pool).kernels().size());
    return GF_OK;
  });
}

GF_API gf_status gf_pool_kernel_name(const char **out, const gf_pool *pool, uint32_t index) {
  return guard([&] {
    require_out(out, "out");
    *out = pool_of(pool).kernels().name(index).c_str();
    return GF_OK;
  });
}

GF_API gf_status gf_pool_set_event_callback(gf_pool *pool, gf_event_fn callback, void *user_data) {
  return guard([&] {
    pool_of(pool).subscribe_events(callback, user_data);
    return GF_OK;
  });
}

}  // extern "C"
