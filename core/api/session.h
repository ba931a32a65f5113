// The facade (core/api): a training run on its own thread, and the value types that come out of
// it (step reports, events, samples, workers). See core/run/engine_session.h.
#pragma once

#include "core/records/engine_types.h"
#include "core/run/engine_session.h"
