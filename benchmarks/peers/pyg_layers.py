#!/usr/bin/env python3
"""Peer timings of PyTorch Geometric (PyG) GNN layers for spindle's GNN benchmark.

Usage:
  pyg_layers.py MANIFEST.json RESULTS.json   time the cases of a manifest written by the C++ side
  pyg_layers.py --self-test                  check this script against a dense numpy reference

Runs on the CPU only. Needs torch and torch_geometric (scripts/install-peers.sh --pyg installs
them into .peers/venv); torch_sparse is not needed: the sparse path uses torch.sparse tensors.

Manifest (paths relative to the manifest's directory; binary files are raw little-endian,
row-major arrays without a header):
  {"n": N, "nnz": E, "edges": "edges.i64",    2*E int64: E rows i (targets), then E cols j
                                               (sources); edge (i, j): node j sends to node i
   "threads": 2, "reps": 5, "min_ms": 150, "warmup": 1,
   "edge_type": "etype.i64", "num_relations": R,   optional (rgcn only): E int64 relation
                                               ids in [0, R), one per edge
   "cases": [{"id": "c0", "layer": "gcn" | "sage" | "gin" | "gat" | "rgcn", "k_in": 32, "k_out": 64,
              "x": "c0_x.f32",                 [N, k_in] float32
              "weights": {"W": "c0_W.f32"},    gcn, gin: W; sage: Wself, Wneigh; rgcn: W0
                                               (root), W1 ... WR (relation r - 1); gat: W,
                                               a_left, a_right; each [k_in, k_out] float32
                                               (= Linear.weight^T) except gat's a_left and
                                               a_right, [k_out] float32
              "grad_out": "c0_g.f32",          [N, k_out] float32, upstream gradient
              "eps": 0.0}]}                    gin only

Semantics (A = the N x N 0/1 pattern of the edges; self loops are already in it when wanted,
so no PyG layer adds any):
  gcn:  out = D^-1/2 A D^-1/2 X W, D = diag(row counts of A), d^-1/2 = 0 where d = 0
  sage: out = X Wself + Dinv A X Wneigh (mean of incoming messages; 0 with none)
  gin:  out = ((1 + eps) X + A X) W
  rgcn: out = X W0 + sum_r Dinv_r A_r X Wr, A_r the edges of relation r - 1 (PyG RGCNConv,
        aggr="mean", root_weight=True, bias=False: its weight[r - 1] is Wr, its root W0)
  gat:  T = X W, s(i, j) = LeakyReLU_0.2(T(i) a_left + T(j) a_right) on A's entries,
        alpha = softmax of s over each row's entries, out = alpha T (0 for a row without
        entries). PyG GATConv(heads=1, negative_slope=0.2, dropout=0, add_self_loops=False,
        bias=False): its att_dst is a_left (the receiving node i), its att_src a_right.

Each case is run on two PyG paths:
  edge_index  the conv is called with edge_index = [cols; rows] (sources; targets), int64 [2, E]
              (PyG's default flow "source_to_target": edge_index[0] sends, edge_index[1]
              receives and aggregates).
  adj_t       the conv is called with a torch.sparse CSR tensor (COO if CSR fails) of shape
              [N, N] whose rows are the targets, i.e. exactly A (PyG's "adj_t" = transposed
              adjacency in its own [source, target] convention). rgcn has no adj_t path
              here: RGCNConv reads edge types from a torch_sparse SparseTensor only (null,
              with the reason).
Timed: the median over at least `reps` runs (after `warmup` untimed runs; more while the timed
runs add up to less than `min_ms` milliseconds, at most 400) of forward under torch.no_grad(),
and of forward + backward (out.backward(grad_out), grads of x and of the weights), in ms.

Written next to the manifest, from the edge_index path: <id>_out.f32 [N, k_out],
<id>_dx.f32 [N, k_in], <id>_d<Wname>.f32 [k_in, k_out] per weight (spindle orientation).
The adj_t path's out, dx and dW are checked against them; the relative difference reported
is max|a - b| / max|b| per array (the largest over the arrays), which must be <= 1e-4 (a
larger one is reported as "adj_t_agrees": false and a warning, not as a failed run).

RESULTS.json: {"torch", "torch_geometric", "threads", "n", "nnz", "reps", "min_ms", "warmup",
"cpu_count", "loadavg_at_start", "peak_rss_mb", "adj_t_all_agree", "cases": [{"id", "layer",
"k_in", "k_out", "paths": {"edge_index": {"fwd_ms", "fwdbwd_ms", "peak_rss_mb"},
"adj_t": {"fwd_ms", "fwdbwd_ms", "peak_rss_mb", "layout"} or null}, "best_fwd_ms",
"best_fwdbwd_ms", "best_fwd_path", "best_fwdbwd_path", "adj_t_max_rel_diff", "adj_t_agrees"
(null when adj_t is unsupported, with "adj_t_error" saying why)}]}.
A path's peak_rss_mb is the process's peak RSS while it ran (Linux; null elsewhere).
"""

