// spindle-gnn-bench --pyg: Spindle's GNN layers against what users run, PyTorch Geometric
// (benchmarks/peers/pyg_layers.py in the venv that `scripts/install-peers.sh --pyg` makes),
// in the same run, on the same graph, features and weights:
//   - forward (inference) and forward + backward (dLoss/dW and dLoss/dH) per layer;
//   - PyG's faster path of edge_index and the sparse adj_t;
//   - agreement: Spindle's output and gradients against PyG's (max |diff| / max |PyG|).
// The graph gets self loops (Ã = A + I, as GCN uses it) and both sides run on Ã: GCNConv
// (normalised, PyG with add_self_loops=False), SAGEConv (mean), GINConv (eps 0.1), GATConv
// (one head, LeakyReLU slope 0.2; PyG with add_self_loops=False, dropout 0); no bias.
// RGCN runs on a typed graph (entries = relation ids 1..R, R >= 2: data/rgcn) instead, without
// self loops: gnn::RGCNConv against PyG's RGCNConv(aggr="mean", root_weight=True, bias=False)
// on the relations of spindle::relations_of_typed_edges; the other layers skip typed graphs
// and RGCN skips untyped ones.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <unistd.h>

#include "gnn_common.hpp"

namespace gnnbench {

struct PygOptions {
  std::vector<std::string> graphs, layers;
  std::vector<std::pair<int, int>> pairs;
  int threads = 2, reps = 5;
  double min_ms = kMinTimedMs;
  std::string data, model, python, script;
};

struct PygCase {
  std::string graph, layer, fwd_path, fwdbwd_path;
  int k_in = 0, k_out = 0;
  double spindle_fwd = NAN, spindle_fwdbwd = NAN, pyg_fwd = NAN, pyg_fwdbwd = NAN, max_rel_diff = NAN;
  std::string composition;
};

namespace pyg_detail {

// Ã = A with every missing diagonal entry added (pattern only).
inline sp::Csr<float> with_self_loops(const sp::Csr<float>& a) {
  std::vector<sp::Triplet<float>> t;
  t.reserve(static_cast<std::size_t>(a.nnz() + a.rows()));
  for (std::int64_t i = 0; i < a.rows(); ++i) {
    bool diag = false;
    for (auto q = a.indptr()[i]; q < a.indptr()[i + 1]; ++q) {
      t.push_back({i, static_cast<std::int64_t>(a.indices()[q]), 1.0f});
      diag |= a.indices()[q] == i;
    }
    if (!diag && i < a.cols()) t.push_back({i, i, 1.0f});
  }
  return sp::Csr<float>::from_triplets(a.rows(), a.cols(), t, sp::Duplicates::sum);
}

template <class V>
void write_raw(const std::filesystem::path& p, const V* data, std::size_t n) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n * sizeof(V)));
  SPINDLE_CHECK(f.good(), sp::IOError, "spindle-gnn-bench: cannot write ", p.string());
}

inline std::vector<float> read_raw(const std::filesystem::path& p, std::size_t n) {
  std::vector<float> v(n);
  std::ifstream f(p, std::ios::binary);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(float)));
  SPINDLE_CHECK(f.gcount() == static_cast<std::streamsize>(n * sizeof(float)), sp::IOError, "spindle-gnn-bench: ",
                p.string(), " holds fewer than ", n, " floats");
  return v;
}

// The number after "key": in a JSON text (the peer's results hold one case).
inline double json_number(const std::string& text, const std::string& key) {
  const auto at = text.find("\"" + key + "\"");
  if (at == std::string::npos) return NAN;
  const auto colon = text.find(':', at);
  const char* s = text.c_str() + colon + 1;
  while (*s == ' ') ++s;
  if (std::string(s, 4) == "null") return NAN;
  return std::strtod(s, nullptr);
}
inline std::string json_string(const std::string& text, const std::string& key) {
  const auto at = text.find("\"" + key + "\"");
  if (at == std::string::npos) return "";
  const auto open = text.find('"', text.find(':', at) + 1);
  const auto close = text.find('"', open + 1);
  return open == std::string::npos || close == std::string::npos ? "" : text.substr(open + 1, close - open - 1);
}

// max |a - b| / max |b| over the arrays.
inline double relative_diff(sp::TensorView<const float> a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (std::size_t q = 0; q < b.size(); ++q) {
    diff = std::max(diff, std::abs(static_cast<double>(a.values()[q]) - b[q]));
    scale = std::max(scale, std::abs(static_cast<double>(b[q])));
  }
  return scale > 0 ? diff / scale : diff;
}

