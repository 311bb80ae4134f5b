"""Headless Chromium for the console's browser tests: Debian's chromium driven by Playwright for Python.

No browser is downloaded: Playwright is pointed at the system's executable (THREADLINE_CHROMIUM, or
`chromium` on the PATH). Without one, the tests skip and say how to get it.
"""

import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "docs" / "console"
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def chromium_executable() -> str | None:
    configured = os.environ.get("THREADLINE_CHROMIUM")
    if configured:
        return configured if Path(configured).exists() else None
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def screenshots_wanted() -> bool:
    """Screenshots for the README are written only on request, so a normal run leaves the tree alone."""
    return os.environ.get("THREADLINE_SCREENSHOTS") == "1"
