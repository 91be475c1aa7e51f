"""HTTP on camstream's HTTP port, with the clients people use: curl and
Python requests (snapshot, keep-alive, HEAD, Digest and Basic), FFmpeg and
GStreamer (the MJPEG stream, RTSP over HTTP), live555 (VLC's RTSP-over-HTTP
client), Prometheus and promtool (/metrics), Chromium (the status page);
and hostile input on the HTTP port while an MJPEG and an RTSP client watch.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time
from itertools import pairwise
from pathlib import Path

import pytest
import requests

from helpers import BIN, Media, assert_frames_match, free_port, gst_launch, live555_frames, run, split
from rtsp import Client, auth_params, digest_response
from test_interop import H, W

USER, PASSWORD = "viewer", "http-secret"


def authorization(challenge: dict[str, str], method: str, uri: str) -> str:
    """The Authorization value answering a Digest challenge (MD5, qop=auth)."""
    p = {"username": USER, "realm": challenge["realm"], "nonce": challenge["nonce"], "uri": uri,
         "algorithm": "MD5", "qop": "auth", "nc": "00000001", "cnonce": "5e1f0c2a"}
    quoted = ("username", "realm", "nonce", "uri", "cnonce")
    params = [f'{k}="{v}"' if k in quoted else f"{k}={v}" for k, v in p.items()]
    return "Digest " + ", ".join(params + [f'response="{digest_response(p, method, PASSWORD)}"'])


@pytest.fixture
def config(tmp_path):
    """A config with one user, as `camstream passwd` writes it."""
    lines = run([str(BIN), "passwd", USER], input=(PASSWORD + "\n").encode(), timeout=10).stdout.decode()
    path = tmp_path / "camstream.toml"
    path.write_text(lines)
    return path


@pytest.fixture
def clip(media):
    return media.ffmpeg("ffmpeg-testsrc2-640x360-420.mjpeg", f"{W}x{H}", 60)


def jpeg_size(data: bytes, tmp: Path) -> str:
    """WIDTHxHEIGHT as FFmpeg decodes the JPEG (fails if it cannot)."""
    f = tmp / "frame.jpg"
    f.write_bytes(data)
    out = run(["ffprobe", "-v", "error", "-show_entries", "stream=width,height", "-of", "csv=p=0:s=x",
               str(f)], timeout=30).stdout.decode().strip()
    return out


class MjpegReader:
    """Reads /stream.mjpg with requests, part by part, checking each part's
    framing (boundary, Content-Type, Content-Length, SOI/EOI)."""

    def __init__(self, url: str, **kw):
        self.response = requests.get(url, stream=True, timeout=10, **kw)
        assert self.response.status_code == 200, self.response.text
        ctype = self.response.headers["Content-Type"]
        m = re.fullmatch(r"multipart/x-mixed-replace;\s*boundary=(\S+)", ctype)
        assert m, ctype
        self.boundary = m.group(1).encode()
        self.raw = self.response.raw
        self.parts: list[tuple[dict[str, str], bytes]] = []

    def _line(self) -> bytes:
        line = self.raw.readline(1024)
        if not line:
            raise EOFError("stream ended")
        return line

    def part(self) -> tuple[dict[str, str], bytes]:
        line = self._line()
        while line == b"\r\n":
            line = self._line()
        assert line == b"--" + self.boundary + b"\r\n", line
        headers = {}
        while (line := self._line()) != b"\r\n":
            k, _, v = line.decode().partition(":")
            headers[k.strip().lower()] = v.strip()
        assert headers["content-type"] == "image/jpeg", headers
        n = int(headers["content-length"])
        jpeg = self.raw.read(n)
        assert len(jpeg) == n and jpeg[:2] == b"\xff\xd8" and jpeg[-2:] == b"\xff\xd9", (n, len(jpeg))
        self.parts.append((headers, jpeg))
        return headers, jpeg

    def close(self) -> None:
        self.response.close()


def metric(text: str, name: str, labels: str = "") -> float:
    for line in text.splitlines():
        if line.startswith(name + (("{" + labels + "}") if labels else "") + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name}{{{labels}}} in:\n{text}")


# ---- snapshot -------------------------------------------------------------


def test_snapshot_with_curl_keep_alive_and_head(camstream, tmp_path):
    cs = camstream("--width", "640", "--height", "360")
    a, b = tmp_path / "a.jpg", tmp_path / "b.jpg"
    p = run(["curl", "-sS", "-v", "--fail", "-o", str(a), f"{cs.http}/snapshot.jpg",
             "-o", str(b), f"{cs.http}/snapshot.jpg"], timeout=30)
    err = p.stderr.decode()
    # Two requests, one connection.
    assert "Re-using existing connection" in err, err
    assert "< Cache-Control: no-store" in err, err
    assert jpeg_size(a.read_bytes(), tmp_path) == "640x360"
    assert jpeg_size(b.read_bytes(), tmp_path) == "640x360"
    head = run(["curl", "-sS", "--fail", "-I", f"{cs.http}/snapshot.jpg"], timeout=30).stdout.decode()
    assert head.startswith("HTTP/1.1 200 OK\r\n"), head
    assert "Content-Type: image/jpeg" in head and re.search(r"Content-Length: \d{4,}", head), head
    # Anything else: a clear 4xx, and the connection serves on.
    with requests.Session() as s:
        r = s.get(f"{cs.http}/nothing-here")
        assert r.status_code == 404 and "/snapshot.jpg" in r.text
        r = s.delete(f"{cs.http}/snapshot.jpg")
        assert r.status_code == 405 and r.headers["Allow"] == "GET, HEAD"
        r = s.get(f"{cs.http}/snapshot.jpg")
        assert r.status_code == 200 and r.content[:2] == b"\xff\xd8"
    # After Connection: close, what the client pipelined is not answered.
    with socket.create_connection(("127.0.0.1", cs.http_port), timeout=10) as c:
        c.sendall(b"HEAD /snapshot.jpg HTTP/1.1\r\nConnection: close\r\n\r\nHEAD /metrics HTTP/1.1\r\n\r\n")
        got = b""
        while chunk := c.recv(65536):
            got += chunk
    assert got.count(b"HTTP/1.1 200 OK") == 1 and b"Content-Type: image/jpeg" in got, got


def test_connection_close_gets_its_answer_from_every_page(camstream):
    """Clients that send `Connection: close` (Python's urllib here; the
    camera's own BusyBox wget too) get each answer, then the end of the
    connection: /metrics and /picture among them, whose answers are made
    outside the HTTP module."""
    import urllib.request

    cs = camstream("--width", "640", "--height", "360")
    for path, wanted in [("/metrics", b"camstream_info"), ("/picture", b'"settings"'),
                         ("/snapshot.jpg", b"\xff\xd8"), ("/", b"<html")]:
        req = urllib.request.Request(cs.http + path)
        assert req.get_header("Connection") is None  # urllib's own close, not ours
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
            assert r.status == 200 and r.headers["Connection"] == "close", (path, r.headers)
        assert wanted in body[:4096], (path, body[:200])


def test_a_snapshot_says_when_the_camera_is_absent(camstream):
    cs = camstream("--source", "v4l2:/dev/video-absent", wait=False)
    cs.wait_for("HTTP on ")
    r = requests.get(f"{cs.http}/snapshot.jpg", timeout=10)
    assert r.status_code == 503 and "camera is absent" in r.text, r.text
    assert r.headers["Cache-Control"] == "no-store"
    text = requests.get(f"{cs.http}/metrics", timeout=10).text
    assert metric(text, "camstream_camera_present") == 0
    assert 'mode="absent: looking for /dev/video-absent"' in text


# ---- MJPEG ----------------------------------------------------------------


def mjpeg_parts(url: str, n: int) -> tuple[list, list[float]]:
    """The first `n` parts of an MJPEG stream, and the gaps between their
    capture times (X-Timestamp)."""
    m = MjpegReader(url)
    try:
        for _ in range(n):
            m.part()
    finally:
        m.close()
    stamps = [float(h["x-timestamp"]) for h, _ in m.parts]
    return m.parts, [b - a for a, b in pairwise(stamps)]


def test_mjpeg_parts_as_ustreamer_sends_them(camstream, tmp_path):
    cs = camstream("--width", "320", "--height", "240", "--fps", "25")
    parts, gaps = mjpeg_parts(f"{cs.http}/stream.mjpg", 30)
    # Every frame, in order: capture times 1/25 s apart.
    assert all(0.02 < g < 0.06 for g in gaps), gaps
    assert jpeg_size(parts[-1][1], tmp_path) == "320x240"


def test_mjpeg_fps_thins_the_stream(camstream):
    cs = camstream("--width", "320", "--height", "240", "--fps", "30")
    _, gaps = mjpeg_parts(f"{cs.http}/stream.mjpg?fps=5", 8)
    # Every sixth frame of 30 (a frame early or late at most).
    assert all(0.16 < g < 0.24 for g in gaps), gaps
    r = requests.get(f"{cs.http}/stream.mjpg?fps=fast", timeout=10)
    assert r.status_code == 400 and "fps" in r.text


def test_ffmpeg_reads_the_mjpeg_stream(camstream, media, clip):
    cs = camstream("--source", f"file:{clip}")
    raw = run(["ffmpeg", "-v", "error", "-f", "mjpeg", "-i", f"{cs.http}/stream.mjpg", "-frames:v", "60",
               "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "yuvj420p", "-"], timeout=60).stdout
    got = split(raw, Media.frame_size(W, H, "yuvj420p"))
    assert_frames_match(got, media.ffmpeg_reference(clip, W, H, "yuvj420p"), min_frames=60)


def test_gstreamer_reads_the_mjpeg_stream(camstream, media, clip, tmp_path):
    cs = camstream("--source", f"file:{clip}")
    out = tmp_path / "gst.raw"
    gst_launch(["souphttpsrc", f"location={cs.http}/stream.mjpg", "!", "multipartdemux", "!", "jpegdec",
                "!", "video/x-raw,format=I420", "!", "identity", "eos-after=61", "!", "filesink",
                f"location={out}"])
    got = split(out.read_bytes(), Media.frame_size(W, H, "I420"))
    assert_frames_match(got, media.gst_reference(clip, W, H, "I420"), min_frames=60)


# ---- RTSP over HTTP -------------------------------------------------------


def tunnel_clients(text: str) -> float:
    return metric(text, "camstream_clients", 'protocol="rtsp",transport="http-tunnel"')


def test_ffmpeg_rtsp_over_http(camstream, media, clip):
    cs = camstream("--source", f"file:{clip}")
    url = f"rtsp://127.0.0.1:{cs.http_port}/stream"
    proc = subprocess.Popen(["ffmpeg", "-v", "error", "-rtsp_transport", "http", "-i", url, "-frames:v", "90",
                             "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "yuvj420p", "-"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen = []

    def watch():
        for _ in range(40):
            seen.append(tunnel_clients(requests.get(f"{cs.http}/metrics", timeout=5).text))
            if seen[-1]:
                return
            time.sleep(0.1)
    watcher = threading.Thread(target=watch)
    watcher.start()
    raw, err = proc.communicate(timeout=60)
    watcher.join()
    assert proc.returncode == 0, err.decode()
    assert 1 in seen, seen
    got = split(raw, Media.frame_size(W, H, "yuvj420p"))
    assert_frames_match(got, media.ffmpeg_reference(clip, W, H, "yuvj420p"), min_frames=90)
    assert "RTSP over HTTP: tunnel opened" in cs.log()


def test_gstreamer_rtsph(camstream, media, clip, tmp_path):
    cs = camstream("--source", f"file:{clip}")
    out = tmp_path / "gst.raw"
    gst_launch(["rtspsrc", f"location=rtsph://127.0.0.1:{cs.http_port}/stream", "latency=200", "!",
                "rtpjpegdepay", "!", "jpegdec", "!", "video/x-raw,format=I420", "!", "identity", "eos-after=61",
                "!", "filesink", f"location={out}"])
    got = split(out.read_bytes(), Media.frame_size(W, H, "I420"))
    assert_frames_match(got, media.gst_reference(clip, W, H, "I420"), min_frames=60)


def test_live555_rtsp_over_http(camstream, openrtsp, config, tmp_path):
    """VLC's client: openRTSP -T PORT tunnels through HTTP, with Digest."""
    cs = camstream("--config", str(config), "--width", "320", "--height", "240")
    folder, p = openrtsp("-T", str(cs.http_port), "-u", USER, PASSWORD, "-d", "3", "-m", "-F", "t-",
                         f"rtsp://127.0.0.1:{cs.http_port}/stream")
    assert p.returncode == 0, p.stderr[-3000:]
    frames = live555_frames(folder)
    assert len(frames) >= 50, len(frames)
    assert jpeg_size(frames[-1], tmp_path) == "320x240"
    assert "RTSP over HTTP: tunnel opened" in cs.log()


def tunnel(port: int, cookie: str) -> tuple[socket.socket, socket.socket]:
    """An RTSP-over-HTTP tunnel as live555 opens it: GET, then POST."""
    get = socket.create_connection(("127.0.0.1", port), timeout=10)
    get.sendall(f"GET /stream HTTP/1.0\r\nx-sessioncookie: {cookie}\r\nAccept: application/x-rtsp-tunnelled\r\n"
                "Pragma: no-cache\r\nCache-Control: no-cache\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += get.recv(4096)
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"application/x-rtsp-tunnelled" in head, head
    post = socket.create_connection(("127.0.0.1", port), timeout=10)
    post.sendall(f"POST /stream HTTP/1.0\r\nx-sessioncookie: {cookie}\r\nContent-Type: application/x-rtsp-tunnelled"
                 "\r\nContent-Length: 32767\r\n\r\n".encode())
    return get, post


class TunnelClient(Client):
    """rtsp.Client whose requests go base64-encoded through the POST side
    and whose replies come on the GET side."""

    def __init__(self, port: int, cookie: str):
        self.get, self.post = tunnel(port, cookie)
        self.sock = self.get
        self.url = f"rtsp://127.0.0.1:{port}/stream"
        self.cseq = 0
        self.buf = b""
        self.session = None
        self.interleaved = []

    def send_raw(self, data: bytes) -> None:
        self.post.sendall(base64.b64encode(data))

    def close(self) -> None:
        self.post.close()
        self.get.close()


def test_a_session_belongs_to_its_connection_or_its_user(camstream, config):
    """A TEARDOWN naming another client's session from a fresh connection
    is answered 454 and that client keeps its stream; the same user on
    another connection may end it (the tunnel's POST side is such a case)."""
    cs = camstream("--width", "320", "--height", "240")
    a = Client(cs.port)
    assert a.setup_tcp().status == 200 and a.play().status == 200
    b = Client(cs.port)
    r = b.call("TEARDOWN", a.url + "/", {"Session": a.session})
    assert r.status == 454, r
    assert len(list(a.packets(1.0))) > 10
    # Through a tunnel: its requests arrive over any POST of the tunnel.
    t = TunnelClient(cs.http_port, "cookie-one")
    assert t.setup_tcp().status == 200 and t.play().status == 200
    assert len(list(t.packets(1.0))) > 10
    r = t.call("TEARDOWN", t.url + "/")
    assert r.status == 200, r
    for c in (a, b, t):
        c.close()

    cs = camstream("--config", str(config), "--width", "320", "--height", "240")

    def call(c: Client, method: str, url: str, headers: dict[str, str]) -> object:
        r = c.call(method, url, headers)
        if r.status != 401:
            return r
        ch = auth_params(next(v for v in r.all("www-authenticate") if "MD5" in v))
        return c.call(method, url, {**headers, "Authorization": authorization(ch, method, url)})

    a = Client(cs.port)
    r = call(a, "SETUP", a.url + "/trackID=0", {"Transport": "RTP/AVP/TCP;unicast;interleaved=0-1"})
    assert r.status == 200, r
    a.session = r.header("session").split(";")[0]
    assert call(a, "PLAY", a.url + "/", {}).status == 200
    # No password: refused before anything; the right one from elsewhere: the owner.
    b = Client(cs.port)
    assert b.call("TEARDOWN", a.url + "/", {"Session": a.session}).status == 401
    assert call(b, "TEARDOWN", a.url + "/", {"Session": a.session}).status == 200
    assert f"session {a.session} from 127.0.0.1" in cs.wait_for(f"session {a.session} from")
    a.close()
    b.close()


def test_tunnel_pairs_only_its_own_get(camstream):
    cs = camstream("--width", "320", "--height", "240")
    post = socket.create_connection(("127.0.0.1", cs.http_port), timeout=10)
    post.sendall(b"POST /stream HTTP/1.0\r\nx-sessioncookie: nobody\r\n"
                 b"Content-Type: application/x-rtsp-tunnelled\r\nContent-Length: 32767\r\n\r\n")
    assert post.recv(4096).startswith(b"HTTP/1.1 404 Not Found\r\n")
    post.close()
    get, post = tunnel(cs.http_port, "same")
    again = socket.create_connection(("127.0.0.1", cs.http_port), timeout=10)
    again.sendall(b"GET /stream HTTP/1.0\r\nx-sessioncookie: same\r\n\r\n")
    assert again.recv(4096).startswith(b"HTTP/1.1 400 Bad Request\r\n")
    for s in (again, get, post):
        s.close()


# ---- authentication -------------------------------------------------------


def test_digest_and_basic_over_http(camstream, config, tmp_path):
    cs = camstream("--config", str(config), "--width", "320", "--height", "240")
    url = f"{cs.http}/snapshot.jpg"
    r = requests.get(url, timeout=10)
    assert r.status_code == 401
    challenges = r.raw.headers.getlist("WWW-Authenticate")
    assert [c.split(",")[2].strip() for c in challenges] == ["algorithm=SHA-256", "algorithm=MD5"], challenges
    r = requests.get(url, auth=requests.auth.HTTPDigestAuth(USER, PASSWORD), timeout=10)
    assert r.status_code == 200 and r.content[:2] == b"\xff\xd8"
    assert requests.get(url, auth=requests.auth.HTTPDigestAuth(USER, "wrong"), timeout=10).status_code == 401
    # The Digest uri is the whole request target, query included.
    with requests.get(f"{cs.http}/stream.mjpg?fps=5", auth=requests.auth.HTTPDigestAuth(USER, PASSWORD),
                      stream=True, timeout=10) as r:
        assert r.status_code == 200, r.status_code
    # Basic is not taken unless basic_auth = true.
    assert requests.get(url, auth=(USER, PASSWORD), timeout=10).status_code == 401
    out = tmp_path / "s.jpg"
    p = subprocess.run(["curl", "-sS", "--fail", "--digest", "-u", f"{USER}:{PASSWORD}", "-o", str(out),
                        f"{cs.http}/stream.mjpg", "--max-time", "2"], capture_output=True, text=True, timeout=30)
    # curl stops the endless stream at --max-time (28); it got in and read parts.
    assert p.returncode == 28 and out.read_bytes().count(b"Content-Type: image/jpeg") > 10, p.stderr
    cs = camstream("--config", str(config), "--basic-auth", "true", "--width", "320", "--height", "240")
    r = requests.get(f"{cs.http}/metrics", auth=(USER, PASSWORD), timeout=10)
    assert r.status_code == 200 and "camstream_info" in r.text


# ---- metrics --------------------------------------------------------------


def test_prometheus_scrapes_the_metrics(camstream, config, tmp_path):
    """promtool finds the exposition well-formed; a real Prometheus scrapes
    it (with Basic: Prometheus has no Digest) and can query counters and
    the latency and stall histograms."""
    cs = camstream("--config", str(config), "--basic-auth", "true", "--width", "320", "--height", "240")
    auth = (USER, PASSWORD)
    m = MjpegReader(f"{cs.http}/stream.mjpg", auth=auth)
    for _ in range(10):
        m.part()
    r = requests.get(f"{cs.http}/metrics", auth=auth, timeout=10)
    assert r.headers["Content-Type"] == "text/plain; version=0.0.4"
    lint = subprocess.run(["promtool", "check", "metrics"], input=r.text, capture_output=True, text=True,
                          timeout=30)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert metric(r.text, "camstream_clients", 'protocol="http",transport="mjpeg"') == 1
    assert metric(r.text, "camstream_frames_sent_total", 'protocol="http"') >= 10
    assert metric(r.text, "process_resident_memory_bytes") > 1e6
    # The event loop's time on each input, by kind (the MJPEG request's).
    assert metric(r.text, "camstream_input_stall_seconds_count", 'kind="http"') >= 1
    assert 'camstream_input_stall_seconds_bucket{kind="onvif",le="0.001"}' in r.text

    port = free_port()
    (tmp_path / "prometheus.yml").write_text(json.dumps({
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
        "scrape_configs": [{
            "job_name": "camstream",
            "basic_auth": {"username": USER, "password": PASSWORD},
            "static_configs": [{"targets": [f"127.0.0.1:{cs.http_port}"]}],
        }],
    }))
    prom = subprocess.Popen(["prometheus", f"--config.file={tmp_path / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def query(q: str) -> list:
        r = requests.get(f"http://127.0.0.1:{port}/api/v1/query", params={"query": q}, timeout=5)
        return r.json()["data"]["result"]
    try:
        result = []
        for _ in range(60):
            try:
                result = query('camstream_frames_sent_total{protocol="http"} > 0')
            except requests.ConnectionError:
                result = []
            if result:
                break
            m.part()
            time.sleep(0.5)
        assert result, "Prometheus never scraped camstream"
        up = query('up{job="camstream"}')
        assert up and up[0]["value"][1] == "1", up
        p99 = query("histogram_quantile(0.99, camstream_send_latency_seconds_bucket)")
        assert p99 and float(p99[0]["value"][1]) > 0, p99
        stall = query('histogram_quantile(1, camstream_input_stall_seconds_bucket{kind="http"})')
        assert stall and float(stall[0]["value"][1]) > 0, stall
    finally:
        m.close()
        prom.terminate()
        prom.wait(20)


# ---- the status page ------------------------------------------------------


def test_status_page_in_chromium(camstream, config, tmp_path):
    """Headless Chromium (Debian's, driven by Playwright) with a password
    over Digest: the live picture moves, the figures fill in, nothing is
    written to the console as an error. The sub-stream is H.264 here: the
    page names its codec and still finds the main stream's H.264 URL."""
    from playwright.sync_api import expect, sync_playwright

    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is missing: run ci/test, which installs it"
    with open(config, "a") as f:
        f.write('[streams.sub]\ncodec = "h264"\n')
    cs = camstream("--config", str(config), "--width", "320", "--height", "240")
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_context(http_credentials={"username": USER, "password": PASSWORD}).new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            # MJPEG by the address (the page's default is WebRTC:
            # test_webrtc.py).
            response = page.goto(cs.http + "/?mode=mjpeg")
            assert response.status == 200
            # (Not wait_for_function: the page's CSP allows no eval, rightly.)
            expect(page.locator("#rate")).to_have_text(re.compile(r"frames/s$"), timeout=15000)
            expect(page.locator("#clients")).to_have_text(re.compile("HTTP over mjpeg"), timeout=15000)
            expect(page.locator("#bitrates")).to_have_text(re.compile(r"stream \(JPEG 320x240\): [\d.]+ Mbit/s"),
                                                           timeout=15000)
            first = page.locator("#picture").screenshot()
            time.sleep(1)
            second = page.locator("#picture").screenshot()
            texts = {i: page.locator(f"#{i}").text_content() for i in
                     ("url-rtsp", "url-rtsph", "url-mjpeg", "url-sub", "sub-codec", "url-h264", "url-onvif",
                      "discovery", "state", "mode", "clients", "bitrates")}
            shown = {i: page.locator(f"#{i}").is_visible() for i in ("row-sub", "row-h264", "row-onvif")}
        finally:
            browser.close()
    assert first != second, "the picture did not change in a second"
    assert texts["url-rtsp"] == f"rtsp://127.0.0.1:{cs.port}/stream", texts
    assert texts["url-rtsph"] == f"rtsph://127.0.0.1:{cs.http_port}/stream", texts
    assert texts["url-mjpeg"] == f"{cs.http}/stream.mjpg", texts
    assert texts["url-sub"] == f"rtsp://127.0.0.1:{cs.port}/sub" and texts["sub-codec"] == "H.264", texts
    assert texts["url-onvif"] == f"{cs.http}/onvif/device_service", texts
    # On loopback the daemon does not announce itself: the page says so.
    assert texts["discovery"] == "(WS-Discovery off: add the camera to an NVR by this address)", texts
    assert texts["url-h264"] == f"rtsp://127.0.0.1:{cs.port}/h264", texts
    assert shown == {"row-sub": True, "row-h264": True, "row-onvif": True}, shown
    assert "h264 (H.264 320x240)" in texts["bitrates"], texts
    assert texts["state"] == "streaming" and texts["mode"].startswith("test pattern 320x240"), texts
    assert "1 HTTP over mjpeg" in texts["clients"], texts
    assert not errors, errors


def test_status_page_opened_with_credentials_in_its_url(camstream, config):
    """The page opened as http://USER:PASSWORD@CAMERA/, as people type it:
    Chromium refuses fetch() of a URL with credentials, which a relative URL
    on such a page resolves to; the page's own requests go to its origin,
    so the URLs and figures still fill in and the WHEP offer is made,
    without the credentials."""
    from playwright.sync_api import expect, sync_playwright

    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is missing: run ci/test, which installs it"
    cs = camstream("--config", str(config), "--width", "320", "--height", "240")
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            response = page.goto(f"http://{USER}:{PASSWORD}@127.0.0.1:{cs.http_port}/")
            assert response.status == 200
            expect(page.locator("#rate")).to_have_text(re.compile(r"frames/s$"), timeout=15000)
            expect(page.locator("#clients")).to_have_text(re.compile("WEBRTC"), timeout=15000)
            texts = {i: page.locator(f"#{i}").text_content() for i in
                     ("error", "url-rtsp", "url-mjpeg", "url-snapshot", "url-metrics", "state", "clients")}
        finally:
            browser.close()
    assert texts["error"] == "", texts
    assert texts["url-rtsp"] == f"rtsp://127.0.0.1:{cs.port}/stream", texts
    assert texts["url-mjpeg"] == f"{cs.http}/stream.mjpg", texts
    assert texts["url-snapshot"] == f"{cs.http}/snapshot.jpg", texts
    assert texts["url-metrics"] == f"{cs.http}/metrics", texts
    assert texts["state"] == "streaming", texts
    # The picture plays over WebRTC: its offer passed the gate too.
    assert "1 WEBRTC over udp" in texts["clients"], texts
    assert not errors, errors


# ---- hostile input --------------------------------------------------------


def test_hostile_http_input_while_an_mjpeg_and_an_rtsp_client_watch(camstream):
    cs = camstream("--width", "320", "--height", "240", "--fps", "25", "--request-timeout", "2",
                   "--max-connections-per-ip", "100", "--max-clients", "40")
    mjpeg = MjpegReader(f"{cs.http}/stream.mjpg")
    rtsp = Client(cs.port)
    assert rtsp.setup_tcp().status == 200 and rtsp.play().status == 200
    stop = threading.Event()
    seqs: list[int] = []

    def watch_mjpeg():
        while not stop.is_set():
            mjpeg.part()

    def watch_rtsp():
        while not stop.is_set():
            seqs.extend(p.seq for p in rtsp.packets(0.5))
    watchers = [threading.Thread(target=watch_mjpeg), threading.Thread(target=watch_rtsp)]
    for w in watchers:
        w.start()

    def send(data: bytes, read: bool = True) -> bytes:
        s = socket.create_connection(("127.0.0.1", cs.http_port), timeout=10)
        s.sendall(data)
        got = b""
        if read:
            try:
                while chunk := s.recv(65536):
                    got += chunk
            except (TimeoutError, ConnectionResetError):
                pass
        s.close()
        return got

    try:
        # Slowloris: heads that never end, a byte at a time.
        slow = [socket.create_connection(("127.0.0.1", cs.http_port), timeout=10) for _ in range(30)]
        for s in slow:
            s.sendall(b"GET /snapshot.jpg HTTP/1.1\r\n")
        for _ in range(6):
            for s in slow:
                try:
                    s.sendall(b"X")
                except OSError:
                    pass  # closed by the server already: request_timeout
            time.sleep(0.5)
        for s in slow:
            assert s.recv(4096).startswith(b"HTTP/1.1 408 Request Timeout\r\n")
            s.close()
        assert send(b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n").startswith(
            b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
        many = b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(100)) + b"\r\n"
        assert send(many).startswith(b"HTTP/1.1 431 ")
        assert send(b"BREW /snapshot.jpg HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 405 Method Not Allowed\r\n")
        assert send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").startswith(b"HTTP/1.1 505 ")
        got = send(b"GET /snapshot.jpg HTTP/1.1\r\n\r\n\x00\xff garbage \r\n\r\n" + os.urandom(2000))
        assert got.startswith(b"HTTP/1.1 200 OK\r\n") and b"HTTP/1.1 400 Bad Request\r\n" in got, got[:200]
        # A tunnel whose POST side sends what is not base64: that side is
        # answered 400 and closed; its GET side and everyone else go on.
        get, post = tunnel(cs.http_port, "hostile")
        post.sendall(b"T1BUSU9OUyAq!!not base64!!")
        assert post.recv(4096).startswith(b"HTTP/1.1 400 Bad Request\r\n")
        post.close()
        get.close()
    finally:
        stop.set()
        for w in watchers:
            w.join(10)
        mjpeg.close()
        rtsp.close()
    stamps = [float(h["x-timestamp"]) for h, _ in mjpeg.parts]
    gaps = [round(b - a, 3) for a, b in pairwise(stamps)]
    assert len(stamps) > 60 and max(gaps) < 0.06, gaps
    steps = {(b - a) % 65536 for a, b in pairwise(seqs)}
    assert len(seqs) > 100 and steps == {1}, steps
    assert cs.alive()
