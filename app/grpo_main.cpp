// grpo: headless CLI (placeholder while the engine layers land).
#include <CLI/CLI.hpp>
#include <iostream>

int main(int argc, char** argv) {
  CLI::App app{"GRPO Studio command line"};
  app.set_version_flag("--version", std::string("grpo ") + GRPO_VERSION);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
