"""The first boot grows the data partition to the end of the card
(rootfs-overlay/usr/lib/camstream/grow-data, docs/IMAGE.md): the image is
built small and flashed to larger cards. Only the 4th and last partition,
only once, and a power cut while it grows leaves a data partition that
mounts and has lost nothing. On the virt board, whose boots are quick; the
emulated Pi's first boot grows its 1 GiB card in test_pi."""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import signal
import struct
import subprocess
from pathlib import Path

import pytest

import guest
from helpers import figure

GIB = 1 << 30


def data_partition(disk: Path) -> tuple[int, int]:
    """Start and size (512-byte sectors) of the MBR's 4th entry."""
    with disk.open("rb") as f:
        mbr = f.read(512)
    return struct.unpack_from("<II", mbr, 446 + 3 * 16 + 8)


def copy_range(src: Path, dst: Path, offset: int, length: int, into: bool) -> None:
    """Copies `length` bytes at `offset` of disk `src` out to file `dst`, or
    (into) back from `dst` into `src` at `offset`."""
    with src.open("r+b") as disk, dst.open("r+b" if into else "wb") as part:
        disk.seek(offset)
        if into:
            while chunk := part.read(1 << 20):
                disk.write(chunk)
        else:
            left = length
            while left:
                chunk = disk.read(min(left, 1 << 20))
                part.write(chunk)
                left -= len(chunk)


def fsck(disk: Path, work: Path) -> int:
    """e2fsck -fn of the disk's data partition (on a copy), which must find
    it clean: the filesystem's size in bytes."""
    start, size = data_partition(disk)
    part = work / "data.ext4"
    copy_range(disk, part, start * 512, size * 512, into=False)
    r = subprocess.run(["e2fsck", "-fn", str(part)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    head = subprocess.run(["dumpe2fs", "-h", str(part)], capture_output=True, text=True, check=True).stdout
    part.unlink()
    field = lambda name: int(re.search(rf"^{name}:\s+(\d+)", head, re.M)[1])  # noqa: E731
    return field("Block count") * field("Block size")


@pytest.fixture
def card(tmp_path):
    """The built disk with a file of the user's on its data partition, on a
    1 GiB card (the image is 708 MiB)."""
    guest.build()
    disk = tmp_path / "card.img"
    subprocess.run(["cp", "--sparse=always", str(guest.IMAGE / "sdcard.img"), str(disk)], check=True)
    start, size = data_partition(disk)
    part = tmp_path / "data.ext4"
    copy_range(disk, part, start * 512, size * 512, into=False)
    keep = tmp_path / "keep"
    keep.write_bytes(secrets.token_bytes(300_000))
    subprocess.run(["debugfs", "-w", "-R", f"write {keep} keep", str(part)], check=True, capture_output=True)
    copy_range(disk, part, start * 512, size * 512, into=True)
    part.unlink()
    os.truncate(disk, GIB)
    return disk, keep.read_bytes(), start, size


def test_power_cut_while_growing_loses_nothing(card, tmp_path):
    disk, keep, start, built = card
    g = guest.Guest(image=disk, testdrive=False, wait=False)
    try:
        g.p.expect(r"data: growing the data partition /dev/vda4 from (\d+) MiB to (\d+) MiB", timeout=120)
        assert int(g.p.match[1]) == built // 2048 and int(g.p.match[2]) == (GIB // 512 - start) // 2048
        # resize2fs says what it is about to do, then asks the kernel to
        # grow the mounted filesystem: cut the power there.
        g.p.expect("old_desc_blocks", timeout=60)
        os.kill(g.p.pid, signal.SIGKILL)  # scripts/qemu exec'd QEMU: this is QEMU
    finally:
        g.p.close(force=True)
    # The partition table was written before the filesystem grew.
    assert data_partition(disk) == (start, GIB // 512 - start)

    g = guest.Guest(image=disk, testdrive=False)
    try:
        mounts = g.sh("cat /proc/mounts")
        assert re.search(r"^/dev/vda4 /data ext4 rw[ ,]", mounts, re.M), mounts
        console = g.console_text
        assert "growing the data partition" not in console, "the table is written once"
        grown = g.sh("cat /data/.grown").strip()
        assert grown.startswith(f"partition {(GIB // 512 - start) // 2048} MiB, filesystem "), grown
        finished = "resize2fs" in console and "is now" in console
        figure(f"grow: power cut during resize2fs; next boot: {grown} "
               f"({'resize2fs finished the grow' if finished else 'the kernel had finished it before the cut'})")
        assert g.sh("md5sum /data/keep").split()[0] == hashlib.md5(keep).hexdigest()
        assert "EXT4-fs error" not in g.sh("dmesg")
        g.sh("sync && mount -o remount,ro /data")
    finally:
        g.close()
    # Clean, and as large as its partition (to the block).
    assert GIB - start * 512 - fsck(disk, tmp_path) < 4096

    # Only once: a larger card later is not grown again.
    os.truncate(disk, 2 * GIB)
    g = guest.Guest(image=disk, testdrive=False)
    try:
        assert "growing the data partition" not in g.console_text
        assert g.sh("cat /sys/class/block/vda4/size").strip() == str(GIB // 512 - start)
    finally:
        g.close()


def test_a_card_the_image_fills_is_left_as_it_is(tmp_path):
    """The disk as built (the data partition ends where it does): nothing
    to grow; the first boot says so once."""
    guest.build()
    disk = tmp_path / "exact.img"
    subprocess.run(["cp", "--sparse=always", str(guest.IMAGE / "sdcard.img"), str(disk)], check=True)
    with disk.open("rb") as f:
        before = f.read(512)
    g = guest.Guest(image=disk, testdrive=False)
    try:
        assert "growing the data partition" not in g.console_text
        grown = g.sh("cat /data/.grown").strip()
        start, size = data_partition(disk)
        assert grown.startswith(f"partition {size // 2048} MiB, filesystem "), grown
    finally:
        g.close()
    with disk.open("rb") as f:
        assert f.read(512) == before
