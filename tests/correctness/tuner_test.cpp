// The SpMM format tuner (tune/spmm.hpp; the SpMV schedule tuner, tune/spmv.hpp, at the end): whatever it chooses computes A X (every candidate
// forced in turn, on every test shape, blocked FEM-like operators and the real matrices,
// against the CSR loop); the choice is the fastest measured candidate, the default unless another
// is TuneOptions::min_gain times faster; records are written,
// reused and keyed on the structure (not the values) and the feature size; broken record
// files and bad calls raise typed errors. Timing itself is not tested (benchmarks do that):
// the tests check that the choice is consistent with what was measured.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>

#include <cstdio>
#include <fstream>
#include <limits>

#include <sys/stat.h>
#include <unistd.h>

#include "correctness/correctness_support.hpp"
#include "spindle/tune.hpp"

using namespace spindle_test;
namespace sp = spindle;
namespace tune = spindle::tune;

namespace {

// The choice of a plan whose default (the first candidate) was measured: the fastest median,
// unless that is another candidate not min_gain times faster than the default — then the default.
template <class Plan>
void check_choice(const Plan& plan, double min_gain) {
  const auto& cs = plan.candidates();
  REQUIRE(!cs.empty());
  REQUIRE(cs.front().measured);
  double best = std::numeric_limits<double>::infinity();
  for (const auto& c : cs)
    if (c.measured) best = std::min(best, c.ms);
  const auto chosen = std::find_if(cs.begin(), cs.end(), [&](const auto& c) { return c.name == plan.choice(); });
  REQUIRE(chosen != cs.end());
  REQUIRE(chosen->measured);
  INFO("choice " << chosen->name << " " << chosen->ms << " ms, default " << cs.front().ms << " ms, best " << best);
  if (chosen == cs.begin()) {
    CHECK((cs.front().ms == best || best * min_gain > cs.front().ms));
  } else {
    CHECK(chosen->ms == best);
    CHECK(chosen->ms * min_gain <= cs.front().ms);
  }
}

// Fast tuning for tests: one timed call per candidate, no progress bar.
tune::TuneOptions quick() {
  tune::TuneOptions o;
  o.progress = false;
  o.min_seconds = 0;
  o.min_reps = 1;
  o.max_reps = 1;
  return o;
}

// The adjacency of `m` plus its diagonal, each entry a dense d x d block (kron_blocks): the
// operator of a vector-valued finite-element problem on m's mesh (exact d x d blocks, aligned).
template <class T>
sp::Csr<T> blocked(const sp::Csr<T>& m, int d) {
  return sp::kron_blocks(m, d, [](int i, int j, std::int64_t c) { return 1.0 / (1 + i + j + (c % 5)); });
}

const std::vector<std::string>& all_candidates() {
  static const std::vector<std::string> n{"csr", "bsr 2x2", "bsr 3x3", "bsr 4x4", "bsr 5x5", "bsr 6x6", "bsr 8x8", "ell"};
  return n;
}

// Y = plan(X) against the CSR loop; Y starts as NaN.
template <class T>
void check_plan(const tune::TunedSpmm<T>& plan, const sp::Csr<T>& a, std::int64_t k, const std::string& what) {
  const auto x = sp::Tensor<T>::random({a.cols(), k}, 11, -1, 1);
  auto y = sp::Tensor<T>::full({a.rows(), k}, std::numeric_limits<T>::quiet_NaN());
  plan(x, y);
  check_close<T>(ref_spmm(a, x.values(), k), y.values(), what + " (" + plan.choice() + ")");
}

// Every candidate forced, then the free choice (check_choice).
// The candidates for `a`: all_candidates() and hyb(1, k) with the k the tuner derives from
// a's degree distribution (a power of two in [4, 256]).
template <class T>
std::vector<std::string> candidates_for(const sp::Csr<T>& a, std::int64_t k) {
  std::vector<std::string> names = all_candidates();
  std::string hyb;
  int schedules = 0;
  for (const auto& c : tune::detail::spmm_candidates(a, k)) {
    if (c.name.rfind("hyb(1,", 0) == 0) hyb = c.name;
    if (c.name.rfind("csr split(", 0) == 0) names.push_back(c.name), ++schedules;
  }
  // CSR schedules: one per tile width of 128, 64, 32, 16, 8 no wider than K, at most three.
  const bool any = a.rows() > 0 && a.cols() > 0 && a.nnz() > 0;
  CHECK(schedules == (!any ? 0 : k >= 32 ? 3 : k >= 16 ? 2 : k >= 8 ? 1 : 0));
  if (a.rows() > 0 && a.cols() > 0 && a.nnz() > 0) {
    REQUIRE(!hyb.empty());
    const std::int64_t width = std::stoll(hyb.substr(6));
    CHECK((width >= 4 && width <= 256 && std::has_single_bit(static_cast<std::uint64_t>(width))));
  }
  names.push_back(hyb.empty() ? "hyb(1,32)" : hyb);
  return names;
}

template <class T>
void check_all_candidates(const sp::Csr<T>& a, std::int64_t k, const std::string& what) {
  for (const auto& name : candidates_for(a, k)) {
    auto o = quick();
    o.only = {name};
    if (a.rows() == 0 || a.cols() == 0 || a.nnz() == 0) {  // only CSR is a candidate then
      if (name != "csr") {
        CHECK_THROWS_AS(tune::tune_spmm(a, k, o), sp::UserError);
        continue;
      }
    }
    INFO(what << " forced " << name << " k=" << k);
    const auto plan = tune::tune_spmm(a, k, o);
    REQUIRE(plan.choice() == name);
    check_plan(plan, a, k, what);
  }
  auto o = quick();
  o.prune_above = std::numeric_limits<double>::infinity();
  o.max_measured = 100;
  const auto plan = tune::tune_spmm(a, k, o);
  int measured = 0;
  for (const auto& c : plan.candidates()) measured += c.measured;
  CHECK(measured == static_cast<int>(plan.record().times_ms.size()));
  check_choice(plan, o.min_gain);
  check_plan(plan, a, k, what);
}

std::string temp_dir() {
  char tmpl[] = "/tmp/spindle-tuner-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  return tmpl;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

}  // namespace

TEMPLATE_TEST_CASE("tuned SpMM computes A X whichever format it runs", "[correctness][tuner]", float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(matrix_shapes()));
  INFO(s << " " << dtype_label<T>());
  const auto a = random_csr<T>(s, 31);
  for (std::int64_t k : {0, 1, 7, 33}) check_all_candidates(a, k, s.name);
}

