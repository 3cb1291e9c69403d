#include "transport/inventory.hpp"

#include "transport/ucx_api.hpp"

namespace gf::transport {
namespace {

const char *kind_of(uct_device_type_t type) {
  switch (type) {
    case UCT_DEVICE_TYPE_NET:
      return "network";
    case UCT_DEVICE_TYPE_SHM:
      return "shared memory";
    case UCT_DEVICE_TYPE_ACC:
      return "accelerator";
    case UCT_DEVICE_TYPE_SELF:
      return "loopback";
    default:
      return "other";
  }
}

bool is_cuda_component(const std::string &name) {
  return name.rfind("cuda", 0) == 0 || name.rfind("gdr", 0) == 0;
}

// The transports of one memory domain of a component.
void query_md(const UcxApi &api, uct_component_h component, const std::string &component_name,
              const char *md_name, Inventory &out) {
  uct_md_config_t *config = nullptr;
  ucs_status_t status = api.uct_md_config_read(component, nullptr, nullptr, &config);
  if (status != UCS_OK) {
    out.problems.push_back(component_name + ": " + api.ucs_status_string(status));
    return;
  }
  uct_md_h md = nullptr;
  status = api.uct_md_open(component, md_name, config, &md);
  api.uct_config_release(config);
  if (status != UCS_OK) {
    out.problems.push_back(component_name + "/" + md_name + ": " + api.ucs_status_string(status));
    return;
  }
  uct_tl_resource_desc_t *resources = nullptr;
  unsigned count = 0;
  status = api.uct_md_query_tl_resources(md, &resources, &count);
  if (status == UCS_OK) {
    for (unsigned i = 0; i < count; ++i) {
      out.offered.push_back(OfferedTransport{component_name, resources[i].tl_name,
                                             resources[i].dev_name,
                                             kind_of(resources[i].dev_type)});
    }
    api.uct_release_tl_resource_list(resources);
  } else {
    out.problems.push_back(component_name + "/" + md_name + ": " + api.ucs_status_string(status));
  }
  api.uct_md_close(md);
}

}  // namespace

Inventory inventory() {
  Inventory out;
  const UcxApi &api = ucx();
  out.version = api.ucp_get_version_string();
  out.library = ucx_library();
  uct_component_h *components = nullptr;
  unsigned count = 0;
  ucs_status_t status = api.uct_query_components(&components, &count);
  if (status != UCS_OK) {
    out.problems.push_back(std::string("no UCX components: ") + api.ucs_status_string(status));
    return out;
  }
  for (unsigned c = 0; c < count; ++c) {
    uct_component_attr_t attr{};
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME | UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    if (api.uct_component_query(components[c], &attr) != UCS_OK) continue;
    const std::string name = attr.name;
    if (is_cuda_component(name)) out.cuda_aware = true;
    std::vector<uct_md_resource_desc_t> mds(attr.md_resource_count);
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    attr.md_resources = mds.data();
    if (!mds.empty() && api.uct_component_query(components[c], &attr) != UCS_OK) continue;
    for (const auto &md : mds) query_md(api, components[c], name, md.md_name, out);
  }
  api.uct_release_component_list(components);
  return out;
}

}  // namespace gf::transport