import gc
import json
import os
import resource
import statistics
import sys
import tempfile
import time
import warnings

REL_TOL = 1e-4
LAYERS = {"gcn": ("W",), "sage": ("Wself", "Wneigh"), "gin": ("W",), "gat": ("W", "a_left", "a_right"),
          "rgcn": None}


def weight_names(layer, num_relations):
    """The weights a case of `layer` gives (rgcn: W0 and one per relation)."""
    if layer == "rgcn":
        return ("W0",) + tuple(f"W{r + 1}" for r in range(num_relations))
    return LAYERS[layer]


def weight_shape(layer, name, k_in, k_out):
    """A weight's shape in spindle's orientation: [k_in, k_out], or [k_out] for GAT's attention
    vectors."""
    return (k_out,) if layer == "gat" and name in ("a_left", "a_right") else (k_in, k_out)

np = None
torch = None
torch_geometric = None


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def import_torch():
    global np, torch, torch_geometric
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import numpy as _np
            import torch as _torch
            import torch_geometric as _pyg
            import torch_geometric.nn  # noqa: F401
    except Exception as e:  # ImportError, or a broken install raising something else
        log(f"pyg_layers: cannot import numpy / torch / torch_geometric ({type(e).__name__}: {e}); "
            f"install them with scripts/install-peers.sh --pyg and run this script with "
            f".peers/venv/bin/python")
        sys.exit(2)
    np, torch, torch_geometric = _np, _torch, _pyg
    # torch.sparse CSR is "beta" and warns on first use; PyG warns when it converts COO to CSR.
    warnings.filterwarnings("ignore", message=".*[Ss]parse CSR tensor support is in beta.*")
    warnings.filterwarnings("ignore", message=".*Converting sparse tensor to CSR format.*")
    warnings.filterwarnings("ignore", message=".*Sparse invariant checks are implicitly disabled.*")


def read_array(base, rel, dtype, count, what):
    path = os.path.join(base, rel)
    nbytes = os.path.getsize(path)
    want = count * np.dtype(dtype).itemsize
    if nbytes != want:
        raise ValueError(f"{what}: {path} has {nbytes} bytes, expected {want}")
    return np.fromfile(path, dtype=dtype, count=count)


def write_array(base, name, t):
    a = t.detach().cpu().contiguous().numpy().astype("<f4", copy=False)
    a.tofile(os.path.join(base, name))


def rel_diff(a, b):
    """max|a - b| / max|b| (0 when both are zero)."""
    a = a.detach().double()
    b = b.detach().double()
    num = (a - b).abs().max().item() if a.numel() else 0.0
    den = b.abs().max().item() if b.numel() else 0.0
    if den == 0.0:
        return 0.0 if num == 0.0 else float("inf")
    return num / den


def reset_peak_rss():
    """Resets the kernel's peak-RSS mark of this process (Linux); False where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_mb():
    """The peak RSS (VmHWM) of this process in MiB, None where /proc does not tell."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        pass
    return None


def make_adj_t(rows, cols, n, layout):
    """The sparse [n, n] matrix with rows = targets (= A), values 1, duplicates summed."""
    from torch_geometric.utils import to_torch_coo_tensor, to_torch_csr_tensor
    index = torch.stack([rows, cols], dim=0)
    if layout == "csr":
        return to_torch_csr_tensor(index, size=(n, n))
    return to_torch_coo_tensor(index, size=(n, n))


class ParamRef:
    """A spindle weight [k_in, k_out] inside a PyG parameter: the parameter itself (a Linear
    weight [k_out, k_in]: transposed) or one slice of it (RGCNConv's weight[r], [k_in, k_out];
    GATConv's att_src[0, 0], [k_out])."""

    def __init__(self, param, index=None, transposed=True):
        self.param, self.index, self.transposed = param, index, transposed

    def _of(self, t):
        t = t if self.index is None else t[self.index]
        return t.t() if self.transposed else t

    def set(self, w):
        self._of(self.param.data).copy_(w)

    def grad(self):
        return self._of(self.param.grad).detach().contiguous()


