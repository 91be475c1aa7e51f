"""Over-the-air updates on the firmware under QEMU (docs/UPDATE.md): signed
RAUC bundles made by scripts/bundle, installed by camstream-update into the
other root slot, chosen by U-Boot's A/B boot script, kept or rolled back by
the boot-time health check. Each test boots its own copy of the disk
without a snapshot, so writes stay as on a board; bundles come in on a
read-only second drive, or from a web server on the host (scripts/qemu
--host-port: the guest can reach nothing else). Rollback and power cut
also run on the emulated Raspberry Pi 3's layout (test_pi)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

import guest
from helpers import ROOT, figure
from test_boot import marked_after_the_first_frame

PI = "rpi3_64"
# The emulated Pi is slower: its waits are four times the virt board's.
SLOW = {"qemu_aarch64": 1, PI: 4}
# The hanging slot's watchdog deadline, s: its trial boot has armed the
# watchdog well before it (the check's first line is the sign).
HANG_WATCHDOG = 12


def slot_text(image: Path, path: str) -> str:
    return guest.slot_file(image, path).decode()


def variant(work: Path, name: str, version: str, replace: dict[str, bytes] | None = None,
            image: Path = guest.IMAGE) -> Path:
    """A root slot image like the one built in `image` that says it is
    `version`, with files replaced."""
    root = guest.slot_tree(image / "rootfs.erofs", work / f"{name}.d")
    os_release = guest.in_tree(root, "/etc/os-release")
    os_release.write_text(re.sub(r"(?m)^VERSION_ID=.*$", f"VERSION_ID={version}", os_release.read_text()))
    for path, content in (replace or {}).items():
        p = root / path.lstrip("/")
        p.unlink(missing_ok=True)
        p.write_bytes(content)
        p.chmod(0o755 if path.startswith(("/usr/bin/", "/usr/sbin/")) else 0o644)
    rootfs = guest.make_slot(root, work / f"{name}.erofs", like=image / "rootfs.erofs")
    shutil.rmtree(root)
    return rootfs


def bundle(rootfs: Path, out: Path, *extra: str) -> Path:
    subprocess.run([str(ROOT / "scripts/bundle"), "--output", str(out), *extra, str(rootfs)], check=True,
                   capture_output=True, timeout=300)
    return out


def readme_bundle(rootfs: Path) -> Path:
    """README's `scripts/bundle ROOTFS`: without --output it puts the bundle
    beside the root filesystem, named by board and version, and says
    where; returns that path."""
    version = re.search(r"(?m)^VERSION_ID=(.*)$", slot_text(rootfs, "/etc/os-release"))[1]
    board = re.search(r"(?m)^compatible=camstream-(\S+)$", slot_text(rootfs, "/etc/rauc/system.conf"))[1]
    made = subprocess.run([str(ROOT / "scripts/bundle"), str(rootfs)], capture_output=True, text=True, check=True,
                          timeout=300).stdout.strip().splitlines()[-1]
    path = ROOT / made
    assert path.parent == rootfs.parent and path.name == f"camstream-{board}-{version}.raucb", made
    return path


def camstream_as(image: Path, wrapper: bytes) -> dict[str, bytes]:
    """Files for variant(): `wrapper` in place of the root filesystem's
    /usr/bin/camstream, which it finds beside it as camstream-real."""
    real = guest.slot_file(image / "rootfs.erofs", "/usr/bin/camstream")
    return {"/usr/bin/camstream": wrapper, "/usr/bin/camstream-real": real}


def v2_and_broken(work: Path, drive: Path, image: Path) -> str:
    """Bundles in `drive` of the root filesystem built in `image`: v2.raucb
    (another version) and broken.raucb (a version whose camstream cannot
    start, its daemon exits at once, while `camstream check`, which the
    health check runs, still works). Returns v1, the built version."""
    v1 = re.search(r"(?m)^VERSION_ID=(.*)$", slot_text(image / "rootfs.erofs", "/etc/os-release"))[1]
    # As README's "Update a board" makes it; served under its name too.
    path = readme_bundle(variant(work, "v2", f"{v1}-v2", image=image))
    path.rename(drive / "v2.raucb")
    (drive / path.name).symlink_to("v2.raucb")
    # Its check's wait for a frame shortened from 45 to 20 s: no frame comes
    # however long it waits, and the rollback after it is what is tested.
    update = slot_text(image / "rootfs.erofs", "/usr/sbin/camstream-update")
    assert "\nHEALTH_TIMEOUT=45\n" in update
    broken = variant(work, "broken", f"{v1}-broken", {
        **camstream_as(image, (
            b'#!/bin/sh\n[ "${1:-}" = check ] && exec /usr/bin/camstream-real "$@"\n'
            b'echo "camstream: error: this build cannot start" >&2\nexit 1\n')),
        "/usr/sbin/camstream-update": update.replace("\nHEALTH_TIMEOUT=45\n", "\nHEALTH_TIMEOUT=20\n").encode()},
        image=image)
    bundle(broken, drive / "broken.raucb")
    return v1


@pytest.fixture(scope="module")
def ota(tmp_path_factory):
    """v1 is the built image; bundles of v2 and of what must be refused."""
    guest.build()
    work = tmp_path_factory.mktemp("ota")
    drive = work / "drive"
    drive.mkdir()
    v1 = v2_and_broken(work, drive, guest.IMAGE)
    # A v2 that hangs on its trial boot: `camstream check` never returns,
    # so nothing marks the slot good or bad and only the watchdog (its
    # deadline shortened from 150 s) gets the board out.
    update = slot_text(guest.IMAGE / "rootfs.erofs", "/usr/sbin/camstream-update")
    assert "\nTRIAL_WATCHDOG=150\n" in update
    hangs = variant(work, "hangs", f"{v1}-hangs", {
        **camstream_as(guest.IMAGE, b'#!/bin/sh\n[ "${1:-}" = check ] && exec sleep 100000\n'
                                    b'exec /usr/bin/camstream-real "$@"\n'),
        "/usr/sbin/camstream-update": update.replace("\nTRIAL_WATCHDOG=150\n",
                                                     f"\nTRIAL_WATCHDOG={HANG_WATCHDOG}\n").encode()})
    bundle(hangs, drive / "hangs.raucb")
    # Signed with a key the board does not trust.
    key, cert = work / "other.key.pem", work / "other.cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30", "-subj",
                    "/CN=not camstream", "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    other_key = variant(work, "otherkey", f"{v1}-otherkey",
                        {"/etc/rauc/keyring.pem": cert.read_bytes()})
    bundle(other_key, drive / "otherkey.raucb", "--key", str(key), "--cert", str(cert))
    # Cut off in the middle (an interrupted copy).
    data = (drive / "v2.raucb").read_bytes()
    (drive / "truncated.raucb").write_bytes(data[: len(data) // 2])
    # Made for another board.
    conf = slot_text(guest.IMAGE / "rootfs.erofs", "/etc/rauc/system.conf")
    rpi = variant(work, "rpi", f"{v1}-rpi",
                  {"/etc/rauc/system.conf": conf.replace("camstream-qemu_aarch64", "camstream-rpi4_64").encode()})
    bundle(rpi, drive / "rpi.raucb")
    # A change of camstream alone, the worst of its kind: every byte of
    # the program differs (it is never started: installed without a reboot).
    real = guest.slot_file(guest.IMAGE / "rootfs.erofs", "/usr/bin/camstream")
    app = variant(work, "app", f"{v1}-v2-app", {"/usr/bin/camstream": real[::-1]})
    bundle(app, drive / "app.raucb")
    image = work / "bundles.ext4"
    # Sized from the bundles (they grow with the image), with room for ext4's own.
    size_mib = sum(f.stat().st_size for f in drive.iterdir()) * 5 // 4 // 2**20 + 16
    subprocess.run(["mke2fs", "-q", "-t", "ext4", "-d", str(drive), str(image), f"{size_mib}M"], check=True)
    ota = type("Ota", (), {})()
    ota.board, ota.image, ota.bundles = "qemu_aarch64", guest.IMAGE, "/tmp/b"
    ota.work, ota.drive, ota.v1, ota.v2 = work, image, v1, f"{v1}-v2"
    ota.v2_size = (drive / "v2.raucb").stat().st_size
    ota.app_size, ota.camstream_size = (drive / "app.raucb").stat().st_size, len(real)
    # The user's web server, on the host.
    with guest.web_server(drive) as ota.web:
        yield ota


@pytest.fixture(scope="module")
def pi_ota(tmp_path_factory):
    """The same on the emulated Raspberry Pi 3's layout (test_pi): v2 and
    broken bundles of its root filesystem, from the host's web server (the
    Pi has no second drive)."""
    guest.build(PI)
    image = guest.image_of(PI)
    work = tmp_path_factory.mktemp("pi-ota")
    drive = work / "drive"
    drive.mkdir()
    v1 = v2_and_broken(work, drive, image)
    ota = type("Ota", (), {})()
    ota.board, ota.image, ota.work, ota.drive, ota.v1, ota.v2 = PI, image, work, None, v1, f"{v1}-v2"
    with guest.web_server(drive) as ota.web:
        ota.bundles = ota.web.url
        yield ota


class Board:
    """A guest on its own disk; on the virt board with the bundle drive
    mounted at /tmp/b."""

    def __init__(self, ota, disk: Path | None = None):
        self.ota = ota
        self.slow = SLOW[ota.board]
        if disk is None:
            disk = ota.work / f"disk-{time.monotonic_ns()}.img"
            subprocess.run(["cp", "--sparse=always", str(ota.image / "sdcard.img"), str(disk)], check=True)
        self.disk = disk
        self.g = self.boot()

    def boot(self) -> guest.Guest:
        """Boots the disk to a frame at the host and the boot state written
        (the health check waits for the first frame)."""
        g = guest.Guest(board=self.ota.board, image=self.disk, drive=self.ota.drive, host_port=self.ota.web.port,
                        wait=False)
        g.wait_booted(timeout=120 * self.slow)
        self.g = g
        self.mount()
        self.framed = g.first_frame(timeout=120 * self.slow)
        g.health_checked(timeout=120 * self.slow)
        return g

    def mount(self) -> None:
        if self.ota.drive:
            self.g.sh("mkdir -p /tmp/b && mount -t ext4 -o ro /dev/vdb /tmp/b")

    def sh(self, cmd: str, **kw) -> str:
        return self.g.sh(cmd, **kw)

    def update(self, source: str, timeout: float = 300) -> tuple[int, str]:
        """camstream-update SOURCE, where it does not reboot: exit status, output."""
        return self.g.run(f"camstream-update {source} 2>&1", timeout)

    def slot(self) -> str:
        return re.search(r"rauc\.slot=(\w)", self.sh("cat /proc/cmdline"))[1]

    def version(self) -> str:
        return self.sh("sed -n 's/^VERSION_ID=//p' /etc/os-release").strip()

    def boot_state(self) -> dict[str, str]:
        return dict(line.split("=", 1) for line in self.sh("fw_printenv").split("\n") if "=" in line)

    def wait_reboot_to_frame(self, timeout: float = 300) -> tuple[float, float]:
        """After a reboot began: waits for the console and a frame at the host;
        returns when U-Boot started again and when the frame came."""
        # Only once U-Boot runs again: the old system may still be serving.
        self.g.p.expect("U-Boot 20", timeout=timeout)
        uboot = time.monotonic()
        first = self.g.first_frame_while_booting(timeout=timeout)
        assert first, f"no frame after the reboot:\n{self.g.console_text[-4000:]}"
        self.mount()
        return uboot, first

    def close(self) -> None:
        self.g.close()


@pytest.fixture
def firmware(ota, request):
    yield from a_board(ota, request)


@pytest.fixture(params=["qemu_aarch64", pytest.param(PI, marks=pytest.mark.slow)])
def firmware_on_each_board(request):
    """The virt board, and the emulated Pi's layout (slow: the Pi's own A/B
    state is proven in CI by test_pi and README's steps on the Pi)."""
    yield from a_board(request.getfixturevalue("ota" if request.param == "qemu_aarch64" else "pi_ota"), request)


