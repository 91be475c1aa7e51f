"""VLC records the stream without re-encoding; the frames it wrote must be
pixel-identical to the source.

VLC's RTSP client is its live555 module. Debian 12's VLC is built without
live555 (`--disable-live555`; live555 is not in Debian), so it cannot open
any rtsp:// URL. Where the installed VLC has the module (videolan.org builds,
Flatpak, Snap, most other distributions) this test runs; otherwise it is
skipped and says why.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from helpers import assert_frames_match, run, split
from test_interop import H, W


def as_user(cmd: list[str], home: str) -> list[str]:
    """VLC refuses to run as root."""
    env = ["env", f"HOME={home}"]
    if os.geteuid() == 0:
        return ["runuser", "-u", "nobody", "--", *env, *cmd]
    return [*env, *cmd]


@pytest.fixture
def vlc_home(tmp_path):
    home = tmp_path / "vlc"
    home.mkdir()
    os.chmod(tmp_path, 0o777)
    os.chmod(home, 0o777)
    return home


def vlc_can_play_rtsp(home) -> bool:
    if not shutil.which("cvlc"):
        return False
    out = subprocess.run(as_user(["cvlc", "--list"], str(home)), capture_output=True, text=True, timeout=60)
    modules = [line.split()[0] for line in out.stdout.splitlines() if line.strip()]
    # A VLC that lists nothing is broken, not merely without RTSP.
    assert "avcodec" in modules, f"cannot list VLC's modules:\n{out.stderr}"
    return "live555" in modules


def test_vlc_records_the_stream(camstream, media, vlc_home):
    if not vlc_can_play_rtsp(vlc_home):
        pytest.skip("the installed VLC has no RTSP client (no live555 module: Debian builds VLC without it)")
    clip = media.ffmpeg("ffmpeg-testsrc2-640x360-420.mjpeg", f"{W}x{H}", 60)
    cs = camstream("--source", f"file:{clip}")
    out = vlc_home / "vlc.mjpeg"
    subprocess.run(as_user(["cvlc", "-I", "dummy", "--no-audio", "--rtsp-tcp", "--run-time=4", "--play-and-exit",
                            cs.url, "--sout", f"#std{{access=file,mux=mpjpeg,dst={out}}}"], str(vlc_home)),
                   check=True, timeout=60, capture_output=True)
    raw = run(["ffmpeg", "-v", "error", "-f", "mpjpeg", "-i", str(out), "-fps_mode", "passthrough",
               "-f", "rawvideo", "-pix_fmt", "yuvj420p", "-"]).stdout
    got = split(raw, W * H * 3 // 2)
    assert_frames_match(got, media.ffmpeg_reference(clip, W, H, "yuvj420p"), min_frames=60)