def build_conv(layer, k_in, k_out, weights, eps, num_relations=0):
    """A PyG conv whose parameters are the given spindle-orientation [k_in, k_out] weights;
    returns (conv, {name: ParamRef})."""
    from torch_geometric.nn import GATConv, GCNConv, GINConv, RGCNConv, SAGEConv
    if layer == "gcn":
        conv = GCNConv(k_in, k_out, add_self_loops=False, normalize=True, bias=False,
                       cached=False)
        params = {"W": ParamRef(conv.lin.weight)}
    elif layer == "sage":
        conv = SAGEConv(k_in, k_out, aggr="mean", root_weight=True, bias=False)
        params = {"Wself": ParamRef(conv.lin_r.weight), "Wneigh": ParamRef(conv.lin_l.weight)}
    elif layer == "gin":
        conv = GINConv(torch.nn.Linear(k_in, k_out, bias=False), eps=float(eps),
                       train_eps=False)
        params = {"W": ParamRef(conv.nn.weight)}
    elif layer == "gat":
        conv = GATConv(k_in, k_out, heads=1, concat=True, negative_slope=0.2, dropout=0.0,
                       add_self_loops=False, bias=False)
        params = {"W": ParamRef(conv.lin.weight),
                  "a_left": ParamRef(conv.att_dst, index=(0, 0), transposed=False),
                  "a_right": ParamRef(conv.att_src, index=(0, 0), transposed=False)}
    elif layer == "rgcn":
        conv = RGCNConv(k_in, k_out, num_relations, aggr="mean", root_weight=True, bias=False)
        params = {"W0": ParamRef(conv.root, transposed=False)}
        for r in range(num_relations):
            params[f"W{r + 1}"] = ParamRef(conv.weight, index=r, transposed=False)
    else:
        raise ValueError(f"unknown layer {layer!r}")
    n_params = sum(1 for _ in conv.parameters())
    distinct = len({id(p.param) for p in params.values()})
    if n_params != distinct:
        raise RuntimeError(f"{layer}: PyG module has {n_params} parameters, expected "
                           f"{distinct} (a bias?)")
    with torch.no_grad():
        for name, p in params.items():
            p.set(weights[name])
    return conv, params


MAX_TIMED_RUNS = 400


def timed_runs(f, warmup, reps, min_ms, keep_last=False):
    """Wall times (ms) of f: `warmup` untimed runs, then at least `reps` timed ones, more while
    they add up to less than `min_ms` (at most MAX_TIMED_RUNS). Returns (times, last result)."""
    times, out = [], None
    for _ in range(warmup):
        out = None
        out = f()
    while len(times) < reps or (sum(times) < min_ms and len(times) < MAX_TIMED_RUNS):
        out = None  # free the previous output before the next run
        t0 = time.perf_counter()
        out = f()
        t1 = time.perf_counter()
        times.append((t1 - t0) * 1e3)
        if not keep_last:
            out = None
    return times, out


def time_path(conv, params, x, edge, grad_out, warmup, reps, min_ms=0.0):
    """`edge`: the conv's graph arguments after x (a tuple: (edge_index,), (adj_t,) or
    (edge_index, edge_type))."""
    """Times forward and forward + backward.

    Returns ({"fwd_ms", "fwdbwd_ms", "peak_rss_mb"}, out, dx, {name: dW [k_in, k_out]}), where
    peak_rss_mb is the process's peak RSS over these runs (inputs, graph and the outputs kept
    from earlier paths included; None where Linux's /proc/self/clear_refs is not writable).
    """
    x_nograd = x.detach()
    gc.collect()
    peak_ok = reset_peak_rss()

    def fwd():
        with torch.no_grad():
            return conv(x_nograd, *edge)

    xg = x.detach().requires_grad_(True)  # shares x's storage; only its .grad is new
    for p in params.values():
        p.param.requires_grad_(True)

    def fwdbwd():
        conv.zero_grad(set_to_none=True)
        xg.grad = None
        out = conv(xg, *edge)
        out.backward(grad_out)
        return out

    fwd_t, _ = timed_runs(fwd, warmup, reps, min_ms)
    fb_t, out = timed_runs(fwdbwd, warmup, reps, min_ms, keep_last=True)
    dx = xg.grad
    dws = {name: p.grad() for name, p in params.items()}
    peak = peak_rss_mb() if peak_ok else None
    times = {"fwd_ms": statistics.median(fwd_t), "fwdbwd_ms": statistics.median(fb_t),
             "peak_rss_mb": peak}
    return times, out.detach(), dx.detach(), dws


