#pragma once
// A Store that fails chosen commits, for tests of what a failed durable write does (like
// LevelDB's FaultInjectionTestEnv). It wraps a real store: batches it lets through are written
// as the real store writes them; a batch it fails is never written, as when the disk refuses a
// write or an fsync, and its caller gets the error. Nothing here is for production use.

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

#include "store/store.h"

namespace allot::store {

class FaultInjectingStore : public Store {
 public:
  using Fault = std::function<bool(const WriteBatch&)>;

  explicit FaultInjectingStore(std::unique_ptr<Store> inner) : inner_(std::move(inner)) {}

  // Every batch for which `fault` holds fails from now on (until heal()).
  void failIf(Fault fault) {
    std::lock_guard lock(mu_);
    fault_ = std::move(fault);
  }
  void heal() { failIf(nullptr); }
  // Batches refused so far.
  int failed() const { return failed_.load(); }

  // Whether the batch holds an op of type Op (a PutTeam, an AppendAudit, ...).
  template <typename Op>
  static bool holds(const WriteBatch& b) {
    for (const auto& op : b.ops)
      if (std::holds_alternative<Op>(op)) return true;
    return false;
  }

  Result<Contents> loadAll() override { return inner_->loadAll(); }
  Status commit(WriteBatch batch) override {
    if (shouldFail(batch)) return injected();
    return inner_->commit(std::move(batch));
  }
  void submit(WriteBatch batch, std::function<void(Status)> done) override {
    if (shouldFail(batch)) {
      done(injected());
      return;
    }
    inner_->submit(std::move(batch), std::move(done));
  }
  Result<std::vector<model::AuditEntry>> queryAudit(const AuditQuery& q) override {
    return inner_->queryAudit(q);
  }
  int schemaVersion() const override { return inner_->schemaVersion(); }

 private:
  bool shouldFail(const WriteBatch& batch) {
    std::lock_guard lock(mu_);
    if (!fault_ || !fault_(batch)) return false;
    ++failed_;
    return true;
  }
  static Status injected() {
    return Status::Unavailable("injected fault: the batch did not reach the disk");
  }

  std::unique_ptr<Store> inner_;
  std::mutex mu_;
  Fault fault_;
  std::atomic<int> failed_{0};
};

}  // namespace allot::store
