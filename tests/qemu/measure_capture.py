"""Capture + encode cost on a real V4L2 driver in the firmware under QEMU
(its camstream service stopped for the measurement): camstream takes
vivid's YUYV at 1280x720, converts and encodes it, and serves one FFmpeg
client on the host. Prints frames/s delivered and camstream's CPU use.
Emulated (TCG) aarch64 is many times slower than a real Cortex-A53, so
these figures are an upper bound on the cost.

    output/venv/bin/python tests/qemu/measure_capture.py [FORMAT [WxH [SECONDS]]]
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import guest  # noqa: E402


def main() -> None:
    fmt = sys.argv[1] if len(sys.argv) > 1 else "YUYV"
    w, h = map(int, (sys.argv[2] if len(sys.argv) > 2 else "1280x720").split("x"))
    seconds = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    guest.build()
    g = guest.Guest(testdrive=False)
    try:
        g.sh("/etc/init.d/S50camstream stop")
        g.sh(f"camstream --source v4l2:/dev/video0 --format {fmt} --width {w} --height {h} --fps 30 "
             "2>/tmp/log & echo $! >/tmp/pid; sleep 2; cat /tmp/log")
        client = subprocess.Popen(["ffmpeg", "-v", "error", "-rtsp_transport", "tcp", "-i", g.url,
                                   "-f", "null", "-"], stdin=subprocess.DEVNULL)
        time.sleep(3)
        # utime + stime in clock ticks (USER_HZ = 100), and frames sent so far.
        stat = "cut -d' ' -f14,15 /proc/$(cat /tmp/pid)/stat"
        t0, a = time.monotonic(), sum(map(int, g.sh(stat).split()))
        time.sleep(seconds)
        t1, b = time.monotonic(), sum(map(int, g.sh(stat).split()))
        client.terminate()
        client.wait()
        g.sh("kill $(cat /tmp/pid); sleep 1")
        log = g.sh("cat /tmp/log")
        sent = int(log.rsplit("ended", 1)[1].split(":")[1].split()[0])
        print(log)
        cpu = (b - a) / 100 / (t1 - t0) * 100
        print(f"{fmt} {w}x{h}: {sent} frames sent in total; camstream CPU {cpu:.1f}% of one emulated core "
              f"over {seconds} s")
    finally:
        g.close()


if __name__ == "__main__":
    main()
