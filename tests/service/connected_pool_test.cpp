// The shared pool through the public ABI, in one process: a service started with
// gf_service_start, pools connected to it, leases, and every misuse a caller can make of them.
// (Several processes against one service: tests/service/.)
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "in_process_service.hpp"
#include "test_support.hpp"

namespace {
using namespace gft;

constexpr uint64_t MiB = 1ull << 20;

// The service's pieces every in-process service test shares (tests/support/in_process_service.hpp).
using Service = ServiceHandle;
using Lease = LeaseHandle;
using TempDir = SocketDir;
using Log = LogLines;

Service start_service(const std::string &socket, int devices, Log *log = nullptr,
                      const char *user_weights = nullptr) {
  gf_pool_config pool = host_config(2, devices, 64 * MiB);
  gf_service_config c = GF_SERVICE_CONFIG_INIT;
  c.pool = &pool;
  c.socket_path = socket.c_str();
  c.user_weights = user_weights;
  if (log) log->attach(c);
  return start(c);
}

Pool connect(const std::string &endpoint) {
  gf_pool_config c = host_config(1, 1);
  c.endpoint = endpoint.c_str();
  return make_pool(c);
}

gf_lease_request whole(double gpus) {
  gf_lease_request r = GF_LEASE_REQUEST_INIT;
  r.gpus = gpus;
  return r;
}

TEST(Service, StartsListeningAndStopsRemovingItsSocket) {
  TempDir dir;
  const std::string socket = dir.path + "/gf.sock";
  Service service = start_service(socket, 2);
  ASSERT_NE(service, nullptr);
  EXPECT_EQ(std::string(gf_service_endpoint(service.get())), "unix://" + socket);
  struct stat st {};
  ASSERT_EQ(::stat(socket.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "only the service's owner may connect by default";
  service.reset();
  EXPECT_NE(::stat(socket.c_str(), &st), 0) << "the socket file outlived the service";
}

TEST(Service, ALiveServiceIsNotReplacedButAStaleSocketIs) {
  TempDir dir;
  const std::string socket = dir.path + "/gf.sock";
  Service first = start_service(socket, 1);
  gf_service_config c = GF_SERVICE_CONFIG_INIT;
  c.socket_path = socket.c_str();
  gf_service *second = nullptr;
  std::string m = GF_EXPECT_STATUS(GF_ERR_STATE, gf_service_start(&second, &c));
  EXPECT_NE(m.find("already listens"), std::string::npos) << m;
  EXPECT_EQ(second, nullptr);
  first.reset();
  // A socket file nobody listens on (a killed service's) is replaced.
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", socket.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
  ::close(fd);
  Service again = start_service(socket, 1);
  EXPECT_NE(again, nullptr);
}

TEST(Service, RefusesToReplaceAFileThatIsNotASocket) {
  TempDir dir;
  const std::string path = dir.path + "/precious.txt";
  std::ofstream(path) << "data";
  gf_service_config c = GF_SERVICE_CONFIG_INIT;
  c.socket_path = path.c_str();
  gf_service *s = nullptr;
  std::string m = GF_EXPECT_STATUS(GF_ERR_STATE, gf_service_start(&s, &c));
  EXPECT_NE(m.find("not a socket"), std::string::npos) << m;
  std::ifstream in(path);
  std::string content;
  in >> content;
  EXPECT_EQ(content, "data");
}

TEST(Service, BadConfigurationsNameTheField) {
  gf_service_config c = GF_SERVICE_CONFIG_INIT;
  gf_service *s = nullptr;
  c.struct_size = 3;
  GF_EXPECT_STATUS(GF_ERR_STRUCT_SIZE, gf_service_start(&s, &c));
  c = GF_SERVICE_CONFIG_INIT;
  c.client_gpu_cap = -1;
  std::string m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_service_start(&s, &c));
  EXPECT_NE(m.find("client_gpu_cap"), std::string::npos) << m;
  c = GF_SERVICE_CONFIG_INIT;
  c.user_weights = "root=two";
  m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_service_start(&s, &c));
  EXPECT_NE(m.find("root=two"), std::string::npos) << m;
  c.user_weights = "no-such-user-here=2";
  m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_service_start(&s, &c));
  EXPECT_NE(m.find("no-such-user-here"), std::string::npos) << m;
  // Paths past gpuflow.h's bounds, named with the bound.
  c = GF_SERVICE_CONFIG_INIT;
  const std::string socket = "/tmp/" + std::string(GF_MAX_SOCKET_PATH_BYTES - 4, 's');
  c.socket_path = socket.c_str();
  m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_service_start(&s, &c));
  EXPECT_NE(m.find("gf_service_config.socket_path is 108 bytes; at most "
                   "GF_MAX_SOCKET_PATH_BYTES (107)"),
            std::string::npos)
      << m;
  c = GF_SERVICE_CONFIG_INIT;
  const std::string token_file = "/tmp/" + std::string(GF_MAX_PATH_BYTES, 't');
  c.listen = "127.0.0.1:0";
  c.token_file = token_file.c_str();
  m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_service_start(&s, &c));
  EXPECT_NE(m.find("gf_service_config.token_file is 4101 bytes; at most GF_MAX_PATH_BYTES (4096)"),
            std::string::npos)
      << m;
  gf_pool_config pool = host_config(1, 1);
  pool.endpoint = "tcp://127.0.0.1:1";
  pool.token_file = token_file.c_str();
  gf_pool *p = nullptr;
  m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_pool_create(&p, &pool));
  EXPECT_NE(m.find("gf_pool_config.token_file is 4101 bytes"), std::string::npos) << m;
  // A token past GF_MAX_TOKEN_BYTES: the service does not start with it, a client does not send it.
  TempDir dir;
  const std::string long_token = dir.path + "/long.token";
  std::ofstream(long_token) << std::string(GF_MAX_TOKEN_BYTES + 1, 'k') << "\n";
  ::chmod(long_token.c_str(), 0600);
  pool.token_file = long_token.c_str();
  m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_pool_create(&p, &pool));
  EXPECT_NE(m.find("is 4097 bytes; at most GF_MAX_TOKEN_BYTES (4096)"), std::string::npos) << m;
  const std::string socket_in_dir = dir.path + "/gf.sock";
  c.socket_path = socket_in_dir.c_str();
  c.token_file = long_token.c_str();
  m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_service_start(&s, &c));
  EXPECT_NE(m.find("is 4097 bytes; at most GF_MAX_TOKEN_BYTES (4096)"), std::string::npos) << m;
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(s, nullptr);
  EXPECT_EQ(gf_service_endpoint(nullptr), nullptr);
  gf_service_stop(nullptr);  // ignored
}

