// What every GRPO Studio process (the CLI, workers, the desktop app) sets up before anything else.
#pragma once

namespace grpo {

// - SIGXFSZ ignored: a file-size limit (ulimit -f) fails the write with EFBIG, which the engine
//   treats as a full bucket (pause, retry), instead of killing the process.
// - glibc's allocator keeps large blocks instead of mapping and unmapping them: a training step
//   allocates and frees tensors of megabytes thousands of times, and with glibc's defaults each
//   such block is a fresh mmap whose pages fault in again. The trainer's step on `grpo bench
//   grpo-step`'s defaults is about 8% faster (BENCHMARKS.md, "Allocator"). Blocks up to 256 MiB
//   come from the heap, up to 1 GiB of free heap top is kept, and the heap grows 64 MiB at a
//   time. A setting the user gives in the environment (MALLOC_MMAP_THRESHOLD_,
//   MALLOC_TRIM_THRESHOLD_, MALLOC_TOP_PAD_) is left as given.
void prepare_process();

}  // namespace grpo
