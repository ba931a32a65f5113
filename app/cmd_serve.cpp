// `grpo serve RUN_DIR [MORE_RUN_DIRS...] --listen HOST:PORT`: the browser view of runs on disk,
// read-only (core/serve/dashboard_routes.h; docs/dashboard.md). The first run is shown; the others
// can be overlaid on its charts for comparison. Data routes need the cluster token; the page's
// address with the token in its fragment is printed once listening. SIGINT/SIGTERM stop it (exit 0).
#include <CLI/CLI.hpp>

#include <iostream>

#include <QCoreApplication>

#include "app/commands.h"
#include "core/cluster/cluster_token.h"
#include "core/cluster/http_server.h"
#include "core/common/error.h"
#include "core/grpo/config.h"
#include "core/grpo/config_schema_json.h"
#include "core/records/run_dir.h"
#include "core/serve/dashboard_routes.h"
#include "core/serve/run_endpoint.h"

namespace grpo::cli {

void add_serve_commands(CLI::App& app) {
  struct ServeArgs {
    std::vector<std::string> runs;
    std::string listen = "127.0.0.1:8765", token_file, tls_cert, tls_key;
  };
  auto a = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand("serve", "Serve the browser view of finished (or running) runs, read-only");
  cmd->add_option("RUN_DIR", a->runs, "Run directories: the first is shown, the others can be compared on its charts")
      ->required();
  cmd->add_option("--listen", a->listen, "HOST:PORT to listen on (port 0: any free port)")->capture_default_str();
  cmd->add_option("--cluster-token-file", a->token_file,
                  "The token the page asks for (default: " + cluster::default_token_path() + ", created if missing)");
  cmd->add_option("--tls-cert", a->tls_cert, "Serve HTTPS with this PEM certificate (and --tls-key)");
  cmd->add_option("--tls-key", a->tls_key, "The certificate's PEM private key");
  cmd->callback([a] {
    cluster::HttpServerOptions o;
    as_usage_errors([&] {
      std::tie(o.host, o.port) = run::parse_host_port(a->listen, "--listen");
      check(a->tls_cert.empty() == a->tls_key.empty(), "--tls-cert/--tls-key", "give both or neither");
      for (const auto& r : a->runs) {
        const run::RunFolder f = run::RunFolder::open_existing(r);
        check(f.has_config(), r, "not a run directory (it has no " + std::string(run::RunFolder::kConfigFile) + ")",
              "give the --output folder of a grpo train run");
      }
    });
    o.bearer_token = cluster::load_or_create_token(a->token_file.empty() ? cluster::default_token_path() : a->token_file);
    o.server_name = "grpo-serve";
    o.tls_cert_file = a->tls_cert;
    o.tls_key_file = a->tls_key;

    // The server thread's event loop wants an application object; this thread only waits.
    const auto qt = make_qt_application();
    cluster::HttpServer server(o);
    run::DashboardSource source;
    source.run_dirs = a->runs;
    source.config_schema = grpo::config_schema_json(grpo::train_config_schema());
    run::add_dashboard_routes(server, source);
    run::add_run_folder_routes(server, a->runs.front());
    install_stop_signals();
    server.start();
    std::cout << "serving " << a->runs.front() << " (read-only) on " << server.url() << std::endl;
    std::cout << "dashboard: " << run::dashboard_url(server.url(), o.bearer_token) << std::endl;
    wait_for_stop_signal();
    server.stop();
  });
}

}  // namespace grpo::cli
