// The facade (core/api): the chart catalogue both views draw from, and the metrics they derive.
// See core/run/charts.h.
#pragma once

#include "core/run/charts.h"