def a_board(ota, request):
    b = Board(ota)
    yield b
    call = getattr(request.node, "report_call", None)
    if call is not None and call.failed:
        # The guest's own account (boot, health check, rollback) of what went wrong.
        print(f"--- guest console, last 12000 characters ---\n{b.g.console_text[-12000:]}")
    b.close()
    b.disk.unlink(missing_ok=True)


def received_kib(history: str, version: str, slot: str) -> int:
    """What the board received while it streamed `version` into `slot`, as
    camstream-update's history says (the kernel's counters, TCP/IP
    included)."""
    received = re.search(rf"installed {re.escape(version)} into slot {slot} \(streamed, (\d+) KiB received\)", history)
    assert received, history
    return int(received[1])


def test_update_over_the_network_and_keep(firmware):
    """README's "Update a board" (the bundle as scripts/bundle made and
    named it, from a web server on the host), with the user's settings on
    the data partition: the trial boot gives the host its first frame
    before its own check asks for one, marks the slot good after it, and
    the settings are there in slot B. Streamed and adaptive: the board
    downloads the blocks it does not have, for a new version and then for a
    new camstream alone, not the bundle."""
    b = firmware
    assert b.slot() == "A" and b.version() == b.ota.v1
    # A setting the user changed, on the data partition: the top-level fps
    # (the first line of its name; [motion] has an fps of its own, and a key
    # twice is a config camstream refuses), else a new first line.
    b.sh("f=/data/etc/camstream.toml; sed -i '1,/^#* *fps *=/ s/^#* *fps *=.*/fps = 25/' $f; "
         "grep -q '^fps = 25' $f || sed -i '1i fps = 25' $f; test \"$(grep -c '^fps *=' $f)\" = 1")
    # And the network's: a name of the user's choosing.
    b.sh("sed -i 's/^hostname =.*/hostname = ota-cam/' /data/etc/network.conf")
    settings = b.sh("md5sum /data/etc/camstream.toml /data/etc/network.conf")
    start = time.monotonic()
    b.g.p.sendline(f"camstream-update {b.ota.web.url}/camstream-{b.ota.board}-{b.ota.v2}.raucb")
    b.g.p.expect("rebooting into slot B", timeout=300)
    installed = time.monotonic()
    rebooted, framed = b.wait_reboot_to_frame()
    figure(f"OTA: update with a {b.ota.v2_size / 1048576:.1f} MiB bundle: download+install {installed - start:.1f} s, "
           f"to the first frame from the new slot {framed - start:.1f} s "
           f"({framed - rebooted:.1f} s after U-Boot started again)")
    b.g.wait_for("camstream-update status", "kept", timeout=90)
    assert b.slot() == "B"
    assert b.version() == b.ota.v2
    assert f"update to {b.ota.v2} kept (slot B)" in b.sh("camstream-update status")
    status = b.sh("rauc status --output-format=shell 2>/dev/null")
    assert "RAUC_SYSTEM_BOOTED_BOOTNAME='B'" in status, status
    slots = dict(re.findall(r"RAUC_SLOT_BOOTNAME_(\d+)='(\w)'", status))
    booted = {v: k for k, v in slots.items()}["B"]
    assert f"RAUC_SLOT_BOOT_STATUS_{booted}='good'" in status, status
    assert b.boot_state()["BOOT_ORDER"] == "B A"
    log = b.sh("logread | grep -E 'camstream(-update)?: '")
    # The host's client had the first frame, then the check asked.
    assert log.index("first frame sent to a client") < log.index(" is good, slot B kept"), log
    # After the trial's own check, which waits for a frame of its own.
    figure(f"OTA: the trial boot's {marked_after_the_first_frame(b.g, within=None)}")
    assert b.sh("md5sum /data/etc/camstream.toml /data/etc/network.conf") == settings
    assert b.sh("hostname").strip() == "ota-cam"
    assert "update to " + b.ota.v2 + " is good" in b.g.console_text
    # A connection the check gave up on is not a failure, but worth seeing.
    for note in re.findall(r"camstream check: [^\r\n]*", b.g.console_text):
        figure(f"OTA: the health check tried again: {note}")
    # Streamed: nothing stored on /data; adaptive: slot A's blocks came from
    # slot A, and the board received what changed (os-release, the
    # metadata), a small part of the bundle.
    assert "download.raucb" not in b.sh("ls /data/ota")
    received = received_kib(b.sh("cat /data/ota/history"), b.ota.v2, "B")
    figure(f"OTA: a new version, its {b.ota.v2_size / 1048576:.1f} MiB bundle streamed: {received / 1024:.1f} MiB "
           f"received by the board, {received * 1024 / b.ota.v2_size:.1%} of the bundle "
           f"(install {installed - start:.1f} s)")
    assert received * 1024 < b.ota.v2_size / 3
    # A new camstream alone, into slot A from slot B: the program's blocks,
    # and not much more.
    start = time.monotonic()
    code, out = b.update(f"--no-reboot {b.ota.web.url}/app.raucb", timeout=300 * b.slow)
    assert code == 0, out
    installed = time.monotonic() - start
    received = received_kib(b.sh("cat /data/ota/history"), f"{b.ota.v1}-v2-app", "A")
    figure(f"OTA: an app-only change ({b.ota.camstream_size / 1048576:.1f} MiB camstream, every byte new), its "
           f"{b.ota.app_size / 1048576:.1f} MiB bundle streamed: {received / 1024:.1f} MiB received by the board, "
           f"{received * 1024 / b.ota.app_size:.1%} of the bundle (install {installed:.1f} s)")
    assert received * 1024 <= b.ota.app_size / 3