TEST_CASE("tuned SpMM on blocked operators and real matrices", "[correctness][tuner][graphs]") {
  const auto mesh = random_csr<float>(Shape{"mesh", 301, 301, 6}, 5);
  for (int d : {2, 3, 4}) {
    const auto a = blocked(mesh, d);
    check_all_candidates(a, 16, "blocked d=" + std::to_string(d));
    // Exact aligned blocks: the d x d BSR has no padding and the model ranks it above CSR.
    const auto plan = tune::tune_spmm(a, 16, quick());
    for (const auto& c : plan.candidates())
      if (c.name == "bsr " + std::to_string(d) + "x" + std::to_string(d)) {
        CHECK(c.padding == 1.0);
        CHECK(c.predicted < 1.0);
      }
  }
  for (const char* file : {"matrices/bcsstk25.mtx.gz", "gnn/cora.mtx.gz"}) {
    auto a = load_graph<float>(file);
    if (!a) {
      WARN("skipping " << file << ": not found under " << data_dir());
      continue;
    }
    const auto plan = tune::tune_spmm(*a, 32, quick());
    check_plan(plan, *a, 32, file);
    check_plan(plan, *a, 5, file);  // any K runs, whatever K it was tuned for
  }
}

TEST_CASE("count_blocks is the block count of Bsr::from_csr", "[correctness][tuner]") {
  for (const auto& s : matrix_shapes()) {
    const auto a = random_csr<float>(s, 3);
    for (std::int64_t br : {1, 2, 3, 8})
      for (std::int64_t bc : {1, 2, 5}) {
        INFO(s << " " << br << "x" << bc);
        CHECK(tune::count_blocks(a, br, bc) == sp::Bsr<float>::from_csr(a, br, bc).nnz_blocks());
      }
  }
}

