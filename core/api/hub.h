// Facade for ui/ (docs/ARCHITECTURE.md, "Layers"): pushing an exported folder to the Hugging Face
// Hub as one commit (core/hub/hub_upload.h; endpoint and token as huggingface_hub reads them).
// Qt-only and torch-free, like the download side it shares its HTTP code with.
#pragma once

#include "core/hub/hub_upload.h"
