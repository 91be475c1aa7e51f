"""A true picture: JFIF (and so MJPEG, the snapshot and the status page)
takes full-range samples; a source of video-range ones (16-235) must make
them full range or every picture is washed out, its black grey (16, 16,
16). The test pattern's 75 % colour bars, decoded by FFmpeg to RGB, over
each way a client sees them; the other sources (vivid's YUV formats,
vimc through libcamera) are tested in the firmware (test_v4l2,
test_libcamera)."""

from __future__ import annotations

import requests

from helpers import BARS_75, bars_off, colour_bars, run, split

W, H = 640, 360
BARS_H = (H * 2 // 3) & ~1


def decode(url_or_file: str, frames: int, *args: str) -> list[bytes]:
    out = run(["ffmpeg", "-v", "error", *args, "-i", url_or_file, "-frames:v", str(frames),
               "-f", "rawvideo", "-pix_fmt", "rgb24", "-"], timeout=60).stdout
    return split(out, W * H * 3)


def test_the_pattern_bars_are_true_over_mjpeg_the_snapshot_and_h264(camstream, tmp_path):
    cs = camstream("--width", str(W), "--height", str(H))
    seen = {
        "MJPEG over RTSP": decode(cs.url, 20, "-rtsp_transport", "tcp"),
        "H.264 over RTSP": decode(cs.url.removesuffix("/stream") + "/h264", 20, "-rtsp_transport", "tcp"),
    }
    snapshots = []
    for n in range(3):
        shot = tmp_path / f"snapshot{n}.jpg"
        shot.write_bytes(requests.get(cs.http + "/snapshot.jpg", timeout=10).content)
        snapshots += decode(str(shot), 1)
    seen["the snapshot"] = snapshots
    for how, frames in seen.items():
        # Frames apart in time: the box moves on.
        bars = colour_bars(frames[::6] if len(frames) > 3 else frames, W, BARS_H)
        print(f"{how}: bars {bars}, at most {bars_off(bars, BARS_75)} off")
        assert bars_off(bars, BARS_75) <= 3, (how, bars)
    # The H.264 stream's SPS says its samples span the full range, with
    # BT.601's matrix, as FFmpeg reads it: what made the bars above right.
    probe = run(["ffprobe", "-v", "error", "-rtsp_transport", "tcp", "-select_streams", "v",
                 "-show_entries", "stream=color_range,color_space", "-of", "csv=p=0",
                 cs.url.removesuffix("/stream") + "/h264"], timeout=60).stdout.decode().strip()
    assert probe == "pc,smpte170m"