TEST(Service, AConnectedPoolMirrorsTheServicesDevices) {
  TempDir dir;
  Service service = start_service(dir.path + "/gf.sock", 3);
  Pool pool = connect(gf_service_endpoint(service.get()));
  ASSERT_NE(pool, nullptr);
  uint32_t devices = 0;
  GF_ASSERT_OK(gf_pool_device_count(&devices, pool.get()));
  EXPECT_EQ(devices, 3u) << "the pool's own config asked for 1: the service's devices win";
}

TEST(Service, ConnectingWhereNothingListensNamesTheEndpoint) {
  TempDir dir;
  gf_pool_config c = host_config(1, 1);
  const std::string endpoint = "unix://" + dir.path + "/nobody.sock";
  c.endpoint = endpoint.c_str();
  gf_pool *p = nullptr;
  std::string m = GF_EXPECT_STATUS(GF_ERR_SYSTEM, gf_pool_create(&p, &c));
  EXPECT_NE(m.find(endpoint), std::string::npos) << m;
  EXPECT_NE(m.find("gpuflow serve"), std::string::npos) << m;
  c.endpoint = "tcp://example:1";
  m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_pool_create(&p, &c));
  EXPECT_NE(m.find("tcp://example:1"), std::string::npos) << m;
  EXPECT_EQ(p, nullptr);
}

