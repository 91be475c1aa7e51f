"""The Raspberry Pi boot path on an emulated Raspberry Pi 3 (QEMU's raspi3b:
BCM2837, SD host, mini UART, DWC2 USB; no GPU firmware): the image
`scripts/image --board rpi3_64` lays out as the Buildroot Pi images do, or
with CAMSTREAM_FIRMWARE a Buildroot rpi3_64 build's own sdcard.img, booted
by `scripts/qemu --board rpi3_64` (U-Boot for the Pi, boot.cmd's A/B
choice, the kernel with the Pi's device tree, root on the SD card) and
streaming to the host over a USB network adapter. One boot serves the file;
its last test follows README's update steps on it with a local bundle
(test_ota.py follows them over the network on the virt board: the emulated
Pi's USB network takes three minutes to download a bundle)."""

from __future__ import annotations

import re
import subprocess
import time

import pytest

import guest
from helpers import figure, live555_frames, run
from test_grow import data_partition
from test_ota import readme_bundle

BOARD = "rpi3_64"
IMAGE = guest.image_of(BOARD)


@pytest.fixture(scope="module")
def firmware(tmp_path_factory):
    """The emulated Pi booted from a copy of the image's card, with README's
    update bundle for it on the data partition, where `scp` would put it
    (README's "a local file works too")."""
    guest.build(BOARD)
    bundle = readme_bundle(IMAGE / "rootfs.erofs")
    assert bundle.name.startswith(f"camstream-{BOARD}-"), bundle
    card = tmp_path_factory.mktemp("pi") / "sdcard.img"
    subprocess.run(["cp", "--sparse=always", str(IMAGE / "sdcard.img"), str(card)], check=True)
    start, _ = data_partition(card)
    subprocess.run(["debugfs", "-w", "-R", f"write {bundle} {bundle.name}", f"{card}?offset={start * 512}"],
                   check=True, capture_output=True)
    g = guest.Guest(board=BOARD, wait=False, image=card)
    g.bundle = f"/data/{bundle.name}"
    try:
        first = g.first_frame_while_booting(timeout=240)
        g.boot_to_frame = first - g.started if first else None
        yield g
    finally:
        g.close()


def test_boots_from_the_sd_card_to_streaming(firmware):
    assert firmware.boot_to_frame is not None, "no frame reached the host"
    print(f"\nemulated Pi 3: QEMU start to first RTP frame at the host: {firmware.boot_to_frame:.1f} s")
    console = firmware.console_text
    # U-Boot for the Pi ran boot.cmd from the FAT partition and took an
    # attempt from slot A.
    # (U-Boot 2023's words, or 2024's and later: a bootflow "with script".)
    assert "Found U-Boot script /boot.scr" in console or \
        re.search(r"Booting bootflow '\S+\.bootdev\.part_1' with script", console), console
    assert "Booting root slot A (partition 2; 2 more attempts after this one)" in console, console
    assert "Starting camstream: OK" in console, console
    assert "Machine model: Raspberry Pi 3 Model B" in firmware.sh("dmesg")
    mounts = firmware.sh("cat /proc/mounts")
    # The kernel mounts the root slot itself when there is no initramfs
    # (the Buildroot image): /dev/root, the command line's root=.
    assert re.search(r"^(/dev/mmcblk0p2|/dev/root) / erofs ro[ ,]", mounts, re.M), mounts
    assert "root=/dev/mmcblk0p2 " in firmware.sh("cat /proc/cmdline") + " "
    assert re.search(r"^/dev/mmcblk0p4 /data ext4 rw[ ,]", mounts, re.M), mounts
    assert re.search(r"^/dev/mmcblk0p1 /boot/firmware vfat rw[ ,]", mounts, re.M), mounts


def test_live555_plays_it(firmware, openrtsp):
    """live555's openRTSP (VLC's RTSP client) at the forwarded port, RTP
    over TCP (a QEMU user network cannot send UDP to the host): every frame
    it saved decodes in FFmpeg."""
    folder, out = openrtsp("-t", "-d", "4", "-m", "-F", "f-", firmware.url)
    assert out.returncode == 0, out.stderr[-4000:]
    frames = live555_frames(folder)
    assert len(frames) >= 20, (len(frames), out.stderr[-2000:])
    decoded = run(["ffmpeg", "-v", "error", "-f", "mjpeg", "-i", "-", "-fps_mode", "passthrough",
                   "-f", "null", "-"], input=b"".join(frames))
    assert decoded.returncode == 0 and not decoded.stderr, decoded.stderr[-2000:]


