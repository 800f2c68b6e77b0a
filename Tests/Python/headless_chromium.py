"""Headless Chromium for the browser tests: Debian's `chromium` and `chromium-driver` (or
`CHROMIUM` and `CHROMEDRIVER`), driven by Selenium, reaching no host but what `reachable` names."""

import os

from selenium import webdriver
from selenium.webdriver.chrome.service import Service


def browser(width, height, reachable=None, extra=()):
    """A headless Chromium window of `width` x `height` that resolves no host name (a page that
    fetched anything would fail), except `reachable` (an address such as 127.0.0.1)."""
    rules = "MAP * ~NOTFOUND" + (", EXCLUDE " + reachable if reachable else "")
    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    for argument in [
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=%d,%d" % (width, height),
        "--host-resolver-rules=" + rules,
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        *extra,
    ]:
        options.add_argument(argument)
    service = Service(executable_path=os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
    return webdriver.Chrome(service=service, options=options)
