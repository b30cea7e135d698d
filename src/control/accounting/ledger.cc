// The allocation ledger's writes and the reports read from it: every change of whether a job holds
// GPUs appends entries to the same WriteBatch as the job change, so the ledger is exactly as
// durable as the job. See model::LedgerEntry and accounting_service.h.

#include <algorithm>
#include <unordered_set>

#include "control/accounting/accounting_service.h"
#include "control/authz.h"
#include "control/names.h"

namespace allot::control {
namespace {

using model::holdsGpus;

}  // namespace

void AccountingService::load(const store::Contents& contents) {
  const TimeMs recent = clock_.nowMs() - 10 * 60'000;
  std::unordered_set<int64_t> live;
  for (const auto& i : world_.ledger.intervals()) {
    if (i.end == 0 || i.end >= recent) live.insert(i.openSeq);
  }
  for (const auto& e : contents.ledger) {
    if (live.count(e.kind == model::LedgerKind::kOpen ? e.seq : e.ref)) usage_.onLedger(e);
  }
}

void AccountingService::append(model::LedgerEntry e, store::WriteBatch& batch) {
  e.seq = world_.ledger.nextSeq();
  world_.ledger.apply(e);
  usage_.onLedger(e);
  batch.add(store::AppendLedger{std::move(e)});
}

void AccountingService::sampleRound(const std::string& host, const model::Telemetry& t,
                                    TimeMs now) {
  usage_.addRound(host, t, now, [this](int64_t alloc, const telemetry::UsageCell& c) {
    world_.ledger.addUsage(alloc, c);
  });
}

void AccountingService::jobChanged(const model::Job& before, const model::Job& after,
                                   store::WriteBatch& batch) {
  const bool held = holdsGpus(before.state);
  const bool holds = holdsGpus(after.state);
  if (held && !holds) {
    const TimeMs now = clock_.nowMs();
    for (int64_t seq : world_.ledger.openPlacement(after.id)) {
      const LedgerInterval* i = world_.ledger.interval(seq);
      model::LedgerEntry e;
      e.kind = model::LedgerKind::kClose;
      e.ref = seq;
      e.jobId = after.id;
      // An end the agent reported (the process exited while allotd was away) is the truth.
      e.endAt = after.finishedAt > 0 && after.finishedAt < now ? after.finishedAt : now;
      if (i) e.endAt = std::max(e.endAt, i->start);
      e.reason =
          after.state == model::JobState::kQueued ? "requeued" : model::jobStateName(after.state);
      append(std::move(e), batch);
    }
  }
  if (!held && holds) {
    auto open = [&](const std::string& host, const std::vector<int>& gpus) {
      if (gpus.empty()) return;  // a CPU-only job holds no GPUs: nothing to account
      model::LedgerEntry e;
      e.jobId = after.id;
      e.team = after.team;
      e.project = after.project;
      e.user = after.user;
      e.host = host;
      if (auto h = world_.hosts.find(host); h != world_.hosts.end() && !gpus.empty()) {
        for (const auto& g : h->second.gpus) {
          if (g.index == gpus.front()) e.gpuModel = g.model;
        }
      }
      e.gpuIndices = gpus;
      e.gpuMilli = after.resources.gpuMilli;
      e.startAt = after.scheduledAt > 0 ? after.scheduledAt : clock_.nowMs();
      append(std::move(e), batch);
    };
    for (const auto& r : after.ranks) open(r.host, r.gpuIndices);
  }
}

Result<std::optional<std::string>> AccountingService::usageTeam(const Principal& p,
                                                                const std::string& team,
                                                                TimeMs from, TimeMs to) const {
  if (!p.isUser()) return Status::PermissionDenied("usage reports are for users");
  if (!team.empty() && (!world_.teams.count(team) || !authz::canSeeTeam(p, team)))
    return Status::NotFound("no team '" + team + "'");
  std::optional<std::string> out = team;
  if (!p.isAdmin() && team.empty()) {
    if (p.teams.empty()) return std::optional<std::string>();
    out = p.soleTeam();
    if (out->empty()) return Status::InvalidArgument(teamRequired(p), "team");
  }
  if (from >= to) return Status::InvalidArgument("from: must be before to", "from");
  return out;
}

UsageWithin AccountingService::measuredUsage() const {
  return [this](int64_t seq, TimeMs from, TimeMs to) -> std::optional<telemetry::UsageCell> {
    std::optional<telemetry::UsageCell> part =
        history_ ? history_(seq, from, to) : telemetry::UsageCell{};
    if (part) *part += usage_.pendingWithin(seq, from, to);
    return part;
  };
}

Result<std::vector<UsageRow>> AccountingService::usage(const Principal& p, UsageQuery q) const {
  auto team = usageTeam(p, q.team, q.from, q.to);
  if (!team.ok()) return team.status();
  if (!*team) return std::vector<UsageRow>{};
  q.team = **team;
  q.now = clock_.nowMs();
  return usageReport(world_.ledger, q, measuredUsage());
}

Result<std::vector<SeriesRow>> AccountingService::usageSeries(const Principal& p,
                                                              SeriesQuery q) const {
  auto team = usageTeam(p, q.team, q.from, q.to);
  if (!team.ok()) return team.status();
  if (!*team) return std::vector<SeriesRow>{};
  if (q.step <= 0) return Status::InvalidArgument("step: must be positive", "step");
  q.team = **team;
  q.now = clock_.nowMs();
  return control::usageSeries(world_.ledger, q, measuredUsage());
}

void AccountingService::loadUsageTotals(
    const std::vector<std::pair<int64_t, telemetry::UsageCell>>& totals) {
  for (const auto& [seq, cell] : totals) world_.ledger.addUsage(seq, cell);
}

Change<int> AccountingService::adoptUnledgeredJobs() {
  Change<int> c;
  c.value = 0;
  for (const model::Job* held : world_.heldJobs()) {
    const model::Job& j = *held;
    const int64_t id = j.id;
    if (!world_.ledger.openPlacement(id).empty()) continue;
    model::Job before = j;
    before.state = model::JobState::kQueued;
    const size_t ops = c.batch.ops.size();
    jobChanged(before, j, c.batch);
    if (c.batch.ops.size() > ops) ++c.value;
  }
  return c;
}

void AccountingService::correctEnd(int64_t jobId, const std::vector<int64_t>& openSeqs,
                                   const std::string& host, TimeMs end, const std::string& why,
                                   store::WriteBatch& batch) {
  for (int64_t seq : openSeqs) {
    const LedgerInterval* i = world_.ledger.interval(seq);
    if (!i || i->end == 0 || world_.ledger.hostOf(*i) != host || end >= i->end) continue;
    model::LedgerEntry e;
    e.kind = model::LedgerKind::kCorrect;
    e.ref = seq;
    e.endAt = std::max(end, i->start);
    e.jobId = jobId;
    e.reason = why;
    append(std::move(e), batch);
  }
}

}  // namespace allot::control
