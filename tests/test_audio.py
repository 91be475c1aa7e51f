"""Sound beside the picture (`[audio]`): the test tone (1 kHz for the first
100 ms of each second of UTC) as every presentation's second track, which
FFmpeg and GStreamer (and live555's openRTSP, with `CAMSTREAM_OPENRTSP`)
record with the picture, with a password, over TCP and UDP. The tone's
onsets in a recording, placed by the pictures' clock strips (the UTC
millisecond each was captured at), fall on whole seconds: the sound is in
step with the picture within 40 ms. And what RTSP does with two tracks:
one session for both, PLAY, PAUSE and TEARDOWN of both, RTP-Info and a
sender report for each before its first packet."""

from __future__ import annotations

import json
import math
import re
import struct
import subprocess
import time
from itertools import pairwise
from pathlib import Path

import pytest
import requests

from helpers import BIN, gst_launch, run
from rtsp import Client, Rtp
from test_auth import PASSWORD, USER, with_user
from test_webrtc import chromium  # noqa: F401 (a fixture)

W, H = 640, 360
RATE = 8000
# The strip: testpattern.rs, strip_geometry (34 cells: white, 32 bits of
# the UTC millisecond, black).
CELLS = 34
# Sound and picture may be this far apart (the bound).
SYNC = 0.040


@pytest.fixture
def sound_config(tmp_path):
    """A config with the test tone as PCMU, one user (`camstream passwd`)
    and the picture at 640x360, 25 frames a second."""
    users = subprocess.run([str(BIN), "passwd", USER], input=PASSWORD + "\n", capture_output=True, text=True,
                           check=True, timeout=10).stdout
    path = tmp_path / "camstream.toml"
    path.write_text(f"width = {W}\nheight = {H}\nfps = 25\n{users}\n[audio]\ndevice = \"test\"\ncodec = \"pcmu\"\n")
    return path


def probe(rec: Path, select: str, entries: str) -> dict:
    return json.loads(run(["ffprobe", "-v", "error", "-select_streams", select, "-show_entries", entries,
                           "-of", "json", str(rec)]).stdout)


