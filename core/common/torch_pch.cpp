// Anchor translation unit for the shared LibTorch precompiled header (see top-level CMakeLists.txt).
