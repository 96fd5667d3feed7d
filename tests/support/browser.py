"""A real headless browser for the tests that look at a page as a user does: Debian's
Chromium and its chromedriver, driven by Selenium (from the package index; it downloads
no browser of its own here: both paths are given).

`make test` installs them with apt-get where this is Debian and root (hack/browser.sh);
where they are missing, the test is skipped with the reason.
Users: tests/local/test_tensorboard_page.py.
"""

from __future__ import annotations

import shutil

import pytest

PACKAGES = ("chromium", "chromium-driver")


def paths() -> tuple[str, str] | None:
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def find() -> tuple[str, str]:
    """(chromium, chromedriver), or the test is skipped saying why. `make test` installs
    them first where it can (hack/browser.sh, the one place that installs them)."""
    found = paths()
    if found is None:
        pytest.skip("no Chromium and chromedriver on PATH: `make browser` installs Debian's "
                    f"{' '.join(PACKAGES)} where this is Debian and root")
    return found


def chrome(width: int = 1200, height: int = 640):
    """A headless Chromium under Selenium (the caller quits it)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    browser, driver = find()
    options = Options()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},{height}"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(driver), options=options)
