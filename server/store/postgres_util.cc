#include "server/store/postgres_util.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/proto/time.h"

namespace rxfleet::server::postgres {

int64_t LockRevision(pq::Connection& conn) {
  pq::Result row = conn.Exec("SELECT value FROM meta WHERE key = 'revision' FOR UPDATE");
  if (row.rows() != 1) throw pq::Error("XX001", "meta key 'revision' is missing");
  return row.Int(0, 0);
}

uint64_t SnapshotXmin(pq::Connection& conn) {
  // xid8 has no binary cast to int8; its text is the 64-bit number (epoch and xid).
  const std::string text =
      conn.Exec("SELECT pg_snapshot_xmin(pg_current_snapshot())::text").Text(0, 0);
  uint64_t xmin = 0;
  if (!absl::SimpleAtoi(text, &xmin)) {
    throw pq::Error("XX000", absl::StrCat("snapshot xmin '", text, "' is not a number"));
  }
  return xmin;
}

namespace {

// Experiments and tunings: name, create_time_ns, end_time_ns (NULL while it has none), record.
template <typename Resource>
pq::Params ResourceRow(const Resource& resource) {
  pq::Params params;
  params.Text(resource.metadata().name())
      .Int(absl::ToUnixNanos(common::TimeFromProto(resource.metadata().create_time())));
  if (resource.status().has_end_time()) {
    params.Int(absl::ToUnixNanos(common::TimeFromProto(resource.status().end_time())));
  } else {
    params.Null();
  }
  params.Record(resource);
  return params;
}

}  // namespace

pq::Params ExperimentRow(const v1::Experiment& experiment) { return ResourceRow(experiment); }

pq::Params TuningRow(const v1::HoldTuning& tuning) { return ResourceRow(tuning); }

void SetRevision(pq::Connection& conn, int64_t revision) {
  conn.Exec("UPDATE meta SET value = $1 WHERE key = 'revision'", pq::Params().Int(revision));
  // Only the number travels (payloads are limited to 8000 bytes): listeners read the state.
  conn.Exec("SELECT pg_notify($1, $2::int8::text)",
            pq::Params().Text(kRevisionChannel).Int(revision));
}

}  // namespace rxfleet::server::postgres