def strip_utc(frame: bytes, w: int, h: int, now: float) -> float | None:
    """The UTC time (s) a test pattern frame says it was captured at, or
    None where its strip does not read (the cells' first white, last black)."""
    cell_w, cell_h = (w // CELLS) & ~1, max(h // 40, 8) & ~1
    x0, y0 = ((w - cell_w * CELLS) // 2) & ~1, (h - cell_h) & ~1

    def on(k: int) -> bool:
        return frame[(y0 + cell_h // 2) * w + x0 + k * cell_w + cell_w // 2] > 128
    if not on(0) or on(CELLS - 1):
        return None
    low = sum(on(k) << (32 - k) for k in range(1, 33))
    # The strip has the low 32 bits of the millisecond: the whole of it is
    # the one nearest now.
    now_ms = int(now * 1000)
    return (now_ms - ((now_ms - low) % (1 << 32))) / 1000


def goertzel(samples: list[int], hz: float, rate: int) -> float:
    k = 2 * math.cos(2 * math.pi * hz / rate)
    s1 = s2 = 0.0
    for x in samples:
        s1, s2 = x + k * s1 - s2, s1
    return s1 * s1 + s2 * s2 - k * s1 * s2


def tone_onsets(samples: list[int], rate: int) -> list[int]:
    """Where each burst of the tone begins: the first loud sample after
    half a second of quiet."""
    onsets, quiet_since = [], 0
    for i, x in enumerate(samples):
        if abs(x) > 3000:
            if i - quiet_since > rate // 2:
                onsets.append(i)
            quiet_since = i
    return onsets


def sync_in(rec: Path) -> tuple[list[float], list[float]]:
    """A recording's tone onsets, each as its distance from the nearest
    whole second of UTC by the pictures' clock strips (s); and each burst's
    power at 1 kHz against 700 and 1400 Hz."""
    now = time.time()
    v = probe(rec, "v", "stream=width,height:frame=pts_time")
    w, h = v["streams"][0]["width"], v["streams"][0]["height"]
    pts = [float(f["pts_time"]) for f in v["frames"]]
    raw = run(["ffmpeg", "-v", "error", "-i", str(rec), "-map", "0:v", "-fps_mode", "passthrough",
               "-f", "rawvideo", "-pix_fmt", "gray", "-"]).stdout
    # Recording time to UTC: the pictures' median of (strip - pts).
    offsets = sorted(u - t for i, t in enumerate(pts)
                     if (u := strip_utc(raw[i * w * h:(i + 1) * w * h], w, h, now)) is not None)
    assert len(offsets) > len(pts) // 2, f"{len(offsets)} of {len(pts)} pictures' strips read"
    utc = offsets[len(offsets) // 2]
    # Each decoded frame's own time: an onset is placed by the frame it is
    # in (a client may move a track's clock between frames).
    frames, at = [], 0.0
    a = probe(rec, "a", "stream=sample_rate:frame=pts_time,nb_samples")
    rate = int(a["streams"][0]["sample_rate"])
    for f in a["frames"]:
        frames.append((at, float(f["pts_time"])))
        at += int(f["nb_samples"]) / rate
    pcm = run(["ffmpeg", "-v", "error", "-i", str(rec), "-map", "0:a", "-f", "s16le", "-ac", "1",
               "-ar", str(RATE), "-"]).stdout
    samples = list(struct.unpack(f"<{len(pcm) // 2}h", pcm))
    errors, ratios = [], []
    for i in tone_onsets(samples, RATE):
        if i < RATE:
            continue  # a client's first second: FFmpeg may still move its clocks
        if i + 720 > len(samples):
            break  # a burst the recording's end cut
        x = i / RATE
        begins, pts = next(f for f in reversed(frames) if f[0] <= x)
        t = pts + (x - begins) + utc
        errors.append(t - round(t))
        burst = samples[i + 80:i + 720]
        ratios.append(goertzel(burst, 1000, RATE) / max(goertzel(burst, 700, RATE), goertzel(burst, 1400, RATE), 1))
    return errors, ratios


def assert_in_step(rec: Path, seconds: int) -> None:
    errors, ratios = sync_in(rec)
    ms = [round(e * 1000, 1) for e in errors]
    print(f"{rec.name}: sound against picture (ms): {ms}")
    assert len(errors) >= seconds - 3, f"{len(errors)} tone bursts in {seconds} s: {ms}"
    assert all(abs(e) < SYNC for e in errors), f"sound against picture (ms): {ms}"
    # The tone is 1 kHz (its power there over 100 times its neighbours').
    assert all(r > 100 for r in ratios), ratios


PCMU = {"codec_name": "pcm_mulaw", "sample_rate": "8000", "channels": 1}
# RFC 7587's rtpmap is always opus/48000/2 (sprop-stereo=0 says the
# sender's is mono): FFmpeg takes the 2.
OPUS = {"codec_name": "opus", "sample_rate": "48000", "channels": 2}


def ffmpeg_records_in_step(url: str, rec: Path, seconds: int, transport: str, sound: dict) -> None:
    """FFmpeg records `url` (with the password) for `seconds`; the sound
    it has is `sound` (ffprobe's codec, rate and channels), in step with
    the picture."""
    run(["ffmpeg", "-v", "error", "-rtsp_transport", transport, "-i", with_user(url),
         "-map", "0", "-c", "copy", "-t", str(seconds), str(rec)], timeout=60 + 4 * seconds)
    streams = probe(rec, "a", "stream=codec_name,sample_rate,channels")["streams"]
    assert streams == [sound], streams
    assert_in_step(rec, seconds)


@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_ffmpeg_records_sound_in_step_with_the_picture(camstream, sound_config, tmp_path, transport):
    cs = camstream("--config", str(sound_config))
    ffmpeg_records_in_step(cs.url, tmp_path / f"ffmpeg-{transport}.mkv", 6, transport, PCMU)


def test_ffmpeg_records_opus_in_step_with_the_picture(camstream, sound_config, tmp_path):
    """Opus (RFC 7587, libopus at 32 kbit/s): FFmpeg's own decoder takes
    it, and its look-ahead is taken off the timestamps."""
    sound_config.write_text(sound_config.read_text().replace('codec = "pcmu"', 'codec = "opus"'))
    cs = camstream("--config", str(sound_config))
    ffmpeg_records_in_step(cs.url, tmp_path / "ffmpeg-opus.mkv", 6, "tcp", OPUS)


def gst_records(url: str, rec: Path, seconds: int, fps: int, protocols: str = "tcp",
                depay: str = "rtppcmudepay") -> None:
    """GStreamer records `url` (an MJPEG picture at `fps`, with the
    password) into `rec`: rtspsrc's rtpbin lines the tracks up by their
    sender reports (one CNAME); matroskamux writes both. Each branch ends
    after `seconds` of its own (pictures, and 20 ms frames of sound)."""
    gst_launch(["rtspsrc", f"location={url}", f"protocols={protocols}", f"user-id={USER}",
                f"user-pw={PASSWORD}", "latency=200", "name=s",
                "s.", "!", "queue", "!", "rtpjpegdepay", "!", "identity", f"eos-after={fps * seconds}",
                "!", "mux.",
                "s.", "!", "queue", "!", depay, "!", "identity", f"eos-after={50 * seconds}", "!", "mux.",
                "matroskamux", "name=mux", "!", "filesink", f"location={rec}"])


@pytest.mark.parametrize("protocols", ["tcp", "udp"])
def test_gstreamer_records_sound_in_step_with_the_picture(camstream, sound_config, tmp_path, protocols):
    cs = camstream("--config", str(sound_config))
    rec = tmp_path / f"gst-{protocols}.mkv"
    gst_records(cs.url, rec, 6, 25, protocols)
    assert_in_step(rec, 6)


@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_live555_saves_sound_in_step_with_the_picture(camstream, sound_config, openrtsp, transport):
    """openRTSP -m saves each frame in a file named by its presentation
    time, which live555 takes from the sender reports (the camera's UTC):
    the tone's onsets fall on whole seconds, and each picture's time is the
    one its strip says."""
    cs = camstream("--config", str(sound_config))
    folder, out = openrtsp(*(["-t"] if transport == "tcp" else []), "-d", "5", "-m", "-F", "f-",
                           "-u", USER, PASSWORD, cs.url)
    assert out.returncode == 0, out.stderr[-4000:]

    def stamped(kind: str) -> list[tuple[float, bytes]]:
        return sorted((float(f.name.rsplit("-", 1)[1]), f.read_bytes()) for f in folder.glob(f"f-{kind}-*"))
    now = time.time()
    pictures = stamped("video-JPEG-1")
    assert len(pictures) >= 100
    late = []
    for t, jpeg in pictures[::10]:
        gray = run(["ffmpeg", "-v", "error", "-f", "mjpeg", "-i", "-", "-f", "rawvideo", "-pix_fmt", "gray", "-"],
                   input=jpeg).stdout
        late.append(t - strip_utc(gray, W, H, now))
    print(f"openRTSP {transport}: pictures' times against their strips (ms): {[round(d * 1000, 1) for d in late]}")
    assert all(abs(d) < SYNC for d in late), [round(d * 1000, 1) for d in late]
    sound = stamped("audio-PCMU-2")
    assert len(sound) >= 200
    errors = []
    for onset in tone_onsets([x for _, b in sound for x in map(ulaw, b)], RATE):
        # The frame it is in, and where in it.
        at = 0
        for t, b in sound:
            if onset < at + len(b):
                u = t + (onset - at) / RATE
                errors.append(u - round(u))
                break
            at += len(b)
    print(f"openRTSP {transport}: tone onsets against whole seconds (ms): {[round(e * 1000, 1) for e in errors]}")
    assert len(errors) >= 3 and all(abs(e) < SYNC for e in errors), [round(e * 1000, 1) for e in errors]


def ulaw(code: int) -> int:
    """G.711 µ-law's linear value (RFC 3551's PCMU)."""
    u = ~code & 0xFF
    t = (((u & 0x0F) << 3) + 0x84) << ((u & 0x70) >> 4)
    return 0x84 - t if u & 0x80 else t - 0x84


def test_both_tracks_in_one_session(camstream, tmp_path):
    """SETUP of each track under one session id; PLAY's RTP-Info names
    both; each track's sender report comes before its first packet, and
    maps it to the clock its first packet's RTP-Info rtptime is on; PAUSE
    stops both, TEARDOWN ends both; a track of no presentation is 404."""
    conf = tmp_path / "c.toml"
    conf.write_text('[audio]\ndevice = "test"\ncodec = "pcmu"\n')
    cs = camstream("--config", str(conf))
    c = Client(cs.port)
    sdp = c.call("DESCRIBE", headers={"Accept": "application/sdp"}).body.decode()
    assert "m=audio 0 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\na=control:trackID=1\r\n" in sdp, sdp
    assert c.setup_tcp("0-1").status == 200
    r = c.call("SETUP", c.url + "/trackID=1", {"Transport": "RTP/AVP/TCP;unicast;interleaved=2-3"})
    assert r.status == 200 and r.header("session").split(";")[0] == c.session
    assert "interleaved=2-3" in r.header("transport")
    assert c.call("SETUP", c.url + "/trackID=9", {"Transport": "RTP/AVP/TCP;unicast;interleaved=4-5"}).status == 404
    play = c.play()
    info = play.header("rtp-info").split(",")
    assert [i.split(";")[0] for i in info] == [f"url={c.url}/trackID=0", f"url={c.url}/trackID=1"], info
    first: dict[int, int] = {}
    reports: dict[int, int] = {}
    end = time.monotonic() + 2
    while time.monotonic() < end and len(first) < 2:
        m = c.read_message()
        if not isinstance(m, tuple):
            continue
        ch, pkt = m
        if ch in (1, 3) and pkt[1] == 200:
            reports.setdefault(ch - 1, struct.unpack("!I", pkt[16:20])[0])
        elif ch in (0, 2) and ch not in first:
            assert ch in reports, f"channel {ch}'s first packet came before its sender report"
            first[ch] = Rtp.parse(pkt).timestamp
    assert set(first) == {0, 2}
    # PAUSE: no more packets on either channel.
    assert c.call("PAUSE", c.url + "/").status == 200
    c.sock.settimeout(0.5)
    late = []
    try:
        while True:
            m = c.read_message()
            if isinstance(m, tuple) and m[0] in (0, 2):
                late.append(m[0])
    except (TimeoutError, OSError):
        pass
    c.sock.settimeout(10)
    # Whatever was on its way when PAUSE came: a frame's packets at most.
    assert late.count(2) <= 1, late
    # Paused, nobody plays the sound: its capture stops.
    before = made(cs, "pcmu")
    time.sleep(0.5)
    assert made(cs, "pcmu") == before >= 1
    assert c.call("TEARDOWN", c.url + "/").status == 200
    # Both entries ended with the session: the same id names nothing now.
    assert c.call("PLAY", c.url + "/").status == 454
    c.close()


def made(cs, codec: str) -> float:
    """Frames of the sound in `codec` the camera has made (its /metrics)."""
    from requests.auth import HTTPDigestAuth
    metrics = requests.get(f"{cs.http}/metrics", auth=HTTPDigestAuth(USER, PASSWORD), timeout=10).text
    return next(float(line.split()[-1]) for line in metrics.splitlines()
                if line.startswith(f'camstream_audio_frames_total{{codec="{codec}",state="made"}}'))


def test_each_client_has_the_sound_in_the_encoding_it_asks_for(camstream, sound_config, tmp_path):
    """One capture, an encoding for each client: at once, FFmpeg records
    the sound as Opus (`?audio=opus`, as go2rtc's clients ask) and
    GStreamer as the configured G.711, both in step with the picture.
    /metrics counts each encoding's frames; one that nobody plays is not
    made. `?audio=none` is the picture alone; an encoding the camera does
    not make is refused."""
    import concurrent.futures
    cs = camstream("--config", str(sound_config))
    opus_rec, pcmu_rec = tmp_path / "ffmpeg-opus.mkv", tmp_path / "gst-pcmu.mkv"
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        opus = pool.submit(ffmpeg_records_in_step, cs.url + "?audio=opus", opus_rec, 6, "tcp", OPUS)
        pcmu = pool.submit(gst_records, cs.url, pcmu_rec, 6, 25)
        opus.result()
        pcmu.result()
    assert_in_step(pcmu_rec, 6)
    counts = {c: made(cs, c) for c in ("pcmu", "opus")}
    print(f"frames made while both played: {counts}")
    assert all(n >= 250 for n in counts.values()), counts
    time.sleep(0.5)
    assert {c: made(cs, c) for c in ("pcmu", "opus")} == counts

    def streams(query: str) -> subprocess.CompletedProcess:
        return subprocess.run(["ffprobe", "-v", "error", "-rtsp_transport", "tcp", "-show_entries",
                               "stream=codec_name", "-of", "csv=p=0", with_user(cs.url + query)],
                              capture_output=True, text=True, timeout=30)
    assert streams("?audio=none").stdout.split() == ["mjpeg"]
    assert streams("?audio=opus").stdout.split() == ["mjpeg", "opus"]
    refused = streams("?audio=mp3")
    assert refused.returncode != 0 and "404" in refused.stderr, refused.stderr
    # The picture's own, and a sound alone in an encoding of its own.
    assert streams("").stdout.split() == ["mjpeg", "pcm_mulaw"]
    alone = subprocess.run(["ffprobe", "-v", "error", "-rtsp_transport", "tcp", "-show_entries",
                            "stream=codec_name", "-of", "csv=p=0", with_user(cs.url.rsplit("/", 1)[0] + "/audio/opus")],
                           capture_output=True, text=True, timeout=30)
    assert alone.stdout.split() == ["opus"], alone.stderr


def test_sound_alone_and_a_session_of_one_presentation(camstream, tmp_path):
    """rtsp://CAMERA/audio is the sound alone; its track cannot join a
    session of the picture's presentation (459)."""
    conf = tmp_path / "c.toml"
    conf.write_text('[audio]\ndevice = "test"\ncodec = "pcmu"\n')
    cs = camstream("--config", str(conf))
    c = Client(cs.port, path="audio")
    sdp = c.call("DESCRIBE").body.decode()
    assert "m=video" not in sdp and "m=audio 0 RTP/AVP 0" in sdp, sdp
    v = Client(cs.port)
    assert v.setup_tcp().status == 200
    r = v.call("SETUP", c.url + "/trackID=0", {"Transport": "RTP/AVP/TCP;unicast;interleaved=2-3"})
    assert r.status == 459
    v.close()
    assert c.setup_tcp().status == 200
    assert c.play().status == 200
    packets = list(c.packets(1.0))
    assert len(packets) >= 30 and all(p.payload_type == 0 and len(p.payload) == 160 for p in packets)
    steps = {(b.timestamp - a.timestamp) & 0xFFFFFFFF for a, b in pairwise(packets)}
    assert steps == {160}, steps
    c.close()


@pytest.mark.parametrize("codec", ["pcmu", "opus"])
def test_an_onvif_client_sees_and_chooses_the_sound(camstream, tmp_path, codec):
    """onvif-zeep-async (Home Assistant's) finds the sound in every
    profile (G.711, Media ver10's name for PCMU), its source and options,
    adds it to a profile as an NVR does, sets its source and encoder
    configurations back as it read them (an NVR's way), and is refused
    another bit rate or encoding than the options say, by name; the
    profile's stream URI carries the sound: FFmpeg reads a PCMU track
    there. A camera whose sound is Opus (which Media ver10 cannot name)
    shows its G.711, and the URI asks for it (`?audio=pcmu`)."""
    from test_onvif import PASSWORD as ONVIF_PASSWORD
    from test_onvif import USER as ONVIF_USER
    from test_onvif import with_camera
    users = run([str(BIN), "passwd", ONVIF_USER, "--onvif"], input=(ONVIF_PASSWORD + "\n").encode(),
                timeout=10).stdout.decode()
    conf = tmp_path / "c.toml"
    conf.write_text(f'{users}\n[audio]\ndevice = "test"\ncodec = "{codec}"\n')
    cs = camstream("--config", str(conf))

    async def ask(cam):
        media = await cam.create_media_service()
        profiles = await media.GetProfiles()
        sources = await media.GetAudioSources()
        configs = await media.GetAudioEncoderConfigurations()
        options = await media.GetAudioEncoderConfigurationOptions({"ConfigurationToken": "audio"})
        source_configs = await media.GetCompatibleAudioSourceConfigurations({"ProfileToken": "main"})
        await media.AddAudioEncoderConfiguration({"ProfileToken": "main", "ConfigurationToken": "audio"})
        await media.SetAudioSourceConfiguration({"Configuration": source_configs[0], "ForcePersistence": False})
        conf = configs[0]
        await media.SetAudioEncoderConfiguration({"Configuration": conf, "ForcePersistence": False})
        refused = []
        for field, value in (("Bitrate", 32), ("Encoding", "AAC"), ("SampleRate", 16)):
            bad = (await media.GetAudioEncoderConfigurations())[0]
            setattr(bad, field, value)
            try:
                await media.SetAudioEncoderConfiguration({"Configuration": bad, "ForcePersistence": False})
                refused.append(None)
            except Fault as f:
                refused.append(f.message)
        after = await media.GetAudioEncoderConfigurations()
        setup = {"Stream": "RTP-Unicast", "Transport": {"Protocol": "RTSP"}}
        uri = (await media.GetStreamUri({"StreamSetup": setup, "ProfileToken": "main"})).Uri
        return profiles, sources, configs, options, source_configs, uri, refused, after

    from zeep.exceptions import Fault

    profiles, sources, configs, options, source_configs, uri, refused, after = with_camera(cs.http_port, ask)
    assert refused == ["not one of the bit rates GetAudioEncoderConfigurationOptions lists",
                       "the sound's encoding is camstream.toml's ([audio] codec)",
                       "the sound's sample rate is its encoding's"], refused
    assert [(c.Encoding, c.Bitrate, c.SampleRate) for c in after] == [("G711", 64, 8)], after
    assert [(p.token, p.AudioSourceConfiguration.SourceToken, p.AudioEncoderConfiguration.Encoding,
             p.AudioEncoderConfiguration.SampleRate) for p in profiles] == \
        [(p.token, "audio", "G711", 8) for p in profiles], profiles
    assert [(s.token, s.Channels) for s in sources] == [("audio", 1)]
    assert [(c.token, c.Encoding, c.Bitrate) for c in configs] == [("audio", "G711", 64)]
    assert ("G711", [64], [8]) in [(o.Encoding, o.BitrateList.Items, o.SampleRateList.Items)
                                   for o in options.Options], options
    assert [c.token for c in source_configs] == ["audio"]
    assert uri.endswith("/stream" + ("?audio=pcmu" if codec == "opus" else "")), uri
    url = uri.replace("rtsp://", f"rtsp://{ONVIF_USER}:{ONVIF_PASSWORD}@")
    streams = run(["ffprobe", "-v", "error", "-rtsp_transport", "tcp", "-show_entries",
                   "stream=codec_type,codec_name", "-of", "csv=p=0", url], timeout=60).stdout.decode().split()
    assert streams == ["mjpeg,video", "pcm_mulaw,audio"], streams


def bursts_at_1khz(samples: list[int], rate: int) -> tuple[list[int], list[float]]:
    """The tone's onsets in `samples`, and each burst's power at 1 kHz
    against 700 and 1400 Hz."""
    onsets = tone_onsets(samples, rate)
    burst = rate * 80 // 1000
    ratios = [goertzel(samples[i:i + burst], 1000, rate)
              / max(goertzel(samples[i:i + burst], 700, rate), goertzel(samples[i:i + burst], 1400, rate), 1.0)
              for i in onsets if i + burst <= len(samples)]
    return onsets, ratios


def test_ffmpeg_takes_the_sound_over_http_with_the_password(camstream, sound_config):
    """/audio.wav, the page's sound while it has no WebRTC track: 16-bit PCM
    at 8 kHz in a WAV without end, behind the password like the MJPEG
    stream. FFmpeg hears a 1 kHz burst each second, a second apart; the
    stream counts as a client and ends when FFmpeg leaves. /audio.aac is
    404 while the sound is G.711."""
    from urllib.parse import quote

    from requests.auth import HTTPDigestAuth

    cs = camstream("--config", str(sound_config))
    assert requests.get(cs.http + "/audio.wav", timeout=10).status_code == 401
    auth = HTTPDigestAuth(USER, PASSWORD)
    r = requests.get(cs.http + "/audio.aac", auth=auth, timeout=10)
    assert r.status_code == 404 and "pcmu: /audio.wav" in r.text, r.text
    r = requests.head(cs.http + "/audio.wav", auth=auth, timeout=10)
    assert r.status_code == 200 and r.headers["Content-Type"] == "audio/wav", r.headers
    url = f"http://{quote(USER)}:{quote(PASSWORD)}@127.0.0.1:{cs.http_port}/audio.wav"
    info = json.loads(run(["ffprobe", "-v", "error", "-show_entries", "stream=codec_name,sample_rate,channels",
                           "-of", "json", url], timeout=30).stdout)["streams"]
    assert info == [{"codec_name": "pcm_s16le", "sample_rate": "8000", "channels": 1}], info
    pcm = run(["ffmpeg", "-v", "error", "-i", url, "-t", "5", "-f", "s16le", "-"], timeout=30).stdout
    samples = list(struct.unpack(f"<{len(pcm) // 2}h", pcm))
    assert len(samples) == 5 * RATE, len(samples)
    onsets, ratios = bursts_at_1khz(samples, RATE)
    print(f"/audio.wav: onsets at {onsets}, 1 kHz against its neighbours {[round(r) for r in ratios]}")
    assert len(onsets) >= 4, onsets
    # A second apart: no sample lost or repeated between bursts.
    assert all(abs(b - a - RATE) <= 1 for a, b in pairwise(onsets)), onsets
    assert all(r > 100 for r in ratios), ratios
    cs.wait_for("sound stream (audio/wav) to")
    ended = cs.wait_for("sound stream to")
    assert re.search(r"ended: [1-9]\d+ frames sent", ended), ended


def test_the_status_page_names_the_sound(camstream, sound_config, chromium):  # noqa: F811
    """The status page (Chromium, with the password) lists the sound, its
    codec and the HTTP stream a player takes, shows its Sound switch, and
    fetches no sound until it is switched on (an audio element cannot play
    an endless WAV in Chromium: the page's sound comes in its WebRTC
    session)."""
    from playwright.sync_api import expect

    cs = camstream("--config", str(sound_config))
    page = chromium.new_context(http_credentials={"username": USER, "password": PASSWORD}).new_page()
    assert page.goto(cs.http + "/").status == 200
    # The configured encoding, then the others a stream's address may ask for.
    expect(page.locator("#sound-codec")).to_have_text("G.711; Opus: ?audio=opus", timeout=20000)
    assert page.locator("#row-sound").is_visible()
    assert page.locator("#url-sound").text_content() == cs.http + "/audio.wav"
    assert page.locator("#sound-switch").is_visible() and not page.locator("#sound-on").is_checked()
    assert "sound stream" not in cs.log()


def inbound_audio(page) -> dict:
    """Chromium's statistics of the sound it receives over WebRTC (an
    empty dict before any)."""
    return page.evaluate("""async () => {
        let found = {};
        (await player.pc.getStats()).forEach(x => {
            if (x.type === "inbound-rtp" && x.kind === "audio") found = x;
        });
        return found;
    }""")


@pytest.mark.parametrize("codec", ["opus", "pcmu"])
def test_the_status_page_plays_the_sound_with_the_picture(camstream, sound_config, chromium, codec):  # noqa: F811
    """The page (Chromium, with the password) plays the picture over
    WebRTC without sound, and nothing captures it; its Sound switch starts
    a session with the sound in the camera's codec (Opus, G.711), which
    Chromium decodes at the codec's rate with the tone in it (its energy:
    a tenth of each second at -6 dBFS), lip-synced by the session's
    sender reports; switched off, the sound stops at the camera."""
    from playwright.sync_api import expect

    sound_config.write_text(sound_config.read_text().replace('codec = "pcmu"', f'codec = "{codec}"'))
    from test_webrtc import signed_in_page

    cs = camstream("--config", str(sound_config))
    page, errors = signed_in_page(chromium, cs.http + "/", USER, PASSWORD)
    receiving = page.locator("#receiving")
    playing = re.compile(rf"^receiving WebRTC H\.264 {W}x{H}, [\d.]+ frames/s, [\d.]+ Mbit/s$")
    expect(receiving).to_have_text(playing, timeout=20000)
    assert page.evaluate("document.getElementById('video').muted")
    time.sleep(2)
    assert made(cs, codec) == 0, "the sound was captured with no one listening"
    assert "with sound" not in cs.log()

    page.locator("#sound-on").check()
    name = {"opus": "Opus", "pcmu": "G.711"}[codec]
    expect(receiving).to_have_text(re.compile(rf"^receiving WebRTC H\.264 {W}x{H}, .* Mbit/s, with sound \({name}\)$"),
                                   timeout=20000)
    cs.wait_for("with sound (port")
    assert not page.evaluate("document.getElementById('video').muted")
    first = inbound_audio(page)
    time.sleep(5)
    last = inbound_audio(page)
    seconds = (last["timestamp"] - first["timestamp"]) / 1000
    packets = (last["packetsReceived"] - first["packetsReceived"]) / seconds
    energy = (last["totalAudioEnergy"] - first["totalAudioEnergy"]) / seconds
    concealed = last["concealedSamples"] - first["concealedSamples"]
    samples = last["totalSamplesReceived"] - first["totalSamplesReceived"]
    print(f"Chromium over WebRTC, {name}: {packets:.1f} packets/s, {samples / seconds:.0f} samples/s, "
          f"{concealed} concealed, tone energy {energy:.4f} per second")
    # 20 ms frames: 50 a second.
    assert 45 <= packets <= 55, packets
    # The tone at -6 dBFS for a tenth of each second. Chromium's level is
    # the peak of each 100 ms block (libwebrtc), held for the block, and
    # its energy the level squared times the time: a tone straddling two
    # blocks gives 0.5^2 * 0.2 = 0.05 a second, the tone unbroken 0.25,
    # silence none (0.056 Opus, 0.061 G.711 measured).
    assert 0.01 < energy < 0.125, energy
    assert concealed < samples / 10, (concealed, samples)
    assert made(cs, codec) > 100

    page.locator("#sound-on").uncheck()
    expect(receiving).to_have_text(playing, timeout=20000)
    before = made(cs, codec)
    time.sleep(1)
    assert made(cs, codec) - before <= 3, "the sound was still captured with the switch off"
    assert not errors, errors
