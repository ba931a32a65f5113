# The Parquet reader's codec libraries (Debian 12: libsnappy-dev, zlib1g-dev, libzstd-dev; see
# scripts/setup.sh) as one interface target, grpo_parquet_codecs. Included by core/io and by the
# fuzz-only build (tests/fuzz), which configures without core/.
if(NOT TARGET grpo_parquet_codecs)
  find_package(PkgConfig REQUIRED)
  find_package(ZLIB REQUIRED)
  pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
  # libsnappy-dev ships a CMake package (Snappy::snappy) and, on Debian, a pkg-config file too.
  find_package(Snappy CONFIG QUIET)
  add_library(grpo_parquet_codecs INTERFACE)
  if(TARGET Snappy::snappy)
    target_link_libraries(grpo_parquet_codecs INTERFACE Snappy::snappy)
  else()
    pkg_check_modules(SNAPPY REQUIRED IMPORTED_TARGET snappy)
    target_link_libraries(grpo_parquet_codecs INTERFACE PkgConfig::SNAPPY)
  endif()
  target_link_libraries(grpo_parquet_codecs INTERFACE ZLIB::ZLIB PkgConfig::ZSTD)
endif()
