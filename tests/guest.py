"""The firmware's kernel under QEMU (aarch64 `virt`, user networking that
only forwards host->guest), driven over its serial console with pexpect."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pexpect

from conftest import ROOT, free_port

OUT = ROOT / "output/qemu-test"
PROMPT = "guest# "


def build() -> Path:
    """Builds (or updates) the kernel and initramfs the tests boot."""
    subprocess.run([str(ROOT / "tests/qemu/build")], check=True, timeout=1800)
    return OUT


class Guest:
    def __init__(self, out: Path, memory: str = "256M"):
        self.rtsp_port = free_port()
        cmd = ["qemu-system-aarch64", "-M", "virt", "-cpu", "cortex-a53", "-smp", "2", "-m", memory,
               "-nographic", "-no-reboot", "-kernel", str(out / "vmlinuz"),
               "-initrd", str(out / "initramfs.cpio.gz"), "-append", "console=ttyAMA0 quiet panic=-1",
               "-netdev", f"user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:{self.rtsp_port}-:8554",
               "-device", "virtio-net-pci,netdev=n0"]
        self.console: list[str] = []
        self.p = pexpect.spawn(cmd[0], cmd[1:], encoding="utf-8", timeout=120, codec_errors="replace")
        self.p.logfile_read = self
        self.p.expect("camstream test initramfs")
        self.p.expect("# ")
        self.p.sendline(f"export PS1='{PROMPT}' TERM=dumb")
        self.p.expect(PROMPT)
        self.p.expect(PROMPT)
        self.sh("modprobe virtio_pci && modprobe virtio_net && ip link set lo up && ip link set eth0 up "
                "&& ip addr add 10.0.2.15/24 dev eth0")

    # pexpect's log sink
    def write(self, s: str) -> None:
        self.console.append(s)

    def flush(self) -> None:
        pass

    @property
    def url(self) -> str:
        return f"rtsp://127.0.0.1:{self.rtsp_port}/stream"

    def sh(self, command: str, timeout: float = 120, check: bool = True) -> str:
        """Runs a shell command in the guest; returns its output."""
        self.p.sendline(f"{command}; echo \"__rc=$?\"")
        self.p.expect(r"__rc=(\d+)\r*\n", timeout=timeout)
        out, rc = self.p.before, int(self.p.match.group(1))
        self.p.expect(PROMPT)
        # Drop the echoed command line.
        out = out.split("\n", 1)[1] if "\n" in out else ""
        out = out.replace("\r", "")
        if check and rc != 0:
            raise AssertionError(f"guest: {command!r} exited {rc}:\n{out}")
        return out

    def wait_for(self, command: str, pattern: str, timeout: float = 60) -> re.Match:
        """Reruns `command` (once a second) until its output matches."""
        out = self.sh(f"i=0; until {command} | grep -qE '{pattern}' || [ $i -ge {int(timeout)} ]; "
                      f"do sleep 1; i=$((i+1)); done; {command}", timeout=timeout + 30, check=False)
        m = re.search(pattern, out)
        assert m, f"no {pattern!r} in guest output:\n{out}"
        return m

    def frames(self, kind: str) -> list[bytes]:
        """The feeder's frames of `kind` as FFmpeg decodes them (files
        built into the initramfs, also kept on the host)."""
        from conftest import run, split
        clip = b"".join(p.read_bytes() for p in sorted((OUT / "work/rootfs/frames").glob(f"{kind}-*.jpg")))
        raw = run(["ffmpeg", "-v", "error", "-f", "mjpeg", "-i", "-", "-f", "rawvideo", "-pix_fmt", "yuvj420p",
                   "-"], input=clip).stdout
        return split(raw, 640 * 480 * 3 // 2)

    def close(self) -> None:
        if self.p.isalive():
            self.p.sendline("poweroff -f")
            try:
                self.p.expect(pexpect.EOF, timeout=20)
            except pexpect.TIMEOUT:
                pass
        self.p.close(force=True)
