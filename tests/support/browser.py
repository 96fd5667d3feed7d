"""A real headless browser for the tests that look at a page as a user does: Debian's
Chromium and its chromedriver, driven by Selenium (from the package index; it downloads
no browser of its own here: both paths are given).

Missing, they are installed with apt-get where this is Debian and root (CI's machine);
elsewhere, or when the install fails, the test is skipped with the reason.
Users: tests/local/test_tensorboard_page.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

PACKAGES = ("chromium", "chromium-driver")
INSTALL_SECONDS = 900  # a fresh machine downloads and unpacks about 100 MB


def paths() -> tuple[str, str] | None:
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def find_or_install() -> tuple[str, str]:
    """(chromium, chromedriver), or the test is skipped saying why."""
    found = paths()
    if found:
        return found
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        pytest.skip("no Chromium here and no way to install it (needs Debian's apt-get as root): "
                    f"apt-get install {' '.join(PACKAGES)}")
    # Several test workers may get here at once: apt waits for the others' lock.
    wait = ["-o", "DPkg::Lock::Timeout=600"]
    for step in (["apt-get", *wait, "update", "-q"], ["apt-get", *wait, "install", "-y", "-q", *PACKAGES]):
        done = subprocess.run(step, capture_output=True, text=True, timeout=INSTALL_SECONDS,
                              env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        if done.returncode != 0:
            pytest.skip(f"Chromium could not be installed ({' '.join(step)}: {done.stderr.strip()[-300:]})")
    found = paths()
    if not found:
        pytest.skip(f"apt-get installed {' '.join(PACKAGES)} but chromium or chromedriver is not on PATH")
    return found


def chrome(width: int = 1200, height: int = 640):
    """A headless Chromium under Selenium (the caller quits it)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    browser, driver = find_or_install()
    options = Options()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},{height}"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(driver), options=options)