def test_the_boot_partition_is_the_pis(firmware):
    """What the Pi's firmware reads, beside U-Boot's files."""
    files = firmware.sh("ls /boot/firmware").split()
    for f in ("bootcode.bin", "start.elf", "fixup.dat", "config.txt", "cmdline.txt", "u-boot.bin",
              "boot.scr", "bootstate.env"):
        assert f in files, files
    # The Pi 3 B and B+'s device trees, by the mainline kernel's names or
    # the Raspberry Pi kernel's.
    assert {"bcm2837-rpi-3-b.dtb", "bcm2837-rpi-3-b-plus.dtb"} <= set(files) or \
        {"bcm2710-rpi-3-b.dtb", "bcm2710-rpi-3-b-plus.dtb"} <= set(files), files
    config = firmware.sh("cat /boot/firmware/config.txt")
    assert "kernel=u-boot.bin" in config and "arm_64bit=1" in config, config
    # The kernel's command line is cmdline.txt's, with the console's UART
    # named as the firmware names it (serial0: here the mini UART, ttyS1),
    # the console last: the one init's console and shell use.
    cmdline = firmware.sh("cat /proc/cmdline")
    written = firmware.sh("cat /boot/firmware/cmdline.txt").strip().replace("console=serial0,", "console=ttyS1,")
    assert cmdline.startswith(written), cmdline
    assert "console=tty1 console=ttyS1,115200" in cmdline, cmdline


def test_the_ab_counter_on_the_boot_partition(firmware):
    """U-Boot took one attempt from slot A; the health check gave it back
    once camstream's first frame went out, through RAUC and fw_setenv on
    the FAT file."""
    firmware.health_checked(timeout=240)
    state = firmware.sh("fw_printenv BOOT_ORDER BOOT_A_LEFT BOOT_B_LEFT")
    assert state.split() == ["BOOT_ORDER=A", "B", "BOOT_A_LEFT=3", "BOOT_B_LEFT=0"], state
    assert "in slot A" in firmware.sh("camstream-update status")
    assert "rootfs.0" in firmware.sh("rauc status"), "RAUC sees the Pi's slots"


def test_the_first_boot_grew_the_data_partition_to_the_card(firmware):
    """The image's data partition (128 MiB) now ends where the 1 GiB card
    does, and its filesystem with it (grow-data; test_grow cuts the power
    while it grows)."""
    grew = re.search(r"data: growing the data partition /dev/mmcblk0p4 from 128 MiB to (\d+) MiB",
                     firmware.console_text)
    assert grew, firmware.console_text
    start, size, card = (int(firmware.sh(f"cat /sys/class/block/{f}").strip())
                         for f in ("mmcblk0p4/start", "mmcblk0p4/size", "mmcblk0/size"))
    assert start + size == card == 1 << 21
    assert size // 2048 == int(grew[1])
    grown = firmware.sh("cat /data/.grown").strip()
    assert grown.startswith(f"partition {size // 2048} MiB, filesystem "), grown
    # The filesystem fills its partition (its own metadata aside).
    kib = int(firmware.sh("df -Pk /data | awk 'NR == 2 { print $2 }'"))
    assert kib > size // 2 * 0.9, (kib, size)


def test_usb_network_and_name(firmware):
    """The USB network adapter gets its address by DHCP and the name comes
    from its MAC (QEMU's 52:54:00:12:34:57)."""
    addr = firmware.sh("ip -4 addr show usb0")
    assert "inet 10.0.2.15/24" in addr, addr
    assert firmware.sh("hostname").strip() == "camstream-3457"


def test_the_watchdog_is_not_armed_under_emulation(firmware):
    """QEMU resets the board the moment the BCM2835 watchdog is armed, so
    scripts/qemu tells the guest not to arm it; the driver is there (the
    Pi restarts through it) and the health check says why it goes on
    without one."""
    # Bound to the SoC's watchdog, as a module or built in.
    assert firmware.sh("ls /sys/bus/platform/drivers/bcm2835-wdt").strip()
    assert firmware.sh("test -e /dev/watchdog && echo yes").strip() == "yes"
    assert "camstream.qemu.watchdog=off" in firmware.sh("cat /proc/cmdline")
    assert "the watchdog is off under this emulator" in firmware.console_text
    assert not firmware.sh("pidof watchdog", check=False).strip()


def test_readme_update_steps_on_the_pi(firmware):
    """README's "Update a board" on the Pi's layout, with the bundle on the
    data partition: RAUC writes the Pi's slot B, U-Boot for the Pi boots
    it by boot.cmd's A/B state on its FAT partition, and the health check
    keeps it. Last: it leaves the board in slot B."""
    g = firmware
    version = g.sh("sed -n 's/^VERSION_ID=//p' /etc/os-release").strip()
    assert g.bundle.endswith(f"-{version}.raucb")
    start = time.monotonic()
    g.p.sendline(f"camstream-update {g.bundle}")
    g.p.expect("rebooting into slot B", timeout=600)
    installed = time.monotonic()
    # U-Boot again (its banner goes to the Pi's screen, not the serial port).
    g.p.expect("Hit any key to stop autoboot", timeout=120)
    g.wait_booted(timeout=300)
    g.wait_for("camstream-update status", "kept", timeout=180)
    kept = time.monotonic()
    figure(f"OTA on {BOARD} by README's steps, from the data partition: install {installed - start:.0f} s, "
           f"kept {kept - start:.0f} s after the command")
    assert re.search(r"rauc\.slot=B", g.sh("cat /proc/cmdline"))
    assert "root=/dev/mmcblk0p3 " in g.sh("cat /proc/cmdline") + " "
    assert f"update to {version} kept (slot B)" in g.sh("camstream-update status")
    assert g.sh("fw_printenv BOOT_ORDER").strip() == "BOOT_ORDER=B A"
    assert g.first_frame(timeout=60)
