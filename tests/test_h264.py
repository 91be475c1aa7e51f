"""H.264 beside MJPEG: rtsp://CAMERA/h264, the main stream encoded again
in software (OpenH264), played by real clients with a password over TCP
and UDP; a client that joins mid-stream starts at an IDR picture with its
parameter sets; the SDP names the profile and the parameter sets; the
sub-stream in H.264 (`codec = "h264"`) at its own size and rate."""

from __future__ import annotations

import base64
import math
import re
import subprocess
import time

import pytest
import requests

from helpers import Media, go2rtc_decode, gst_launch, run, split
from rtsp import Client
from test_auth import PASSWORD, USER, config, with_user  # noqa: F401 (config: a fixture)

W, H = 640, 360
# RFC 6184 NAL unit types.
IDR, SPS, PPS, STAP_A, FU_A = 5, 7, 8, 24, 28


def h264_url(cs) -> str:
    return cs.url.removesuffix("/stream") + "/h264"


def colour(url: str, transport: str = "tcp") -> str:
    """The range and matrix the stream's SPS signals, as FFmpeg reads them."""
    return run(["ffprobe", "-v", "error", "-rtsp_transport", transport, "-select_streams", "v",
                "-show_entries", "stream=color_range,color_space", "-of", "csv=p=0", with_user(url)],
               timeout=60).stdout.decode().strip()


def psnr(a: bytes, b: bytes) -> float:
    se = sum((x - y) ** 2 for x, y in zip(a, b, strict=True))
    return math.inf if se == 0 else 10 * math.log10(255 * 255 * len(a) / se)


@pytest.fixture
def clip(media):
    return media.ffmpeg("ffmpeg-testsrc2-640x360-420.mjpeg", f"{W}x{H}", 60)