// A layer under test: forward and backward on the case's inputs, and what it chose.
struct ConvRun {
  std::function<sp::TensorView<const float>(sp::TensorView<const float>)> forward;
  std::function<gnn::LayerGradients<float>(sp::TensorView<const float>)> backward;
  std::function<std::string()> composition;
};

// The graph a case runs on: Ã for gcn, sage, gin, gat; the relations of a typed graph for rgcn.
struct CaseGraph {
  sp::Csr<float> a;                   // Ã (untyped graphs)
  std::vector<sp::Csr<float>> rels;   // relation r + 1 (typed graphs: 2 or more relations)
  std::vector<const sp::Csr<float>*> rel_ptrs;
};

inline ConvRun make_conv(const std::string& layer, std::int64_t k_in, std::int64_t k_out, const gnn::CostModel& model,
                         std::map<std::string, sp::Tensor<float>>& weights, const CaseGraph& g) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(k_in));
  auto w = [&](const std::string& n, std::uint64_t seed) {
    weights.emplace(n, sp::Tensor<float>::random({k_in, k_out}, seed, -scale, scale));
    return weights.at(n);
  };
  if (layer == "rgcn") {
    std::vector<sp::Tensor<float>> wr;
    for (std::size_t r = 0; r < g.rels.size(); ++r) wr.push_back(w("W" + std::to_string(r + 1), 32 + r));
    auto conv = std::make_shared<gnn::RGCNConv<float>>(w("W0", 31), std::move(wr), model);
    const auto* ptrs = &g.rel_ptrs;
    return {[conv, ptrs](sp::TensorView<const float> x) { return conv->forward(*ptrs, x); },
            [conv](sp::TensorView<const float> d) { return conv->backward(d, true); },
            [conv] {
              // How many relations ran each composition (a relation without edges runs none).
              std::map<std::string, int> n;
              for (std::size_t r = 0; r < conv->relation_count(); ++r)
                if (const auto* c = conv->relation(r).last_run()) ++n[c->text];
              std::string t;
              for (const auto& [text, k] : n) t += (t.empty() ? "" : " ") + std::to_string(k) + "x " + text;
              return t;
            }};
  }
  const auto* a = &g.a;
  if (layer == "gat") {
    // Attention vectors of K_out entries, scaled like PyG's glorot init of att_src / att_dst.
    const double sa = std::sqrt(6.0 / static_cast<double>(k_out + 1));
    for (const char* n : {"a_left", "a_right"})
      weights.emplace(n, sp::Tensor<float>::random({k_out}, n[2] == 'l' ? 15 : 16, -sa, sa));
    auto conv = std::make_shared<gnn::GATConv<float>>(w("W", 17), weights.at("a_left"), weights.at("a_right"), model);
    return {[conv, a](sp::TensorView<const float> x) { return conv->forward(*a, x); },
            [conv](sp::TensorView<const float> d) { return conv->backward(d, true); },
            [conv] { return conv->adaptive().last_run()->text; }};
  }
  std::shared_ptr<gnn::GraphConv<float>> conv;
  if (layer == "gcn") conv = std::make_shared<gnn::GCNConv<float>>(w("W", 11), model);
  if (layer == "sage") conv = std::make_shared<gnn::SAGEConv<float>>(w("Wself", 12), w("Wneigh", 13), model);
  if (layer == "gin") conv = std::make_shared<gnn::GINConv<float>>(w("W", 14), 0.1, model);
  SPINDLE_CHECK(conv != nullptr, sp::UserError, "--pyg: layer '", layer,
                "' has no PyG counterpart here (gcn, sage, gin, gat, rgcn)");
  return {[conv, a](sp::TensorView<const float> x) { return conv->forward(*a, x); },
          [conv](sp::TensorView<const float> d) { return conv->backward(d, true); },
          [conv] { return conv->adaptive().last_run()->text; }};
}

// The relations of a typed graph file (2 or more), or none: an untyped graph (entries not
// relation ids, or all one relation).
inline std::vector<sp::Csr<float>> typed_relations(const std::string& spec, const std::string& data_dir) {
  std::string path = spec;
  if (!std::filesystem::exists(path)) path = data_dir + "/" + spec + ".mtx.gz";
  if (!std::filesystem::exists(path)) return {};  // rmat: generated, untyped
  const auto t = sp::read_matrix_market_triplets<float>(path);
  try {
    auto rels = sp::relations_of_typed_edges<float>(t.header.rows, t.entries);
    if (rels.size() >= 2) return rels;
  } catch (const sp::Error&) {
  }
  return {};
}

}  // namespace pyg_detail

