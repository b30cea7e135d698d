#include "telemetry/telemetry_schema.h"

#include <array>
#include <string>

#include "store/migrations/schema_sql.h"

namespace allot::telemetry {
namespace {

// Times are Unix milliseconds; `bucket` is the start of a minute or hour. Usage columns are
// milli-GPU-milliseconds (telemetry/usage_cell.h); `alloc` is the ledger seq of the allocation's
// open entry. Readings a GPU did not report are NULL in gpu_samples. Rollup tables are keyed the
// way they are read (one GPU's or one allocation's buckets in time order), and so are raw samples;
// retention deletes by time scan them, once an hour.
constexpr std::string_view kV1Samples = R"sql(
CREATE TABLE gpu_samples (
  host            TEXT NOT NULL,
  gpu             INTEGER NOT NULL,
  at_ms           INTEGER NOT NULL,
  util_pct        REAL,
  memory_mib      INTEGER,
  temperature_c   REAL,
  power_w         REAL,
  sm_clock_mhz    INTEGER,
  ecc_corrected   INTEGER,
  ecc_uncorrected INTEGER
);
CREATE INDEX gpu_samples_by_gpu ON gpu_samples (host, gpu, at_ms);

)sql";

// Minute and hour rollups of a GPU's samples, and of an allocation's usage: the two tiers of each
// have the same columns and differ only in the bucket's length.
constexpr std::string_view kGpuRollupColumns = R"sql(  host              TEXT NOT NULL,
  gpu               INTEGER NOT NULL,
  bucket            INTEGER NOT NULL,
  samples           INTEGER NOT NULL,
  util_samples      INTEGER NOT NULL,
  util_sum          REAL NOT NULL,
  memory_max_mib    INTEGER NOT NULL,
  temperature_max_c REAL NOT NULL,
  power_sum_w       REAL NOT NULL,
  power_samples     INTEGER NOT NULL,
  PRIMARY KEY (host, gpu, bucket)
)sql";
constexpr std::string_view kUsageRollupColumns = R"sql(  alloc    INTEGER NOT NULL,
  bucket   INTEGER NOT NULL,
  measured INTEGER NOT NULL,
  used     INTEGER NOT NULL,
  idle     INTEGER NOT NULL,
  PRIMARY KEY (alloc, bucket)
)sql";

constexpr std::string_view kV1UsageTotals = R"sql(CREATE TABLE usage_totals (
  alloc    INTEGER PRIMARY KEY,
  measured INTEGER NOT NULL,
  used     INTEGER NOT NULL,
  idle     INTEGER NOT NULL
);
)sql";

}  // namespace

std::span<const store::Migration> telemetryMigrations() {
  static const std::string kV1 =
      std::string(kV1Samples) + store::withoutRowidTable("gpu_minutes", kGpuRollupColumns) +
      store::withoutRowidTable("gpu_hours", kGpuRollupColumns) + "\n" +
      store::withoutRowidTable("usage_minutes", kUsageRollupColumns) +
      store::withoutRowidTable("usage_hours", kUsageRollupColumns) + std::string(kV1UsageTotals);
  static const std::array kMigrations = {
      store::Migration{1, "samples, rollups and usage", kV1},
  };
  return kMigrations;
}

}  // namespace allot::telemetry