TEST(Service, LeasesNameTheirDevicesAndComeBack) {
  TempDir dir;
  Log log;
  Service service = start_service(dir.path + "/gf.sock", 2, &log);
  Pool pool = connect(gf_service_endpoint(service.get()));
  gf_lease_request r = whole(0.5);
  r.name = "half";
  gf_lease *raw = nullptr;
  GF_ASSERT_OK(gf_lease_acquire(&raw, pool.get(), &r, 1000));
  Lease lease(raw);
  uint64_t id = 0;
  uint32_t count = 0;
  double cpus = -1;
  GF_ASSERT_OK(gf_lease_info(&id, &count, &cpus, lease.get()));
  EXPECT_GT(id, 0u);
  ASSERT_EQ(count, 1u);
  EXPECT_EQ(cpus, 0.0);
  gf_lease_device d = GF_LEASE_DEVICE_INIT;
  GF_ASSERT_OK(gf_lease_device_info(&d, lease.get(), 0));
  EXPECT_EQ(d.share, 0.5);
  EXPECT_EQ(d.memory, 32 * MiB);
  EXPECT_EQ(std::string(d.uuid).rfind("GPU-", 0), 0u) << d.uuid;
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_lease_device_info(&d, lease.get(), 1));
  int32_t revoked = -1;
  GF_ASSERT_OK(gf_lease_revoked(&revoked, lease.get()));
  EXPECT_EQ(revoked, 0);

  gf_bytes status{};
  GF_ASSERT_OK(gf_pool_service_status(&status, pool.get(), GF_STATUS_JSON));
  std::string json(static_cast<const char *>(status.data), status.size);
  gf_bytes_free(&status);
  EXPECT_NE(json.find("\"name\":\"half\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"pid\":" + std::to_string(getpid())), std::string::npos) << json;
  GF_ASSERT_OK(gf_pool_service_status(&status, pool.get(), GF_STATUS_TEXT));
  std::string text(static_cast<const char *>(status.data), status.size);
  gf_bytes_free(&status);
  EXPECT_NE(text.find("gpu:0x0.5"), std::string::npos) << text;

  GF_ASSERT_OK(gf_lease_release(lease.release()));
  // The release waits for no answer (issue 29); the status request after it on the same
  // connection is read after it, so by its answer the service has released and logged the lease.
  GF_ASSERT_OK(gf_pool_service_status(&status, pool.get(), GF_STATUS_JSON));
  EXPECT_TRUE(log.has("released lease " + std::to_string(id))) << log.text;
  json.assign(static_cast<const char *>(status.data), status.size);
  gf_bytes_free(&status);
  EXPECT_NE(json.find("\"leases\":[]"), std::string::npos) << json;
}

