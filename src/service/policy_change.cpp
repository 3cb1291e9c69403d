#include "service/policy_change.hpp"

#include <set>

#include "service/client.hpp"
#include "service/listener.hpp"

namespace gf::service {

namespace {

double weight_of(const Policy &policy, uint32_t uid) {
  auto w = policy.user_weights.find(uid);
  return w == policy.user_weights.end() ? 1.0 : w->second;
}

}  // namespace

std::string policy_change(const Policy &before, const Policy &after) {
  std::string out;
  auto changed = [&out](const std::string &what, double from, double to) {
    if (from == to) return;
    out += (out.empty() ? "" : "; ") + what + " " + amount_text(from) + " -> " + amount_text(to);
  };
  changed("usage_half_life_s", before.usage_half_life_s, after.usage_half_life_s);
  changed("client_gpu_cap", before.client_gpu_cap, after.client_gpu_cap);
  changed("user_gpu_cap", before.user_gpu_cap, after.user_gpu_cap);
  std::set<uint32_t> users;
  for (const auto &[uid, w] : before.user_weights) users.insert(uid);
  for (const auto &[uid, w] : after.user_weights) users.insert(uid);
  for (uint32_t uid : users) {
    changed("weight of " + user_name_of(uid), weight_of(before, uid), weight_of(after, uid));
  }
  return out.empty() ? "unchanged" : out;
}

}  // namespace gf::service
