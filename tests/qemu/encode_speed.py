"""JPEG encoding speed on the emulated board: camstream's unit tests built
for aarch64 (scripts/lib-build.sh's cross Rust), and their ignored figure
`raw_capture_encode_speed` (720p in every raw layout, 1080p YUV420 and NV12
as libcamera gives them) run in the firmware under QEMU, its camstream
service stopped. Emulated (TCG) aarch64 is many times slower than a real
board, so these are upper bounds (docs/BENCHMARKS.md).

    output/venv/bin/python tests/qemu/encode_speed.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import guest  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def unit_test_binary() -> Path:
    """camstream's unit-test executable for aarch64, as cargo names it."""
    out = subprocess.run(["sh", "-c", '. scripts/lib.sh && . scripts/lib-build.sh && '
                          'cargo_aarch64 test --release --locked -p camstream --no-run --message-format=json'],
                         cwd=ROOT, env={**os.environ, "ROOT": str(ROOT)},
                         check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg["target"]["name"] == "camstream" \
                and msg["target"]["kind"] == ["bin"] and msg.get("executable"):
            return Path(msg["executable"])
    raise SystemExit("cargo built no test executable for camstream")


def main() -> None:
    binary = unit_test_binary()
    guest.build()
    with tempfile.TemporaryDirectory() as tmp:
        files, drive = Path(tmp) / "files", Path(tmp) / "drive.ext4"
        files.mkdir()
        shutil.copy(binary, files / "camstream-tests")
        subprocess.run(["mke2fs", "-q", "-t", "ext4", "-d", str(files), str(drive), "64M"], check=True)
        g = guest.Guest(drive=drive, memory="512M")
        try:
            g.sh("/etc/init.d/S50camstream stop; mkdir -p /tmp/t && mount -t ext4 -o ro /dev/vdb /tmp/t")
            rc, out = g.run("/tmp/t/camstream-tests --ignored --nocapture raw_capture_encode_speed 2>&1", 1800)
            print(out)
            if rc != 0:
                raise SystemExit(f"the figure's test failed in the guest (exit {rc})")
        finally:
            g.close()


if __name__ == "__main__":
    main()