// gf_lease_environment: what `gpuflow lease` runs its command with, and Dask workers run with.
TEST(Service, ALeasesEnvironmentNamesExactlyItsDevices) {
  TempDir dir;
  Service service = start_service(dir.path + "/gf.sock", 3);
  Pool pool = connect(gf_service_endpoint(service.get()));
  auto environment_of = [&](gf_lease_request r, std::string *uuid) {
    gf_lease *raw = nullptr;
    GF_EXPECT_OK(gf_lease_acquire(&raw, pool.get(), &r, 1000));
    Lease lease(raw);
    uint64_t id = 0;
    uint32_t count = 0;
    GF_EXPECT_OK(gf_lease_info(&id, &count, nullptr, lease.get()));
    gf_lease_device d = GF_LEASE_DEVICE_INIT;
    if (count) GF_EXPECT_OK(gf_lease_device_info(&d, lease.get(), 0));
    if (uuid) *uuid = count ? d.uuid : "";
    const char *lines = nullptr;
    GF_EXPECT_OK(gf_lease_environment(&lines, lease.get()));
    const std::string env = lines ? lines : "(null)";
    // Past the id, which differs per lease.
    const std::string id_line = "GPUFLOW_LEASE_ID=" + std::to_string(id) + "\n";
    const size_t at = env.find(id_line);
    EXPECT_NE(at, std::string::npos) << env;
    return at == std::string::npos
               ? env
               : env.substr(0, at) + "GPUFLOW_LEASE_ID=ID\n" + env.substr(at + id_line.size());
  };

  // The service's second device, whole: a pool in the job emulates two devices, so that the
  // UUID it is handed names the second, at the device's memory.
  gf_lease_request r = whole(1);
  int32_t second = 1;
  r.devices = &second;
  r.device_count = 1;
  std::string uuid;
  std::string env = environment_of(r, &uuid);
  EXPECT_EQ(env, "CUDA_VISIBLE_DEVICES=" + uuid + "\nNVIDIA_VISIBLE_DEVICES=" + uuid +
                     "\nGPUFLOW_DEVICES=1\nGPUFLOW_LEASE_ID=ID\nGPUFLOW_EMULATED_DEVICES=2\n"
                     "GPUFLOW_EMULATED_DEVICE_MEMORY=" +
                     std::to_string(64 * MiB) + "\n");

  // A share of one device: NVIDIA MPS's limits, and the emulated device at the share's memory.
  env = environment_of(whole(0.25), &uuid);
  EXPECT_EQ(env, "CUDA_VISIBLE_DEVICES=" + uuid + "\nNVIDIA_VISIBLE_DEVICES=" + uuid +
                     "\nGPUFLOW_DEVICES=0\nGPUFLOW_LEASE_ID=ID\nGPUFLOW_EMULATED_DEVICES=1\n"
                     "GPUFLOW_EMULATED_DEVICE_MEMORY=" +
                     std::to_string(16 * MiB) +
                     "\nCUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25\n"
                     "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=16M\n");

  // CPUs alone: no device for CUDA, and none for container runtimes either.
  gf_lease_request cpus = GF_LEASE_REQUEST_INIT;
  cpus.cpus = 1;
  EXPECT_EQ(environment_of(cpus, nullptr),
            "CUDA_VISIBLE_DEVICES=\nNVIDIA_VISIBLE_DEVICES=void\nGPUFLOW_DEVICES=\n"
            "GPUFLOW_LEASE_ID=ID\n");

  gf_lease *held = nullptr;
  GF_ASSERT_OK(gf_lease_acquire(&held, pool.get(), &r, 1000));
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_lease_environment(nullptr, held));
  GF_ASSERT_OK(gf_lease_release(held));
  const char *lines = nullptr;
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_lease_environment(&lines, held));
}

TEST(Service, LeaseMisuseIsAClearError) {
  TempDir dir;
  Service service = start_service(dir.path + "/gf.sock", 2);
  Pool pool = connect(gf_service_endpoint(service.get()));
  gf_lease *lease = nullptr;
  gf_lease_request r = whole(1.5);
  std::string m =
      GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_lease_acquire(&lease, pool.get(), &r, 0));
  EXPECT_NE(m.find("gpus"), std::string::npos) << m;
  r = whole(0);
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_lease_acquire(&lease, pool.get(), &r, 0));
  r = whole(3);
  m = GF_EXPECT_STATUS(GF_ERR_INFEASIBLE, gf_lease_acquire(&lease, pool.get(), &r, 0));
  EXPECT_NE(m.find("3"), std::string::npos) << m;
  r = whole(1);
  int32_t missing = 7;
  r.devices = &missing;
  r.device_count = 1;
  GF_EXPECT_STATUS(GF_ERR_INFEASIBLE, gf_lease_acquire(&lease, pool.get(), &r, 0));
  r = whole(1);
  r.struct_size = 5;
  GF_EXPECT_STATUS(GF_ERR_STRUCT_SIZE, gf_lease_acquire(&lease, pool.get(), &r, 0));
  r = whole(1);
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_lease_acquire(nullptr, pool.get(), &r, 0));
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_lease_acquire(&lease, nullptr, &r, 0));
  EXPECT_EQ(lease, nullptr);
  EXPECT_EQ(gf_lease_release(nullptr), GF_OK);
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE,
                   gf_lease_info(nullptr, nullptr, nullptr, reinterpret_cast<gf_lease *>(8)));
  // A released handle is stale, not a crash.
  gf_lease *held = nullptr;
  GF_ASSERT_OK(gf_lease_acquire(&held, pool.get(), &r, 1000));
  GF_ASSERT_OK(gf_lease_release(held));
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_lease_release(held));
  int32_t revoked = 0;
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_lease_revoked(&revoked, held));
}

