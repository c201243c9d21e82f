// The web template (images/web: Debian's Chromium and playwright-core) on a real box: a
// Playwright script in the box opens a page served inside the box, reads it and takes a
// screenshot, and `hutch cp` brings the PNG out. Needs HUTCH_TEST_WEB_IMAGE (scripts/test.sh
// builds the template); skipped without it. Under TCG Chromium takes tens of seconds to start.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "harness.h"

namespace hutch::e2e {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPage =
    "<!doctype html><html><head><title>made in the box</title></head>"
    "<body style=\"background:#c00\"><h1>hello from a hutch box</h1></body></html>\n";

constexpr const char* kScript = R"js(const { chromium } = require("playwright-core");
(async () => {
  const browser = await chromium.launch({ executablePath: "/usr/bin/chromium" });
  const page = await browser.newPage({ viewport: { width: 640, height: 400 } });
  await page.goto("http://127.0.0.1:8000/");
  console.log(`${await page.title()} | ${await page.textContent("h1")}`);
  await page.screenshot({ path: "/tmp/shot.png" });
  await browser.close();
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
)js";

uint32_t bigEndian32(const std::string& bytes, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

TEST(WebTemplateTest, PlaywrightInTheBoxScreenshotsAPageServedInTheBox) {
  if (std::getenv("HUTCH_TEST_WEB_IMAGE") == nullptr) {
    GTEST_SKIP() << "HUTCH_TEST_WEB_IMAGE is not set: build the web template "
                    "(scripts/build-image.sh --recipe images/web; scripts/test.sh does)";
  }
  Daemon d;
  ASSERT_EQ(d.hutch({"run", "--name", "web", "--template", "web", "--memory", "2G"}).exit_code, 0);
  fs::path site = d.dir() / "site";
  fs::create_directories(site);
  std::ofstream(site / "index.html") << kPage;
  std::ofstream(site / "shot.js") << kScript;
  auto copied = d.hutch({"cp", site.string(), "web:/tmp/site"});
  ASSERT_EQ(copied.exit_code, 0) << copied.err;

  // The page is served inside the box, on its loopback: nothing leaves the box.
  auto shot = d.hutch(
      {"exec", "web", "--", "sh", "-c",
       "cd /tmp/site || exit 1; python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 & "
       "srv=$!; for i in $(seq 100); do curl -fs -o /dev/null http://127.0.0.1:8000/ && break; "
       "sleep 0.2; done; node shot.js; status=$?; kill $srv; exit $status"});
  ASSERT_EQ(shot.exit_code, 0) << shot.out << shot.err;
  EXPECT_EQ(shot.out, "made in the box | hello from a hutch box\n");

  fs::path png = d.dir() / "shot.png";
  auto out = d.hutch({"cp", "web:/tmp/shot.png", png.string()});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  std::string bytes = readFile(png);
  ASSERT_GT(bytes.size(), 24U);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << "not a PNG";
  EXPECT_EQ(bytes.substr(12, 4), "IHDR");
  EXPECT_EQ(bigEndian32(bytes, 16), 640U) << "width: the viewport's";
  EXPECT_EQ(bigEndian32(bytes, 20), 400U) << "height: the viewport's";
}

}  // namespace
}  // namespace hutch::e2e
