"""The firmware image booted under QEMU by scripts/qemu (README's main
command), driven over its serial console with pexpect. Writes go to a
snapshot QEMU drops at exit; the guest can open no connection out, so the
host reaches it through forwarded ports only."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pexpect
import pytest

from helpers import ROOT, free_port, run, split
from rtsp import Client

# CAMSTREAM_FIRMWARE: a Buildroot build's images directory (for instance
# output/qemu_aarch64/images, with sdcard.img, rootfs.erofs and the U-Boot it
# built; or a Raspberry Pi 3 build's, output/rpi3_64/images, which has the
# Pi's firmware in rpi-firmware/) to test instead of the image scripts/image
# assembles for that board.
FIRMWARE = os.environ.get("CAMSTREAM_FIRMWARE")
IMAGE = Path(FIRMWARE).resolve() if FIRMWARE else ROOT / "output/image"
FIRMWARE_BOARD = ("rpi3_64" if (IMAGE / "rpi-firmware").is_dir() else "qemu_aarch64") if FIRMWARE else None
# The root filesystem's files: scripts/image keeps them beside the image,
# Buildroot in its target directory.
ROOTFS = IMAGE.parent / "target" if FIRMWARE else IMAGE / "rootfs"
TESTDRIVE = ROOT / "output/qemu-test"
PROMPT = "guest# "


def image_of(board: str) -> Path:
    """The images directory of `board`'s firmware: CAMSTREAM_FIRMWARE's, or
    what scripts/image builds."""
    if FIRMWARE:
        return IMAGE
    return ROOT / ("output/image" if board == "qemu_aarch64" else f"output/image-{board}")


def slot_tree(slot: Path, into: Path) -> Path:
    """The files of root slot image `slot` (EROFS, as rootfs.erofs), as
    they are in it, extracted under `into`."""
    subprocess.run(["fsck.erofs", f"--extract={into}", str(slot)], check=True, capture_output=True)
    return into


def in_tree(root: Path, path: str) -> Path:
    """Where file `path` of the tree extracted under `root` is, through
    symbolic links inside it (Buildroot's /etc/os-release is one)."""
    for _ in range(8):
        p = root / path.lstrip("/")
        if not p.is_symlink():
            return p
        link = os.readlink(p)
        path = link if link.startswith("/") else os.path.normpath(f"{os.path.dirname(path)}/{link}")
    raise OSError(f"{path}: too many links in {root}")


def slot_file(slot: Path, path: str) -> bytes:
    """A file of root slot image `slot`, through symbolic links inside it."""
    with tempfile.TemporaryDirectory() as tmp:
        return in_tree(slot_tree(slot, Path(tmp) / "root"), path).read_bytes()


def make_slot(root: Path, slot: Path, like: Path | None = None) -> Path:
    """A root slot image of the files under `root`, made as scripts/image
    makes rootfs.erofs; with the build time and UUID of the slot image
    `like`, as a new build of the same tree has them, so that the blocks
    of unchanged files come out the same (an adaptive update)."""
    stamp, same_uuid = 0, []
    if like:
        # EROFS's superblock, at 1024: build_time (le64) at 24, uuid at 48.
        with like.open("rb") as f:
            f.seek(1024)
            sb = f.read(64)
        stamp = int.from_bytes(sb[24:32], "little")
        same_uuid = [f"-U{uuid.UUID(bytes=sb[48:64])}"]
    subprocess.run(["mkfs.erofs", "--quiet", "-zlz4hc,9", "-C65536", f"-T{stamp}", *same_uuid, str(slot), str(root)],
                   check=True, capture_output=True)
    return slot


# The boards build() has built in this test run.
BUILT: set[str] = set()


def build(board: str = "qemu_aarch64") -> None:
    """Builds (or updates) the firmware image of `board` (not a given
    CAMSTREAM_FIRMWARE) and, for the virt board, the tests' extra drive;
    once a test run: the tree does not change under it, and each test
    file asks."""
    if board in BUILT:
        return
    if FIRMWARE:
        # The test drive's v4l2loopback is built for the kernel scripts/image
        # takes from Debian; Guest refuses it with a given firmware.
        if board != FIRMWARE_BOARD:
            pytest.skip(f"CAMSTREAM_FIRMWARE is a {FIRMWARE_BOARD} build, not {board}")
        return
    subprocess.run([str(ROOT / "scripts/image"), "--board", board], check=True, timeout=1800)
    if board == "qemu_aarch64":
        subprocess.run([str(ROOT / "tests/qemu/build")], check=True, timeout=1800)
    BUILT.add(board)


class WebServer:
    """A web server on the host's 127.0.0.1 serving `directory` as a user
    serves bundles (README): BusyBox's httpd, which answers HTTP range
    requests, so RAUC streams from it; or, for a while, Python's
    http.server, which answers none, so camstream-update downloads the
    bundle whole. `url` is where the guest reaches it through
    Guest(host_port=port); python() swaps the servers on that port."""

    def __init__(self, directory: Path):
        self.directory, self.port = directory, free_port()
        self.url = f"http://10.0.2.100:{self.port}"
        self.p: subprocess.Popen | None = None
        self.start(ranges=True)

    def start(self, ranges: bool) -> None:
        if ranges:
            cmd = ["busybox", "httpd", "-f", "-p", f"127.0.0.1:{self.port}", "-h", str(self.directory)]
        else:
            cmd = [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "--directory", str(self.directory),
                   str(self.port)]
        self.p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.p.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{cmd[0]} does not serve on port {self.port}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.p is not None:
            self.p.terminate()
            self.p.wait(timeout=10)
            self.p = None

    @contextlib.contextmanager
    def python(self):
        """Python's http.server on the same port for a while."""
        self.stop()
        self.start(ranges=False)
        try:
            yield
        finally:
            self.stop()
            self.start(ranges=True)


@contextlib.contextmanager
def web_server(directory: Path):
    """WebServer(directory), stopped afterwards."""
    web = WebServer(directory)
    try:
        yield web
    finally:
        web.stop()


@contextlib.contextmanager
def streaming(**kwargs):
    """The image built (or updated) and booted as Guest(**kwargs), once its
    camstream streams; powered off afterwards."""
    build(kwargs.get("board", "qemu_aarch64"))
    g = Guest(**kwargs)
    try:
        g.wait_for("logread | grep camstream", "streaming ")
        yield g
    finally:
        g.close()


def firmware_fixture(**kwargs):
    """A test file's `firmware` fixture: one guest for the file's tests,
    booted as `streaming(**kwargs)`."""

    @pytest.fixture(scope="module")
    def firmware():
        with streaming(**kwargs) as g:
            yield g

    return firmware


class Guest:
    def __init__(self, memory: str = "256M", testdrive: bool = True, wait: bool = True,
                 image: Path | None = None, drive: Path | None = None, password_needed: bool = False,
                 ssh: bool = False, board: str = "qemu_aarch64", host_port: int | None = None,
                 bios: Path | None = None, qemu_args: list[str] | None = None):
        """`image`: a disk image of the test's own, booted without a snapshot
        (its writes stay, as on a real board); `drive`: a read-only second
        disk instead of the test drive; `password_needed`: the host's
        clients are treated as a network's (scripts/qemu --password-needed);
        `ssh`: the guest's SSH port forwarded to `ssh_port`; `board`:
        scripts/qemu --board (rpi3_64: no extra drive, no PCIe);
        `host_port`: the host's 127.0.0.1:PORT reachable from the guest at
        10.0.2.100:PORT (scripts/qemu --host-port); `bios`: the virt
        board's U-Boot (scripts/qemu --bios); `qemu_args`: more of QEMU's
        arguments (devices)."""
        self.rtsp_port = free_port()
        self.http_port = free_port()
        self.webrtc_port = free_port(socket.SOCK_DGRAM)
        self.ssh_port = free_port() if ssh else None
        self.qmp_path = f"/tmp/camstream-qmp-{self.rtsp_port}.sock"
        args = ["--no-build", "--board", board, "--port", str(self.rtsp_port),
                "--http-port", str(self.http_port), "--webrtc-port", str(self.webrtc_port), "--memory", memory]
        args += ["--ssh-port", str(self.ssh_port)] if ssh else []
        args += ["--host-port", str(host_port)] if host_port else []
        args += ["--password-needed"] if password_needed else []
        if image:
            args += ["--image", str(image)]
        else:
            args += ["--snapshot"]
            if FIRMWARE and board == FIRMWARE_BOARD:
                args += ["--image", str(IMAGE / "sdcard.img")]
        if bios:
            args += ["--bios", str(bios)]
        elif FIRMWARE and board == FIRMWARE_BOARD == "qemu_aarch64":
            args += ["--bios", str(IMAGE / "u-boot.bin")]
        if board != "qemu_aarch64":
            testdrive = False
        if drive:
            args += ["--drive", str(drive)]
            testdrive = False
        if testdrive and FIRMWARE:
            pytest.skip("the test drive's v4l2loopback is built for Debian's kernel, not CAMSTREAM_FIRMWARE's")
        elif testdrive:
            args += ["--drive", str(TESTDRIVE / "testdrive.tar")]
        # A PCIe port to hot-plug devices into, and QMP to do it with.
        args += ["--", "-qmp", f"unix:{self.qmp_path},server=on,wait=off"]
        if board == "qemu_aarch64":
            args += ["-device", "pcie-root-port,id=hp0,chassis=1"]
        args += qemu_args or []
        self.console: list[str] = []
        # Nudges sent during the command running (see expect_nudging).
        self.nudges = 0
        self.testdrive = testdrive
        self.started = time.monotonic()
        # QEMU's own messages (slirp's "Failed to send packet" for each of
        # the guest's packets to a network this machine has none of) go to
        # a file of their own: on the console they landed inside the
        # guest's lines and broke a test's match in two.
        self.stderr_path = Path(f"/tmp/camstream-qemu-{self.rtsp_port}.stderr")
        self.p = pexpect.spawn("/bin/sh", ["-c", 'err=$1; shift; exec "$@" 2>"$err"', "sh",
                                           str(self.stderr_path), str(ROOT / "scripts/qemu"), *args],
                               encoding="utf-8", timeout=120, codec_errors="replace")
        self.p.logfile_read = self
        if wait:
            self.wait_booted()

    def wait_booted(self, timeout: float = 120, since: int | None = None) -> None:
        """Waits for the console, opens a shell on it, unpacks the extra drive.
        `since`: a position in `console_text` after which the console's
        invitation may already have gone by (read while waiting for
        something else)."""
        invitation = "Please press Enter to activate this console."
        if since is None or invitation not in self.console_text[since:]:
            self.p.expect(invitation, timeout=timeout)
        self.p.sendline("")
        self.p.expect("# ")
        # The kernel's messages stay in its log (dmesg, logread): on the
        # console they land inside commands' output (vimc's warnings, written
        # while `camstream probe` printed, once broke its libcamera line).
        self.p.sendline(f"stty cols 4096; dmesg -n 1; export PS1='{PROMPT}' TERM=dumb")
        self.p.expect(PROMPT)
        self.p.expect(PROMPT)
        if self.testdrive:
            # cam/ (libcamera's tool and its libraries) only where needed.
            self.sh("mkdir -p /tmp/t && tar -xf /dev/vdb -C /tmp/t --exclude=./cam")

    # pexpect's log sink
    def write(self, s: str) -> None:
        self.console.append(s)

    def flush(self) -> None:
        pass

    @property
    def console_text(self) -> str:
        return "".join(self.console)

    @property
    def url(self) -> str:
        return f"rtsp://127.0.0.1:{self.rtsp_port}/stream"

    def expect_nudging(self, pattern: str, timeout: float, nudge: str = "\x11 \x7f") -> None:
        """`expect`, but a console silent for 20 s is nudged: a few times
        the guest's console went silent for minutes (right after busy loops,
        or a process killed) and came back with the next command line. The
        nudge is a START character (^Q: output stopped by a stray STOP
        byte restarts) and a space erased again (DEL): its echo is new
        output, which restarts a serial port that stopped sending (what the
        silences look like: ^Q alone did not bring a console back once in
        120 s, a command line did). Neither reaches a
        command: the terminal takes ^Q itself, and the space is erased by
        the line discipline (a command running) or by the shell's line
        editing (at the prompt). Once a command has ended and only its
        prompt is awaited, `run` nudges with an empty line instead: the
        space is echoed and erased all the same while the prompt itself
        stays lost (seen once in 120 s after busy loops were killed),
        where an empty line gets a new prompt."""
        deadline = time.monotonic() + timeout
        while True:
            heard = len(self.console)
            try:
                self.p.expect(pattern, timeout=max(0.1, min(20, deadline - time.monotonic())))
                return
            except pexpect.TIMEOUT:
                if time.monotonic() >= deadline:
                    raise
                if len(self.console) == heard:
                    print(f"guest console: nothing for 20 s while waiting for {pattern!r}; nudged",
                          file=sys.stderr, flush=True)
                    self.p.send(nudge)
                    self.nudges += 1

    def run(self, command: str, timeout: float = 120) -> tuple[int, str]:
        """Runs a shell command in the guest; returns its exit status and output."""
        self.nudges = 0
        self.p.sendline(f"{command}; echo \"__rc=$?\"")
        self.expect_nudging(r"__rc=(\d+)\r*\n", timeout)
        out, rc = self.p.before, int(self.p.match.group(1))
        self.expect_nudging(PROMPT, 120, nudge="\x11\r")
        # Drop the echoed command line, and whatever the console printed
        # before it (a daemon's line to /dev/console can come between the
        # prompt and the echo).
        echoed = out.rfind('echo "__rc=$?"')
        start = out.find("\n", max(echoed, 0))
        out = out[start + 1:] if start >= 0 else ""
        # A nudge's space, echoed and erased while the command ran.
        out = out.replace(" \b \b", "", self.nudges)
        return rc, out.replace("\r", "")

    def sh(self, command: str, timeout: float = 120, check: bool = True) -> str:
        """Runs a shell command in the guest; returns its output."""
        rc, out = self.run(command, timeout)
        if check and rc != 0:
            raise AssertionError(f"guest: {command!r} exited {rc}:\n{out}")
        return out

    def camera_records(self) -> str:
        """The inodes of the records camera-node keeps for camera nodes (see
        `camera_nodes_settled`), before a driver is unbound or unloaded."""
        return " ".join(self.sh("ls -i /run/udev/data 2>/dev/null | awk '{print $1}'").split())

    def camera_nodes_settled(self, nodes: list[str], before: str, timeout: float = 30) -> None:
        """Waits until mdev has handled the uevents of a driver unbound and
        bound again (or unloaded and loaded) until each of `nodes` (video0)
        is there for good. devtmpfs makes and removes nodes at once, mdev
        hears of it later: a removal it has yet to handle takes away the node
        the new device already has (a probe then found no /dev/video*). Its
        handling of the new node is the sign: camera-node's record for it, a
        new file (an inode not among `before`), comes after every earlier
        event was handled."""
        self.sh(f"settled() {{ for n in {' '.join(nodes)}; do "
                "d=$(cat /sys/class/video4linux/$n/dev 2>/dev/null) && [ -e /dev/$n ] || return 1; "
                "set -- $(ls -i /run/udev/data/c$d 2>/dev/null); [ $# -gt 0 ] || return 1; "
                f"case ' {before} ' in *\" $1 \"*) return 1;; esac; done; }}; "
                f"i=0; until settled; do [ $i -lt {int(timeout * 10)} ] || "
                "{ echo 'mdev did not settle'; exit 1; }; sleep 0.1; i=$((i+1)); done", timeout=timeout + 30)

    def log_since_mark(self) -> str:
        """Writes a mark into the system log; returns the command that
        prints the log from it on (what happened after this call, however
        many lines it took)."""
        mark = f"test-mark-{time.monotonic_ns()}"
        self.sh(f"logger -t test {mark}")
        return f"logread | sed -n '/{mark}/,$p'"

    def wait_for(self, command: str, pattern: str, timeout: float = 60) -> re.Match:
        """Reruns `command` (once a second) until its output matches.
        `pattern` is read by the guest's grep -E and then by Python's re,
        so it keeps to what both read alike ([0-9], not \\d, which grep
        takes as "d": the loop would run to its timeout)."""
        out = self.sh(f"i=0; until {command} | grep -qE '{pattern}' || [ $i -ge {int(timeout)} ]; "
                      f"do sleep 1; i=$((i+1)); done; {command}", timeout=timeout + 30, check=False)
        m = re.search(pattern, out)
        assert m, f"no {pattern!r} in guest output:\n{out}"
        return m

    def first_frame_while_booting(self, timeout: float = 120) -> float | None:
        """While the guest boots: waits for its console (`wait_booted`) and,
        beside it, for the first whole frame at a host client (the console
        must be read meanwhile, or the boot stalls writing to it). Returns
        when the frame came (time.monotonic()), or None if none came within
        `timeout`."""
        first: list[float] = []
        t = threading.Thread(target=lambda: first.append(self.first_frame(timeout=timeout)), daemon=True)
        t.start()
        self.wait_booted(timeout=timeout)
        t.join(timeout + 10)
        return first[0] if first else None

    def first_frame(self, timeout: float = 120, path: str = "stream") -> float:
        """Seconds until a whole RTP frame reaches the host over TCP
        interleaved (retrying while the guest is not serving yet); the
        console must be read meanwhile (see `wait_booted`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                # A short wait for the answer to SETUP: while the guest
                # reboots, QEMU accepts the connection and nothing answers.
                c = Client(self.rtsp_port, path=path, timeout=2)
                try:
                    if c.setup_tcp().status == 200:
                        c.sock.settimeout(5)
                        if c.play().status == 200:
                            for p in c.packets(5):
                                if p.marker:
                                    return time.monotonic()
                finally:
                    c.close()
            except Exception:  # not up yet: refused, reset, closed early
                pass
            time.sleep(0.2)
        raise TimeoutError(f"no frame from {self.url} within {timeout} s")

    def health_checked(self, timeout: float = 120) -> None:
        """Waits until the boot's health check has written the boot state:
        it holds camstream-update's lock until then, and begins once
        camstream's first frame went out to a client (at most 20 s without
        one; docs/UPDATE.md)."""
        self.sh("flock /run/camstream-update.lock true", timeout=timeout)

    def diagnose(self) -> str:
        """What the guest's camstream is doing, for a failure message: its
        state and kernel wait point, the system log's end, connections to
        it and what takes the CPU."""
        return self.sh(
            "for p in $(pidof camstream); do echo \"camstream $p: $(grep State /proc/$p/status)"
            " wchan=$(cat /proc/$p/wchan) syscall=$(cat /proc/$p/syscall)\"; done; "
            "logread | tail -n 30; netstat -tn | head -n 12; top -b -n 1 | head -n 15", check=False)

    def qmp(self, command: str, **arguments) -> dict:
        """One command on QEMU's QMP socket."""
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(self.qmp_path)
            f = s.makefile("rw")
            json.loads(f.readline())
            for cmd in [{"execute": "qmp_capabilities"}, {"execute": command, "arguments": arguments}]:
                f.write(json.dumps(cmd) + "\n")
                f.flush()
                while True:
                    reply = json.loads(f.readline())
                    if "event" not in reply:
                        break
            assert "return" in reply, reply
            return reply["return"]

    def frames(self, kind: str, pix_fmt: str = "yuvj420p") -> list[bytes]:
        """The feeder's frames of `kind` as FFmpeg decodes them (the files
        on the extra drive, also kept on the host)."""
        clip = b"".join(p.read_bytes() for p in sorted((TESTDRIVE / "work/drive/frames").glob(f"{kind}-*.jpg")))
        raw = run(["ffmpeg", "-v", "error", "-f", "mjpeg", "-i", "-", "-f", "rawvideo", "-pix_fmt", pix_fmt,
                   "-"], input=clip).stdout
        return split(raw, 640 * 480 * 3 if pix_fmt == "rgb24" else 640 * 480 * 3 // 2)

    def close(self) -> None:
        if self.p.isalive():
            self.p.sendline("poweroff -f")
            try:
                self.p.expect(pexpect.EOF, timeout=20)
            except pexpect.TIMEOUT:
                pass
        self.p.close(force=True)
        Path(self.qmp_path).unlink(missing_ok=True)
        # Shown with a failing test's output (pytest keeps stderr for those).
        with contextlib.suppress(OSError):
            err = self.stderr_path.read_text(errors="replace").splitlines()
            if err:
                print("scripts/qemu's stderr, its last lines:", *err[-20:], sep="\n", file=sys.stderr)
        self.stderr_path.unlink(missing_ok=True)
