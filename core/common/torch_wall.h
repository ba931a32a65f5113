// Included by a library's wall file (ui/torch_wall.cpp, core/records/records_wall.cpp,
// core/serve/serve_wall.cpp): it fails the build when LibTorch's headers are on that library's
// include path, which means a library it links exports them (LibTorch is linked PRIVATE to the
// engine libraries; see grpo_library in the top-level CMakeLists.txt).
#pragma once
#if __has_include(<torch/torch.h>) || __has_include(<torch/types.h>) || __has_include(<torch/nn.h>)
#error "this library can see LibTorch headers: it must link only torch-free targets (docs/ARCHITECTURE.md, \"Layers\")"
#endif
