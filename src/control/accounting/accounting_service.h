#pragma once
// AccountingService: every GPU-hour, by team, project and user, allocated and used
// (docs/accounting.md). The allocation ledger is written as an observer of job changes: when a
// job starts or stops holding GPUs, its entries go into the same batch as the job change, so the
// ledger is exactly as durable as the job. Measured use comes from the agents' samples,
// attributed to the allocations holding the GPUs (telemetry/attribution.h), kept as running
// totals and handed to the telemetry store.
//
// Owns: the World's ledger index (only this service appends to it), the attributor, and the
// telemetry store's history as reports read it. Reads: hosts (a GPU's model), teams, jobs.
// Threading: allotd's I/O thread.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "control/change.h"
#include "control/principal.h"
#include "control/usage_report.h"
#include "control/usage_series.h"
#include "control/world.h"
#include "model/agent_protocol.h"
#include "model/model.h"
#include "store/store.h"
#include "telemetry/attribution.h"

namespace allot::control {

class AccountingService {
 public:
  // `idleBelowPct`: allocated time whose samples read under this utilisation counts as idle.
  AccountingService(const Clock& clock, World& world, double idleBelowPct)
      : clock_(clock), world_(world), usage_(idleBelowPct) {}

  // After the World is loaded: the attributor takes the holds of allocations open now or closed
  // moments ago (samples may still come for them), not the whole history.
  void load(const store::Contents& contents);

  // A job changed (`before` its old copy): an open entry per rank when it starts holding GPUs,
  // a close entry for each when it stops, in `batch`.
  void jobChanged(const model::Job& before, const model::Job& after, store::WriteBatch& batch);
  // A correction: the given intervals on `host` ended at `end` (when it was last seen).
  void correctEnd(int64_t jobId, const std::vector<int64_t>& openSeqs, const std::string& host,
                  TimeMs end, const std::string& why, store::WriteBatch& batch);
  // A sample round from `host`, already checked against its GPUs, received at `now`.
  void sampleRound(const std::string& host, const model::Telemetry& t, TimeMs now);

  // Allocated GPU time from the ledger. Members see only their own team (naming another team is
  // NotFound); platform admins see every team, or the one named.
  Result<std::vector<UsageRow>> usage(const Principal& p, UsageQuery q) const;
  // The same over time (control/usage_series.h), under the same visibility.
  Result<std::vector<SeriesRow>> usageSeries(const Principal& p, SeriesQuery q) const;
  // After load: jobs holding GPUs with no open ledger entry (placed before the ledger existed,
  // schema < 3) get their open entries now, from when they were placed. The value counts them.
  Change<int> adoptUnledgeredJobs();
  // At start: each allocation's running totals, as the telemetry store kept them.
  void loadUsageTotals(const std::vector<std::pair<int64_t, telemetry::UsageCell>>& totals);
  // Where reports read the use inside part of an interval: the telemetry store's tiers.
  void setUsageHistory(UsageWithin history) { history_ = std::move(history); }
  // Samples, rollups and attributed use since the last call, for the telemetry store.
  telemetry::TelemetryBatch drainTelemetry() { return usage_.drain(); }

 private:
  // The team a usage report covers: the one named, else the caller's only team, "" for all
  // (platform admins). nullopt: the caller has no team, so the report is empty. Also checks that
  // from is before to.
  Result<std::optional<std::string>> usageTeam(const Principal& p, const std::string& team,
                                               TimeMs from, TimeMs to) const;
  // The measured use within a span: telemetry.db's tiers plus what is not written there yet.
  UsageWithin measuredUsage() const;
  void append(model::LedgerEntry e, store::WriteBatch& batch);

  const Clock& clock_;
  World& world_;
  telemetry::UsageAttributor usage_;  // samples -> allocations, until drained
  UsageWithin history_;               // the telemetry store's tiers; empty in tests
};

}  // namespace allot::control
