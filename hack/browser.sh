#!/usr/bin/env bash
# Debian's Chromium and chromedriver for the tests that look at a page as a user does
# (tests/support/browser.py drives them with Selenium, which downloads no browser of its
# own here). Installed with apt-get (hack/apt-install.sh) where this is Debian and we are
# root, as on CI's machine; elsewhere it says why not and the browser tests skip with the
# same reason.
#
# Idempotent: does nothing when both are on PATH. Never fails the make target: a machine
# without a browser still runs every other test.
set -uo pipefail

PACKAGES=(chromium chromium-driver)

if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
    exit 0
fi
"$(dirname "$0")/apt-install.sh" browser "${PACKAGES[@]}" || echo "browser: the browser tests will skip" >&2
exit 0
