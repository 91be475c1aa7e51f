"""One version names a release everywhere: the crate, the Buildroot package,
CHANGELOG.md's newest release and, on a release's commit, its tag (the
image's VERSION_ID and what the daemon reports come from the tree's files,
scripts/version, never from a tag alone). And the release files
scripts/release makes of a Pi image (`make release BOARD=...`): the image
compressed and its block map, which bmaptool writes back bit for bit, the
update bundle of that version, Raspberry Pi Imager's os_list.json, whose
sizes and hashes are the files', and SHA256SUMS. The image is a Buildroot Pi
build's (CAMSTREAM_FIRMWARE) or else the emulated Pi's (scripts/image
--board rpi3_64)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

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


def changelog_date(version: str) -> str:
    return re.search(rf"^## {re.escape(version)} - (\S+)$", (ROOT / "CHANGELOG.md").read_text(), re.M)[1]


def test_the_version_comes_from_the_files_in_a_clone_without_tags(tmp_path):
    """A clone that has no tags (what lands reaches clones without them)
    still builds an image of the crate's version; the commit goes beside it
    as BUILD_ID."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--no-tags", str(ROOT), str(clone)], check=True)
    assert not subprocess.run(["git", "-C", str(clone), "tag"], capture_output=True, text=True).stdout.strip()
    version = subprocess.run([str(clone / "scripts/version")], capture_output=True, text=True, check=True).stdout
    assert version.strip() == crate_version()
    target = tmp_path / "target"
    (target / "etc/init.d").mkdir(parents=True)
    (target / "root").mkdir()
    keyring = tmp_path / "keyring.pem"
    keyring.write_text("a certificate\n")
    subprocess.run(["sh", str(clone / "board/common/post-build.sh"), str(target), "rpi3_64"], check=True,
                   env={**os.environ, "CAMSTREAM_KEYRING": str(keyring)}, capture_output=True)
    release = dict(line.split("=", 1) for line in (target / "etc/os-release").read_text().splitlines())
    assert release["VERSION_ID"] == crate_version()
    commit = subprocess.run(["git", "-C", str(clone), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=True).stdout.strip()
    assert release["BUILD_ID"].startswith(commit[:7]), release


def test_a_version_the_changelog_does_not_name_is_refused(tmp_path):
    """app/Cargo.toml bumped without CHANGELOG.md's release: no image, no
    bundle, no release gets that version."""
    (tmp_path / "scripts").mkdir()
    (tmp_path / "app").mkdir()
    shutil.copy(ROOT / "scripts/version", tmp_path / "scripts/version")
    shutil.copy(ROOT / "CHANGELOG.md", tmp_path / "CHANGELOG.md")
    cargo = (ROOT / "app/Cargo.toml").read_text()
    (tmp_path / "app/Cargo.toml").write_text(cargo.replace(f'version = "{crate_version()}"', 'version = "9.9.9"', 1))
    r = subprocess.run([str(tmp_path / "scripts/version")], capture_output=True, text=True)
    assert r.returncode != 0 and "9.9.9" in r.stderr and crate_version() in r.stderr, r


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# The Pi image released: a Buildroot Pi build's images directory, else the
# emulated Pi's image from Debian's packages.
FIRMWARE = os.environ.get("CAMSTREAM_FIRMWARE")
PI_IMAGES = Path(FIRMWARE).resolve() if FIRMWARE and (Path(FIRMWARE) / "rpi-firmware").is_dir() else None
URL = "https://downloads.example.org/camstream/"


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    images = PI_IMAGES
    if images is None:
        subprocess.run([str(ROOT / "scripts/image"), "--board", "rpi3_64"], check=True, timeout=1800)
        images = ROOT / "output/image-rpi3_64"
    out = tmp_path_factory.mktemp("release")
    made = subprocess.run([str(ROOT / "scripts/release"), "--images", str(images), "--output", str(out), "--url",
                           URL, "rpi3_64"], capture_output=True, text=True, check=True, timeout=1800).stdout.split()
    base = f"camstream-rpi3_64-{crate_version()}"
    assert [Path(m).name for m in made] == [f"{base}.img.xz", f"{base}.img.bmap", f"{base}.raucb", "os_list.json",
                                           "SHA256SUMS"], made
    r = type("Release", (), {})()
    r.images, r.out, r.base = images, out, out / base
    return r


def test_bmaptool_writes_the_image_bit_for_bit(release, tmp_path):
    """bmaptool copy finds the block map beside the download and writes only
    the blocks in use; the card then holds the image exactly."""
    card = tmp_path / "card.img"
    subprocess.run(["bmaptool", "copy", str(release.base) + ".img.xz", str(card)], check=True, capture_output=True,
                   timeout=1800)
    assert card.stat().st_size == (release.images / "sdcard.img").stat().st_size
    assert sha256(card) == sha256(release.images / "sdcard.img")
    # The map covers the image's partitions, not all of its zeros.
    bmap = (Path(str(release.base) + ".img.bmap")).read_text()
    mapped = int(re.search(r"<MappedBlocksCount>\s*(\d+)", bmap)[1])
    total = int(re.search(r"<BlocksCount>\s*(\d+)", bmap)[1])
    assert 0 < mapped < total, (mapped, total)


def test_the_imager_entry_is_the_files(release):
    """os_list.json: what Raspberry Pi Imager needs to offer, download, check
    and write the image."""
    os_list = json.loads((release.out / "os_list.json").read_text())["os_list"]
    assert len(os_list) == 1, os_list
    entry = os_list[0]
    xz = Path(str(release.base) + ".img.xz")
    image = release.images / "sdcard.img"
    assert entry["url"] == URL + xz.name
    assert entry["image_download_size"] == xz.stat().st_size
    assert entry["image_download_sha256"] == sha256(xz)
    assert entry["extract_size"] == image.stat().st_size
    assert entry["extract_sha256"] == sha256(image)
    assert entry["release_date"] == changelog_date(crate_version())
    assert entry["devices"] == ["pi3-64bit"]
    assert crate_version() in entry["name"] and "Raspberry Pi 3" in entry["name"], entry
    assert entry["description"], entry


def test_sha256sums_checks_the_files_and_catches_a_changed_byte(release, tmp_path):
    subprocess.run(["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=release.out, check=True)
    copy = tmp_path / "copy"
    shutil.copytree(release.out, copy)
    bundle = copy / (release.base.name + ".raucb")
    data = bytearray(bundle.read_bytes())
    data[len(data) // 2] ^= 1
    bundle.write_bytes(bytes(data))
    r = subprocess.run(["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=copy, capture_output=True, text=True)
    assert r.returncode != 0 and bundle.name in r.stdout, r


def test_the_bundle_is_the_boards_and_the_versions(release):
    info = subprocess.run(["rauc", "info", "--keyring", str(ROOT / "output/keys/development.cert.pem"),
                           "--output-format=shell", str(release.base) + ".raucb"], capture_output=True, text=True,
                          check=True).stdout
    fields = dict(line.split("=", 1) for line in info.splitlines() if "=" in line)
    assert fields["RAUC_MF_COMPATIBLE"].strip("'") == "camstream-rpi3_64"
    assert fields["RAUC_MF_VERSION"].strip("'") == crate_version()


def test_an_image_of_another_version_is_not_released(release, tmp_path):
    """A stale build would be published under the tree's version: refused."""
    images = tmp_path / "images"
    images.mkdir()
    (images / "sdcard.img").symlink_to(release.images / "sdcard.img")
    rootfs = images / "rootfs.ext4"
    shutil.copyfile(release.images / "rootfs.ext4", rootfs)
    stat = subprocess.run(["debugfs", "-R", "stat /etc/os-release", str(rootfs)], capture_output=True,
                          text=True).stdout
    path = "/usr/lib/os-release" if "Fast link dest" in stat else "/etc/os-release"
    text = subprocess.run(["debugfs", "-R", f"cat {path}", str(rootfs)], capture_output=True, text=True,
                          check=True).stdout
    old = tmp_path / "os-release"
    old.write_text(re.sub(r"(?m)^VERSION_ID=.*$", "VERSION_ID=0.0.1", text))
    subprocess.run(["debugfs", "-w", "-f", "-", str(rootfs)], input=f"rm {path}\nwrite {old} {path}\n",
                   text=True, check=True, capture_output=True)
    r = subprocess.run([str(ROOT / "scripts/release"), "--images", str(images), "--output", str(tmp_path / "out"),
                        "rpi3_64"], capture_output=True, text=True)
    assert r.returncode != 0 and "0.0.1" in r.stderr, r
    assert not list((tmp_path / "out").glob("*.img.xz"))
