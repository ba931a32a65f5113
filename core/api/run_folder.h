// The facade (core/api): reading a run directory (records, tails, adapter versions,
// checkpoints), a metrics record (core/records/metrics_record.h) and a run's status, all from the
// records library (core/records, no trainer). Exporting is core/api/export.h. See
// core/records/run_dir.h.
#pragma once

#include "core/records/metrics_record.h"
#include "core/records/run_dir.h"
#include "core/records/run_status.h"