// gf_lease_bind_process_group: only a group of this host with processes of the caller's user.
TEST(Service, ALeaseBindsOnlyAProcessGroupThatExists) {
  TempDir dir;
  Service service = start_service(dir.path + "/gf.sock", 1);
  Pool pool = connect(gf_service_endpoint(service.get()));
  gf_lease_request r = whole(1);
  gf_lease *lease = nullptr;
  GF_ASSERT_OK(gf_lease_acquire(&lease, pool.get(), &r, 1000));
  std::string m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_lease_bind_process_group(lease, 1));
  EXPECT_NE(m.find("process_group 1"), std::string::npos) << m;
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_lease_bind_process_group(lease, -5));
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_lease_bind_process_group(lease, int64_t{1} << 40));
  // A group id nobody uses (pids stop at pid_max, at most 2^22).
  m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_lease_bind_process_group(lease, 0x7ffffff0));
  EXPECT_NE(m.find("no process"), std::string::npos) << m;
  GF_EXPECT_OK(gf_lease_bind_process_group(lease, ::getpgrp()));
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE,
                   gf_lease_bind_process_group(reinterpret_cast<gf_lease *>(8), ::getpgrp()));
  // Released the ordinary way, a bound lease simply ends: nothing of this process is signalled.
  GF_ASSERT_OK(gf_lease_release(lease));
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_lease_bind_process_group(lease, ::getpgrp()));
  gf_lease *again = nullptr;
  GF_ASSERT_OK(gf_lease_acquire(&again, pool.get(), &r, 1000));
  GF_ASSERT_OK(gf_lease_release(again));
}