@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_ffmpeg_plays_h264_with_the_password(camstream, config, media, clip, transport):  # noqa: F811
    cs = camstream("--config", str(config), "--source", f"file:{clip}")
    out = subprocess.run(["ffmpeg", "-v", "error", "-rtsp_transport", transport, "-i", with_user(h264_url(cs)),
                          "-frames:v", "40", "-f", "rawvideo", "-pix_fmt", "gray", "-"],
                         capture_output=True, timeout=60)
    frames = split(out.stdout, W * H)
    # No decoding error: the first frame it got was an IDR picture.
    assert out.returncode == 0 and out.stderr == b"", out.stderr.decode()
    assert len(frames) == 40
    # The picture is the camera's: each decoded frame is close to one of
    # the clip's (2 Mbit/s at 640x360: over 30 dB measured; another frame
    # of the clip scores under 20).
    reference = split(run(["ffmpeg", "-v", "error", "-i", str(clip), "-f", "rawvideo", "-pix_fmt", "gray", "-"],
                          timeout=60).stdout, W * H)
    rows = slice(0, W * H, 7)  # every 7th pixel: quick, and enough to tell pictures apart
    best = [max(psnr(f[rows], r[rows]) for r in reference) for f in frames[::8]]
    print(f"H.264 over {transport}: PSNR against the nearest source frame {min(best):.1f} to {max(best):.1f} dB")
    # Decoded to grey, as from the clip, its levels are the JPEG's: the SPS
    # says they span the full range (JFIF's) with BT.601's matrix. Without
    # that FFmpeg takes them as video range and stretches them: 27.2 dB,
    # measured; with it 47.1-48.4 (the sub-stream 46.8-48.5).
    assert min(best) > 40, best
    assert colour(h264_url(cs), transport) == "pc,smpte170m"
    # Without the password: 401.
    refused = subprocess.run(["ffprobe", "-v", "error", h264_url(cs)], capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "401 Unauthorized" in refused.stderr, refused.stderr


@pytest.mark.parametrize("protocols", ["tcp", "udp"])
def test_gstreamer_plays_h264_with_the_password(camstream, config, protocols, tmp_path):  # noqa: F811
    cs = camstream("--config", str(config), "--width", str(W), "--height", str(H))
    out = tmp_path / "gst.raw"
    gst_launch(["rtspsrc", f"location={h264_url(cs)}", f"user-id={USER}", f"user-pw={PASSWORD}",
                f"protocols={protocols}", "latency=200", "!", "rtph264depay", "!", "avdec_h264", "!",
                "video/x-raw,format=I420", "!", "identity", "eos-after=21", "!", "filesink", f"location={out}"])
    assert len(split(out.read_bytes(), Media.frame_size(W, H, "I420"))) == 20


def test_raw_pictures_are_encoded_without_a_jpeg_decode(camstream, tmp_path):
    # The test pattern draws 4:2:0 planes: the H.264 encoder takes them as
    # they are (the log says so once). Its pictures are the pattern's: in
    # the colour bars (the top two thirds), nearly every sample of each
    # plane within a few levels of the main stream's JPEG of the pattern
    # (the moving box and the clock differ from frame to frame). U and V
    # swapped, tried: 28 % of chroma samples.
    cs = camstream("--width", str(W), "--height", str(H))
    out = run(["ffmpeg", "-v", "error", "-rtsp_transport", "tcp", "-i", h264_url(cs), "-frames:v", "10",
               "-f", "rawvideo", "-pix_fmt", "yuvj420p", "-"], timeout=60).stdout
    cs.wait_for("H.264 stream: encoding the camera's raw pictures (no JPEG decode)")
    snapshot = tmp_path / "snapshot.jpg"
    snapshot.write_bytes(requests.get(cs.http + "/snapshot.jpg", timeout=10).content)
    # The samples as they are (yuvj420p: no range conversion; the
    # pattern's samples are full range in both).
    ref = run(["ffmpeg", "-v", "error", "-i", str(snapshot), "-f", "rawvideo", "-pix_fmt", "yuvj420p", "-"],
              timeout=60).stdout
    frames = split(out, W * H * 3 // 2)
    assert len(frames) == 10
    bars = H * 2 // 3

    def planes(f: bytes) -> list[bytes]:
        y, c = W * H, W * H // 4
        return [f[:W * bars], f[y:y + W // 2 * bars // 2], f[y + c:y + c + W // 2 * bars // 2]]

    def near(a: bytes, b: bytes) -> float:
        return sum(abs(x - y) <= 8 for x, y in zip(a, b, strict=True)) / len(a)

    shares = [[near(a, b) for a, b in zip(planes(f), planes(ref), strict=True)] for f in frames[2:]]
    print("H.264 of the raw pattern against its JPEG, share of Y/U/V samples within 8 levels in the bars:",
          ", ".join("/".join(f"{x:.3f}" for x in s) for s in shares[:4]))
    assert min(min(s) for s in shares) > 0.9, shares
    # Full range, as the JPEG's: the SPS says so.
    assert colour(h264_url(cs)) == "pc,smpte170m"


def test_a_client_joining_starts_at_a_key_frame_with_its_parameter_sets(camstream, tmp_path):
    # Key frames only every 1000 frames (33 s): a joining client's first
    # picture must be one asked for when it joined. (No user: this host's
    # clients stream without a password.)
    cfg = tmp_path / "camstream.toml"
    cfg.write_text("[streams.h264]\ngop = 1000\n")
    cs = camstream("--config", str(cfg), "--width", str(W), "--height", str(H))
    first = subprocess.Popen(["ffmpeg", "-v", "error", "-rtsp_transport", "tcp", "-i", h264_url(cs),
                              "-t", "8", "-f", "null", "-"], stderr=subprocess.PIPE)
    try:
        cs.wait_for("session ", timeout=20)
        for _ in range(3):
            time.sleep(1)
            c = Client(cs.port, path="h264", timeout=20)
            r = c.call("DESCRIBE")
            assert r.status == 200, r
            sdp = r.body.decode()
            assert "m=video 0 RTP/AVP 96" in sdp and "a=rtpmap:96 H264/90000" in sdp, sdp
            assert c.setup_tcp().status == 200
            assert c.play().status == 200
            packets = list(c.packets(1.5))
            c.close()
            assert packets, "no packets"
            # The first packet: SPS and PPS in one STAP-A, then the IDR
            # picture (in FU-A fragments at this size).
            p0 = packets[0].payload
            assert p0[0] & 0x1F == STAP_A, p0[:4].hex()
            n1 = int.from_bytes(p0[1:3], "big")
            assert p0[3] & 0x1F == SPS and p0[3 + n1 + 2] & 0x1F == PPS, p0.hex()
            p1 = packets[1].payload
            assert (p1[0] & 0x1F, p1[1] & 0x1F) == (FU_A, IDR) or p1[0] & 0x1F == IDR, p1[:2].hex()
            # The SDP names what the stream carries.
            fmtp = re.search(r"a=fmtp:96 packetization-mode=1;profile-level-id=(\w{6});"
                             r"sprop-parameter-sets=([\w+/=]+),([\w+/=]+)", sdp)
            assert fmtp, sdp
            sps = base64.b64decode(fmtp[2])
            assert fmtp[1] == sps[1:4].hex().upper() and sps[1] == 66, fmtp[0]  # Constrained Baseline
            assert p0[3:3 + n1] == sps
    finally:
        first.wait(30)
    assert first.returncode == 0 and first.stderr.read() == b""


def test_metrics_name_each_streams_codec_and_count_its_bytes(camstream):
    cs = camstream("--width", str(W), "--height", str(H))
    run(["ffmpeg", "-v", "error", "-rtsp_transport", "tcp", "-i", h264_url(cs), "-frames:v", "60",
         "-f", "null", "-"], timeout=60)
    text = requests.get(cs.http + "/metrics", timeout=10).text
    assert re.search(r'camstream_stream_info\{path="h264",codec="h264",width="640",height="360",fps="30"\} 1',
                     text), text
    assert re.search(r'camstream_stream_info\{path="stream",codec="jpeg",', text), text
    frames = int(re.search(r'camstream_stream_frames_total\{path="h264"\} (\d+)', text)[1])
    payload = int(re.search(r'camstream_stream_payload_bytes_total\{path="h264"\} (\d+)', text)[1])
    assert frames >= 60 and payload > 0, (frames, payload)
    print(f"H.264 at 2000 kbit/s asked: {frames} frames, {payload * 8 / frames * 30 / 1000:.0f} kbit/s made")


@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_the_sub_stream_in_h264_at_its_size_and_rate(camstream, config, media, transport):  # noqa: F811
    # A 1280x720 camera; the sub-stream 640x360 at 5 frames a second, in
    # H.264, beside the main stream's MJPEG.
    clip = media.ffmpeg("ffmpeg-testsrc2-1280x720-420.mjpeg", "1280x720", 60)
    with open(config, "a") as f:
        f.write('[streams.sub]\ncodec = "h264"\nbitrate = 400\n')
    cs = camstream("--config", str(config), "--source", f"file:{clip}")
    sub = with_user(cs.url.removesuffix("/stream") + "/sub")
    probe = run(["ffprobe", "-v", "error", "-rtsp_transport", transport, "-select_streams", "v",
                 "-show_entries", "stream=codec_name,profile,width,height", "-of", "csv=p=0", sub],
                timeout=60).stdout.decode().strip()
    assert probe == f"h264,Constrained Baseline,{W},{H}", probe
    out = subprocess.run(["ffmpeg", "-v", "error", "-rtsp_transport", transport, "-i", sub,
                          "-frames:v", "10", "-f", "rawvideo", "-pix_fmt", "gray", "-"],
                         capture_output=True, timeout=60)
    assert out.returncode == 0 and out.stderr == b"", out.stderr.decode()
    frames = split(out.stdout, W * H)
    assert len(frames) == 10
    # The camera's picture at half its size (the sub-stream box-filters
    # it; FFmpeg's "area" scaling is the same filter at 2:1).
    reference = split(run(["ffmpeg", "-v", "error", "-i", str(clip), "-vf", f"scale={W}:{H}:flags=area",
                           "-f", "rawvideo", "-pix_fmt", "gray", "-"], timeout=60).stdout, W * H)
    rows = slice(0, W * H, 7)
    best = [max(psnr(f[rows], r[rows]) for r in reference) for f in frames[::3]]
    # Its rate, not the main stream's: the frames' times, from their RTP
    # timestamps, 0.2 s apart (at the main stream's rate, 0.033).
    times = [float(t) for t in run(["ffprobe", "-v", "error", "-rtsp_transport", transport, "-i", sub,
                                    "-select_streams", "v", "-show_entries", "frame=pts_time",
                                    "-of", "csv=p=0", "-read_intervals", "%+#11"], timeout=60).stdout.split()
             if t != b"N/A"]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    print(f"H.264 sub-stream over {transport}: PSNR against the nearest source frame "
          f"{min(best):.1f} to {max(best):.1f} dB; {len(gaps)} frame intervals {min(gaps):.3f} to {max(gaps):.3f} s")
    # The JPEG's levels, as the SPS says (27.2 dB when it did not).
    assert min(best) > 40, best
    assert len(gaps) >= 8 and 0.15 < sum(gaps) / len(gaps) < 0.25, times
    text = requests.get(cs.http + "/metrics", auth=requests.auth.HTTPDigestAuth(USER, PASSWORD), timeout=10).text
    assert f'camstream_stream_info{{path="sub",codec="h264",width="{W}",height="{H}",fps="5"}} 1' in text, text
    assert 'camstream_stream_info{path="stream",codec="jpeg",width="1280",height="720"' in text, text


def test_the_sub_stream_keeps_its_rate_and_the_sps_says_it(camstream, config):  # noqa: F811
    # The test pattern at 30 frames/s; the sub-stream in H.264 at 5. Over
    # 20 s of its RTP timestamps a client gets 5 a second, to within a
    # frame: before, 5.6 a second (334-336 a minute, 0.167 and 0.200 s
    # apart: 111-112 in 20 s, well outside). And
    # each H.264 stream's SPS says its rate, which FFmpeg takes as the
    # stream's: before, it guessed 30/1 (or 120/1) for the sub-stream from the
    # timestamps.
    with open(config, "a") as f:
        f.write('[streams.sub]\ncodec = "h264"\nbitrate = 200\n')
    cs = camstream("--config", str(config), "--source", "testpattern", "--width", "640", "--height", "360")
    sub = with_user(cs.url.removesuffix("/stream") + "/sub")
    seconds = 20
    # One client for that long (and a little more: the first frame's time
    # is where the count starts).
    counting = subprocess.Popen(["ffprobe", "-v", "error", "-rtsp_transport", "tcp", "-i", sub, "-select_streams",
                                 "v", "-show_entries", "frame=pts_time", "-of", "csv=p=0",
                                 "-read_intervals", f"%+{seconds + 3}"], stdout=subprocess.PIPE)
    rates = {path: run(["ffprobe", "-v", "error", "-rtsp_transport", "tcp", "-i", url,
                        "-select_streams", "v", "-show_entries", "stream=r_frame_rate", "-of", "csv=p=0"],
                       timeout=60).stdout.decode().strip()
             for path, url in (("h264", with_user(h264_url(cs))), ("sub", sub))}
    out, _ = counting.communicate(timeout=seconds + 60)
    times = [float(t) for t in out.split() if t != b"N/A"]
    assert times and times[-1] - times[0] >= seconds, times[-3:]
    frames = sum(1 for t in times if t - times[0] < seconds)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    print(f"sub-stream at 5 frames/s: {frames} frames in {seconds} s of its timestamps, "
          f"{min(gaps):.3f} to {max(gaps):.3f} s apart; r_frame_rate {rates}")
    assert seconds * 5 - 1 <= frames <= seconds * 5 + 1, frames
    assert rates == {"h264": "30/1", "sub": "5/1"}, rates


def test_go2rtc_relays_h264_it_pulled_with_the_password(camstream, config, tmp_path):  # noqa: F811
    """go2rtc (v1.9.14, built from the Go module proxy as the benchmark
    builds it) pulls /h264 with the user's password (its RTSP client speaks
    TCP) and serves it again; FFmpeg decodes what go2rtc serves."""
    cs = camstream("--config", str(config), "--width", str(W), "--height", str(H))
    pictures, said = go2rtc_decode(tmp_path / "go2rtc.yaml", with_user(h264_url(cs)), (W, H))
    assert len(pictures) == 30, said
    assert any("session " in line and "RTP/AVP/TCP" in line for line in cs.lines), cs.log()


@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_live555_saves_h264_that_ffmpeg_decodes(camstream, config, openrtsp, transport):  # noqa: F811
    """live555's openRTSP (VLC's RTSP client) with the password: the H.264
    file it saves (the SDP's parameter sets, then the stream's NAL units)
    decodes whole in FFmpeg."""
    cs = camstream("--config", str(config), "--width", str(W), "--height", str(H))
    folder, out = openrtsp(*(["-t"] if transport == "tcp" else []), "-d", "4", "-u", USER, PASSWORD,
                           h264_url(cs))
    assert out.returncode == 0, out.stderr[-4000:]
    saved = list(folder.glob("video-H264-*"))
    assert len(saved) == 1, sorted(p.name for p in folder.iterdir())
    decoded = subprocess.run(["ffmpeg", "-v", "error", "-f", "h264", "-i", str(saved[0]), "-f", "rawvideo",
                              "-pix_fmt", "gray", "-"], capture_output=True, timeout=60)
    frames = split(decoded.stdout, W * H)
    print(f"openRTSP over {transport}: {saved[0].stat().st_size} bytes, {len(frames)} frames decoded")
    # 4 s at 30 frames/s; no decoding error.
    assert len(frames) >= 90 and decoded.stderr == b"", decoded.stderr.decode()[-2000:]
