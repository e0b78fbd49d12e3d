// Input-oblivious pruning of compositions (GRANII, seed 004 §IV-C "Pruning Associations").
//
// Two scenarios: the input embedding is wider than the output (K_in > K_out) and narrower.
// In a scenario, composition Y makes X unprofitable when Y's primitives can be matched one
// to one onto X's primitives of the same kind with each of Y's no larger than its partner
// (X does everything Y does, on matrices at least as large, and possibly more); for two
// compositions with the same primitives and sizes the later one is the duplicate. A
// composition unprofitable in every scenario is pruned; the rest are promoted and remember
// the scenarios where they may win (the seed's "<" / ">" annotations).
//
// Sizes are compared at representative symbol values of each scenario; only sizes of the
// same primitive kind are compared, and those differ by the embedding sizes.
#pragma once

#include <algorithm>
#include <array>
#include <map>
#include <string>
#include <vector>

#include "spindle/gnn/associate.hpp"

namespace spindle::gnn {

struct Scenario {
  std::string name;
  std::map<std::string, double> at;  // symbol values
};

// K_in > K_out and K_in < K_out with a graph of average degree 8 (M: the rows of a
// rectangular graph, an RGCN relation's support, as many as its columns here).
inline std::vector<Scenario> default_scenarios() {
  return {{"K_in > K_out", {{"N", 1000}, {"M", 1000}, {"E", 8000}, {"K_in", 64}, {"K_out", 32}}},
          {"K_in < K_out", {{"N", 1000}, {"M", 1000}, {"E", 8000}, {"K_in", 32}, {"K_out", 64}}}};
}

namespace detail {

// A composition's primitive sizes in one scenario, per primitive kind, largest first.
struct Signature {
  std::array<std::vector<double>, kPrimitiveCount> sizes;
};

inline Signature signature(const Composition& c, const Scenario& s) {
  Signature g;
  for (const auto& [p, cost] : c.primitives()) g.sizes[static_cast<std::size_t>(p)].push_back(cost.eval(s.at));
  for (auto& v : g.sizes) std::sort(v.rbegin(), v.rend());
  return g;
}

// Does y make x unprofitable (ties broken by position)?
inline bool dominates(const Signature& y, std::size_t y_pos, const Signature& x, std::size_t x_pos) {
  bool strict = false;
  for (std::size_t p = 0; p < kPrimitiveCount; ++p) {
    const auto& mine = y.sizes[p];
    const auto& theirs = x.sizes[p];
    if (theirs.size() < mine.size()) return false;
    for (std::size_t k = 0; k < mine.size(); ++k) {
      if (mine[k] > theirs[k]) return false;
      if (mine[k] < theirs[k]) strict = true;
    }
    if (theirs.size() > mine.size()) strict = true;
  }
  return strict || y_pos < x_pos;
}

}  // namespace detail

struct RankedComposition {
  Composition composition;
  bool promoted = false;
  std::vector<std::string> profitable_in;  // scenarios where nothing dominates it
};

// A symbol a scenario does not bind takes the value of the symbol with its first letter
// (E1, E2: the stored counts of further sparse matrices, read as E); ShapeError otherwise.
inline Scenario complete_scenario(Scenario s, const std::vector<Composition>& all) {
  for (const Composition& c : all)
    for (const auto& [p, size] : c.primitives())
      for (const Monomial& m : size.terms())
        for (const auto& [sym, pow] : m.powers) {
          if (s.at.count(sym)) continue;
          auto base = s.at.find(sym.substr(0, 1));
          SPINDLE_CHECK(base != s.at.end(), ShapeError, "gnn: scenario '", s.name, "' gives no value for '",
                        sym, "'");
          s.at[sym] = base->second;
        }
  return s;
}

inline std::vector<RankedComposition> prune(const std::vector<Composition>& all,
                                            std::vector<Scenario> scenarios = default_scenarios()) {
  for (Scenario& s : scenarios) s = complete_scenario(std::move(s), all);
  std::vector<std::vector<detail::Signature>> sig(scenarios.size());
  for (std::size_t k = 0; k < scenarios.size(); ++k)
    for (const Composition& c : all) sig[k].push_back(detail::signature(c, scenarios[k]));
  std::vector<RankedComposition> out;
  for (std::size_t x = 0; x < all.size(); ++x) {
    RankedComposition r{all[x], false, {}};
    for (std::size_t k = 0; k < scenarios.size(); ++k) {
      bool dominated = false;
      for (std::size_t y = 0; y < all.size() && !dominated; ++y)
        dominated = y != x && detail::dominates(sig[k][y], y, sig[k][x], x);
      if (!dominated) r.profitable_in.push_back(scenarios[k].name);
    }
    r.promoted = !r.profitable_in.empty();
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace spindle::gnn