// The bounds of gpuflow.h ("Shared pools") are checked before anything is sent: each refusal
// names the field and the bound, the service never hears of it, and the pool's lease and
// connection are as they were. At the bounds themselves, requests are granted.
TEST(Service, LeaseRequestsPastTheBoundsAreRefusedBeforeSending) {
  TempDir dir;
  Log log;
  Service service = start_service(dir.path + "/gf.sock", 2, &log);
  Pool pool = connect(gf_service_endpoint(service.get()));
  gf_lease_request r = whole(1);
  r.name = "held";
  gf_lease *raw = nullptr;
  GF_ASSERT_OK(gf_lease_acquire(&raw, pool.get(), &r, 1000));
  Lease held(raw);

  struct Case {
    const char *what;
    std::string name;
    std::vector<int32_t> devices;
    std::vector<std::string> said;
  };
  std::vector<int32_t> too_many(GF_MAX_LEASE_DEVICES + 1);
  for (size_t i = 0; i < too_many.size(); ++i) too_many[i] = static_cast<int32_t>(i);
  const std::vector<Case> cases = {
      {"a name one byte over",
       std::string(GF_MAX_LEASE_NAME_BYTES + 1, 'n'),
       {},
       {"gf_lease_request.name is 4097 bytes; at most GF_MAX_LEASE_NAME_BYTES (4096)"}},
      {"a name over by a two-byte character",
       std::string(GF_MAX_LEASE_NAME_BYTES - 1, 'n') + "\xc3\xa9",
       {},
       {"gf_lease_request.name is 4097 bytes", "GF_MAX_LEASE_NAME_BYTES"}},
      {"a name that is not UTF-8",
       "caf\xe9",
       {},
       {"gf_lease_request.name is not valid UTF-8 (byte 3 is 0xe9)"}},
      {"one device more than the bound",
       "",
       too_many,
       {"gf_lease_request.devices lists 1025 devices; at most GF_MAX_LEASE_DEVICES (1024)"}},
      {"a device twice",
       "",
       {1, 0, 1},
       {"gf_lease_request.devices lists device 1 twice (entries 0 and 2)"}},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    gf_lease_request bad = whole(1);
    bad.name = c.name.empty() ? nullptr : c.name.c_str();
    bad.devices = c.devices.empty() ? nullptr : c.devices.data();
    bad.device_count = static_cast<uint32_t>(c.devices.size());
    gf_lease *lease = nullptr;
    const std::string m =
        GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_lease_acquire(&lease, pool.get(), &bad, 0));
    EXPECT_EQ(lease, nullptr);
    for (const std::string &part : c.said) EXPECT_NE(m.find(part), std::string::npos) << m;
  }
  // Nothing reached the service: it refused nothing and the pool is still its client.
  EXPECT_FALSE(log.has("refused")) << log.text;
  EXPECT_FALSE(log.has("disconnected")) << log.text;
  int32_t revoked = -1;
  GF_ASSERT_OK(gf_lease_revoked(&revoked, held.get()));
  EXPECT_EQ(revoked, 0);

  // At the bounds the requests go out. The most devices: the node has two, so the service
  // refuses the list for naming one it lacks, as an answer to that request alone.
  std::vector<int32_t> most(GF_MAX_LEASE_DEVICES);
  for (size_t i = 0; i < most.size(); ++i) most[i] = static_cast<int32_t>(i);
  gf_lease_request edge = whole(1);
  edge.devices = most.data();
  edge.device_count = static_cast<uint32_t>(most.size());
  gf_lease *lease = nullptr;
  std::string m =
      GF_EXPECT_STATUS(GF_ERR_INFEASIBLE, gf_lease_acquire(&lease, pool.get(), &edge, 0));
  EXPECT_NE(m.find("device 2 does not exist"), std::string::npos) << m;
  // The longest name is granted, beside the lease held all along.
  const std::string longest(GF_MAX_LEASE_NAME_BYTES, 'n');
  edge = whole(1);
  edge.name = longest.c_str();
  GF_ASSERT_OK(gf_lease_acquire(&lease, pool.get(), &edge, 1000));
  GF_ASSERT_OK(gf_lease_release(lease));
  GF_ASSERT_OK(gf_lease_release(held.release()));
  EXPECT_FALSE(log.has("disconnected")) << log.text;
}

TEST(Service, AnEmbeddedPoolHasNoLeasesAndNoServiceStatus) {
  gf_pool_config c = host_config(1, 1);
  c.endpoint = "embedded";
  Pool pool = make_pool(c);
  gf_lease *lease = nullptr;
  gf_lease_request r = whole(1);
  std::string m = GF_EXPECT_STATUS(GF_ERR_STATE, gf_lease_acquire(&lease, pool.get(), &r, 0));
  EXPECT_NE(m.find("embedded"), std::string::npos) << m;
  gf_bytes status{};
  GF_EXPECT_STATUS(GF_ERR_STATE, gf_pool_service_status(&status, pool.get(), GF_STATUS_TEXT));
}

TEST(Service, WaitingForALeaseTimesOutAndNowOrNeverDoesNotWait) {
  TempDir dir;
  Service service = start_service(dir.path + "/gf.sock", 1);
  Pool pool = connect(gf_service_endpoint(service.get()));
  gf_lease_request r = whole(1);
  gf_lease *held = nullptr;
  GF_ASSERT_OK(gf_lease_acquire(&held, pool.get(), &r, 1000));
  Lease keep(held);
  gf_lease *second = nullptr;
  auto start = std::chrono::steady_clock::now();
  GF_EXPECT_STATUS(GF_TIMEOUT, gf_lease_acquire(&second, pool.get(), &r, 200));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 150ms);  // it waited, as it was told
  GF_EXPECT_STATUS(GF_TIMEOUT, gf_lease_acquire(&second, pool.get(), &r, 0));
  EXPECT_EQ(second, nullptr);
  // The timed-out requests left no trace: once the device is back, a new one gets it.
  keep.reset();
  GF_ASSERT_OK(gf_lease_acquire(&second, pool.get(), &r, 1000));
  gf_lease_release(second);
}

