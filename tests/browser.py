"""A real headless Chromium for the view tests, driven through selenium and the system's
chromedriver (Debian's `chromium` and `chromium-driver`): it opens a page from a file:// URL,
clicks and hovers as a person would, and reports every network request the page made and every
console error.

Without a browser the tests that use it are skipped, saying why; where TINYATTN_REQUIRE_BROWSER=1
(set by .ci/run) they fail instead, so that CI cannot pass without having run them.
"""
import json
import os
import pathlib
import shutil
import tempfile

import pytest

# the flags the machine's notes give for a headless Chromium run as root on a closed network
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1400,900"]


def find(*names):
    return next((path for path in map(shutil.which, names) if path), None)


def start():
    """A Browser, or a skip (a failure where TINYATTN_REQUIRE_BROWSER=1) saying what is missing."""
    chromium, driver = find("chromium", "chromium-browser", "google-chrome"), find("chromedriver")
    missing = [what for what, found in (("selenium", _has_selenium()), ("chromium", chromium),
                                        ("chromedriver", driver)) if not found]
    if missing:
        reason = (f"no browser to test the views in: {', '.join(missing)} not found (Debian: "
                  "apt-get install chromium chromium-driver; pip install selenium)")
        if os.environ.get("TINYATTN_REQUIRE_BROWSER") == "1":
            pytest.fail(reason + "; TINYATTN_REQUIRE_BROWSER=1 says they must run")
        pytest.skip(reason)
    return Browser(chromium, driver)


def _has_selenium():
    try:
        import selenium  # noqa: F401
    except ImportError:
        return False
    return True


class Browser:
    """One Chromium session: `open` a page, then read what it did."""

    def __init__(self, chromium, driver):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        self.profile = tempfile.mkdtemp(prefix="tinyattn-chromium-")     # a new, empty profile
        for flag in FLAGS + [f"--user-data-dir={self.profile}"]:
            options.add_argument(flag)
        # the performance log carries the DevTools Network events: every request the page makes
        options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
        self.driver = webdriver.Chrome(service=Service(driver), options=options)

    def quit(self):
        self.driver.quit()
        shutil.rmtree(self.profile, ignore_errors=True)

    def open(self, path, frame=None):
        """Load the page at `path` and wait until its script says it is ready (the script of the
        page in the element `frame` names, a CSS selector, when given); the logs of what came
        before are dropped, so that `requests()` and `errors()` tell of this page only."""
        self.driver.get("about:blank")      # first: whatever the last page was doing ends
        self.driver.get_log("performance")
        self.driver.get_log("browser")
        self.url = pathlib.Path(path).resolve().as_uri()
        self.driver.get(self.url)
        if frame is not None:
            self.driver.switch_to.frame(self.find(frame))
        self.wait_until("return document.body && document.body.dataset.ready === 'true'")

    def wait_until(self, script, seconds=20):
        from selenium.webdriver.support.ui import WebDriverWait
        WebDriverWait(self.driver, seconds).until(lambda driver: driver.execute_script(script))

    def run(self, script, *arguments):
        return self.driver.execute_script(script, *arguments)

    def find(self, selector):
        from selenium.webdriver.common.by import By
        return self.driver.find_element(By.CSS_SELECTOR, selector)

    def find_all(self, selector):
        from selenium.webdriver.common.by import By
        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def hover(self, element):
        from selenium.webdriver.common.action_chains import ActionChains
        ActionChains(self.driver).move_to_element(element).perform()

    def press(self, key):
        """Press a key named as selenium's `Keys` names it: "ARROW_LEFT", "END"."""
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.keys import Keys
        ActionChains(self.driver).send_keys(getattr(Keys, key)).perform()

    def requests(self):
        """The URLs of every request the browser sent since the page was opened."""
        urls = []
        for entry in self.driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message["method"] == "Network.requestWillBeSent":
                urls.append(message["params"]["request"]["url"])
        return urls

    def errors(self):
        """The console's errors (uncaught exceptions, console.error, failed loads) since then."""
        return [entry["message"] for entry in self.driver.get_log("browser")
                if entry["level"] == "SEVERE"]

    def ready_milliseconds(self):
        """From navigation start to the page's "tinyattn-ready" mark, set after its first draw."""
        return self.run("return performance.getEntriesByName('tinyattn-ready')[0].startTime")

    def screenshot(self, path):
        self.driver.save_screenshot(str(path))
        return path