// Whether the peer can run: the venv's python imports torch and torch_geometric.
inline bool pyg_available(const PygOptions& o, std::string& why) {
  if (!std::filesystem::exists(o.python)) {
    why = o.python + " not found (scripts/install-peers.sh --pyg)";
    return false;
  }
  const std::string cmd = "'" + o.python + "' -c 'import torch, torch_geometric' >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    why = "torch / torch_geometric do not import in " + o.python + " (scripts/install-peers.sh --pyg)";
    return false;
  }
  return true;
}

inline std::vector<PygCase> run_pyg_comparison(const PygOptions& o) {
  namespace fs = std::filesystem;
  using namespace pyg_detail;
  std::string tmpl = (fs::temp_directory_path() / "spindle-pyg-XXXXXX").string();
  SPINDLE_CHECK(::mkdtemp(tmpl.data()) != nullptr, sp::IOError, "spindle-gnn-bench: cannot create ", tmpl);
  const fs::path dir = tmpl;
  const gnn::CostModel model = o.model.empty() ? gnn::CostModel{} : gnn::CostModel::load(o.model);
  std::vector<PygCase> cases;
  const std::size_t total = o.graphs.size() * o.layers.size() * o.pairs.size();
  std::size_t done = 0;
  for (const std::string& spec : o.graphs) {
    CaseGraph cg;
    cg.rels = typed_relations(spec, o.data);
    const bool typed = !cg.rels.empty();
    for (const auto& r : cg.rels) cg.rel_ptrs.push_back(&r);
    std::string name = spec;  // a typed graph is read once, as its relations
    if (!typed) {
      Graph g = load_graph(spec, o.data);
      name = g.name;
      cg.a = with_self_loops(g.a);
    }
    const std::int64_t n = typed ? cg.rels.front().rows() : cg.a.rows();
    std::int64_t e = 0;
    {
      // Edge lists (rows = targets, then cols = sources) and, for a typed graph, the relation
      // of each edge (0-based).
      std::vector<std::int64_t> rows, cols, types;
      auto add = [&](const sp::Csr<float>& m, std::int64_t type) {
        for (std::int64_t i = 0; i < m.rows(); ++i)
          for (auto q = m.indptr()[i]; q < m.indptr()[i + 1]; ++q) {
            rows.push_back(i);
            cols.push_back(m.indices()[q]);
            types.push_back(type);
          }
      };
      if (typed)
        for (std::size_t r = 0; r < cg.rels.size(); ++r) add(cg.rels[r], static_cast<std::int64_t>(r));
      else
        add(cg.a, 0);
      e = static_cast<std::int64_t>(rows.size());
      rows.insert(rows.end(), cols.begin(), cols.end());
      write_raw(dir / "edges.i64", rows.data(), rows.size());
      write_raw(dir / "etype.i64", types.data(), types.size());
    }
    for (const auto& [kin, kout] : o.pairs)
      for (const std::string& layer : o.layers) {
        progress(name + " " + layer + " " + std::to_string(kin) + "->" + std::to_string(kout), done++, total);
        if (typed != (layer == "rgcn")) continue;  // rgcn runs on typed graphs only, the others on untyped ones
        PygCase k;
        k.graph = name;
        k.layer = layer;
        k.k_in = kin;
        k.k_out = kout;
        std::map<std::string, sp::Tensor<float>> weights;
        const ConvRun conv = make_conv(layer, kin, kout, model, weights, cg);
        const auto x = sp::Tensor<float>::random({n, kin}, 21, -1, 1);
        const auto grad = sp::Tensor<float>::random({n, kout}, 22, -1, 1);
        k.spindle_fwd = time_ms([&] { (void)conv.forward(x.view()); }, o.reps, o.min_ms);
        k.spindle_fwdbwd = time_ms(
            [&] {
              (void)conv.forward(x.view());
              (void)conv.backward(grad.view());
            },
            o.reps, o.min_ms);
        k.composition = conv.composition();
        // The results compared: one more forward and backward.
        const auto out = conv.forward(x.view());
        const std::vector<float> out_copy(out.values().begin(), out.values().end());
        const auto grads = conv.backward(grad.view());

        // The peer, on the same inputs.
        write_raw(dir / "x.f32", x.values().data(), x.values().size());
        write_raw(dir / "g.f32", grad.values().data(), grad.values().size());
        std::string wjson;
        for (const auto& [name, w] : weights) {
          write_raw(dir / (name + ".f32"), w.values().data(), w.values().size());
          wjson += std::string(wjson.empty() ? "" : ", ") + "\"" + name + "\": \"" + name + ".f32\"";
        }
        {
          std::ofstream m(dir / "manifest.json");
          m << "{\"n\": " << n << ", \"nnz\": " << e << ", \"edges\": \"edges.i64\", ";
          if (typed) m << "\"edge_type\": \"etype.i64\", \"num_relations\": " << cg.rels.size() << ", ";
          m << "\"threads\": " << o.threads
            << ", \"reps\": " << o.reps << ", \"min_ms\": " << o.min_ms << ", \"warmup\": 1, \"cases\": [{\"id\": \"c\", \"layer\": \"" << layer
            << "\", \"k_in\": " << kin << ", \"k_out\": " << kout << ", \"x\": \"x.f32\", \"weights\": {" << wjson
            << "}, \"grad_out\": \"g.f32\", \"eps\": 0.1}]}\n";
        }
        const std::string cmd = "'" + o.python + "' '" + o.script + "' '" + (dir / "manifest.json").string() + "' '" +
                                (dir / "results.json").string() + "' 2>'" + (dir / "peer.log").string() + "'";
        if (std::system(cmd.c_str()) != 0) {
          std::ifstream log(dir / "peer.log");
          std::stringstream ss;
          ss << log.rdbuf();
          SPINDLE_CHECK(false, sp::RuntimeError, "the PyG peer failed on ", name, " ", layer, ":\n", ss.str());
        }
        std::stringstream rs;
        rs << std::ifstream(dir / "results.json").rdbuf();
        const std::string r = rs.str();
        k.pyg_fwd = json_number(r, "best_fwd_ms");
        k.pyg_fwdbwd = json_number(r, "best_fwdbwd_ms");
        k.fwd_path = json_string(r, "best_fwd_path");
        k.fwdbwd_path = json_string(r, "best_fwdbwd_path");
        const auto out_view = sp::TensorView<const float>(out_copy.data(), {n, kout});
        double diff = relative_diff(out_view, read_raw(dir / "c_out.f32", out_copy.size()));
        diff = std::max(diff, relative_diff(grads.input, read_raw(dir / "c_dx.f32", grads.input.values().size())));
        for (const auto& [name, gw] : grads.weights)
          diff = std::max(diff, relative_diff(gw, read_raw(dir / ("c_d" + name + ".f32"), gw.values().size())));
        k.max_rel_diff = diff;
        cases.push_back(k);
      }
  }
  progress("done", total, total);
  std::error_code ec;
  fs::remove_all(dir, ec);
  return cases;
}

