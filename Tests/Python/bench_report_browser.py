#!/usr/bin/env python3
"""Opens a `switchboard bench` report in headless Chromium and says what it drew.

Usage: bench_report_browser.py REPORT_HTML SCREENSHOT_DIR

Loads the page from its file (no server: the report is self-contained), then reads, as a reader's
browser laid it out: every chart's drawn size, every curve's drawn length, the rows of the table,
the percentile charts, the bar rows and the comparison's dots; how much wider than the window the
page is at 1280 px and at a phone's 390 px (its tables scroll inside their box, not the page);
and that nothing was fetched (the Performance API lists every resource the page loaded). Saves a
screenshot of the top of the page at 1280x1000 and one of the latency section. Prints
"RESULT {json}"; exits 1 with the reason when the page does not load.

Chromium is Debian's (`chromium`, `chromium-driver`), headless, reaching nothing: the page must
need nothing but its file. Loading has 30 s and each script 30 s, so a hang ends in the `finally`
that quits Chromium; past 90 s in all the script ends the same way.
"""

import json
import os
import signal
import sys

import headless_chromium
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait


def browser():
    # Nothing reachable: a fetch would fail and show in the resources it lists.
    return headless_chromium.browser(1280, 1000, extra=["--hide-scrollbars"])


def out_of_time(signum, frame):
    raise SystemExit("out of time: 90 s")


def main():
    page, shots = sys.argv[1], sys.argv[2]
    # Raised in the script, so the `finally` below quits Chromium and its driver.
    signal.signal(signal.SIGALRM, out_of_time)
    signal.alarm(90)
    driver = browser()
    try:
        driver.set_page_load_timeout(30)
        driver.set_script_timeout(30)
        driver.get("file://" + os.path.abspath(page))
        WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.readyState") == "complete")
        print("page loaded: " + driver.title, flush=True)
        read = driver.execute_script(
            """
            const size = e => { const r = e.getBoundingClientRect(); return [Math.round(r.width), Math.round(r.height)]; };
            return {
              charts: [...document.querySelectorAll('svg.chart')].map(size),
              curveLengths: [...document.querySelectorAll('polyline.series')].map(p => Math.round(p.getTotalLength())),
              tableRows: document.querySelectorAll('#rows tbody tr').length,
              curves: document.querySelectorAll('figure.curve').length,
              barRows: document.querySelectorAll('g.bar-row').length,
              goalMarks: document.querySelectorAll('g.goal').length,
              moved: document.querySelectorAll('g.moved').length,
              skipped: [...document.querySelectorAll('#skipped li')].map(e => e.textContent),
              totals: document.getElementById('totals').textContent,
              fetched: performance.getEntriesByType('resource').map(e => e.name),
              overflow1280: document.documentElement.scrollWidth - window.innerWidth,
              height: document.documentElement.scrollHeight,
            };
            """
        )
        top = os.path.join(shots, "bench-report-1280.png")
        driver.save_screenshot(top)
        # The latency section whole: a window as tall as the page, then the element's picture.
        driver.set_window_size(1280, min(read["height"] + 200, 16000))
        latency = os.path.join(shots, "bench-report-latency.png")
        driver.find_element(By.ID, "latency").screenshot(latency)
        driver.set_window_size(390, 844)
        WebDriverWait(driver, 30).until(lambda d: d.execute_script("return window.innerWidth") <= 400)
        read["overflow390"] = driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
        read["screenshots"] = [top, latency]
        print("RESULT " + json.dumps(read), flush=True)
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
