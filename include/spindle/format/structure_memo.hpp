// StructureMemo: facts derived from a sparse matrix's structure (its shape, row offsets and
// column indices), computed on first use and kept with the matrix — e.g. the graph features
// that a GNN layer's selection reads, paid once per graph instead of once per layer and size.
// A Csr's structure is immutable after construction, so a fact never goes stale; its values
// stay mutable, so no fact may read them. Copies of a matrix share its memo (same structure);
// the memo dies with the last of them, so nothing keyed by an address can outlive the graph.
// Thread-safe: concurrent first uses compute a fact once (under the memo's lock), later ones
// return the kept copy.
//
//   struct DegreeSum { std::int64_t s; };  // a fact type is its own key
//   const DegreeSum d = a.memo().get<DegreeSum>([&] { return DegreeSum{...}; });
#pragma once

#include <memory>
#include <mutex>
#include <typeindex>
#include <utility>
#include <vector>

namespace spindle::detail {

class StructureMemo {
 public:
  // The kept fact of type Fact, computing it with `make()` (which returns a Fact) the first time.
  template <class Fact, class Make>
  Fact get(Make&& make) {
    const std::type_index key(typeid(Fact));
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [k, v] : facts_)
      if (k == key) return *static_cast<const Fact*>(v.get());
    auto kept = std::make_shared<const Fact>(std::forward<Make>(make)());
    facts_.emplace_back(key, kept);
    return *kept;
  }
  // How many facts are kept (for tests).
  std::size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return facts_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::pair<std::type_index, std::shared_ptr<const void>>> facts_;
};

}  // namespace spindle::detail
