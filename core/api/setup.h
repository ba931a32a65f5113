// The facade (core/api): what the setup page shows before a run: a model folder's summary, the
// Hugging Face cache, a dataset's splits and first rows, the reward functions by name, the demo
// task. All torch-free.
#pragma once

#include "core/hub/hf_cache.h"
#include "core/model/inspect.h"
#include "core/rollout/arith_task.h"
#include "core/rollout/dataset.h"
#include "core/rollout/dataset_source.h"
#include "core/rollout/reward.h"
