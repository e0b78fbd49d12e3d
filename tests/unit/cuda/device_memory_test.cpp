// Device containers: StorageViews of DeviceTensor / DeviceCsr as kernel arguments (no GPU
// needed for empty ones), and - with a GPU - host <-> device round trips (sync and on a
// stream), dtype / shape checks naming both sides, and deterministic freeing.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "cuda_test_support.hpp"
#include "spindle/format/storage_of.hpp"

using namespace spindle;
using namespace spindle::cuda;
using Catch::Contains;

static_assert(storage_argument<DeviceTensor<float>>);
static_assert(storage_argument<const DeviceTensor<double>&>);
static_assert(storage_argument<DeviceCsr<float>>);
static_assert(storage_argument<const DeviceCsr<float, std::int64_t>&>);

TEST_CASE("device memory: empty containers need no driver and describe themselves", "[cuda]") {
  DeviceBuffer b;
  CHECK(b.empty());
  CHECK(b.get() == 0);
  CHECK(b.context() == nullptr);
  b.upload(nullptr, 0);
  b.fill_zero();
  DeviceBuffer moved = std::move(b);
  CHECK(moved.size() == 0);

  DeviceTensor<float> t;
  CHECK(t.shape() == std::vector<std::int64_t>{0});
  StorageView s = storage_of(t);
  CHECK(s.on_device);
  CHECK(s.writable);
  CHECK(s.dtype == DType::f32);
  CHECK(std::string(s.kind) == "DeviceTensor");
  REQUIRE(s.levels.size() == 1);
  CHECK(s.levels[0].kind == LevelKind::dense_fixed);
  CHECK(s.levels[0].length == 0);
  const DeviceTensor<float>& ct = t;
  CHECK_FALSE(storage_of(ct).writable);

  DeviceCsr<double, std::int64_t> a;
  StorageView cs = storage_of(a);
  CHECK(cs.on_device);
  CHECK(cs.writable);
  CHECK(cs.dtype == DType::f64);
  CHECK(std::string(cs.kind) == "DeviceCsr");
  REQUIRE(cs.levels.size() == 2);
  CHECK(cs.levels[0].kind == LevelKind::dense_fixed);
  CHECK(cs.levels[1].kind == LevelKind::sparse_variable);
  CHECK(cs.levels[1].index_dtype == DType::i64);
  const auto& ca = a;
  CHECK_FALSE(storage_of(ca).writable);
  CHECK(a.description() == "DeviceCsr<f64,i64> 0x0 nnz=0");
}

TEMPLATE_TEST_CASE("device memory: DeviceTensor round trips (GPU)", "[cuda]", float, double, std::int32_t,
                   std::int64_t) {
  if (!cuda::test::gpu_ready()) return;
  std::vector<std::int64_t> shape = GENERATE(std::vector<std::int64_t>{}, std::vector<std::int64_t>{17},
                                             std::vector<std::int64_t>{3, 5}, std::vector<std::int64_t>{2, 3, 4},
                                             std::vector<std::int64_t>{0, 5});
  INFO("shape " << spindle::detail::shape_string(shape));
  auto host = Tensor<TestType>::random(shape, 11, -100, 100);
  auto d = DeviceTensor<TestType>::from_host(host);
  CHECK(d.shape() == shape);
  CHECK(d.to_host() == host);
  StorageView s = d.storage();
  CHECK(s.on_device);
  CHECK(s.data == reinterpret_cast<void*>(static_cast<std::uintptr_t>(d.device_ptr())));
  CHECK(s.value_count == host.size());

  CudaStream stream(CudaContext::process());
  auto other = Tensor<TestType>::random(shape, 12, -100, 100);
  d.copy_from_host(other, &stream);
  CHECK(d.to_host(&stream) == other);
  auto e = DeviceTensor<TestType>::from_host(host, &stream);
  stream.synchronize();
  d.copy_from(e);
  CHECK(d.to_host() == host);
  d.fill_zero(&stream);
  Tensor<TestType> back = Tensor<TestType>::full(shape, TestType(7));
  d.copy_to_host(back, &stream);
  stream.synchronize();
  CHECK(back == Tensor<TestType>::zeros(shape));
}

