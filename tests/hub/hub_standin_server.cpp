// The loopback Hub stand-in (hub_standin.h) as a process, for measurements that run the real
// `grpo` against it (scripts/bench_hub_push.sh): it listens on 127.0.0.1, accepts pushes made with
// the token given as its argument, prints its URL as its first line on stdout, and exits when its
// stdin closes (the caller holds the pipe, so the server never outlives it). A test tool: never
// installed.
#include <QCoreApplication>
#include <QSocketNotifier>

#include <cstdio>
#include <iostream>
#include <unistd.h>

#include "tests/hub/hub_standin.h"

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  if (argc != 2) {
    std::cerr << "usage: hub_standin_server TOKEN   (serves until stdin closes)" << std::endl;
    return 2;
  }
  hub_test::HubStandIn hub;
  hub.set_upload_token(QByteArray(argv[1]));
  std::cout << hub.url() << std::endl;
  QSocketNotifier stdin_closed(STDIN_FILENO, QSocketNotifier::Read);
  QObject::connect(&stdin_closed, &QSocketNotifier::activated, &app, [&] {
    char buf[256];
    if (::read(STDIN_FILENO, buf, sizeof buf) <= 0) app.quit();
  });
  const int rc = app.exec();
  const auto stats = hub.upload_stats();
  std::cerr << "hub_standin_server: " << stats.commits << " commits, " << stats.violations.size() << " violations" << std::endl;
  for (const auto& v : stats.violations) std::cerr << "  violation: " << v.toStdString() << std::endl;
  return rc == 0 && stats.violations.empty() ? 0 : 1;
}
