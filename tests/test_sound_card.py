"""Sound from a real sound card, under QEMU: the kernel's loopback card
(snd-aloop, in the image for this board) with tone-feed (tests/qemu)
playing camstream's test tone into it, 1 kHz for the first 100 ms of each
second of UTC. camstream, as its own user in group audio (mdev's nodes),
captures the other side through alsa-lib beside the test pattern, whose
clock strip marks the same instants: at once, two FFmpeg record both with
a password, the sound as G.711 and as Opus, and in each the tone's onsets
fall on the pictures' whole seconds within 40 ms.
`device = "auto"` never takes a loopback card: with only that one, there
is no sound track, and the log says which cards there were.
(QEMU's usb-audio device only plays: it cannot be the USB path here.)"""

from __future__ import annotations

import concurrent.futures
import re

import pytest
import requests

import guest
from helpers import run
from test_audio import OPUS, PCMU, ffmpeg_records_in_step
from test_auth import PASSWORD, USER, with_user
from test_http import metric


@pytest.fixture(scope="module")
def firmware():
    guest.build()
    g = guest.Guest()
    g.sh("/etc/init.d/S50camstream stop")
    g.sh("modprobe snd-aloop && mkdir -p /tmp/snd")
    # mdev gives the nodes their group as its uevents come (devtmpfs made
    # them root's alone): waited for, 10 s at most (the test says which).
    g.sh("i=0; while [ $i -lt 100 ] && ls -l /dev/snd | grep -q ' root  *root '; do sleep 0.1; i=$((i + 1)); done")
    yield g
    g.close()


def start(g: guest.Guest, *audio: str) -> str:
    """camstream in the guest as the firmware runs it (its own user), with
    the test pattern, one user and `audio` as its [audio] lines; its log up
    to the line that says it streams."""
    lines = ["rtsp_port = 554", "http_port = 80", "source = \"testpattern\"", "width = 640", "height = 360",
             "fps = 10", "user = \"camstream\"", "[audio]", *audio]
    g.sh("printf '%s\\n' " + " ".join(f"'{line}'" for line in lines)
         + " >/tmp/snd/camstream.toml && "
         + f"echo '{PASSWORD}' | camstream passwd {USER} >>/tmp/snd/camstream.toml")
    g.sh("camstream --config /tmp/snd/camstream.toml 2>/tmp/snd/log & echo $! >/tmp/snd/pid")
    g.wait_for("cat /tmp/snd/log", "streaming |error")
    out = g.sh("cat /tmp/snd/log")
    assert "error" not in out, out
    return out


def stop(g: guest.Guest) -> None:
    g.sh("for f in /tmp/snd/pid /tmp/snd/feed; do [ ! -f $f ] || kill $(cat $f); rm -f $f; done; "
         "while pidof camstream tone-feed >/dev/null; do sleep 0.1; done")


def test_the_loopback_card_recorded_in_step_with_the_picture(firmware, tmp_path):
    nodes = firmware.sh("ls -l /dev/snd/")
    # mdev's nodes: the card's capture and playback PCMs, its control,
    # group audio (which camstream's user is in).
    assert re.search(r"crw-rw----\s+1 root\s+audio .* pcmC0D1c", nodes), nodes
    assert re.search(r"crw-rw----\s+1 root\s+audio .* controlC0", nodes), nodes
    assert "audio:x:29:camstream" in firmware.sh("cat /etc/group")
    firmware.sh("/tmp/t/tone-feed hw:CARD=Loopback,DEV=0 2>/tmp/snd-feed.log & echo $! >/tmp/snd/feed")
    try:
        log = start(firmware, "device = \"plughw:CARD=Loopback,DEV=1\"", "codec = \"pcmu\"")
        assert "audio: pcmu, opus from plughw:CARD=Loopback,DEV=1" in log, log
        # One capture, two encodings at once: one FFmpeg takes the
        # configured G.711, another asks for Opus. (Not GStreamer over
        # TCP: its clock-skew estimate moves a track's timestamps by up to
        # 200 ms when the guest's packets come in bursts.)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            pcmu = pool.submit(ffmpeg_records_in_step, firmware.url, tmp_path / "aloop.mkv", 8, "tcp", PCMU)
            opus = pool.submit(ffmpeg_records_in_step, firmware.url + "?audio=opus", tmp_path / "aloop-opus.mkv",
                               8, "tcp", OPUS)
            pcmu.result()
            opus.result()
        m = requests.get(f"http://127.0.0.1:{firmware.http_port}/metrics",
                         auth=requests.auth.HTTPDigestAuth(USER, PASSWORD), timeout=10).text
        for codec in ("pcmu", "opus"):
            assert metric(m, "camstream_audio_frames_total", f'codec="{codec}",state="made"') > 300, m
            assert metric(m, "camstream_audio_frames_total", f'codec="{codec}",state="lost"') == 0, m
        # The feeder never fell behind (an underrun would be a gap in the tone).
        assert "tone-feed" not in firmware.sh("cat /tmp/snd-feed.log")
    finally:
        stop(firmware)


def test_auto_takes_no_loopback_card(firmware):
    """The loopback card carries what something plays, not the room: auto
    leaves it, and with no other card there is no sound track."""
    try:
        log = start(firmware, "device = \"auto\"")
        assert re.search(r"audio: no sound card to capture from \(the machine has plughw:CARD=Loopback,DEV=0 "
                         r"\(Loopback, Loopback\); plughw:CARD=Loopback,DEV=1 \(Loopback, Loopback\); auto takes no "
                         r"loopback card\): no sound", log), log
        described = run(["ffprobe", "-v", "error", "-rtsp_transport", "tcp", "-show_entries", "stream=codec_type",
                         "-of", "csv=p=0", with_user(firmware.url)], timeout=60).stdout.decode().split()
        assert described == ["video"], described
    finally:
        stop(firmware)