TEST_CASE("tuning records: written once, reused, keyed on structure and feature size", "[correctness][tuner]") {
  const std::string dir = temp_dir();
  const std::string file = dir + "/records.jsonl";
  const auto a = random_csr<float>(Shape{"irregular", 257, 190, 9, 0.2}, 8);
  auto o = quick();
  o.record_file = file;

  const auto first = tune::tune_spmm(a, 16, o);
  CHECK_FALSE(first.from_record());
  REQUIRE(tune::read_records(file).size() == 1);
  const auto rec = tune::read_records(file)[0];
  CHECK(rec.choice == first.choice());
  CHECK(rec.fingerprint == tune::csr_fingerprint(a));
  CHECK(rec.feature == 16);
  CHECK(rec.rows == 257);
  CHECK(rec.nnz == a.nnz());
  CHECK(rec.times_ms.size() >= 1);

  // The same structure with other values: reused, no new line, and it computes the new A.
  const auto b = with_random_values(a, 99);
  CHECK(tune::csr_fingerprint(b) == tune::csr_fingerprint(a));
  const auto again = tune::tune_spmm(b, 16, o);
  CHECK(again.from_record());
  CHECK(again.choice() == first.choice());
  CHECK(tune::read_records(file).size() == 1);
  check_plan(again, b, 16, "from record");

  // Another K, another structure: tuned and appended.
  CHECK_FALSE(tune::tune_spmm(a, 17, o).from_record());
  auto idx = std::vector<std::int32_t>(a.indices().begin(), a.indices().end());
  std::vector<std::int32_t> ptr(a.indptr().begin(), a.indptr().end());
  std::vector<float> val(a.values().begin(), a.values().end());
  std::size_t q = 0;  // an entry whose column can move up by one
  for (; q < idx.size(); ++q) {
    const auto row = static_cast<std::size_t>(std::upper_bound(ptr.begin(), ptr.end(), static_cast<std::int32_t>(q)) - ptr.begin() - 1);
    const bool last_in_row = q + 1 == static_cast<std::size_t>(ptr[row + 1]);
    const std::int32_t next = last_in_row ? 190 : idx[q + 1];
    if (idx[q] + 1 < next) break;
  }
  REQUIRE(q < idx.size());
  ++idx[q];
  const sp::Csr<float> c(257, 190, ptr, idx, val);
  CHECK(tune::csr_fingerprint(c) != tune::csr_fingerprint(a));
  CHECK_FALSE(tune::tune_spmm(c, 16, o).from_record());
  CHECK(tune::read_records(file).size() == 3);

  // A record naming a candidate this tuner does not have: CacheError, not a silent retune.
  auto bad = rec;
  bad.choice = "hyb 9x9";
  tune::append_record(file, bad);
  CHECK_THROWS_AS(tune::tune_spmm(a, 16, o), sp::CacheError);
  std::remove(file.c_str());
  ::rmdir(dir.c_str());
}

