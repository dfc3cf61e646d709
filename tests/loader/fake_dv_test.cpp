// SPDX-License-Identifier: MIT
// The lazily loaded libraries (the providers' direct-verbs libraries and
// libibumad) against fakes at the dlopen boundary (tests/fakes/fake_dv.c):
// never loaded at start-up, loaded once on first use, bound at their nodes
// (MLX5_1.25.1 included), fewer nodes or a missing symbol failing as
// documented, a provider library refused when its IBVERBS_PRIVATE_* need is
// not the loaded libibverbs's node. Each case runs in its own ctest with the
// environment it names (tests/CMakeLists.txt).
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <dlfcn.h>

#include "rdma_api.h"
#include "rdmadl/loader.h"
#include <doctest/doctest.h>

namespace {

std::string env(const char *name) {
  const char *v = std::getenv(name);
  REQUIRE(v != nullptr);
  return v;
}

// Whether the file is mapped in this process (without loading it).
bool mapped(const std::string &path) {
  void *h = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (h)
    dlclose(h);
  return h != nullptr;
}

std::string error_of(rdmadl_lib lib) {
  const char *e = rdmadl_lib_error(lib);
  return e ? e : "";
}

} // namespace

TEST_CASE("fake_dv: a provider library is loaded on its first call, not at start-up") {
  REQUIRE(rdmadl_load() == 0);
  CHECK(rdmadl_lib_state(RDMADL_LIB_MLX5) == RDMADL_STATE_NOT_LOADED);
  CHECK(error_of(RDMADL_LIB_MLX5).find("not loaded yet") == 0);
  CHECK(rdmadl_lib_missing_count(RDMADL_LIB_MLX5) == rdmadl_lib_symbol_count(RDMADL_LIB_MLX5));
  CHECK(!mapped(env("RDMADL_MLX5_PATH")));
  errno = 0;
  CHECK(!mlx5dv_is_supported(nullptr)); // the fake's answer, not a failure
  CHECK(errno == 0);
  CHECK(mapped(env("RDMADL_MLX5_PATH")));
  CHECK(rdmadl_lib_state(RDMADL_LIB_MLX5) == RDMADL_STATE_LOADED);
  CHECK(rdmadl_lib_missing_count(RDMADL_LIB_MLX5) == 0);
  CHECK(std::string(rdmadl_lib_version_node(RDMADL_LIB_MLX5)) == "MLX5_1.27");
  const char *node = nullptr;
  CHECK(rdmadl_symbol_status("__mlx5dv_create_flow", &node) == RDMADL_SYMBOL_RESOLVED);
  CHECK(std::string(node) == "MLX5_1.25.1");
  CHECK(rdmadl_symbol_status("mlx5dv_init_obj", &node) == RDMADL_SYMBOL_RESOLVED);
  CHECK(std::string(node) == "MLX5_1.2");
  // The other libraries were not touched.
  CHECK(rdmadl_lib_state(RDMADL_LIB_EFA) == RDMADL_STATE_NOT_LOADED);
  CHECK(rdmadl_lib_state(RDMADL_LIB_IBUMAD) == RDMADL_STATE_NOT_LOADED);
}

TEST_CASE("fake_dv: an older provider library binds its nodes, newer calls fail as documented") {
  CHECK(rdmadl_lib_load(RDMADL_LIB_MLX5) == 0);
  CHECK(rdmadl_lib_state(RDMADL_LIB_MLX5) == RDMADL_STATE_PARTIAL);
  CHECK(std::string(rdmadl_lib_version_node(RDMADL_LIB_MLX5)) == "MLX5_1.10");
  CHECK(rdmadl_symbol_status("mlx5dv_query_device", nullptr) == RDMADL_SYMBOL_RESOLVED);
  CHECK(rdmadl_symbol_status("mlx5dv_devx_uar_export_dmabuf_fd", nullptr) == RDMADL_SYMBOL_MISSING);
  errno = 0;
  CHECK(mlx5dv_devx_uar_export_dmabuf_fd(nullptr) == -1); // MLX5_1.26, M1
  CHECK(errno == EOPNOTSUPP);
  errno = 0;
  CHECK(__mlx5dv_create_flow(nullptr, nullptr, 0, nullptr, 0) == nullptr); // MLX5_1.25.1
  CHECK(errno == EOPNOTSUPP);
  mlx5dv_context attrs{};
  errno = 0;
  CHECK(mlx5dv_query_device(nullptr, &attrs) == 0); // bound: the fake's answer
  CHECK(errno == 0);
}

TEST_CASE("fake_dv: a provider library missing one symbol fails only that one") {
  CHECK(rdmadl_lib_load(RDMADL_LIB_MLX5) == 0);
  CHECK(rdmadl_lib_state(RDMADL_LIB_MLX5) == RDMADL_STATE_PARTIAL);
  REQUIRE(rdmadl_lib_missing_count(RDMADL_LIB_MLX5) == 1);
  CHECK(std::string(rdmadl_lib_missing_symbol(RDMADL_LIB_MLX5, 0)) == "mlx5dv_query_device");
  mlx5dv_context attrs{};
  errno = 0;
  CHECK(mlx5dv_query_device(nullptr, &attrs) == EOPNOTSUPP); // ERRNO
  CHECK(errno == EOPNOTSUPP);
  errno = 0;
  CHECK(!mlx5dv_is_supported(nullptr));
  CHECK(errno == 0);
}

