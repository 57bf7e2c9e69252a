// Node storage shared by the page-size-1 prefix trees with two resources per
// node (MambaRadixTree, SwaRadixTree): nodes live in a vector addressed by
// index, freed indices are reused, and callers hold generation-tagged handles
// so a handle to a deleted (or reset) node is detected instead of aliasing the
// node that reuses its index. Children are found through one hash map keyed by
// (parent, namespace, first token); namespaces are the `extra_key` strings
// (LoRA id, cache salt) interned to small integers.
//
// Host memory: reserve() takes, before a tree call changes anything, the room
// every later step needs (node storage, the free-id list, child-map buckets
// and spare child-map nodes, kept as C++17 node handles), so that create,
// destroy, link and unlink never allocate once reserved.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace kvp::cache {

// Arena index in the low 32 bits, generation in the high 32 bits.
using NodeHandle = uint64_t;

struct TreeNodeBase {
  int32_t parent = -1;
  int32_t ns = 0;
  int32_t children = 0;
  uint32_t generation = 0;
  bool live = false;
  std::vector<int32_t> key;    // tokens on the edge from the parent
  std::vector<int64_t> value;  // full-attention KV slots, one per token
};

// Number of leading tokens that `key` and tokens[0, n) share.
inline size_t common_prefix(const std::vector<int32_t>& key, const int32_t* tokens, size_t n) {
  const size_t limit = std::min(key.size(), n);
  return static_cast<size_t>(std::mismatch(key.data(), key.data() + limit, tokens).first - key.data());
}

template <class Node>
class NodeArena {
 public:
  static constexpr int32_t kRoot = 0;

  NodeArena() { reset(); }
  NodeArena(const NodeArena&) = delete;
  NodeArena& operator=(const NodeArena&) = delete;

  // Drops every node and makes a fresh root. Generations keep counting, so
  // handles from before the reset stay stale.
  void reset() {
    nodes_.clear();
    free_ids_.clear();
    children_.clear();
    live_ = 0;
    create();
  }

  Node& operator[](int32_t id) { return nodes_[static_cast<size_t>(id)]; }
  const Node& operator[](int32_t id) const { return nodes_[static_cast<size_t>(id)]; }
  std::vector<Node>* storage() { return &nodes_; }
  size_t id_limit() const { return nodes_.size(); }  // every id is below this
  size_t id_limit_capacity() const { return nodes_.capacity(); }  // ids stay below this until create() grows it
  size_t live_count() const { return live_; }

  // Room for `new_nodes` more nodes: create/destroy/link/unlink then allocate
  // nothing until that many nodes were made. Changes nothing visible.
  void reserve(size_t new_nodes) {
    const size_t needed = live_ + new_nodes;
    if (nodes_.capacity() < needed) nodes_.reserve(std::max(needed, 2 * nodes_.capacity()));
    const size_t limit = nodes_.capacity();  // no more nodes than this can exist
    if (free_ids_.capacity() < limit) free_ids_.reserve(limit);
    if (static_cast<double>(limit) > static_cast<double>(children_.bucket_count()) * children_.max_load_factor()) {
      children_.reserve(limit);  // no rehash on a link
    }
    if (spare_links_.capacity() < limit) spare_links_.reserve(limit);
    while (children_.size() + spare_links_.size() < limit) {
      // A placeholder key no child has (parents are >= 0), taken out again at once.
      spare_links_.push_back(children_.extract(children_.emplace(ChildKey{-1, 0, 0}, -1).first));
    }
  }

  // A fresh live node. May grow the storage: references to nodes die here.
  int32_t create() {
    int32_t id;
    if (!free_ids_.empty()) {
      id = free_ids_.back();
      free_ids_.pop_back();
    } else {
      id = static_cast<int32_t>(nodes_.size());
      nodes_.emplace_back();
    }
    Node& n = nodes_[static_cast<size_t>(id)];
    n = Node();
    n.generation = ++generations_;
    n.live = true;
    ++live_;
    return id;
  }

