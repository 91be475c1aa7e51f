"""One version names a release everywhere: the crate, the Buildroot package,
CHANGELOG.md's newest release and, on a release's commit, its tag (the
image's VERSION_ID and what the daemon reports come from these)."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def crate_version() -> str:
    return tomllib.loads((ROOT / "app/Cargo.toml").read_text())["workspace"]["package"]["version"]


def test_crate_package_and_changelog_agree():
    crate = crate_version()
    mk = re.search(r"^CAMSTREAM_VERSION = (\S+)$", (ROOT / "package/camstream/camstream.mk").read_text(), re.M)
    assert mk, "package/camstream/camstream.mk has no CAMSTREAM_VERSION line"
    changelog = (ROOT / "CHANGELOG.md").read_text()
    releases = re.findall(r"^## (\d+\.\d+\.\d+) - (\d{4}-\d{2}-\d{2})$", changelog, re.M)
    assert releases, "CHANGELOG.md names no release (## X.Y.Z - YYYY-MM-DD)"
    assert re.search(r"^## Unreleased$", changelog, re.M), "CHANGELOG.md has no Unreleased section on top"
    assert (mk.group(1), releases[0][0]) == (crate, crate), (
        f"app/Cargo.toml says {crate}, camstream.mk {mk.group(1)}, CHANGELOG.md's newest release {releases[0][0]}")
    dates = [d for _, d in releases]
    assert dates == sorted(dates, reverse=True), f"CHANGELOG.md's releases are not newest first: {dates}"


def test_a_release_tag_names_the_crate_version():
    """On a tagged commit the tag is vX.Y.Z of the crate's version (the image
    takes its VERSION_ID from the tag)."""
    tags = subprocess.run(["git", "-C", str(ROOT), "tag", "--points-at", "HEAD", "--list", "v*"],
                          capture_output=True, text=True).stdout.split()
    for tag in tags:
        assert tag == f"v{crate_version()}", f"HEAD is tagged {tag}, the crate's version is {crate_version()}"