def test_refused_bundles_change_nothing(firmware):
    b = firmware
    before_state = b.boot_state()
    running = b.sh("md5sum /dev/vda2", timeout=300)
    cases = [
        ("/tmp/b/otherkey.raucb", 5, "signature is not from a key this board trusts"),
        ("/tmp/b/truncated.raucb", 7, "not a valid bundle"),
        # Streamed: RAUC reads the signature over HTTP, refused at once; a
        # truncated one cannot be streamed, and is refused once downloaded.
        (f"{b.ota.web.url}/otherkey.raucb", 5, "signature is not from a key this board trusts"),
        (f"{b.ota.web.url}/truncated.raucb", 7, "not a valid bundle"),
        ("/tmp/b/rpi.raucb", 6, "the bundle is for 'camstream-rpi4_64', this board is 'camstream-qemu_aarch64'"),
        ("/tmp/b/missing.raucb", 2, "no bundle at"),
        (f"{b.ota.web.url}/missing.raucb", 3, "download of"),
    ]
    for source, code, message in cases:
        rc, out = b.update(source)
        print(f"\ncamstream-update {source}: exit {rc}: {out.strip().splitlines()[-1]}")
        assert rc == code, out
        assert message in out, out
    # From a server that answers no range requests (Python's), the bundle
    # is downloaded whole first: not when /data has no room for it.
    free_kib = int(b.sh("df -Pk /data | awk 'NR == 2 {print $4}'"))
    fill = max(0, free_kib - b.ota.v2_size // 1024 // 2)
    b.sh(f"dd if=/dev/zero of=/data/fill bs=1024 count={fill} 2>/dev/null")
    with b.ota.web.python():
        rc, out = b.update(f"{b.ota.web.url}/v2.raucb")
    b.sh("rm /data/fill")
    print(f"camstream-update from Python's server with {free_kib - fill} KiB free: exit {rc}: "
          f"{out.strip().splitlines()[-1]}")
    assert "cannot stream the bundle" in out, out
    assert rc == 4 and "not enough space on /data" in out, out
    assert b.boot_state() == before_state
    assert b.sh("md5sum /dev/vda2", timeout=300) == running
    assert b.sh("ls /data/ota 2>/dev/null | grep -c raucb || true").strip() == "0"
    assert b.g.first_frame(timeout=30)


def test_new_slot_that_cannot_stream_rolls_back(firmware_on_each_board):
    b = firmware_on_each_board
    start = time.monotonic()
    b.g.p.sendline(f"camstream-update {b.ota.bundles}/broken.raucb")
    b.g.p.expect("rebooting into slot B", timeout=300 * b.slow)
    # Slot B boots, the check fails, the board goes back to A by itself.
    b.g.p.expect("failed its check", timeout=300 * b.slow)
    # With what camstream itself logged, for whoever reads the console.
    b.g.p.expect("camstream's log: .*this build cannot start", timeout=30)
    b.g.p.expect(r"was rolled back \((.*)\): running (\S+) in slot A again", timeout=300 * b.slow)
    reason, running = b.g.p.match.group(1), b.g.p.match.group(2)
    back = time.monotonic()
    assert running == b.ota.v1
    b.g.wait_booted(since=b.g.console_text.rfind("Starting kernel"), timeout=120 * b.slow)
    b.mount()
    assert b.g.first_frame(timeout=60 * b.slow)
    figure(f"OTA on {b.ota.board}: update whose camstream cannot start rolled back after {back - start:.0f} s: "
           f"{reason}")
    assert b.slot() == "A" and b.version() == b.ota.v1
    assert "rolled back" in b.sh("camstream-update status")
    assert "B" not in b.boot_state()["BOOT_ORDER"]


def test_trial_boot_that_hangs_is_reset_by_the_watchdog(firmware):
    """Slot B hangs before its check ends: the watchdog, armed and not fed
    on a trial boot, resets the board (QEMU's i6300esb; the emulated Pi's
    watchdog resets the moment it is armed, docs/IMAGE.md), each reset
    costs B a boot attempt, and once they are gone U-Boot boots A, which
    rolls the update back."""
    b = firmware
    start = time.monotonic()
    b.g.p.sendline("camstream-update /tmp/b/hangs.raucb")
    b.g.p.expect("rebooting into slot B", timeout=300)
    b.g.p.expect(r"was rolled back \((.*)\): running (\S+) in slot A again", timeout=600)
    reason, running = b.g.p.match.group(1), b.g.p.match.group(2)
    back = time.monotonic()
    assert running == b.ota.v1
    assert reason == "slot B did not come up (its boot attempts ran out)"
    tries = b.g.console_text.count("Booting root slot B")
    assert tries == 3, b.g.console_text[-6000:]
    # Each of them armed the watchdog for its trial and never got further.
    assert b.g.console_text.count("waiting up to 45 s for a frame") == tries
    figure(f"OTA: a slot whose trial boot hangs: {tries} watchdog resets ({HANG_WATCHDOG} s each), back in slot A and "
           f"rolled back {back - start:.0f} s after the command")
    b.g.wait_booted(since=b.g.console_text.rfind("Starting kernel"))
    b.mount()
    assert b.slot() == "A" and b.version() == b.ota.v1
    assert "B" not in b.boot_state()["BOOT_ORDER"]
    assert b.g.first_frame(timeout=60)


def test_power_cut_while_writing_keeps_the_old_slot(firmware_on_each_board):
    b = firmware_on_each_board
    b.g.p.sendline(f"camstream-update {b.ota.bundles}/v2.raucb")
    b.g.p.expect("Copying image to rootfs.1", timeout=300 * b.slow)
    os.kill(b.g.p.pid, signal.SIGKILL)  # scripts/qemu exec'd QEMU: this is QEMU
    b.g.p.close(force=True)
    cut = time.monotonic()
    b.boot()
    assert b.slot() == "A" and b.version() == b.ota.v1
    state = b.boot_state()
    assert state["BOOT_ORDER"].split()[0] == "A", state
    framed = b.framed
    figure(f"OTA on {b.ota.board}: power cut while writing slot B: back to streaming from slot A "
           f"{framed - cut:.1f} s after")
    # And the next update goes through (the same code on both boards: on
    # the quicker one), from a server that answers no range requests
    # (Python's): downloaded whole to /data first, installed, removed.
    if b.ota.drive:
        with b.ota.web.python():
            rc, out = b.update(f"--no-reboot {b.ota.web.url}/v2.raucb", timeout=600)
        assert rc == 0 and "downloading it whole to /data first" in out and "slot B boots next" in out, out
        history = b.sh("cat /data/ota/history")
        received = re.search(rf"installed {re.escape(b.ota.v2)} into slot B \(downloaded, (\d+) KiB received\)",
                             history)
        assert received and int(received[1]) * 1024 > b.ota.v2_size, history
        assert "download.raucb" not in b.sh("ls /data/ota")


def test_rauc_dying_is_told_apart_from_a_failed_install(firmware):
    """RAUC killed by a signal (seen once: glibc's "double free" as RAUC 1.8
    exits) after it activated the new slot: the update carries on to its
    trial boot. Killed before: exit 8, the old slot stays first."""
    b = firmware
    b.sh("cp /usr/bin/rauc /tmp/rauc-real && printf '%s\\n' '#!/bin/sh' "
         "'/tmp/rauc-real \"$@\"; rc=$?' '[ \"$1\" = install ] && kill -ABRT $$' 'exit $rc' >/tmp/rauc-dies-after "
         "&& printf '%s\\n' '#!/bin/sh' '/tmp/rauc-real \"$@\" & pid=$!' "
         "'[ \"$1\" = install ] && sleep 2 && kill -ABRT $pid' 'wait $pid' >/tmp/rauc-dies-during "
         "&& chmod +x /tmp/rauc-dies-after /tmp/rauc-dies-during")
    b.sh("mount --bind /tmp/rauc-dies-after /usr/bin/rauc")
    rc, out = b.update("--no-reboot /tmp/b/v2.raucb")
    assert rc == 0, out
    assert "RAUC exited with signal 6 after it had written, verified and activated slot B" in out, out
    assert b.boot_state()["BOOT_ORDER"].startswith("B"), b.boot_state()
    assert "pending: " + b.ota.v2 + " in slot B" in b.sh("camstream-update status")
    # Undo: slot A first again, nothing pending.
    b.sh("umount /usr/bin/rauc && rauc status mark-active booted >/dev/null 2>&1 && rm /data/ota/pending")
    b.sh("mount --bind /tmp/rauc-dies-during /usr/bin/rauc")
    rc, out = b.update("--no-reboot /tmp/b/v2.raucb")
    assert rc == 8, out
    assert "installing failed, slot A is unchanged and still boots" in out, out
    assert b.boot_state()["BOOT_ORDER"].startswith("A"), b.boot_state()
    # camstream-update's own line (RAUC's slot details below it may say
    # status=pending).
    assert "pending: " not in b.sh("camstream-update status")


@pytest.mark.slow
def test_the_release_bundle_installs_on_the_pi(tmp_path):
    """What a person downloads to update (scripts/release's .raucb, beside the
    image they flashed) installs on the emulated Pi from a web server, boots
    slot B and is kept (slow: README's steps above prove the same path with
    scripts/bundle's bundle)."""
    guest.build(PI)
    out = tmp_path / "release"
    subprocess.run([str(ROOT / "scripts/release"), "--images", str(guest.image_of(PI)), "--output", str(out),
                    PI], check=True, capture_output=True, timeout=1800)
    bundle = next(out.glob(f"camstream-{PI}-*.raucb"))
    g = None
    with guest.web_server(out) as web:
        try:
            g = guest.Guest(board=PI, host_port=web.port, testdrive=False, wait=False)
            g.wait_booted(timeout=480)
            version = g.sh("sed -n 's/^VERSION_ID=//p' /etc/os-release").strip()
            assert bundle.name == f"camstream-{PI}-{version}.raucb"
            g.p.sendline(f"camstream-update {web.url}/{bundle.name}")
            g.p.expect("rebooting into slot B", timeout=900)
            g.p.expect("Hit any key to stop autoboot", timeout=300)
            g.wait_booted(timeout=480)
            g.wait_for("camstream-update status", "kept", timeout=300)
            assert f"update to {version} kept (slot B)" in g.sh("camstream-update status")
            assert re.search(r"rauc\.slot=B", g.sh("cat /proc/cmdline"))
        finally:
            if g is not None:
                g.close()
