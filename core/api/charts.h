// The facade (core/api): the chart, metric and event catalogue both views draw from, and the
// metrics they derive. See core/records/charts.h and core/records/catalogue.h.
#pragma once

#include "core/records/catalogue.h"
#include "core/records/charts.h"
