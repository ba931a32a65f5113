// grpo-studio: the desktop app. main() only: parse arguments, build the window, connect, run.
//   grpo-studio                                  opens ready to run the demo
//   grpo-studio --demo [--steps N] [--screenshot F.png]   runs the demo at once; with
//                                                --screenshot, saves the dashboard and exits
//   grpo-studio --headless [--steps N]           the demo in the terminal; PNG charts at the end
#include <cstdio>
#include <iostream>

#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QLineEdit>
#include <QTimer>

#include "core/common/process_setup.h"
#include "ui/dashboard_page.h"
#include "ui/main_window.h"
#include "ui/setup_page.h"

int main(int argc, char** argv) {
  grpo::prepare_process();  // SIGXFSZ ignored, the allocator kept from unmapping tensors
  bool headless = false, info_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    headless = headless || a == "--headless";
    info_only = info_only || a == "--version" || a == "-v" || a == "--help" || a == "-h";
  }
  const bool no_platform = qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM");
  if ((headless || info_only) && no_platform) qputenv("QT_QPA_PLATFORM", "offscreen");
  if (!headless && !info_only && no_platform && qEnvironmentVariableIsEmpty("DISPLAY") &&
      qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY")) {
    std::cerr << "grpo-studio: no display (DISPLAY and WAYLAND_DISPLAY are unset)\n"
                 "  run the demo in the terminal: grpo-studio --headless\n"
                 "  or under a virtual display:   xvfb-run -a grpo-studio --demo\n";
    return 1;
  }

  QApplication app(argc, argv);
  QApplication::setApplicationName("grpo-studio");
  QApplication::setOrganizationName("grpo-studio");
  QApplication::setApplicationVersion(GRPO_VERSION);
  QCommandLineParser parser;
  parser.setApplicationDescription("GRPO Studio: asynchronous GRPO with LoRA, live.");
  parser.addHelpOption();
  parser.addVersionOption();
  QCommandLineOption demo("demo", "Start the embedded demo (tiny-arith, arithmetic) at once.");
  QCommandLineOption steps("steps", "Override max_steps.", "N");
  QCommandLineOption shot("screenshot", "After the run, save the dashboard to FILE.png and exit.", "FILE");
  QCommandLineOption head("headless", "Run the demo in the terminal (no window); write PNG charts at the end.");
  QCommandLineOption output("output", "Run directory (default: ~/grpo-studio-runs/run-<date>-<time>).", "DIR");
  parser.addOptions({demo, steps, shot, head, output});
  parser.process(app);

  grpo::ui::MainWindow window;
  if (parser.isSet(steps)) {
    bool ok = false;
    const int n = parser.value(steps).toInt(&ok);
    if (!ok || n < 1) {
      std::cerr << "grpo-studio: --steps: expected a positive integer, got \"" << parser.value(steps).toStdString() << "\"\n";
      return 2;
    }
    window.setupPage()->field("max_steps")->setText(QString::number(n));
  }
  if (parser.isSet(output)) window.setupPage()->setRunDirectory(parser.value(output));
  const bool autostart = parser.isSet(demo) || headless;
  const QString screenshot = parser.value(shot);
  int exit_code = 0;

  if (headless) {
    window.resize(1600, 1000);
    window.show();  // offscreen: laid out so the charts render at a real size
    QObject::connect(window.controller(), &grpo::ui::EngineController::stepsReady, &window,
                     [&](const QVector<grpo::run::StepReport>& reports) {
                       for (const auto& r : reports) {
                         auto get = [&](const char* k) { auto it = r.metrics.find(k); return it == r.metrics.end() ? 0.0 : it->second; };
                         std::printf("step %lld/%lld reward %.4f loss %.4f policy-v%lld%s\n", static_cast<long long>(r.step),
                                     static_cast<long long>(r.max_steps), get("reward"), get("loss"),
                                     static_cast<long long>(r.policy_version),
                                     r.metrics.count("eval/accuracy") ? (" eval_acc " + std::to_string(get("eval/accuracy"))).c_str() : "");
                       }
                       std::fflush(stdout);
                     });
  } else if (!screenshot.isEmpty() || autostart) {
    window.show();
  } else {
    window.show();
  }

  QObject::connect(&window, &grpo::ui::MainWindow::runFinished, &app, [&](const QString& adapter, const QString& error) {
    if (!error.isEmpty()) {
      std::cerr << "grpo-studio: run failed: " << error.toStdString() << "\n";
      exit_code = 1;
    } else if (headless) {
      std::cout << "final adapter: " << adapter.toStdString() << "\n";
    }
    if (headless) {
      const QString dir = QDir(window.controller()->runDir()).filePath("charts");
      QStringList written;
      window.showPage(window.dashboard());
      if (!window.dashboard()->saveAllPng(dir, &written)) exit_code = exit_code ? exit_code : 1;
      for (const auto& p : written) std::cout << "chart: " << p.toStdString() << "\n";
      QTimer::singleShot(0, &app, [&] { app.exit(exit_code); });
    } else if (!screenshot.isEmpty()) {
      window.showPage(window.dashboard());
      window.dashboard()->redrawNow(true);
      QTimer::singleShot(300, &app, [&] {  // let the layout settle and the charts paint
        window.dashboard()->redrawNow(true);
        if (!window.grab().save(screenshot, "PNG")) {
          std::cerr << "grpo-studio: cannot write " << screenshot.toStdString() << "\n";
          exit_code = exit_code ? exit_code : 1;
        } else {
          std::cout << "screenshot: " << screenshot.toStdString() << "\n";
        }
        app.exit(exit_code);
      });
    }
  });

  if (autostart) {
    window.setupPage()->loadPreset("demo");
    if (parser.isSet(steps)) window.setupPage()->field("max_steps")->setText(parser.value(steps));
    if (parser.isSet(output)) window.setupPage()->setRunDirectory(parser.value(output));
    QTimer::singleShot(0, &window, [&] {
      if (!window.startRun()) {
        std::cerr << "grpo-studio: cannot start the demo\n";
        app.exit(1);
      }
    });
  }
  return app.exec();
}