def fmt_peak(entry):
    peak = entry.get("peak_rss_mb")
    return "" if peak is None else f" (peak RSS {peak:.0f} MiB)"


def run_manifest(manifest_path, results_path):
    import_torch()
    manifest_path = os.path.abspath(manifest_path)
    base = os.path.dirname(manifest_path)
    with open(manifest_path) as f:
        m = json.load(f)
    n, e = int(m["n"]), int(m["nnz"])
    threads = int(m.get("threads", 1))
    reps = max(1, int(m.get("reps", 5)))
    warmup = max(0, int(m.get("warmup", 1)))
    min_ms = max(0.0, float(m.get("min_ms", 0.0)))

    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass  # only allowed before any inter-op work has started

    edges = read_array(base, m["edges"], "<i8", 2 * e, "edges")
    if e and (edges.min() < 0 or edges.max() >= n):
        raise ValueError(f"edges: an index is outside [0, {n})")
    rows = torch.from_numpy(edges[:e].copy())
    cols = torch.from_numpy(edges[e:].copy())
    del edges
    edge_index = torch.stack([cols, rows], dim=0).contiguous()  # [sources; targets]
    num_relations, edge_type = int(m.get("num_relations", 0)), None
    if "edge_type" in m:
        et = read_array(base, m["edge_type"], "<i8", e, "edge_type")
        if e and (et.min() < 0 or et.max() >= num_relations):
            raise ValueError(f"edge_type: a relation id is outside [0, {num_relations})")
        edge_type = torch.from_numpy(et.copy())

    adj = {}  # layout -> sparse adj_t, or None where it cannot be built; COO only if needed

    def get_adj(layout):
        if layout not in adj:
            try:
                adj[layout] = make_adj_t(rows, cols, n, layout)
            except Exception as ex:  # noqa: BLE001 - report and go on without this layout
                log(f"pyg_layers: cannot build a torch.sparse {layout} adj_t: {ex}")
                adj[layout] = None
            t = adj[layout]
            if t is not None:
                nnz_unique = int(t.col_indices().numel() if layout == "csr" else t._nnz())
                if nnz_unique != e:
                    log(f"pyg_layers: WARNING: {e - nnz_unique} duplicate edges; the edge_index "
                        f"path sends their messages twice, the adj_t path sums them into one "
                        f"entry of value 2")
        return adj[layout]

    results = {
        "torch": torch.__version__,
        "torch_geometric": torch_geometric.__version__,
        "threads": torch.get_num_threads(),
        "n": n, "nnz": e, "reps": reps, "min_ms": min_ms, "warmup": warmup,
        # Timings with `threads` OpenMP threads stall badly when other processes hold cores.
        "cpu_count": os.cpu_count(),
        "loadavg_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "cases": [],
    }
    all_agree = True
    for case in m["cases"]:
        cid, layer = case["id"], case["layer"]
        k_in, k_out = int(case["k_in"]), int(case["k_out"])
        if layer not in LAYERS:
            raise ValueError(f"case {cid}: unknown layer {layer!r}")
        x = torch.from_numpy(read_array(base, case["x"], "<f4", n * k_in, f"{cid} x")
                             .reshape(n, k_in))
        g = torch.from_numpy(read_array(base, case["grad_out"], "<f4", n * k_out,
                                        f"{cid} grad_out").reshape(n, k_out))
        if layer == "rgcn" and edge_type is None:
            raise ValueError(f"case {cid}: rgcn needs the manifest's edge_type and num_relations")
        weights = {}
        for name in weight_names(layer, num_relations):
            shape = weight_shape(layer, name, k_in, k_out)
            weights[name] = torch.from_numpy(
                read_array(base, case["weights"][name], "<f4", int(np.prod(shape)), f"{cid} {name}")
                .reshape(shape))
        eps = float(case.get("eps", 0.0))

        conv, params = build_conv(layer, k_in, k_out, weights, eps, num_relations)
        ei_args = (edge_index, edge_type) if layer == "rgcn" else (edge_index,)
        ei_entry, out, dx, dws = time_path(conv, params, x, ei_args, g, warmup, reps, min_ms)
        paths = {"edge_index": ei_entry}
        write_array(base, f"{cid}_out.f32", out)
        write_array(base, f"{cid}_dx.f32", dx)
        for name, dw in dws.items():
            write_array(base, f"{cid}_d{name}.f32", dw)
        del conv, params

        # adj_t path: CSR first, COO if the layer fails on CSR.
        adj_entry, adj_layout, diff, errors = None, None, None, []
        if layer == "rgcn":
            errors.append("RGCNConv reads edge types from a torch_sparse SparseTensor only")
        for layout in () if layer == "rgcn" else ("csr", "coo"):
            adj_t = get_adj(layout)
            if adj_t is None:
                continue
            try:
                conv, params = build_conv(layer, k_in, k_out, weights, eps)
                adj_entry, a_out, a_dx, a_dws = time_path(conv, params, x, (adj_t,), g,
                                                          warmup, reps, min_ms)
            except Exception as ex:  # noqa: BLE001 - an unsupported path is reported as null
                errors.append(f"{layout}: {type(ex).__name__}: {ex}")
                conv = params = None
                gc.collect()
                continue
            diff = max([rel_diff(a_out, out), rel_diff(a_dx, dx)]
                       + [rel_diff(a_dws[k], dws[k]) for k in dws])
            adj_entry["layout"] = layout
            adj_layout = layout
            del conv, params, a_out, a_dx, a_dws, adj_t
            break
        paths["adj_t"] = adj_entry

        best_fwd = min(paths, key=lambda p: paths[p]["fwd_ms"] if paths[p] else float("inf"))
        best_fb = min(paths, key=lambda p: paths[p]["fwdbwd_ms"] if paths[p] else float("inf"))
        agrees = diff is None or diff <= REL_TOL
        all_agree &= agrees
        rec = {
            "id": cid, "layer": layer, "k_in": k_in, "k_out": k_out,
            "paths": paths,
            "best_fwd_ms": paths[best_fwd]["fwd_ms"],
            "best_fwdbwd_ms": paths[best_fb]["fwdbwd_ms"],
            "best_fwd_path": best_fwd,
            "best_fwdbwd_path": best_fb,
            "adj_t_max_rel_diff": diff,
            "adj_t_agrees": agrees if diff is not None else None,
        }
        if adj_entry is None:
            rec["adj_t_error"] = "; ".join(errors) if errors else "no sparse adj_t could be built"
        results["cases"].append(rec)

        line = (f"pyg_layers: {cid} {layer} {k_in}->{k_out}: edge_index fwd "
                f"{ei_entry['fwd_ms']:.3f} ms, fwd+bwd {ei_entry['fwdbwd_ms']:.3f} ms"
                f"{fmt_peak(ei_entry)}")
        if adj_entry:
            line += (f"; adj_t({adj_layout}) fwd {adj_entry['fwd_ms']:.3f} ms, fwd+bwd "
                     f"{adj_entry['fwdbwd_ms']:.3f} ms{fmt_peak(adj_entry)}; max rel diff "
                     f"{diff:.2e}")
            if not agrees:
                line += f" WARNING: paths disagree (> {REL_TOL:g})"
        else:
            line += f"; adj_t unsupported ({rec['adj_t_error']})"
        log(line)

        del x, g, weights, out, dx, dws
        gc.collect()

    # Linux reports ru_maxrss in KiB; resetting the peak per path (clear_refs) resets it too,
    # so take the largest of it and the per-path peaks.
    peaks = [resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0]
    for rec in results["cases"]:
        peaks += [p["peak_rss_mb"] for p in rec["paths"].values()
                  if p and p.get("peak_rss_mb") is not None]
    results["peak_rss_mb"] = max(peaks)
    results["adj_t_all_agree"] = all_agree
    with open(results_path, "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
    return results


# ------------------------------------------------------------------------------------------
# Self-test: a small directed graph, written as the C++ side writes it, checked in float64
# numpy against the formulas above.


def dense_reference(layer, a, x, ws, g, eps, rel_a=()):
    """out, dx, {name: dW} in float64 for the dense 0/1 pattern a (rows = targets); rgcn reads
    the per-relation patterns rel_a instead."""
    n = a.shape[0]
    if layer == "gat":
        return gat_reference(a, x, ws, g)
    if layer == "rgcn":
        terms = [(np.eye(n), "W0")]
        for r, ar in enumerate(rel_a):
            d = ar.sum(axis=1)
            terms.append((np.where(d > 0, 1.0 / np.maximum(d, 1), 0.0)[:, None] * ar, f"W{r + 1}"))
    elif layer == "gcn":
        d = a.sum(axis=1)
        dis = np.where(d > 0, 1.0 / np.sqrt(np.maximum(d, 1)), 0.0)
        terms = [(dis[:, None] * a * dis[None, :], "W")]
    elif layer == "sage":
        d = a.sum(axis=1)
        dinv = np.where(d > 0, 1.0 / np.maximum(d, 1), 0.0)
        terms = [(np.eye(n), "Wself"), (dinv[:, None] * a, "Wneigh")]
    else:
        terms = [((1.0 + eps) * np.eye(n) + a, "W")]
    out = np.zeros((n, g.shape[1]))
    dx = np.zeros_like(x)
    dws = {name: np.zeros_like(ws[name]) for name in ws}
    for mat, name in terms:  # out = sum M X W: dX = sum M^T G W^T, dW = (M X)^T G
        mx = mat @ x
        out += mx @ ws[name]
        dx += mat.T @ g @ ws[name].T
        dws[name] += mx.T @ g
    return out, dx, dws


def gat_reference(a, x, ws, g):
    """GAT's out, dx and weight gradients (formula in the module docstring), by hand in
    float64: softmax and LeakyReLU backward on A's entries."""
    w, al, ar = ws["W"], ws["a_left"], ws["a_right"]
    mask = a > 0
    t = x @ w
    e = (t @ al)[:, None] + (t @ ar)[None, :]
    s = np.where(e > 0, e, 0.2 * e)
    row_max = np.where(mask, s, -np.inf).max(axis=1, initial=-np.inf, keepdims=True)
    ex = np.where(mask, np.exp(s - np.where(np.isfinite(row_max), row_max, 0.0)), 0.0)
    den = ex.sum(axis=1, keepdims=True)
    alpha = ex / np.where(den > 0, den, 1.0)
    out = alpha @ t
    dalpha = np.where(mask, g @ t.T, 0.0)
    de = alpha * (dalpha - (alpha * dalpha).sum(axis=1, keepdims=True)) * np.where(e > 0, 1.0, 0.2)
    de_l, de_r = de.sum(axis=1), de.sum(axis=0)
    dt = alpha.T @ g + np.outer(de_l, al) + np.outer(de_r, ar)
    return out, dt @ w.T, {"W": x.T @ dt, "a_left": t.T @ de_l, "a_right": t.T @ de_r}


def self_test():
    import_torch()
    rng = np.random.default_rng(12345)
    n, k_in, k_out = 40, 6, 5
    no_in, no_out = 3, 7  # node 3: empty row (receives nothing); node 7: empty column
    pairs = set()
    while len(pairs) < 220:
        i, j = (int(v) for v in rng.integers(0, n, size=2))
        if i == no_in or j == no_out:
            continue
        pairs.add((i, j))
    for i in range(0, n, 5):  # some self loops, as the C++ side adds them
        if i != no_in and i != no_out:
            pairs.add((i, i))
    pairs = sorted(pairs, key=lambda p: (rng.random(), p))  # unsorted edge order
    rows = np.array([p[0] for p in pairs], dtype="<i8")
    cols = np.array([p[1] for p in pairs], dtype="<i8")
    assert (cols == no_in).any(), "the empty-row node must still send messages"
    a = np.zeros((n, n))
    a[rows, cols] = 1.0
    n_rel = 3  # rgcn: each edge one of three relations, relation 2 rarer
    etype = np.array([0 if u < 0.45 else 1 if u < 0.9 else 2 for u in rng.random(len(pairs))],
                     dtype="<i8")
    rel_a = [np.zeros((n, n)) for _ in range(n_rel)]
    for r in range(n_rel):
        rel_a[r][rows[etype == r], cols[etype == r]] = 1.0

    # Check the GCN normalisation claim directly: PyG's gcn_norm on edge_index = [cols; rows]
    # gives deg(j)^-1/2 deg(i)^-1/2 with deg = row count (number of edges targeting a node).
    from torch_geometric.nn.conv.gcn_conv import gcn_norm
    ei = torch.from_numpy(np.stack([cols, rows]))
    _, w = gcn_norm(ei, None, n, False, False, "source_to_target", torch.float64)
    d = a.sum(axis=1)
    dis = np.where(d > 0, 1.0 / np.sqrt(np.maximum(d, 1)), 0.0)
    ok_norm = np.allclose(w.numpy(), dis[cols] * dis[rows], rtol=1e-12, atol=0)
    print(f"{'PASS' if ok_norm else 'FAIL'} gcn_norm edge weights = deg(j)^-1/2 deg(i)^-1/2, "
          f"deg = row count of A")

    ok_all = ok_norm
    with tempfile.TemporaryDirectory(prefix="pyg_layers_selftest_") as tmp:
        np.concatenate([rows, cols]).astype("<i8").tofile(os.path.join(tmp, "edges.i64"))
        etype.tofile(os.path.join(tmp, "etype.i64"))
        cases, refs = [], {}
        for layer, eps in (("gcn", 0.0), ("sage", 0.0), ("gin", 0.3), ("gat", 0.0), ("rgcn", 0.0)):
            cid = f"t_{layer}"
            x = rng.standard_normal((n, k_in)).astype("<f4")
            g = rng.standard_normal((n, k_out)).astype("<f4")
            ws = {name: rng.standard_normal(weight_shape(layer, name, k_in, k_out)).astype("<f4")
                  for name in weight_names(layer, n_rel)}
            x.tofile(os.path.join(tmp, f"{cid}_x.f32"))
            g.tofile(os.path.join(tmp, f"{cid}_g.f32"))
            for name, w_ in ws.items():
                w_.tofile(os.path.join(tmp, f"{cid}_{name}.f32"))
            case = {"id": cid, "layer": layer, "k_in": k_in, "k_out": k_out,
                    "x": f"{cid}_x.f32", "grad_out": f"{cid}_g.f32",
                    "weights": {name: f"{cid}_{name}.f32" for name in ws}}
            if layer == "gin":
                case["eps"] = eps
            cases.append(case)
            refs[cid] = dense_reference(layer, a, x.astype(np.float64),
                                        {k: v.astype(np.float64) for k, v in ws.items()},
                                        g.astype(np.float64), eps, rel_a)
        manifest = {"n": n, "nnz": len(pairs), "edges": "edges.i64", "edge_type": "etype.i64",
                    "num_relations": n_rel, "threads": 2, "reps": 2,
                    "warmup": 1, "cases": cases}
        with open(os.path.join(tmp, "manifest.json"), "w") as f:
            json.dump(manifest, f)
        res = run_manifest(os.path.join(tmp, "manifest.json"), os.path.join(tmp, "res.json"))

        for case, rec in zip(cases, res["cases"]):
            cid = case["id"]
            out_r, dx_r, dws_r = refs[cid]

            def load(name, shape):
                return np.fromfile(os.path.join(tmp, name), dtype="<f4").reshape(shape)

            got = {"out": (load(f"{cid}_out.f32", (n, k_out)), out_r),
                   "dx": (load(f"{cid}_dx.f32", (n, k_in)), dx_r)}
            for name in dws_r:
                got[f"d{name}"] = (load(f"{cid}_d{name}.f32", weight_shape(case["layer"], name, k_in, k_out)),
                                   dws_r[name])
            diffs = {k: float(np.abs(v[0] - v[1]).max() / np.abs(v[1]).max())
                     for k, v in got.items()}
            worst = max(diffs.values())
            adj_ok = (rec["paths"]["adj_t"] is not None and rec["adj_t_agrees"]) or \
                case["layer"] == "rgcn"  # no adj_t path
            ok = worst <= REL_TOL and adj_ok
            ok_all &= ok
            detail = ", ".join(f"{k} {v:.1e}" for k, v in diffs.items())
            adj_detail = (f"adj_t({rec['paths']['adj_t']['layout']}) vs edge_index "
                          f"{rec['adj_t_max_rel_diff']:.1e}" if rec["paths"]["adj_t"]
                          else f"adj_t unsupported: {rec.get('adj_t_error')}")
            print(f"{'PASS' if ok else 'FAIL'} {case['layer']}: max rel diff vs numpy float64: "
                  f"{detail}; {adj_detail}")
    print("self-test:", "PASS" if ok_all else "FAIL")
    return 0 if ok_all else 1


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) != 3 or argv[1].startswith("-"):
        log(__doc__.split("\n\n")[1])
        return 64
    run_manifest(argv[1], argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
