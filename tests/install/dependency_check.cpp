// dependency_check: the smallest program that uses every library the app links, each for real,
// so a machine whose packages are incomplete fails here with the package to install instead of
// deep inside a build or a run. scripts/check_fresh.sh builds and runs it on a pristine Debian 12
// root; CTest runs it too. Checks:
//   LibTorch   a 192x192 fp32 matrix product against a plain triple loop (BLAS is wired up)
//   Qt Charts  a line chart with a title rendered offscreen into an image: the plot and the
//              title's glyphs are drawn (the platform plugin, OpenGL-linked Charts, and a font)
//   Qt Network a loopback TCP round trip (127.0.0.1) and TLS support (the OpenSSL backend)
// Prints one JSON line; exits 1 naming what failed and the Debian package that provides it.
#include <torch/torch.h>

#include <QApplication>
#include <QChart>
#include <QChartView>
#include <QElapsedTimer>
#include <QFontDatabase>
#include <QImage>
#include <QLineSeries>
#include <QSslSocket>
#include <QTcpServer>
#include <QTcpSocket>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace {

std::vector<std::string> failures;

void fail(const std::string& what, const std::string& fix) { failures.push_back(what + " (fix: " + fix + ")"); }

// Largest |C - A*B| over a matrix product done by LibTorch and by hand.
double torch_matmul_error() {
  constexpr int64_t n = 192;
  torch::manual_seed(7);
  auto a = torch::randn({n, n}), b = torch::randn({n, n});  // (n, n)
  auto c = torch::matmul(a, b).contiguous();                // (n, n)
  auto pa = a.accessor<float, 2>(), pb = b.accessor<float, 2>(), pc = c.accessor<float, 2>();
  double worst = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t k = 0; k < n; ++k) s += double(pa[i][k]) * pb[k][j];
      worst = std::max(worst, std::abs(s - pc[i][j]));
    }
  return worst;
}

// Pixels of `img` inside `rect` that differ from the rectangle's first pixel.
int64_t inked_pixels(const QImage& img, const QRect& rect) {
  const QRect r = rect.intersected(img.rect());
  if (r.isEmpty()) return 0;
  const QRgb background = img.pixel(r.topLeft());
  int64_t n = 0;
  for (int y = r.top(); y <= r.bottom(); ++y)
    for (int x = r.left(); x <= r.right(); ++x) n += img.pixel(x, y) != background;
  return n;
}

// Renders a titled line chart offscreen; returns the inked pixels of the title band and the plot.
std::pair<int64_t, int64_t> render_chart() {
  auto* series = new QLineSeries;
  for (int i = 0; i < 50; ++i) series->append(i, std::sin(i / 5.0));
  auto* chart = new QChart;
  chart->addSeries(series);
  chart->createDefaultAxes();
  chart->legend()->hide();
  chart->setTitle("dependency check");
  QFont title_font = chart->titleFont();
  title_font.setPointSize(18);
  chart->setTitleFont(title_font);
  chart->setAnimationOptions(QChart::NoAnimation);
  QChartView view(chart);  // owns the chart
  view.resize(480, 320);
  view.show();  // laid out and painted by the platform plugin (offscreen without a display)
  QApplication::processEvents();
  const QImage img = view.grab().toImage();
  const int64_t title = inked_pixels(img, QRect(0, 0, img.width(), 40));
  const QRectF plot = chart->plotArea();
  return {title, inked_pixels(img, plot.toRect().adjusted(2, 2, -2, -2))};
}

// Sends a few bytes from a client socket to a server socket over 127.0.0.1; true when they arrive.
bool loopback_round_trip() {
  QTcpServer server;
  if (!server.listen(QHostAddress::LocalHost, 0)) return false;
  QTcpSocket client;
  client.connectToHost(QHostAddress::LocalHost, server.serverPort());
  if (!client.waitForConnected(5000) || !server.waitForNewConnection(5000)) return false;
  QTcpSocket* peer = server.nextPendingConnection();
  const QByteArray message = "grpo dependency check";
  client.write(message);
  client.flush();
  QByteArray got;
  QElapsedTimer clock;
  clock.start();
  while (got.size() < message.size() && clock.elapsed() < 5000)
    if (peer->waitForReadyRead(100)) got += peer->readAll();
  return got == message;
}

}  // namespace

int main(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);

  const double matmul_error = torch_matmul_error();
  if (!(matmul_error < 1e-3)) fail("LibTorch matmul differs from the reference by " + std::to_string(matmul_error), "libtorch-dev, libopenblas0-pthread");

  const int families = int(QFontDatabase::families().size());
  if (families == 0) fail("Qt finds no font", "fonts-dejavu-core");
  const auto [title_ink, plot_ink] = render_chart();
  if (title_ink < 50) fail("the chart's title drew " + std::to_string(title_ink) + " pixels", "fonts-dejavu-core");
  if (plot_ink < 50) fail("the chart's plot drew " + std::to_string(plot_ink) + " pixels", "qt6-charts-dev, libqt6opengl6-dev, qt6-qpa-plugins");

  const bool tcp = loopback_round_trip();
  if (!tcp) fail("no loopback TCP round trip with Qt Network", "qt6-base-dev");
  const bool tls = QSslSocket::supportsSsl();
  if (!tls) fail("Qt Network has no TLS backend", "libssl3");

  std::printf("{\"torch\":\"%s\",\"qt\":\"%s\",\"matmul_max_abs_error\":%.3g,\"font_families\":%d,"
              "\"chart_title_pixels\":%lld,\"chart_plot_pixels\":%lld,\"loopback_tcp\":%s,\"tls\":\"%s\"}\n",
              TORCH_VERSION, qVersion(), matmul_error, families, (long long)title_ink, (long long)plot_ink,
              tcp ? "true" : "false", tls ? QSslSocket::sslLibraryVersionString().toUtf8().constData() : "");
  for (const auto& f : failures) std::fprintf(stderr, "dependency_check: FAIL: %s\n", f.c_str());
  return failures.empty() ? 0 : 1;
}
