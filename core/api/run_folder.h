// The facade (core/api): reading a run directory (records, tails, adapter versions,
// checkpoints), a metrics record (core/run/metrics_record.h), a run's status, and exporting its
// adapters. See core/run/run_dir.h.
#pragma once

#include "core/run/export.h"
#include "core/run/metrics_record.h"
#include "core/run/run_dir.h"
#include "core/run/run_status.h"
