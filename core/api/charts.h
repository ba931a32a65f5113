// The facade (core/api): the chart catalogue both views draw from, and the metrics they derive.
// See core/records/charts.h.
#pragma once

#include "core/records/charts.h"