TEST_CASE("device memory: copies check dtype and shape, naming both sides (GPU)", "[cuda]") {
  if (!cuda::test::gpu_ready()) return;
  auto d = DeviceTensor<float>::zeros({3, 4});
  d.set_name("B");
  CHECK_THROWS_AS(d.copy_from_host(Tensor<float>::zeros({4, 3})), ShapeError);
  CHECK_THROWS_WITH(d.copy_from_host(Tensor<float>::zeros({4, 3})),
                    Contains("has shape [4, 3] but the device tensor DeviceTensor<f32> [3, 4] 'B' has shape [3, 4]"));
  Tensor<double> wrong = Tensor<double>::zeros({3, 4});
  CHECK_THROWS_AS(d.copy_from_host(wrong.storage()), DTypeError);
  CHECK_THROWS_WITH(d.copy_from_host(wrong.storage()), Contains("element type f64") && Contains("has f32"));
  auto csr = Csr<float>::random(3, 4, 2, 1);
  CHECK_THROWS_WITH(d.copy_from_host(csr.storage()), Contains("is not dense"));
  Tensor<float> out = Tensor<float>::zeros({3, 4});
  const Tensor<float>& read_only = out;
  CHECK_THROWS_WITH(d.copy_to_host(read_only.storage()), Contains("is read-only"));
  CHECK_THROWS_WITH(d.copy_from_host(d.storage()), Contains("is a device container"));
  CHECK_THROWS_AS(d.copy_from(DeviceTensor<float>::zeros({12})), ShapeError);
  CHECK_THROWS_AS(DeviceTensor<float>(std::vector<std::int64_t>(9, 1)), ShapeError);
  CHECK_THROWS_AS(DeviceTensor<float>({-1, 2}), ShapeError);
}

TEST_CASE("device memory: DeviceCsr round trips (GPU)", "[cuda]") {
  if (!cuda::test::gpu_ready()) return;
  RandomCsrOptions opts;
  opts.empty_row_fraction = 0.2;
  opts.shuffle_rows = GENERATE(false, true);
  auto host = Csr<float>::random(100, 80, 5, 3, opts);
  auto d = DeviceCsr<float>::from_host(host);
  CHECK(d.rows() == 100);
  CHECK(d.cols() == 80);
  CHECK(d.nnz() == host.nnz());
  CHECK(d.sorted() == host.sorted());
  Csr<float> back = d.to_host();
  CHECK(std::equal(back.indptr().begin(), back.indptr().end(), host.indptr().begin(), host.indptr().end()));
  CHECK(std::equal(back.indices().begin(), back.indices().end(), host.indices().begin(), host.indices().end()));
  CHECK(std::equal(back.values().begin(), back.values().end(), host.values().begin(), host.values().end()));

  StorageView s = d.storage();
  CHECK(s.on_device);
  CHECK(s.value_count == host.nnz());
  CHECK(s.levels[1].nnz == host.nnz());
  CHECK(s.levels[1].sorted == host.sorted());
  CHECK(s.levels[1].indptr == reinterpret_cast<const void*>(static_cast<std::uintptr_t>(d.indptr_ptr())));
  CHECK(s.levels[1].indices == reinterpret_cast<const void*>(static_cast<std::uintptr_t>(d.indices_ptr())));

  std::vector<float> values(static_cast<std::size_t>(host.nnz()));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  CudaStream stream(CudaContext::process());
  d.copy_values_from_host(values, &stream);
  CHECK(d.values_to_host(&stream) == values);
  std::vector<float> short_values(3);
  CHECK_THROWS_AS(d.copy_values_from_host(short_values), ShapeError);
  d.fill_values_zero();
  CHECK(d.values_to_host() == std::vector<float>(values.size(), 0.0f));

  auto empty = Csr<float>::random(10, 10, 0, 1);
  REQUIRE(empty.nnz() == 0);
  CHECK(DeviceCsr<float>::from_host(empty).to_host().nnz() == 0);
}

TEST_CASE("device memory: freed when the owner goes (GPU)", "[cuda]") {
  if (!cuda::test::gpu_ready()) return;
  CudaContext& ctx = CudaContext::process();
  const std::int64_t n = 64ll << 20;  // 256 MiB of floats
  // Free memory is the whole GPU's: other processes (ctest -j) allocate and free beside
  // this one, so an attempt where the others moved it by more than the margins is retried.
  bool taken = false, returned = false;
  for (int attempt = 0; attempt < 8 && !(taken && returned); ++attempt) {
    auto before = ctx.memory_info().first;
    {
      DeviceTensor<float> big({n}, ctx);
      taken = ctx.memory_info().first + (200ull << 20) <= before;
      DeviceTensor<float> moved = std::move(big);
      CHECK(big.device_ptr() == 0);
    }
    returned = ctx.memory_info().first + (16ull << 20) >= before;
  }
  CHECK(taken);
  CHECK(returned);
}
