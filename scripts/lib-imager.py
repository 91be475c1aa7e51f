"""Raspberry Pi Imager's side of a release (scripts/release): a board's
entry in Imager's OS list and the list of every board released in one
directory, in the form rpi-imager's doc/json-schema/os-list-schema.json
describes (tests/test_release.py validates against it).

    python3 scripts/lib-imager.py board BOARD        # exit 2 if camstream has no such board
    python3 scripts/lib-imager.py partition IMAGE N  # byte offset of MBR partition N
    python3 scripts/lib-imager.py entry BOARD VERSION DATE URL SDCARD_IMG IMG_XZ
    python3 scripts/lib-imager.py list DIR           # os_list.json of DIR's camstream-*.json
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import struct
import sys

# Imager shows an OS only for a device one of whose tags its entry names.
# Each board gets a tag of its own, so a Zero 2 W's user is not offered
# the Pi 3's image (they boot different device trees). The device names
# are the ones Imager running on a Pi takes from its board revision
# (src/embedded/device_info.cpp), so it picks its own board by itself.
BOARDS = {
    "rpi3_64": ("Raspberry Pi 3", "Raspberry Pi 3 Model B and B+ (64-bit)", "camstream-pi3-64bit"),
    "rpi4_64": ("Raspberry Pi 4", "Raspberry Pi 4 Model B and Raspberry Pi 400 (64-bit)", "camstream-pi4-64bit"),
    "rpi5": ("Raspberry Pi 5", "Raspberry Pi 5 (64-bit)", "camstream-pi5-64bit"),
    "rpizero2w_64": ("Raspberry Pi Zero 2 W", "Raspberry Pi Zero 2 W (64-bit)", "camstream-pi02-64bit"),
    # Booted under QEMU, never written by Imager: released without an entry.
    "qemu_aarch64": None,
}
ICON = "camstream.png"


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def partition(image: str, number: int) -> int:
    with open(image, "rb") as f:
        mbr = f.read(512)
    if len(mbr) < 512 or mbr[510:512] != b"\x55\xaa":
        sys.exit(f"lib-imager: {image} has no MBR partition table")
    entry = mbr[446 + 16 * (number - 1):446 + 16 * number]
    start, size = struct.unpack("<II", entry[8:16])
    if entry[4] == 0 or size == 0:
        sys.exit(f"lib-imager: {image} has no partition {number}")
    return start * 512


def entry(board: str, version: str, date: str, url: str, image: str, xz: str) -> dict | None:
    if BOARDS[board] is None:
        return None
    device, _, tag = BOARDS[board]
    name = os.path.basename(xz)
    return {
        "name": f"camstream {version} ({device})",
        "description": "Camera firmware: MJPEG and H.264 over RTSP and HTTP, ONVIF, signed A/B updates",
        "icon": url + ICON,
        "url": url + name,
        "bmap_url": url + name.removesuffix(".xz").removesuffix(".img") + ".img.bmap",
        "extract_size": os.path.getsize(image),
        "extract_sha256": sha256(image),
        "image_download_size": os.path.getsize(xz),
        "image_download_sha256": sha256(xz),
        "release_date": date,
        "architecture": "armv8",
        "devices": [tag],
        # Imager's customisation dialog, its settings left on the boot
        # partition as rpi-preseed.toml (Imager 2.0.11 and later), which the
        # image's S03preseed applies at the first boot.
        "init_format": "rpi-preseed",
    }


def os_list_devices(entries) -> list[dict]:
    """Imager reads the device list of the file it was opened with (--repo):
    the boards with an entry, in BOARDS' order."""
    tags = {tag for e in entries for tag in e["devices"]}
    return [{"name": d, "description": text, "tags": [tag], "matching_type": "exclusive"}
            for d, text, tag in (b for b in BOARDS.values() if b) if tag in tags]


def os_list(directory: str) -> dict:
    entries = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(directory, "camstream-*.json")))]
    return {"imager": {"devices": os_list_devices(entries)}, "os_list": sorted(entries, key=lambda e: e["name"])}


def main(argv: list[str]) -> None:
    match argv:
        case ["board", board]:
            if board not in BOARDS:
                sys.stderr.write(f"scripts/release: no board {board} ({', '.join(BOARDS)})\n")
                sys.exit(2)
        case ["partition", image, number]:
            print(partition(image, int(number)))
        case ["entry", board, version, date, url, image, xz]:
            e = entry(board, version, date, url, image, xz)
            if e is not None:
                print(json.dumps(e, indent=2))
        case ["list", directory]:
            print(json.dumps(os_list(directory), indent=2))
        case _:
            sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
