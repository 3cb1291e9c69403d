// gpuflow doctor's data-plane check (issue 13, item 6): what UCX offers on this machine, the
// transports the connection to a real `gpuflow serve` took, and the put/get self-test, through
// the C ABI (gf_data_plane_check) and through the command; bad arguments refused, and the
// machine's inventory still reported when no service answers.
#include <gpuflow.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "processes.hpp"

using namespace gfsvc;

namespace {

nlohmann::json check(gf_pool *pool, double seconds, gf_status *status = nullptr) {
  gf_bytes out{};
  const gf_status s = gf_data_plane_check(&out, pool, seconds);
  if (status) *status = s;
  if (s != GF_OK) return nullptr;
  nlohmann::json doc = nlohmann::json::parse(static_cast<const char *>(out.data),
                                             static_cast<const char *>(out.data) + out.size);
  gf_bytes_free(&out);
  return doc;
}

std::string last_error() {
  const char *e = gf_last_error();
  return e ? e : "";
}

// "tcp/lo", "posix/memory", …: the offered transports as ucx_info -d names them.
std::set<std::string> offered(const nlohmann::json &doc) {
  std::set<std::string> out;
  for (const auto &t : doc.at("offered"))
    out.insert(t.at("transport").get<std::string>() + "/" + t.at("device").get<std::string>());
  return out;
}

TEST(DataPlaneCheck, TheMachinesInventoryNeedsNoService) {
  const nlohmann::json doc = check(nullptr, 0);
  ASSERT_FALSE(doc.is_null()) << last_error();
  EXPECT_EQ(doc.at("ucx_version").get<std::string>().rfind("1.", 0), 0u) << doc.dump();
  const std::set<std::string> seen = offered(doc);
  // What every Linux machine with UCX has: loopback, POSIX shared memory, the loopback NIC.
  EXPECT_TRUE(seen.count("self/memory0") || seen.count("self/memory")) << doc.dump();
  EXPECT_TRUE(seen.count("posix/memory")) << doc.dump();
  EXPECT_TRUE(seen.count("tcp/lo")) << doc.dump();
  bool cuda_component = false;
  for (const auto &t : doc.at("offered"))
    cuda_component |= t.at("component").get<std::string>().rfind("cuda", 0) == 0;
  EXPECT_EQ(doc.at("cuda_aware").get<bool>(), cuda_component) << doc.dump();
  EXPECT_FALSE(doc.contains("data_plane")) << "no pool, no self-test";
  // Which UCX was loaded, as a file that exists (what -DGPUFLOW_UCX_LIBRARY chose).
  const std::string library = doc.at("ucx_library").get<std::string>();
  EXPECT_TRUE(std::filesystem::exists(library)) << doc.dump();
}

// GPUFLOW_UCX_LIBRARY picks another UCX (a CUDA-enabled one, say) at run time; doctor names the
// one it loaded, or says why it could not.
TEST(DataPlaneCheck, TheUcxLibraryCanBeChosenAndIsReported) {
  const nlohmann::json doc = check(nullptr, 0);
  ASSERT_FALSE(doc.is_null()) << last_error();
  const std::string library =
      std::filesystem::canonical(doc.at("ucx_library").get<std::string>()).string();
  TempDir dir;
  auto doctor = [&](const std::string &choice) {
    Proc p({GPUFLOW_CLI_PATH, "doctor", "--pool", "unix://" + (dir / "none.sock")},
           dir / "doctor.err", {"GPUFLOW_UCX_LIBRARY=" + choice});
    std::string out;
    while (std::optional<std::string> l = p.line(30000 * kTimeFactor)) out += *l + "\n";
    p.wait(30000 * kTimeFactor);
    return out;
  };
  const std::string chosen = doctor(library);
  EXPECT_TRUE(contains(chosen, "ok   UCX 1.") && contains(chosen, "(" + library + ") offers:"))
      << chosen;
  const std::string missing = doctor(dir / "no-such-libucp.so");
  EXPECT_TRUE(contains(missing, "FAIL UCX: cannot load UCX (" + (dir / "no-such-libucp.so")))
      << missing;
}

TEST(DataPlaneCheck, BadArgumentsAndEmbeddedPoolsAreRefused) {
  gf_status s = GF_OK;
  EXPECT_EQ(gf_data_plane_check(nullptr, nullptr, 0), GF_ERR_INVALID_ARGUMENT);
  for (double bad : {-1.0, std::nan(""), 1e9}) {
    check(nullptr, bad, &s);
    EXPECT_EQ(s, GF_ERR_INVALID_ARGUMENT) << bad;
    EXPECT_NE(last_error().find("seconds"), std::string::npos) << last_error();
  }
  gf_pool_config c = GF_POOL_CONFIG_INIT;
  c.endpoint = "embedded";
  c.backend = GF_BACKEND_HOST;
  gf_pool *pool = nullptr;
  ASSERT_EQ(gf_pool_create(&pool, &c), GF_OK) << last_error();
  check(pool, 0, &s);
  EXPECT_EQ(s, GF_ERR_STATE);
  EXPECT_NE(last_error().find("embedded"), std::string::npos) << last_error();
  gf_pool_destroy(pool);
}

TEST(DataPlaneCheck, AgainstTheServiceEverySizeComesBackIntact) {
  TempDir dir;
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  gf_pool_config c = GF_POOL_CONFIG_INIT;
  const std::string endpoint = service.endpoint();
  c.endpoint = endpoint.c_str();
  gf_pool *pool = nullptr;
  ASSERT_EQ(gf_pool_create(&pool, &c), GF_OK) << last_error();
  const nlohmann::json doc = check(pool, 0.2);
  gf_pool_destroy(pool);
  ASSERT_FALSE(doc.is_null()) << last_error();
  const auto &plane = doc.at("data_plane");
  // Shared memory only, whatever the machine offers (docs/transport.md, "Trust").
  const std::string transports = plane.at("transports");
  EXPECT_NE(transports.find("posix/memory"), std::string::npos) << transports;
  EXPECT_EQ(transports.find("tcp"), std::string::npos) << transports;
  std::vector<double> sizes;
  for (const auto &r : plane.at("results")) {
    sizes.push_back(r.at("bytes"));
    EXPECT_GE(r.at("repeats").get<int>(), 1);
    EXPECT_GT(r.at("put_s").get<double>(), 0);
    EXPECT_GT(r.at("get_s").get<double>(), 0);
    EXPECT_NEAR(r.at("get_bytes_per_s").get<double>() * r.at("get_s").get<double>(),
                r.at("bytes").get<double>(), 1e-6 * r.at("bytes").get<double>() + 1e-9);
  }
  EXPECT_EQ(sizes, (std::vector<double>{8, 64 << 10, 1 << 20, 16 << 20}));
}

TEST(DataPlaneCheck, DoctorPrintsTheTransportsAndTheSelfTest) {
  TempDir dir;
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  auto [rc, out] = run_cli(dir, {"doctor", "--pool", service.endpoint(), "--seconds", "0.2"});
  EXPECT_EQ(rc, 0) << out;
  EXPECT_TRUE(contains(out, "ok   UCX 1.")) << out;
  EXPECT_TRUE(contains(out, "posix (memory)")) << out;
  EXPECT_TRUE(contains(out, "ok   data plane to the service: ")) << out;
  EXPECT_TRUE(contains(out, "ok   data plane 16 MiB blobs, content checked")) << out;
  EXPECT_TRUE(contains(out, "note UCX CUDA support: ")) << out;
}

TEST(DataPlaneCheck, DoctorWithoutAServiceStillListsWhatUcxOffers) {
  TempDir dir;
  auto [rc, out] = run_cli(dir, {"doctor", "--pool", "unix://" + (dir / "none.sock")});
  EXPECT_EQ(rc, 2) << out;
  EXPECT_TRUE(contains(out, "FAIL service socket")) << out;
  EXPECT_TRUE(contains(out, "ok   UCX 1.")) << out;
  EXPECT_FALSE(contains(out, "data plane to the service")) << out;
}

}  // namespace