inline void print_pyg_report(const std::vector<PygCase>& cases, const std::vector<std::string>& layers) {
  auto geomean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += std::log(x);
    return v.empty() ? NAN : std::exp(s / static_cast<double>(v.size()));
  };
  std::printf("\n%-22s %-5s %9s %10s %10s %6s %-10s %10s %10s %6s %-10s %9s  %s\n", "graph", "layer", "K", "fwd ms",
              "PyG fwd", "ratio", "PyG path", "fwd+bwd", "PyG f+b", "ratio", "PyG path", "max diff", "composition");
  for (const auto& k : cases)
    std::printf("%-22s %-5s %4d:%-4d %10.3f %10.3f %5.2fx %-10s %10.3f %10.3f %5.2fx %-10s %9.2e  %s\n",
                k.graph.c_str(), k.layer.c_str(), k.k_in, k.k_out, k.spindle_fwd, k.pyg_fwd, k.pyg_fwd / k.spindle_fwd,
                k.fwd_path.c_str(), k.spindle_fwdbwd, k.pyg_fwdbwd, k.pyg_fwdbwd / k.spindle_fwdbwd,
                k.fwdbwd_path.c_str(), k.max_rel_diff, k.composition.c_str());
  std::printf("\n%-6s %6s %18s %22s %14s %10s\n", "layer", "cases", "fwd vs PyG (geo)", "fwd+bwd vs PyG (geo)",
              "max diff", "agree 1e-4");
  std::vector<std::string> names = layers;
  names.push_back("all");
  for (const auto& n : names) {
    std::vector<double> f, fb;
    double worst = 0;
    int agree = 0, count = 0;
    for (const auto& k : cases) {
      if (n != "all" && k.layer != n) continue;
      ++count;
      f.push_back(k.pyg_fwd / k.spindle_fwd);
      fb.push_back(k.pyg_fwdbwd / k.spindle_fwdbwd);
      worst = std::max(worst, k.max_rel_diff);
      agree += k.max_rel_diff <= 1e-4;
    }
    std::printf("%-6s %6d %17.2fx %21.2fx %14.2e %6d/%d\n", n.c_str(), count, geomean(f), geomean(fb), worst, agree,
                count);
  }
}

}  // namespace gnnbench
