#pragma once
// A set of GPU model ids (ClusterState::modelId): which models, or in Allot's fleet which
// capacity kinds, a task may use. Any number of ids: a kind is model x owner x mode x driver x
// CUDA x lease hold x contour, and a real fleet passes 64 of them. The first 64 ids live in one
// word, so the common fleet never allocates and a membership test is a shift; the set "any model"
// is a flag, since it holds ids no state has handed out yet.

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <tuple>
#include <vector>

namespace allot::sched::placement {

class ModelSet {
 public:
  ModelSet() = default;  // empty: no model
  static ModelSet any() {
    ModelSet s;
    s.any_ = true;
    return s;
  }
  static ModelSet of(std::initializer_list<int> ids) {
    ModelSet s;
    for (int id : ids) s.insert(id);
    return s;
  }

  bool isAny() const { return any_; }
  bool empty() const { return !any_ && low_ == 0 && high_.empty(); }
  bool contains(int id) const {
    if (any_) return true;
    if (id < 64) return id >= 0 && ((low_ >> id) & 1);
    const size_t w = static_cast<size_t>(id / 64 - 1);
    return w < high_.size() && ((high_[w] >> (id % 64)) & 1);
  }
  void insert(int id) {
    if (any_ || id < 0) return;
    if (id < 64) {
      low_ |= uint64_t{1} << id;
      return;
    }
    const size_t w = static_cast<size_t>(id / 64 - 1);
    if (high_.size() <= w) high_.resize(w + 1, 0);
    high_[w] |= uint64_t{1} << (id % 64);
  }
  // The largest id an explicit set holds, -1 when none (or any).
  int maxId() const {
    if (any_) return -1;
    for (size_t w = high_.size(); w-- > 0;)
      if (high_[w]) return static_cast<int>((w + 1) * 64) + 63 - __builtin_clzll(high_[w]);
    return low_ ? 63 - __builtin_clzll(low_) : -1;
  }

  ModelSet& operator|=(const ModelSet& o) {
    if (any_ || o.any_) return *this = any();
    low_ |= o.low_;
    if (high_.size() < o.high_.size()) high_.resize(o.high_.size(), 0);
    for (size_t w = 0; w < o.high_.size(); ++w) high_[w] |= o.high_[w];
    return *this;
  }
  ModelSet& operator&=(const ModelSet& o) {
    if (o.any_) return *this;
    if (any_) return *this = o;
    low_ &= o.low_;
    high_.resize(std::min(high_.size(), o.high_.size()));
    for (size_t w = 0; w < high_.size(); ++w) high_[w] &= o.high_[w];
    trim();
    return *this;
  }
  // The ids of this set that `o` lacks. "Any" has no complement here: taking from it is a bug.
  ModelSet& operator-=(const ModelSet& o) {
    if (any_) std::abort();
    if (o.any_) return *this = ModelSet{};
    low_ &= ~o.low_;
    for (size_t w = 0; w < std::min(high_.size(), o.high_.size()); ++w) high_[w] &= ~o.high_[w];
    trim();
    return *this;
  }
  friend ModelSet operator|(ModelSet a, const ModelSet& b) { return a |= b; }
  friend ModelSet operator&(ModelSet a, const ModelSet& b) { return a &= b; }
  friend ModelSet operator-(ModelSet a, const ModelSet& b) { return a -= b; }

  // Sets are kept trimmed (no trailing zero words), so equal sets compare equal.
  friend bool operator==(const ModelSet& a, const ModelSet& b) {
    return std::tie(a.any_, a.low_, a.high_) == std::tie(b.any_, b.low_, b.high_);
  }
  friend bool operator<(const ModelSet& a, const ModelSet& b) {
    return std::tie(a.any_, a.low_, a.high_) < std::tie(b.any_, b.low_, b.high_);
  }
  uint64_t hash() const {
    uint64_t h = (any_ ? 0x9e3779b97f4a7c15ULL : 0) ^ low_;
    for (uint64_t w : high_) h = (h ^ w) * 0x100000001b3ULL + (h >> 29);
    return h;
  }

 private:
  void trim() {
    while (!high_.empty() && high_.back() == 0) high_.pop_back();
  }

  bool any_ = false;
  uint64_t low_ = 0;            // ids 0..63
  std::vector<uint64_t> high_;  // ids 64.., 64 per word
};

}  // namespace allot::sched::placement
