"""A real headless browser for the tests that look at a page as a user does: Debian's
Chromium and its chromedriver, driven by Selenium (from the package index; it downloads
no browser of its own here: both paths are given).

`make test` installs them with apt-get where this is Debian and root (hack/browser.sh);
where they are missing, the test is skipped with the reason.
Users: tests/local/test_tensorboard_page.py.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import tempfile
from collections.abc import Iterator

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
        pytest.skip(
            "no Chromium and chromedriver on PATH: `make browser` installs Debian's "
            f"{' '.join(PACKAGES)} where this is Debian and root"
        )
    return found


@contextlib.contextmanager
def chrome(width: int = 1200, height: int = 640) -> Iterator[tuple[object, pathlib.Path]]:
    """A headless Chromium under Selenium, and the folder it keeps its temporary files in
    (its TMPDIR); on leaving, the browser is quit and the folder removed. Chromium leaves
    its singleton socket's folder, `org.chromium.Chromium.*`, in TMPDIR after a session:
    /tmp gathered one per run. The folder's name is short because the socket's whole path
    must fit in a Unix socket address (108 bytes; a test's tmp_path is too long)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    browser, driver = find()
    options = Options()
    options.binary_location = browser
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={width},{height}",
    ):
        options.add_argument(arg)
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="ddpjob-chrome-"))
    try:
        session = webdriver.Chrome(service=Service(driver, env={**os.environ, "TMPDIR": str(scratch)}), options=options)
        try:
            yield session, scratch
        finally:
            session.quit()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
