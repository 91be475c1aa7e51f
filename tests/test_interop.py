"""Real clients decode frames from camstream; every frame must be
pixel-identical to the source frame decoded by the same decoder."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

from helpers import Media, assert_frames_match, gst_launch, gst_stopped_cleanly, live555_frames, run, split

W, H = 640, 360


def ffmpeg_client(url: str, transport: str, frames: int, pix_fmt: str, w: int = W, h: int = H) -> list[bytes]:
    raw = run(["ffmpeg", "-v", "error", "-rtsp_transport", transport, "-buffer_size", "8388608",
               "-i", url, "-frames:v", str(frames), "-fps_mode", "passthrough",
               "-f", "rawvideo", "-pix_fmt", pix_fmt, "-"],
              timeout=60).stdout
    return split(raw, Media.frame_size(w, h, pix_fmt))


def gst_client(url: str, protocols: str, frames: int, fmt: str, w: int = W, h: int = H,
               tmp=None) -> list[bytes]:
    out = tmp / f"gst-{protocols}-{w}x{h}.raw"
    gst_launch(["rtspsrc", f"location={url}", f"protocols={protocols}", "latency=200",
                "!", "rtpjpegdepay", "!", "jpegdec", "!", f"video/x-raw,format={fmt}",
                "!", "identity", f"eos-after={frames + 1}", "!", "filesink", f"location={out}"])
    return split(out.read_bytes(), Media.frame_size(w, h, fmt))


@pytest.fixture
def clip420(media):
    return media.ffmpeg("ffmpeg-testsrc2-640x360-420.mjpeg", f"{W}x{H}", 60)


@pytest.fixture
def clip422(media):
    # FFmpeg codes 4:2:2 as luma 2x2 + chroma 1x2, which RTP/JPEG cannot
    # carry (camstream refuses it); libjpeg's 4:2:2 is luma 2x1 + chroma 1x1.
    return media.cjpeg("cjpeg-testsrc2-640x360-422.mjpeg", f"{W}x{H}", 60, ["-sample", "2x1", "-quality", "85"])


@pytest.mark.parametrize("transport", ["tcp", "udp"])
@pytest.mark.parametrize("sampling", ["420", "422"])
def test_ffmpeg(camstream, media, clip420, clip422, transport, sampling):
    clip, fmt = (clip420, "yuvj420p") if sampling == "420" else (clip422, "yuvj422p")
    cs = camstream("--source", f"file:{clip}")
    got = ffmpeg_client(cs.url, transport, 90, fmt)
    assert_frames_match(got, media.ffmpeg_reference(clip, W, H, fmt), min_frames=90,
                        consecutive=transport == "tcp")


@pytest.mark.parametrize("protocols", ["tcp", "udp"])
@pytest.mark.parametrize("sampling", ["420", "422"])
def test_gstreamer(camstream, media, clip420, clip422, protocols, sampling, tmp_path):
    # jpegdec (1.22) hands out 4:2:2 as I420 too; both sides go through it.
    clip, fmt = (clip420, "I420") if sampling == "420" else (clip422, "I420")
    cs = camstream("--source", f"file:{clip}")
    got = gst_client(cs.url, protocols, 60, fmt, tmp=tmp_path)
    assert_frames_match(got, media.gst_reference(clip, W, H, fmt), min_frames=60,
                        consecutive=protocols == "tcp")


@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_live555(camstream, media, clip420, openrtsp, transport):
    """live555's openRTSP, VLC's RTSP client: the JPEG files it rebuilds from
    RTP/JPEG (its own headers, the tables from the packets) decode to the
    source frames."""
    cs = camstream("--source", f"file:{clip420}")
    folder, out = openrtsp(*(["-t"] if transport == "tcp" else []), "-d", "4", "-m", "-F", "f-", cs.url)
    assert out.returncode == 0, out.stderr[-4000:]
    frames = live555_frames(folder)
    raw = run(["ffmpeg", "-v", "error", "-f", "mjpeg", "-i", "-", "-fps_mode", "passthrough",
               "-f", "rawvideo", "-pix_fmt", "yuvj420p", "-"], input=b"".join(frames)).stdout
    got = split(raw, Media.frame_size(W, H, "yuvj420p"))
    assert len(got) == len(frames), "every file openRTSP wrote decodes"
    assert_frames_match(got, media.ffmpeg_reference(clip420, W, H, "yuvj420p"), min_frames=90,
                        consecutive=transport == "tcp")


def test_restart_markers(camstream, media, tmp_path):
    """Frames with DRI (RTP/JPEG types 64/65) through FFmpeg and GStreamer."""
    clip = media.cjpeg("cjpeg-restart-640x360-422.mjpeg", f"{W}x{H}", 30,
                       ["-restart", "1", "-sample", "2x1", "-quality", "85"])
    cs = camstream("--source", f"file:{clip}")
    got = ffmpeg_client(cs.url, "tcp", 45, "yuvj422p")
    assert_frames_match(got, media.ffmpeg_reference(clip, W, H, "yuvj422p"), min_frames=45)
    got = gst_client(cs.url, "tcp", 45, "I420", tmp=tmp_path)
    assert_frames_match(got, media.gst_reference(clip, W, H, "I420"), min_frames=45)


def test_4k_through_gstreamer(camstream, media, tmp_path):
    """3840x2160 does not fit the RTP/JPEG header: a=x-dimensions carries it."""
    clip = media.ffmpeg("ffmpeg-testsrc2-3840x2160.mjpeg", "3840x2160", 8, quality=10)
    cs = camstream("--source", f"file:{clip}", "--fps", "5")
    got = gst_client(cs.url, "tcp", 10, "I420", w=3840, h=2160, tmp=tmp_path)
    assert_frames_match(got, media.gst_reference(clip, 3840, 2160, "I420"), min_frames=10)


def test_several_clients_at_once(camstream, media, clip420, tmp_path):
    cs = camstream("--source", f"file:{clip420}")
    ref_ff = media.ffmpeg_reference(clip420, W, H, "yuvj420p")
    ref_gst = media.gst_reference(clip420, W, H, "I420")
    results: dict[str, list[bytes]] = {}
    errors: list[BaseException] = []

    def client(name, fn):
        try:
            results[name] = fn()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    jobs = {
        "ffmpeg-tcp-1": lambda: ffmpeg_client(cs.url, "tcp", 90, "yuvj420p"),
        "ffmpeg-tcp-2": lambda: ffmpeg_client(cs.url, "tcp", 90, "yuvj420p"),
        "ffmpeg-udp": lambda: ffmpeg_client(cs.url, "udp", 90, "yuvj420p"),
        "gst-tcp": lambda: gst_client(cs.url, "tcp", 90, "I420", tmp=tmp_path),
        "gst-udp": lambda: gst_client(cs.url, "udp", 90, "I420", tmp=tmp_path),
    }
    threads = [threading.Thread(target=client, args=item) for item in jobs.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for name, frames in results.items():
        ref = ref_gst if name.startswith("gst") else ref_ff
        assert_frames_match(frames, ref, min_frames=90, consecutive="tcp" in name)


def test_teardown_and_reconnect_with_ffmpeg(camstream, media, clip420):
    cs = camstream("--source", f"file:{clip420}")
    ref = media.ffmpeg_reference(clip420, W, H, "yuvj420p")
    for _ in range(3):
        assert_frames_match(ffmpeg_client(cs.url, "tcp", 20, "yuvj420p"), ref, min_frames=20)
    cs.wait_for("ended (TEARDOWN)")


def test_testpattern_is_moving(camstream):
    """The default source: frames decode and change over time."""
    cs = camstream("--width", "320", "--height", "240", "--fps", "15")
    frames = ffmpeg_client(cs.url, "tcp", 15, "yuvj420p", 320, 240)
    assert len(frames) == 15
    assert len(set(frames)) == 15, "every test pattern frame differs"


def test_ffprobe_reports_the_stream(camstream):
    cs = camstream("--width", "1280", "--height", "720")
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-rtsp_transport", "tcp", "-select_streams", "v:0", "-count_frames",
         "-read_intervals", "%+2", "-show_entries", "stream=codec_name,width,height,nb_read_frames",
         "-of", "csv=p=0", cs.url], check=True, capture_output=True, text=True, timeout=60).stdout.strip()
    codec, w, h, n = out.split(",")
    assert (codec, w, h) == ("mjpeg", "1280", "720")
    assert int(n) >= 50


@pytest.mark.parametrize("transcript, clean", [
    ("gstreamer-1.22-rtspsrc-pause-cancelled-at-eos.txt", True),
    ("gstreamer-1.22-rtspsrc-server-closed-at-pause.txt", False),
    ("gstreamer-1.22-rtspsrc-server-closed-at-teardown.txt", False),
])
def test_gstreamer_pause_race_is_told_from_a_server_close(transcript, clean):
    """What gst-launch printed when rtspsrc cancelled its own PAUSE at the
    end (the server never saw it), and when a proxy in front of camstream
    closed the connection at PAUSE or TEARDOWN: only the first may pass."""
    out = (Path(__file__).parent / "testdata/gstreamer" / transcript).read_text()
    assert gst_stopped_cleanly(1, out) is clean
    assert not gst_stopped_cleanly(2, out)