TEST_CASE("fake_dv: a provider library needing another IBVERBS_PRIVATE node is refused") {
  const std::string need = env("FAKE_DV_NEED"), have = env("FAKE_DV_HAVE");
  errno = 0;
  CHECK(rdmadl_lib_load(RDMADL_LIB_MLX5) == EOPNOTSUPP);
  CHECK(errno == 0);
  CHECK(rdmadl_lib_state(RDMADL_LIB_MLX5) == RDMADL_STATE_INCOMPATIBLE);
  const std::string why = error_of(RDMADL_LIB_MLX5);
  CAPTURE(why);
  CHECK(why.find("from another rdma-core release") != std::string::npos);
  CHECK(why.find("needs " + need) != std::string::npos);
  CHECK(why.find("has " + have) != std::string::npos);
  // Refused before dlopen: nothing of it is in the process.
  CHECK(!mapped(env("RDMADL_MLX5_PATH")));
  errno = 0;
  CHECK(!mlx5dv_is_supported(nullptr));
  CHECK(errno == EOPNOTSUPP);
}

TEST_CASE("fake_dv: a provider library beside libibverbs, of its release, is found there") {
  CHECK(rdmadl_lib_load(RDMADL_LIB_MLX5) == 0);
  CHECK(rdmadl_lib_state(RDMADL_LIB_MLX5) == RDMADL_STATE_LOADED);
  std::string ibv = rdmadl_lib_path(RDMADL_LIB_IBVERBS);
  std::string mlx5 = rdmadl_lib_path(RDMADL_LIB_MLX5);
  CHECK(mlx5 == ibv.substr(0, ibv.rfind('/')) + "/libmlx5.so.1");
  CHECK(std::string(rdmadl_lib_requested(RDMADL_LIB_MLX5)) == "libmlx5.so.1");
}

TEST_CASE("fake_dv: libibumad loads on its own, without libibverbs") {
  CHECK(rdmadl_load() == EOPNOTSUPP);
  CHECK(rdmadl_lib_state(RDMADL_LIB_MLX5) == RDMADL_STATE_SKIPPED);
  CHECK(error_of(RDMADL_LIB_MLX5) == "not loaded because libibverbs is unusable");
  errno = 0;
  CHECK(umad_init() == 0);
  CHECK(errno == 0);
  CHECK(rdmadl_lib_state(RDMADL_LIB_IBUMAD) == RDMADL_STATE_PARTIAL);
  CHECK(std::string(rdmadl_lib_version_node(RDMADL_LIB_IBUMAD)) == "IBUMAD_1.2");
  errno = 0;
  CHECK(umad_open_smi_port(nullptr, 0) < 0); // IBUMAD_1.3
  CHECK(errno == EOPNOTSUPP);
  CHECK(std::string(umad_class_str(0)) == "fake"); // bound: the fake's string
}

TEST_CASE("fake_dv: RDMADL_DISABLE covers the lazily loaded libraries") {
  CHECK(rdmadl_lib_load(RDMADL_LIB_IBUMAD) == EOPNOTSUPP);
  CHECK(rdmadl_lib_state(RDMADL_LIB_IBUMAD) == RDMADL_STATE_DISABLED);
  CHECK(rdmadl_lib_state(RDMADL_LIB_MLX5) == RDMADL_STATE_DISABLED);
  errno = 0;
  CHECK(umad_init() == -1);
  CHECK(errno == EOPNOTSUPP);
  CHECK(std::string(umad_class_str(UMAD_CLASS_SUBN_LID_ROUTED)) == "Subn");
  CHECK(!mapped(env("RDMADL_IBUMAD_PATH")));
}

TEST_CASE("fake_dv: a garbage file at a provider override is a failed load, not a crash") {
  CHECK(rdmadl_lib_load(RDMADL_LIB_MLX5) == EOPNOTSUPP);
  CHECK(rdmadl_lib_state(RDMADL_LIB_MLX5) == RDMADL_STATE_LOAD_FAILED);
  CHECK(error_of(RDMADL_LIB_MLX5).find("is not an ELF file") != std::string::npos);
  errno = 0;
  CHECK(!mlx5dv_is_supported(nullptr));
  CHECK(errno == EOPNOTSUPP);
}

TEST_CASE("fake_dv: threads racing into the first call load the library once") {
  REQUIRE(rdmadl_load() == 0);
  std::atomic<int> go{0}, wrong{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; i++)
    threads.emplace_back([&] {
      while (!go.load())
        std::this_thread::yield();
      errno = 0;
      if (mlx5dv_is_supported(nullptr) || errno != 0 ||
          rdmadl_lib_state(RDMADL_LIB_MLX5) != RDMADL_STATE_LOADED)
        wrong++;
    });
  go = 1;
  for (auto &t : threads)
    t.join();
  CHECK(wrong == 0);
  CHECK(rdmadl_lib_missing_count(RDMADL_LIB_MLX5) == 0);
}
