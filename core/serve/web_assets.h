// The files of web/ (the browser view), compiled into the binary by web/embed_assets.cmake as the
// generated web_assets.cpp of core/serve's build folder; served by dashboard_routes.cpp.
#pragma once

#include <cstddef>

namespace grpo::run::web {

struct Asset {
  const char* path;  // "/app.js"
  const char* type;  // "text/javascript; charset=utf-8"
  const unsigned char* data;
  std::size_t size;
};
extern const Asset kAssets[];
extern const std::size_t kAssetCount;

}  // namespace grpo::run::web
