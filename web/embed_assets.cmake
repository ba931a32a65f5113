# Compiles the browser view's files (this folder) into one C++ source of byte arrays, served by
# core/serve/dashboard_routes.cpp: the binary carries its page, nothing is fetched at run time.
# cmake -DROOT=<web dir> -DOUT=<file.cpp> -P embed_assets.cmake
# Served paths are the files' paths below ROOT ("/app.js", "/vendor/uplot/uPlot.iife.min.js");
# index.html is also "/". Only the types listed below are embedded (not this script).
if(NOT ROOT OR NOT OUT)
  message(FATAL_ERROR "usage: cmake -DROOT=<dir> -DOUT=<file.cpp> -P embed_assets.cmake")
endif()
file(GLOB_RECURSE files RELATIVE "${ROOT}" "${ROOT}/*.html" "${ROOT}/*.js" "${ROOT}/*.css" "${ROOT}/*.svg"
     "${ROOT}/LICENSE" "${ROOT}/*/LICENSE")
list(SORT files)
set(arrays "")
set(table "")
set(i 0)
foreach(rel ${files})
  if(rel MATCHES "^tests/|node_modules")
    continue()
  endif()
  get_filename_component(ext "${rel}" LAST_EXT)
  if(ext STREQUAL ".html")
    set(type "text/html; charset=utf-8")
  elseif(ext STREQUAL ".js")
    set(type "text/javascript; charset=utf-8")
  elseif(ext STREQUAL ".css")
    set(type "text/css; charset=utf-8")
  elseif(ext STREQUAL ".svg")
    set(type "image/svg+xml")
  else()
    set(type "text/plain; charset=utf-8")
  endif()
  file(READ "${ROOT}/${rel}" hex HEX)
  string(LENGTH "${hex}" hex_len)
  math(EXPR size "${hex_len} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  # Break the initializer into lines of 32 bytes (about 160 characters).
  string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){32})" "\\1\n" bytes "${bytes}")
  string(APPEND arrays "// ${rel}\nstatic const unsigned char a${i}[] = {\n${bytes}0x00};\n")
  string(APPEND table "    {\"/${rel}\", \"${type}\", a${i}, ${size}},\n")
  math(EXPR i "${i} + 1")
endforeach()
set(src "// Generated from web/ by web/embed_assets.cmake at build time: do not edit.
#include \"core/serve/web_assets.h\"

namespace grpo::run::web {

${arrays}
extern const Asset kAssets[] = {
${table}};
extern const std::size_t kAssetCount = ${i};

}  // namespace grpo::run::web
")
# Rewrite only on change, so an unchanged page does not recompile.
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
  if(old STREQUAL src)
    return()
  endif()
endif()
file(WRITE "${OUT}" "${src}")
