// Facade for ui/ (docs/ARCHITECTURE.md, "Layers"): exporting a run's adapter as a PEFT folder or a
// merged model, a training-library operation (it reads the weights). Torch-free header.
#pragma once

#include "core/run/export.h"
