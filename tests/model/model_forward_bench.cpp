// model_forward_bench: runs grpo::model::bench_forward from the command line until `grpo bench`
// wires it. Usage: model_forward_bench [size|model_dir] [seq_len] [batch] [lora_r] [threads] [iters]
#include <iostream>
#include <string>

#include "core/common/files.h"
#include "core/model/forward_bench.h"

int main(int argc, char** argv) {
  grpo::model::ForwardBenchOptions o;
  if (argc > 1) {
    std::string a = argv[1];
    if (grpo::is_directory(a)) o.model_dir = a;
    else o.size = a;
  }
  if (argc > 2) o.seq_len = std::stoll(argv[2]);
  if (argc > 3) o.batch = std::stoll(argv[3]);
  if (argc > 4) o.lora_r = std::stoll(argv[4]);
  if (argc > 5) o.threads = std::stoi(argv[5]);
  if (argc > 6) o.iters = std::stoi(argv[6]);
  try {
    std::cout << grpo::model::bench_forward(o).dump(2) << "\n";
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
