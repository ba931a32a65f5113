// Compiled into grpo_ui to keep the layering real: ui/ sees the engine through torch-free
// headers only, so LibTorch's headers must not be on its include path. If this fails, a
// library that grpo_ui links exports LibTorch's include directories (see grpo_library in the
// top-level CMakeLists.txt: torch is linked PRIVATE).
#if __has_include(<torch/torch.h>) || __has_include(<torch/types.h>) || __has_include(<torch/nn.h>)
#error "ui/ can see LibTorch headers: grpo_ui must link only torch-free targets (LibTorch PRIVATE to the engine libraries)"
#endif