  // Precondition: unlinked from its parent and out of every list.
  void destroy(int32_t id) {
    Node& n = nodes_[static_cast<size_t>(id)];
    n.live = false;
    n.key = {};
    n.value = {};
    free_ids_.push_back(id);
    --live_;
  }

  NodeHandle handle(int32_t id) const {
    return (static_cast<uint64_t>(nodes_[static_cast<size_t>(id)].generation) << 32) | static_cast<uint32_t>(id);
  }

  // Arena index of a live node, -1 for a stale or unknown handle.
  int32_t resolve(NodeHandle h) const {
    const uint32_t id = static_cast<uint32_t>(h & 0xffffffffu);
    if (id >= nodes_.size()) return -1;
    const Node& n = nodes_[id];
    return n.live && n.generation == static_cast<uint32_t>(h >> 32) ? static_cast<int32_t>(id) : -1;
  }

  int32_t intern(const std::string& extra_key) {
    auto it = namespaces_.find(extra_key);
    if (it != namespaces_.end()) return it->second;
    const int32_t id = static_cast<int32_t>(namespaces_.size());
    namespaces_.emplace(extra_key, id);
    return id;
  }

  // -1 if the namespace was never used (so nothing can match in it).
  int32_t find_namespace(const std::string& extra_key) const {
    auto it = namespaces_.find(extra_key);
    return it == namespaces_.end() ? -1 : it->second;
  }

  int32_t find_child(int32_t parent, int32_t ns, int32_t first_token) const {
    auto it = children_.find(ChildKey{parent, ns, first_token});
    return it == children_.end() ? -1 : it->second;
  }

  // Precondition: the child's key and namespace are set.
  void link(int32_t parent, int32_t child) {
    Node& c = nodes_[static_cast<size_t>(child)];
    c.parent = parent;
    const ChildKey key{parent, c.ns, c.key.front()};
    if (spare_links_.empty()) {
      children_[key] = child;  // not reserved: allocates
    } else {
      auto nh = std::move(spare_links_.back());
      spare_links_.pop_back();
      nh.key() = key;
      nh.mapped() = child;
      children_.insert(std::move(nh));
    }
    ++nodes_[static_cast<size_t>(parent)].children;
  }

  // Precondition: the child's key is unchanged since it was linked.
  void unlink(int32_t child) {
    Node& c = nodes_[static_cast<size_t>(child)];
    auto nh = children_.extract(ChildKey{c.parent, c.ns, c.key.front()});
    if (spare_links_.size() < spare_links_.capacity()) spare_links_.push_back(std::move(nh));  // no allocation
    --nodes_[static_cast<size_t>(c.parent)].children;
    c.parent = -1;
  }

 private:
  struct ChildKey {
    int32_t parent, ns, token;
    bool operator==(const ChildKey& o) const { return parent == o.parent && ns == o.ns && token == o.token; }
  };
  struct ChildKeyHash {
    size_t operator()(const ChildKey& k) const {
      uint64_t h = (static_cast<uint64_t>(static_cast<uint32_t>(k.parent)) << 32) ^ static_cast<uint32_t>(k.token);
      h ^= static_cast<uint64_t>(static_cast<uint32_t>(k.ns)) * 0x9e3779b97f4a7c15ull;
      h ^= h >> 29;
      h *= 0xbf58476d1ce4e5b9ull;
      return static_cast<size_t>(h ^ (h >> 32));
    }
  };

  std::vector<Node> nodes_;
  std::vector<int32_t> free_ids_;
  size_t live_ = 0;
  uint32_t generations_ = 0;
  using ChildMap = std::unordered_map<ChildKey, int32_t, ChildKeyHash>;
  ChildMap children_;
  std::vector<typename ChildMap::node_type> spare_links_;  // unused child-map nodes (see reserve)
  std::unordered_map<std::string, int32_t> namespaces_;
};

}  // namespace kvp::cache
