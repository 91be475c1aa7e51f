"""RTSP authentication: with users in the config, FFmpeg and GStreamer get
in with the password and nobody without it; Digest with SHA-256 and MD5 as
RFC 7616 and RFC 2617 compute it, Basic only when enabled; the user
Raspberry Pi Imager sets, known by its password hash until it signs in."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
import threading
import time

import pytest
import requests

from helpers import BIN, ROOT, gst_launch, gst_stopped_cleanly, live555_frames, run
from rtsp import Client, auth_params, digest_response

USER, PASSWORD = "viewer", "correct horse battery"


@pytest.fixture
def config(tmp_path):
    """A config file with one user, made by `camstream passwd`."""
    lines = subprocess.run([str(BIN), "passwd", USER], input=PASSWORD + "\n", capture_output=True, text=True,
                           check=True, timeout=10).stdout
    assert PASSWORD not in lines
    path = tmp_path / "camstream.toml"
    path.write_text(lines)
    return path


def digest(algorithm: str, method: str, uri: str, challenge: dict[str, str], password: str = PASSWORD,
           nc: str = "00000001", cnonce: str = "0a4f113b") -> str:
    p = {"username": USER, "realm": challenge["realm"], "nonce": challenge["nonce"], "uri": uri,
         "algorithm": algorithm, "qop": "auth", "nc": nc, "cnonce": cnonce}
    response = digest_response(p, method, password)
    return (f'Digest username="{USER}", realm="{challenge["realm"]}", nonce="{challenge["nonce"]}", uri="{uri}", '
            f'response="{response}", algorithm={algorithm}, qop=auth, nc={nc}, cnonce="{cnonce}"')


def with_user(url: str, password: str = PASSWORD) -> str:
    return url.replace("rtsp://", f"rtsp://{USER}:{password.replace(' ', '%20')}@")


@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_ffmpeg_with_and_without_the_password(camstream, config, transport):
    cs = camstream("--config", str(config), "--width", "320", "--height", "240")
    got = run(["ffmpeg", "-v", "error", "-rtsp_transport", transport, "-i", with_user(cs.url), "-frames:v", "10",
               "-f", "rawvideo", "-pix_fmt", "gray", "-"], timeout=60).stdout
    assert len(got) == 10 * 320 * 240
    for url in (cs.url, with_user(cs.url, "wrong")):
        out = subprocess.run(["ffprobe", "-v", "error", url], capture_output=True, text=True, timeout=60)
        assert out.returncode != 0 and "401 Unauthorized" in out.stderr, out.stderr


def test_gstreamer_with_and_without_the_password(camstream, config):
    cs = camstream("--config", str(config), "--width", "320", "--height", "240")

    def args(password: str) -> list[str]:
        return ["rtspsrc", f"location={cs.url}", f"user-id={USER}", f"user-pw={password}", "protocols=tcp",
                "!", "rtpjpegdepay", "!", "jpegdec", "!", "fakesink", "num-buffers=10"]
    gst_launch(args(PASSWORD))
    refused = subprocess.run(["gst-launch-1.0", "-q", *args("wrong")], capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "Unauthorized" in refused.stderr, refused.stderr


def test_digest_sha256_and_md5_and_what_is_refused(camstream, config):
    cs = camstream("--config", str(config))
    c = Client(cs.port)
    r = c.call("DESCRIBE")
    assert r.status == 401
    challenges = r.all("www-authenticate")
    # SHA-256 first (RFC 7616 3.7), one nonce for both, no Basic unless enabled.
    assert [auth_params(ch)["algorithm"] for ch in challenges] == ["SHA-256", "MD5"], challenges
    assert all(ch.startswith("Digest ") for ch in challenges)
    ch = auth_params(challenges[0])
    assert ch["realm"] == "camstream" and ch["qop"] == "auth" and auth_params(challenges[1])["nonce"] == ch["nonce"]
    for algorithm in ("SHA-256", "MD5"):
        r = c.call("DESCRIBE", headers={"Authorization": digest(algorithm, "DESCRIBE", c.url, ch)})
        assert r.status == 200 and b"m=video" in r.body, (algorithm, r)
    # The response covers the method and the password; a nonce must be ours.
    for header in (digest("SHA-256", "OPTIONS", c.url, ch),
                   digest("SHA-256", "DESCRIBE", c.url, ch, password="wrong"),
                   digest("MD5", "DESCRIBE", c.url, {**ch, "nonce": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}),
                   "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()):
        r = c.call("DESCRIBE", headers={"Authorization": header})
        assert r.status == 401, (header, r)
    # Garbage gets 400 and the connection goes on.
    r = c.call("DESCRIBE", headers={"Authorization": 'Digest username="x'})
    assert r.status == 400
    r = c.call("DESCRIBE", headers={"Authorization": digest("MD5", "DESCRIBE", c.url, ch)})
    assert r.status == 200
    # A response made for another URI is not taken for this one (RFC 7616
    # 3.4.6: 400); the same path under another host name is the same one.
    other = c.url.replace("/stream", "/other")
    r = c.call("DESCRIBE", headers={"Authorization": digest("MD5", "DESCRIBE", other, ch)})
    assert r.status == 400, r
    alias = c.url.replace("127.0.0.1", "camstream.local")
    r = c.call("DESCRIBE", headers={"Authorization": digest("MD5", "DESCRIBE", alias, ch, nc="00000002")})
    assert r.status == 200, r
    # A whole session with credentials on every request.
    r = c.call("SETUP", c.url + "/trackID=0", headers={
        "Transport": "RTP/AVP/TCP;unicast;interleaved=0-1",
        "Authorization": digest("SHA-256", "SETUP", c.url + "/trackID=0", ch, nc="00000002")})
    assert r.status == 200, r
    c.session = r.header("session").split(";")[0]
    r = c.call("PLAY", headers={"Authorization": digest("SHA-256", "PLAY", c.url, ch, nc="00000003")})
    assert r.status == 200, r
    assert any(p.marker for p in c.packets(3))
    # Without credentials the session's requests are refused too.
    assert c.call("GET_PARAMETER").status == 401
    c.close()


@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_live555_with_and_without_the_password(camstream, config, openrtsp, transport):
    """live555's openRTSP (VLC's RTSP client) keeps the last Digest challenge,
    answers with MD5 and no qop, and names the presentation's URL in every
    request after DESCRIBE, its SETUP of the stream included: with the
    password every frame it saves decodes; without it, or with a wrong one,
    it gets 401 and nothing."""
    cs = camstream("--config", str(config), "--width", "320", "--height", "240")
    tcp = ["-t"] if transport == "tcp" else []
    folder, out = openrtsp(*tcp, "-d", "4", "-m", "-F", "f-", "-u", USER, PASSWORD, cs.url)
    assert out.returncode == 0, out.stderr[-4000:]
    assert 'uri="' + cs.url + '/"' in out.stderr, "the presentation's URL in SETUP's credentials"
    frames = live555_frames(folder)
    assert len(frames) >= 90, len(frames)
    raw = run(["ffmpeg", "-v", "error", "-f", "mjpeg", "-i", "-", "-f", "rawvideo", "-pix_fmt", "gray", "-"],
              input=b"".join(frames)).stdout
    assert len(raw) == len(frames) * 320 * 240, "every frame decodes, at 320x240"
    for name, args in (("none", []), ("wrong", ["-u", USER, "wrong"])):
        folder, out = openrtsp(*tcp, "-d", "2", "-m", "-F", "f-", *args, cs.url, name=name)
        assert out.returncode != 0 and "401 Unauthorized" in out.stderr, out.stderr[-4000:]
        assert not live555_frames(folder)


def test_basic_only_when_enabled(camstream, config):
    cs = camstream("--config", str(config), "--basic-auth", "true")
    c = Client(cs.port)
    r = c.call("OPTIONS")
    assert r.status == 401 and r.all("www-authenticate")[-1] == 'Basic realm="camstream"', r
    good = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    bad = "Basic " + base64.b64encode(f"{USER}:wrong".encode()).decode()
    assert c.call("OPTIONS", headers={"Authorization": good}).status == 200
    assert c.call("OPTIONS", headers={"Authorization": bad}).status == 401
    c.close()


def test_config_errors_are_clear(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[users.viewer]\nmd5 = "00"\nsha256 = "00"\n')
    out = subprocess.run([str(BIN), "--config", str(bad)], capture_output=True, text=True, timeout=10)
    assert out.returncode != 0 and "camstream passwd viewer" in out.stderr, out.stderr
    out = subprocess.run([str(BIN), "passwd", "a:b"], input="pw\n", capture_output=True, text=True, timeout=10)
    assert out.returncode != 0 and "':'" in out.stderr, out.stderr
    out = subprocess.run([str(BIN), "passwd", "viewer"], input="", capture_output=True, text=True, timeout=10)
    assert out.returncode != 0 and "no password" in out.stderr, out.stderr


def test_sessions_outlive_their_nonce(camstream, config):
    """Nonces expire (30 s here, the shortest allowed) while clients play:
    FFmpeg and GStreamer keep streaming across it, and so does a session
    whose only keep-alives are GET_PARAMETERs with the old nonce and no RTCP
    (clients send keep-alives without reading the answer: a refused one
    would let the session time out; 10 s here). A new request outside a
    session gets stale=true."""
    cs = camstream("--config", str(config), "--width", "320", "--height", "240", "--fps", "5",
                   "--nonce-lifetime", "30", "--session-timeout", "10")
    c = Client(cs.port)
    ch = auth_params(c.call("DESCRIBE").all("www-authenticate")[0])
    r = c.call("SETUP", c.url + "/trackID=0", headers={
        "Transport": "RTP/AVP/TCP;unicast;interleaved=0-1",
        "Authorization": digest("SHA-256", "SETUP", c.url + "/trackID=0", ch)})
    assert r.status == 200, r
    c.session = r.header("session").split(";")[0]
    assert c.call("PLAY", headers={"Authorization": digest("SHA-256", "PLAY", c.url, ch)}).status == 200
    old = digest("SHA-256", "GET_PARAMETER", c.url, ch)
    statuses: list[int] = []

    def keep_alive():
        for _ in range(11):
            time.sleep(4)
            statuses.append(c.call("GET_PARAMETER", headers={"Authorization": old}).status)
    keeper = threading.Thread(target=keep_alive)
    keeper.start()
    frames = 5 * 42
    gst = subprocess.Popen(["gst-launch-1.0", "-q", "rtspsrc", f"location={cs.url}", f"user-id={USER}",
                            f"user-pw={PASSWORD}", "protocols=tcp", "!", "rtpjpegdepay", "!", "fakesink",
                            f"num-buffers={frames}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    got = run(["ffmpeg", "-v", "error", "-rtsp_transport", "tcp", "-i", with_user(cs.url), "-frames:v", str(frames),
               "-f", "rawvideo", "-pix_fmt", "gray", "-"], timeout=90).stdout
    assert len(got) == frames * 320 * 240
    try:
        out = gst.communicate(timeout=30)[0]
    finally:
        gst.kill()
    assert gst_stopped_cleanly(gst.returncode, out), out
    keeper.join(30)
    assert statuses == [200] * 11, statuses
    c.interleaved.clear()
    assert any(p.marker for p in c.packets(2)), "the session kept alive with an old nonce stopped"
    assert "timed out" not in cs.log(), cs.log()
    c.close()
    fresh = Client(cs.port)
    r = fresh.call("DESCRIBE", headers={"Authorization": digest("MD5", "DESCRIBE", fresh.url, ch)})
    assert r.status == 401 and all(", stale=true," in v for v in r.all("www-authenticate")), r
    fresh.close()


def test_the_health_check_answers_with_the_stored_digests(camstream, config, tmp_path):
    """`camstream check` (the OTA health check) on the device has the config's
    digests, not the password: that is enough for Digest. Its URL comes from
    the config too. Elsewhere it takes the password from the URL."""
    cs = camstream("--config", str(config), "--width", "320", "--height", "240")
    local = tmp_path / "local.toml"
    local.write_text(f'listen = "127.0.0.1"\nrtsp_port = {cs.port}\nhttp_port = 0\n' + config.read_text())

    def check(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)

    p = check("--config", str(local), "check", "--timeout", "20")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f"rtsp://127.0.0.1:{cs.port}/stream: 320x240 frame"), p.stdout
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    p = check("--config", str(empty), "check", "--timeout", "20", with_user(cs.url))
    assert p.returncode == 0, p.stderr
    assert PASSWORD.split()[0] not in p.stdout, "the password is not printed"
    # A refused password is the server's last word: not tried again for
    # the ten minutes asked.
    p = check("--config", str(empty), "check", "--timeout", "600", with_user(cs.url, "wrong"))
    assert p.returncode == 1 and "not tried again: DESCRIBE answered 401: the password was refused" in p.stderr, \
        p.stderr
    p = check("--config", str(empty), "check", "--timeout", "600", cs.url)
    assert p.returncode == 1 and "not tried again: DESCRIBE answered 401: the server wants a password" in p.stderr, \
        p.stderr


IMAGER_PRESEED = ROOT / "tests/testdata/rpi-imager/rpi-imager-2.0.11.1-rpi-preseed.toml"
IMAGER_USER, IMAGER_PASSWORD = "alice", "Correct horse 7"


def test_imagers_user_signs_in_once_in_chromium_then_everywhere(camstream, tmp_path):
    """The user Raspberry Pi Imager sets (its own rpi-preseed.toml, applied
    by `camstream preseed` as the image does at the first boot) is known by
    Imager's yescrypt hash only. The page asks for it with Basic alone;
    Chromium signs in with the password; a wrong one is refused; from then
    on Digest clients (FFmpeg over RTSP, requests over HTTP) take the same
    password, and after a restart too (the digests learnt are kept)."""
    from playwright.sync_api import expect, sync_playwright

    data = tmp_path / "etc"
    p = subprocess.run([str(BIN), "preseed", str(IMAGER_PRESEED), "--data", str(data)], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0 and 'camstream user "alice" (level user)' in p.stdout, p
    config = data / "camstream.toml"
    assert "password_hash = \"$y$" in config.read_text()
    cs = camstream("--config", str(config), "--width", "320", "--height", "240")
    cs.wait_for('user "alice" is known by a password hash')
    snapshot = f"{cs.http}/snapshot.jpg"
    r = requests.get(snapshot, timeout=10)
    assert r.status_code == 401 and r.raw.headers.getlist("WWW-Authenticate") == ['Basic realm="camstream"'], \
        r.headers
    assert requests.get(snapshot, auth=(IMAGER_USER, "Correct horse 8"), timeout=30).status_code == 401
    cs.wait_for("HTTP: a wrong password")
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is missing: run ci/test, which installs it"
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_context(
                http_credentials={"username": IMAGER_USER, "password": IMAGER_PASSWORD}).new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))
            response = page.goto(cs.http + "/")
            assert response.status == 200
            expect(page.locator("#rate")).to_have_text(re.compile(r"frames/s$"), timeout=15000)
            state = page.locator("#state").text_content()
        finally:
            browser.close()
    assert state == "streaming" and not errors, (state, errors)
    cs.wait_for('user "alice" signed in with its password hash')
    # Digest from now on, as for any user: the page offers it again.
    r = requests.get(snapshot, timeout=10)
    assert len(r.raw.headers.getlist("WWW-Authenticate")) == 3, r.headers
    r = requests.get(snapshot, auth=requests.auth.HTTPDigestAuth(IMAGER_USER, IMAGER_PASSWORD), timeout=10)
    assert r.status_code == 200 and r.content[:2] == b"\xff\xd8"

    def probe(port: int) -> str:
        url = f"rtsp://{IMAGER_USER}:Correct%20horse%207@127.0.0.1:{port}/stream"
        return run(["ffprobe", "-v", "error", "-rtsp_transport", "tcp", "-show_entries", "stream=codec_name",
                    "-of", "csv=p=0", url], timeout=60).stdout.decode().strip()

    assert probe(cs.port) == "mjpeg"
    kept = (data / "camstream.digests.toml").read_text()
    assert "[users.alice]" in kept and IMAGER_PASSWORD not in kept, kept
    assert oct((data / "camstream.digests.toml").stat().st_mode & 0o777) == "0o600"
    # After a restart: Digest at once, no sign-in on the page first.
    cs.stop()
    cs = camstream("--config", str(config), "--width", "320", "--height", "240")
    assert probe(cs.port) == "mjpeg"
    # A new password from Imager (a new hash) voids the digests kept.
    config.write_text(config.read_text().replace("d/e2JkVv", "d/e2JkVw"))
    cs.stop()
    cs = camstream("--config", str(config), "--width", "320", "--height", "240")
    r = requests.get(f"{cs.http}/snapshot.jpg", timeout=10)
    assert r.raw.headers.getlist("WWW-Authenticate") == ['Basic realm="camstream"'], r.headers