TEST_CASE("tuning records: round trip and broken files", "[correctness][tuner][errors]") {
  tune::TuningRecord r;
  r.kernel = "spmm";
  r.dtype = "f32";
  r.index = "i32";
  r.rows = 3, r.cols = 4, r.nnz = 5, r.feature = 32, r.threads = 2;
  r.fingerprint = "ab\"c\\d";
  r.machine = "m\n1";
  r.choice = "bsr 4x4";
  r.tuning_s = 1.5;
  r.times_ms = {{"csr", 2.5}, {"bsr 4x4", 1.25}};
  const auto back = tune::parse_record_line(tune::to_json_line(r), "test");
  CHECK(back.same_key(r));
  CHECK(back.choice == r.choice);
  CHECK(back.fingerprint == r.fingerprint);
  CHECK(back.machine == r.machine);
  REQUIRE(back.times_ms.size() == 2);
  CHECK(back.times_ms[1].first == "bsr 4x4");
  CHECK(back.times_ms[1].second == 1.25);

  const std::string dir = temp_dir();
  const std::string file = dir + "/records.jsonl";
  auto message_of = [&](const std::string& text) {
    write_text(file, text);
    try {
      tune::read_records(file);
    } catch (const sp::CacheError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string good = tune::to_json_line(r) + "\n";
  CHECK(tune::read_records(dir + "/missing.jsonl").empty());
  write_text(file, good + "\n" + good);
  CHECK(tune::read_records(file).size() == 2);
  CHECK_THAT(message_of(good + "{\"version\":1,\"kernel\":\"spmm\"}\n"), Catch::Contains("line 2") && Catch::Contains("\"dtype\" is missing"));
  CHECK_THAT(message_of(good + "{\"version\":1,\"kernel\":\"spmm\"\n"), Catch::Contains("line 2") && Catch::Contains("expected ','"));
  CHECK_THAT(message_of(good + "not json\n"), Catch::Contains("line 2") && Catch::Contains("expected '{'"));
  std::string wrong_type = good;
  wrong_type.replace(wrong_type.find("\"rows\":3"), 8, "\"rows\":\"3\"");
  CHECK_THAT(message_of(wrong_type), Catch::Contains("line 1") && Catch::Contains("\"rows\" must be an integer"));
  std::string version = good;
  version.replace(version.find("\"version\":1"), 11, "\"version\":7");
  CHECK_THAT(message_of(version), Catch::Contains("version 7"));
  CHECK_THAT(message_of(good.substr(0, good.size() - 3) + "\n"), Catch::Contains("line 1"));
  CHECK_THAT(message_of(good.substr(0, good.size() - 1) + " x\n"), Catch::Contains("text after the object"));
  std::string dup = good;
  dup.insert(1, "\"nnz\":5,");
  CHECK_THAT(message_of(dup), Catch::Contains("appears twice"));
  CHECK_THAT(message_of(std::string("{\"version\":1,\"bogus\":1}\n")), Catch::Contains("unknown field \"bogus\""));
  // Not a regular file.
  CHECK_THROWS_AS(tune::read_records(dir), sp::CacheError);
  // A broken file is reported by the tuner too, and left as it was.
  write_text(file, "garbage\n");
  auto o = quick();
  o.record_file = file;
  const auto a = random_csr<float>(Shape{"1x1", 1, 1, 1}, 1);
  CHECK_THROWS_AS(tune::tune_spmm(a, 4, o), sp::CacheError);
  {
    std::ifstream f(file);
    std::string content((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    CHECK(content == "garbage\n");
  }
  std::remove(file.c_str());
  ::rmdir(dir.c_str());
}

TEST_CASE("tuned SpMM: bad calls raise typed errors", "[correctness][tuner][errors]") {
  const auto a = random_csr<float>(Shape{"tall", 130, 7, 3}, 2);
  CHECK_THROWS_AS(tune::tune_spmm(a, -1, quick()), sp::ShapeError);
  auto o = quick();
  o.only = {"hyb"};
  CHECK_THROWS_WITH(tune::tune_spmm(a, 4, o), Catch::Contains("'hyb'") && Catch::Contains("candidates: csr, bsr 2x2"));
  o.only = {"ell"};  // named: measured even where the model would prune it
  o.prune_above = 0.5;
  CHECK(tune::tune_spmm(a, 4, o).choice() == "ell");
  // ... but never built beyond max_padding slots per nonzero: one row of 400 among 2000 rows of
  // one makes ELL store 2000 x 400 slots for 2399 nonzeros (333 per nonzero).
  {
    std::vector<std::int32_t> ptr{0}, idx;
    for (std::int32_t r = 0; r < 2000; ++r) {
      const std::int32_t n = r == 7 ? 400 : 1;
      for (std::int32_t c = 0; c < n; ++c) idx.push_back(r == 7 ? c : r % 500);
      ptr.push_back(static_cast<std::int32_t>(idx.size()));
    }
    const sp::Csr<float, std::int32_t> skew(2000, 500, ptr, idx, std::vector<float>(idx.size(), 1.0f));
    auto s = quick();
    s.only = {"ell"};
    CHECK_THROWS_WITH(tune::tune_spmm(skew, 4, s),
                      Catch::Contains("too large to build") && Catch::Contains("ell: not built: 333.5 stored slots"));
    s.only = {"ell", "csr"};
    const auto plan_skew = tune::tune_spmm(skew, 4, s);
    CHECK(plan_skew.choice() == "csr");
    CHECK_THAT(plan_skew.report(), Catch::Contains("not built"));
    s.max_padding = 0.5;
    CHECK_THROWS_AS(tune::tune_spmm(skew, 4, s), sp::UserError);
  }
  o = quick();
  o.min_reps = 0;
  CHECK_THROWS_AS(tune::tune_spmm(a, 4, o), sp::UserError);
  const auto plan = tune::tune_spmm(a, 4, quick());
  auto x = sp::Tensor<float>::zeros({7, 4}), y = sp::Tensor<float>::zeros({130, 4});
  auto wrong_x = sp::Tensor<float>::zeros({8, 4}), wrong_y = sp::Tensor<float>::zeros({130, 5});
  CHECK_NOTHROW(plan(x, y));
  CHECK_THROWS_AS(plan(wrong_x, y), sp::ShapeError);
  CHECK_THROWS_AS(plan(x, wrong_y), sp::ShapeError);
}

// The SpMV schedule tuner (tune/spmv.hpp): every candidate schedule forced in turn computes
// A x (on every test shape, in f32 and f64, and on real matrices); the free choice follows
// check_choice; records are reused; bad calls raise typed errors.
namespace {

template <class T>
void check_spmv_plan(const tune::TunedSpmv<T>& plan, const sp::Csr<T>& a, const std::string& what) {
  const auto x = sp::Tensor<T>::random({a.cols()}, 13, -1, 1);
  auto y = sp::Tensor<T>::full({a.rows()}, std::numeric_limits<T>::quiet_NaN());
  plan(x, y);
  check_close<T>(ref_spmv(a, x.values()), y.values(), what + " (" + plan.choice() + ")");
}

template <class T>
void check_all_spmv_candidates(const sp::Csr<T>& a, const std::string& what) {
  auto all = quick();
  all.prune_above = std::numeric_limits<double>::infinity();
  all.max_measured = 100;
  const auto plan = tune::tune_spmv(a, all);
  for (const auto& c : plan.candidates()) CHECK(c.measured);  // nothing pruned, nothing left out
  check_choice(plan, all.min_gain);
  check_spmv_plan(plan, a, what);
  CHECK(plan.candidates().size() == (a.nnz() == 0 || a.rows() == 0 || a.cols() == 0 ? 1u : 6u));
  for (const auto& c : plan.candidates()) {
    auto o = quick();
    o.only = {c.name};
    INFO(what << " forced " << c.name);
    const auto forced = tune::tune_spmv(a, o);
    REQUIRE(forced.choice() == c.name);
    check_spmv_plan(forced, a, what);
  }
}

}  // namespace

TEMPLATE_TEST_CASE("tuned SpMV computes A x whichever schedule it runs", "[correctness][tuner]", float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(matrix_shapes()));
  INFO(s << " " << dtype_label<T>());
  check_all_spmv_candidates(random_csr<T>(s, 41), s.name);
}

TEST_CASE("tuned SpMV on real matrices and the model preferring partial sums on long rows only", "[correctness][tuner][graphs]") {
  for (const char* file : {"matrices/bcsstk25.mtx.gz", "gnn/cora.mtx.gz"}) {
    auto a = load_graph<float>(file);
    if (!a) {
      WARN("skipping " << file << ": not found under " << data_dir());
      continue;
    }
    check_all_spmv_candidates(*a, file);
  }
  // Rows of 64 nonzeros: 4 partial sums cut the chain of additions by about 4 in the model;
  // rows of 1: the partial sums only add work.
  const auto dense_rows = random_csr<float>(Shape{"long rows", 200, 400, 64}, 3);
  const auto one_per_row = random_csr<float>(Shape{"short rows", 400, 400, 1}, 3);
  const auto candidates_long = tune::detail::spmv_candidates(dense_rows);
  const auto candidates_short = tune::detail::spmv_candidates(one_per_row);
  REQUIRE(candidates_long.size() == 6);
  CHECK(candidates_long[2].name == "csr rfactor(\"j\", 4).parallel(\"i\")");
  CHECK(candidates_long[2].cost < 0.5 * candidates_long[0].cost);
  // rfactor's partial sums only add work on rows of one entry (hyb, last, has no row loop).
  REQUIRE(candidates_short.size() == 6);
  for (std::size_t c = 1; c + 1 < candidates_short.size(); ++c) CHECK(candidates_short[c].cost > candidates_short[0].cost);
  // hyb(1, k): k a power of two in [4, 256]; its padding is what Hyb::from_csr stores.
  for (const auto* a : {&dense_rows, &one_per_row}) {
    const auto& h = a == &dense_rows ? candidates_long.back() : candidates_short.back();
    REQUIRE(h.name.rfind("hyb(1,", 0) == 0);
    const std::int64_t k = std::stoll(h.name.substr(6));
    CHECK(std::has_single_bit(static_cast<std::uint64_t>(k)));
    CHECK(h.padding == Approx(sp::Hyb<float>::from_csr(*a, 1, k).padding_ratio()));
  }
}

TEST_CASE("tuned SpMV reuses records and raises typed errors on bad calls", "[correctness][tuner][errors]") {
  const std::string dir = temp_dir();
  const std::string file = dir + "/spmv.jsonl";
  const auto a = random_csr<float>(Shape{"square", 97, 97, 9}, 4);
  auto o = quick();
  o.record_file = file;
  const auto first = tune::tune_spmv(a, o);
  CHECK_FALSE(first.from_record());
  const auto again = tune::tune_spmv(a, o);
  CHECK(again.from_record());
  CHECK(again.choice() == first.choice());
  CHECK(again.record().kernel == "spmv");
  check_spmv_plan(again, a, "from the record");
  // An SpMM record of the same matrix is another key: SpMV tunes anew.
  CHECK_FALSE(tune::tune_spmm(a, 1, o).from_record());
  std::remove(file.c_str());
  ::rmdir(dir.c_str());

  auto bad = quick();
  bad.only = {"csr rfactor(\"j\", 3)"};
  CHECK_THROWS_WITH(tune::tune_spmv(a, bad), Catch::Contains("none of which is a candidate") &&
                                                  Catch::Contains("csr rfactor(\"j\", 2).parallel(\"i\")"));
  bad = quick();
  bad.max_reps = 0;
  CHECK_THROWS_AS(tune::tune_spmv(a, bad), sp::UserError);
  const auto plan = tune::tune_spmv(a, quick());
  auto x = sp::Tensor<float>::zeros({97}), y = sp::Tensor<float>::zeros({97});
  auto wrong = sp::Tensor<float>::zeros({96});
  auto matrix = sp::Tensor<float>::zeros({97, 1});
  CHECK_NOTHROW(plan(x, y));
  CHECK_THROWS_AS(plan(wrong, y), sp::ShapeError);
  CHECK_THROWS_AS(plan(x, wrong), sp::ShapeError);
  CHECK_THROWS_AS(plan(matrix, y), sp::ShapeError);
}

TEST_CASE("the tuner keeps the default unless another candidate is min_gain times faster", "[correctness][tuner]") {
  using tune::detail::choose;
  CHECK(choose({1.0, 0.99}, true, 1.03) == 0);  // within the margin: the default
  CHECK(choose({1.0, 0.97}, true, 1.03) == 1);  // 0.97 * 1.03 <= 1
  CHECK(choose({1.0, 0.98, 0.90}, true, 1.03) == 2);
  CHECK(choose({1.0, 0.90, 0.90}, true, 1.03) == 1);  // ties: the earlier
  CHECK(choose({1.0, 1.2, 1.5}, true, 1.03) == 0);
  CHECK(choose({0.5}, true, 1.03) == 0);
  CHECK(choose({1.0, 0.99}, false, 1.03) == 1);  // no default measured (TuneOptions::only): the fastest
  CHECK(choose({1.0, 0.99}, true, 1.0) == 1);    // min_gain 1: the fastest
  CHECK(tune::TuneOptions{}.min_gain == 1.03);
}

TEST_CASE("the tuner times its candidates in interleaved rounds within min_reps and max_reps", "[correctness][tuner]") {
  // Three candidates that log their calls (0, 1, 2), identical results. A checked first call
  // each, then per round an untimed lead-in and the round's share of the timed calls, the
  // candidates in a rotating order.
  using Run = std::function<void(sp::TensorView<const float>, sp::TensorView<float>)>;
  const auto a = random_csr<float>(Shape{"square", 5, 5, 2}, 1);
  auto run_cases = [&](int min_reps, int max_reps) {
    std::vector<int> log;
    std::vector<tune::detail::Candidate<Run>> cands;
    for (int c = 0; c < 3; ++c)
      cands.push_back({"c" + std::to_string(c), 1.0, 1.0, [&log, c]() -> Run {
                         return [&log, c](sp::TensorView<const float> x, sp::TensorView<float> y) {
                           log.push_back(c);
                           for (std::int64_t r = 0; r < y.dim(0); ++r) y.data()[r] = x.data()[r];
                         };
                       }});
    auto o = quick();
    o.min_seconds = 0;
    o.min_reps = min_reps;
    o.max_reps = max_reps;
    auto rec = tune::detail::record_key("test", a, 1);
    auto sel = tune::detail::select<float, Run>(cands, o, rec, "test", "test", {5}, {5});
    for (const auto& r : sel.results) CHECK(r.measured);
    return log;
  };
  SECTION("min_reps 8: 4 rounds of a lead-in and 2 timed calls each") {
    const auto log = run_cases(8, 20);
    std::vector<int> want = {0, 1, 2};  // the checked first calls
    for (int k = 0; k < 4; ++k)
      for (int m = 0; m < 3; ++m) want.insert(want.end(), 3, (m + k) % 3);
    CHECK(log == want);
  }
  SECTION("max_reps 2: two rounds, one timed call each") {
    const auto log = run_cases(2, 2);
    CHECK(log == std::vector<int>{0, 1, 2, 0, 0, 1, 1, 2, 2, 1, 1, 2, 2, 0, 0});
  }
  SECTION("min_reps 3 of max 200: rounds of 1, 1, 1 and none in the fourth") {
    const auto log = run_cases(3, 200);
    // ceil(3 (k + 1) / 4) calls by the end of round k: 1, 2, 3, 3 (with min_seconds 0 the last
    // round has nothing to time and makes no call, not even a lead-in).
    std::vector<int> want = {0, 1, 2};
    for (int k = 0; k < 3; ++k)
      for (int m = 0; m < 3; ++m) want.insert(want.end(), 2, (m + k) % 3);
    CHECK(log == want);
  }
}