TEST(Service, AStoppedServiceFailsWaitingCallsNamingTheEndpoint) {
  TempDir dir;
  Service service = start_service(dir.path + "/gf.sock", 1);
  const std::string endpoint = gf_service_endpoint(service.get());
  Pool pool = connect(endpoint);
  gf_lease_request r = whole(1);
  gf_lease *held = nullptr;
  GF_ASSERT_OK(gf_lease_acquire(&held, pool.get(), &r, 1000));
  gf_status waited = GF_OK;
  std::string message;
  std::thread waiter([&] {
    gf_lease *never = nullptr;
    waited = gf_lease_acquire(&never, pool.get(), &r, -1);  // blocks: the device is held
    message = last_error();
  });
  // The service stops only once the request waits in its queue: the call is failed while it
  // waits, not refused by a service already gone.
  EXPECT_TRUE(wait_until([&] { return someone_waits(pool.get()); }));
  service.reset();
  waiter.join();
  EXPECT_EQ(waited, GF_ERR_SYSTEM);
  EXPECT_NE(message.find(endpoint), std::string::npos) << message;
  // The pool reconnects meanwhile: the lease it holds is still its own (a restarted service
  // keeps it for this process), and releasing it now hands it back once a service answers.
  int32_t revoked = 1;
  GF_ASSERT_OK(gf_lease_revoked(&revoked, held));
  EXPECT_EQ(revoked, 0);
  GF_ASSERT_OK(gf_lease_release(held));
  gf_bytes reply = {nullptr, 0};
  std::string gone =
      GF_EXPECT_STATUS(GF_ERR_SYSTEM, gf_pool_service_status(&reply, pool.get(), GF_STATUS_JSON));
  EXPECT_NE(gone.find(endpoint), std::string::npos) << gone;
}

TEST(Service, ConnectedPoolsTakeTurnsOnOneDeviceAndHandItBack) {
  TempDir dir;
  Log log;
  Service service = start_service(dir.path + "/gf.sock", 1, &log);
  Pool a = connect(gf_service_endpoint(service.get()));
  Pool b = connect(gf_service_endpoint(service.get()));
  // Both pools run GPU tasks on the one device; each task records its interval. No interval of
  // one pool may overlap one of the other: the device is leased to one process at a time.
  std::mutex mu;
  std::vector<std::tuple<char, double, double>> spans;
  auto now = [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  auto graph_for = [&](char who) {
    Graph g = make_graph();
    for (int i = 0; i < 6; ++i) {
      TaskSpec s;
      s.resources = {{"GPU", 1}};
      s.gpu = [&, who](gf_task_ctx *) {
        double t0 = now();
        std::this_thread::sleep_for(10ms);
        std::lock_guard lock(mu);
        spans.emplace_back(who, t0, now());
        return 0;
      };
      must_add_task(g.get(), s);
    }
    return g;
  };
  Graph ga = graph_for('a'), gb = graph_for('b');
  RunPtr ra(submit(a.get(), ga.get())), rb(submit(b.get(), gb.get()));
  GF_ASSERT_OK(gf_run_wait(ra.get(), 30000));
  GF_ASSERT_OK(gf_run_wait(rb.get(), 30000));
  ASSERT_EQ(spans.size(), 12u);
  for (const auto &[w1, s1, e1] : spans) {
    for (const auto &[w2, s2, e2] : spans) {
      if (w1 != w2) {
        EXPECT_FALSE(s1 < e2 && s2 < e1) << "a and b ran on the device at once";
      }
    }
  }
  // After the linger both hand the device back.
  EXPECT_TRUE(wait_until(
      [&] {
        gf_bytes status{};
        if (gf_pool_service_status(&status, a.get(), GF_STATUS_JSON) != GF_OK) return false;
        std::string json(static_cast<const char *>(status.data), status.size);
        gf_bytes_free(&status);
        return json.find("\"leases\":[]") != std::string::npos;
      },
      5000ms))
      << log.text;
}

}  // namespace

