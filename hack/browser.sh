#!/usr/bin/env bash
# Debian's Chromium and chromedriver for the tests that look at a page as a user does
# (tests/support/browser.py drives them with Selenium, which downloads no browser of its
# own here). Installed with apt-get where this is Debian and we are root, as on CI's
# machine; elsewhere it says why not and the browser tests skip with the same reason.
#
# Idempotent: does nothing when both are on PATH. Never fails the make target: a machine
# without a browser still runs every other test.
set -uo pipefail

PACKAGES=(chromium chromium-driver)

if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
    exit 0
fi
if ! command -v apt-get >/dev/null || [[ $(id -u) != 0 ]]; then
    echo "browser: no Chromium here and no way to install it (needs Debian's apt-get as root): the browser tests will skip" >&2
    exit 0
fi
# Another apt on the machine: wait for its lock, within a bound.
wait=(-o DPkg::Lock::Timeout=600)
export DEBIAN_FRONTEND=noninteractive
if ! timeout 900 apt-get "${wait[@]}" update -q >/dev/null ||
    ! timeout 900 apt-get "${wait[@]}" install -y -q --no-install-recommends "${PACKAGES[@]}" >/dev/null; then
    echo "browser: apt-get install ${PACKAGES[*]} failed: the browser tests will skip" >&2
fi
exit 0
