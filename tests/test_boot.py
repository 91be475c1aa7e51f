"""The first frame after each way a camera boots, on one card (a copy of
the built image on a 1 GiB disk) under QEMU, in this order: the first boot
(the data partition grows to the card), a normal boot, a boot with no
network cable (the cable plugged in later); and U-Boot stopped at its
prompt by a key, then booted on. Each gives the time from QEMU's start (or
from the cable) to the first whole frame at a client on the host, and
shows that the health check's mark-good came after the first frame went
out (docs/UPDATE.md). The trial boot of an update is test_ota's, after
README's update steps. scripts/bench-boot times the steps of a boot
(docs/IMAGE.md)."""

from __future__ import annotations

import math
import os
import re
import subprocess
import time
from pathlib import Path

import pexpect
import pytest

import guest
from helpers import figure

GIB = 1 << 30


@pytest.fixture(scope="module")
def card(tmp_path_factory) -> Path:
    guest.build()
    disk = tmp_path_factory.mktemp("boot") / "card.img"
    subprocess.run(["cp", "--sparse=always", str(guest.IMAGE / "sdcard.img"), str(disk)], check=True)
    os.truncate(disk, GIB)
    return disk


def boot_to_frame(disk: Path, **kwargs) -> tuple[guest.Guest, float]:
    """Boots `disk`, reading the console while a host client asks for the
    first frame; returns the guest, logged in, and the seconds from QEMU's
    start to that frame."""
    g = guest.Guest(image=disk, testdrive=False, wait=False, **kwargs)
    try:
        first = g.first_frame_while_booting(timeout=150)
        assert first, f"no frame at the host:\n{g.console_text[-4000:]}"
    except BaseException:
        g.close()
        raise
    return g, first - g.started


def boot_times(g: guest.Guest) -> dict[str, float]:
    """/run/boot-times (rcS, functions.sh's boot_time): the first time of
    each step's event, as "STEP EVENT"."""
    times: dict[str, float] = {}
    for line in g.sh("cat /run/boot-times").splitlines():
        at, step, event = line.split()
        times.setdefault(f"{step} {event}", float(at))
    return times


def marked_after_the_first_frame(g: guest.Guest, within: float | None = 10) -> str:
    """Asserts that RAUC's mark-good began after camstream's first frame
    went out (both on the guest's uptime: camstream's process start and
    what it logs about its first frame), and `within` seconds of it: not
    when the health check gives up waiting (20 s); returns how long after.
    None: no bound (a trial boot's mark-good follows its own check's
    frame, which the log shows, however long the check took)."""
    g.health_checked()
    log = g.sh("logread | grep -E 'camstream(-update)?: '")
    out = re.search(r"first frame sent to a client \((\w+)\), ([\d.]+) s after the start", log)
    assert out, log
    pid = g.sh("pidof camstream").split()[-1]
    tick = int(g.sh("getconf CLK_TCK 2>/dev/null || echo 100") or 100)
    started = int(g.sh(f"cut -d' ' -f22 /proc/{pid}/stat")) / tick
    marked = boot_times(g)["mark-good start"]
    # The daemon's own clock starts a little after its process.
    sent = started + float(out[2])
    assert sent - 0.1 <= marked < sent + (math.inf if within is None else within), (marked, sent, log)
    return f"mark-good {marked - sent:.1f} s after the first frame ({out[1]})"


def test_first_boot_grows_the_card_and_streams(card):
    g, frame = boot_to_frame(card)
    try:
        assert re.search(r"data: growing the data partition /dev/vda4 from \d+ MiB to \d+ MiB", g.console_text)
        assert g.sh("cat /data/.grown").startswith("partition ")
        after = marked_after_the_first_frame(g)
        figure(f"boot paths: first boot (data partition grown to 1 GiB): first frame at the host "
               f"{frame:.1f} s after QEMU's start; {after}")
    finally:
        g.close()


def test_normal_boot_streams(card):
    g, frame = boot_to_frame(card)
    try:
        assert "growing the data partition" not in g.console_text
        assert "rauc.slot=A" in g.sh("cat /proc/cmdline")
        after = marked_after_the_first_frame(g)
        assert g.sh("fw_printenv BOOT_A_LEFT").strip() == "BOOT_A_LEFT=3"
        figure(f"boot paths: normal boot: first frame at the host {frame:.1f} s after QEMU's start; {after}")
    finally:
        g.close()


def test_boot_without_a_network_cable_streams_once_plugged_in(card):
    """Booted with the link down: camstream streams (to the board's own
    check), the slot is marked good without a client, and the host's
    client gets a frame soon after the cable goes in."""
    g = guest.Guest(image=card, testdrive=False, wait=False)
    try:
        # Out before U-Boot is through (QEMU makes its QMP socket at start).
        deadline = time.monotonic() + 10
        while not Path(g.qmp_path).exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        g.qmp("set_link", name="net", up=False)
        g.wait_booted(timeout=150)
        assert "inet " not in g.sh("ip -4 addr show dev eth0")
        out = g.sh("camstream check --config /data/etc/camstream.toml --timeout 60")
        assert "frame" in out, out
        g.health_checked()
        assert g.sh("fw_printenv BOOT_A_LEFT").strip() == "BOOT_A_LEFT=3"
        plugged = time.monotonic()
        g.qmp("set_link", name="net", up=True)
        framed = g.first_frame(timeout=60)
        figure(f"boot paths: booted without a network cable: first frame at the host {framed - plugged:.1f} s "
               f"after the cable went in")
    finally:
        g.close()


def test_a_key_on_the_console_stops_uboot_and_boot_goes_on(card):
    """U-Boot's autoboot delay is 0; a key already typed when it looks
    stops it at its prompt (docs/IMAGE.md), and `boot` carries on."""
    g = guest.Guest(image=card, testdrive=False, wait=False)
    try:
        # Space, as docs/IMAGE.md says, until U-Boot shows its prompt.
        deadline = time.monotonic() + 30
        while True:
            g.p.send(" ")
            try:
                g.p.expect("=> ", timeout=0.1)
                break
            except pexpect.TIMEOUT:
                assert time.monotonic() < deadline and "Starting kernel" not in g.console_text, \
                    g.console_text[-3000:]
        assert "Hit any key to stop autoboot:  0" in g.console_text
        g.p.sendline("")
        g.p.expect("=> ")
        g.p.sendline("boot")
        first = g.first_frame_while_booting(timeout=150)
        assert first, g.console_text[-4000:]
    finally:
        g.close()