namespace {

TEST(Service, ARevokedDeviceIsHandedBackBetweenTasksAndTheRunStillCompletes) {
  TempDir dir;
  Log log;
  Service service = start_service(dir.path + "/gf.sock", 1, &log);
  Pool busy = connect(gf_service_endpoint(service.get()));
  Pool other = connect(gf_service_endpoint(service.get()));
  // `busy` keeps the one device busy with a stream of short tasks; `other` asks for the device.
  // Fair share makes the service ask `busy` for it back: busy stops starting tasks, hands it back
  // between two of them, asks for it again while `other` holds it, gets it after `other` is done,
  // and finishes. The stream outlasts the wait for the grant whatever it takes: its tasks take
  // 10 ms each until `other` has the device (30 s for all, a guard against a hang), none after.
  std::atomic<int> done{0}, ran_while_leased{0};
  std::atomic<bool> granted{false}, other_holds{false};
  Graph g = make_graph();
  constexpr int kTasks = 3000;
  for (int i = 0; i < kTasks; ++i) {
    TaskSpec s;
    s.resources = {{"GPU", 1}};
    s.gpu = [&](gf_task_ctx *) {
      if (other_holds) ran_while_leased++;
      if (!granted) std::this_thread::sleep_for(10ms);
      done++;
      return 0;
    };
    must_add_task(g.get(), s);
  }
  RunPtr run(submit(busy.get(), g.get()));
  ASSERT_TRUE(wait_until([&] { return done.load() > 0; }));
  gf_lease_request r = whole(1);
  gf_lease *lease = nullptr;
  GF_ASSERT_OK(gf_lease_acquire(&lease, other.get(), &r, 60000));
  other_holds = true;
  granted = true;
  // Busy's tasks that started before the hand back have all ended: what is done now stays.
  const int done_when_granted = done.load();
  EXPECT_LT(done_when_granted, kTasks) << "the lease came only after the whole run";
  EXPECT_TRUE(log.has("to hand back lease")) << log.text;
  // Busy, tasks left, asks for the device again: its request waits while `other` holds it.
  EXPECT_TRUE(wait_until([&] { return someone_waits(other.get()); })) << log.text;
  EXPECT_EQ(done.load(), done_when_granted) << "busy ran tasks on a device leased to another";
  other_holds = false;
  GF_ASSERT_OK(gf_lease_release(lease));
  EXPECT_EQ(ran_while_leased.load(), 0) << "busy started tasks on a device leased to another";
  GF_ASSERT_OK(gf_run_wait(run.get(), 60000));
  EXPECT_EQ(done.load(), kTasks);
  run.reset();
  expect_ledger_idle(busy.get());
}

}  // namespace

namespace {

TEST(Service, CpuWorkersOfConnectedPoolsRunOnlyOnCpusTheServiceGranted) {
  TempDir dir;
  Service service = start_service(dir.path + "/gf.sock", 1);  // 2 CPUs (host_config(2, …))
  // Two pools of 2 CPU workers each: 4 threads that could run at once, 2 CPUs to lease.
  gf_pool_config c = host_config(2, 1);
  const std::string endpoint = gf_service_endpoint(service.get());
  c.endpoint = endpoint.c_str();
  Pool a = make_pool(c), b = make_pool(c);
  std::atomic<int> running{0}, most{0};
  auto graph = [&] {
    Graph g = make_graph();
    for (int i = 0; i < 12; ++i) {
      TaskSpec s;
      s.cpu = [&](gf_task_ctx *) {
        int now = ++running;
        for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {
        }
        std::this_thread::sleep_for(5ms);
        --running;
        return 0;
      };
      must_add_task(g.get(), s);
    }
    return g;
  };
  Graph ga = graph(), gb = graph();
  RunPtr ra(submit(a.get(), ga.get())), rb(submit(b.get(), gb.get()));
  GF_ASSERT_OK(gf_run_wait(ra.get(), 30000));
  GF_ASSERT_OK(gf_run_wait(rb.get(), 30000));
  EXPECT_LE(most.load(), 2) << "more CPU tasks ran at once than the service has CPUs";
  EXPECT_GE(most.load(), 1);
}

}  // namespace
