"""WebRTC (WHEP): the status page plays the H.264 stream in real browsers
(Chromium, Firefox ESR) with a password, and WHEP's requests are refused where they should be.
Offers are the browser's own (Chromium makes them in the test), never
written by hand."""

import contextlib
import os
import re
import shutil
import time
from pathlib import Path

import pytest
import requests
from requests.auth import HTTPDigestAuth

from helpers import ROOT, figure, run
from test_http import PASSWORD, USER, config  # noqa: F401 (config: a fixture)


@pytest.fixture
def chromium():
    """Headless Chromium (Debian's) through Playwright: yields the browser."""
    from playwright.sync_api import sync_playwright

    path = shutil.which("chromium")
    assert path, "Debian's chromium is missing: run ci/test, which installs it"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=path, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


def metric(text: str, name: str, **labels: str) -> float:
    """One series' value from /metrics' text (0 if absent)."""
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        m = re.match(r"^([a-z_]+)(?:\{(.*)\})? (\S+)$", line)
        if m and m.group(1) == name and (not want or want in (m.group(2) or "")):
            return float(m.group(3))
    return 0.0


def signed_in_page(chromium, url: str, user: str = USER, password: str = PASSWORD):
    """Chromium's page at `url`, signed in as `user` (Digest), and the
    errors it writes to its console, as they come."""
    page = chromium.new_context(http_credentials={"username": user, "password": password}).new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    assert page.goto(url).status == 200
    return page, errors


def frames_decoded(page) -> int:
    return page.evaluate("() => document.getElementById('video').getVideoPlaybackQuality().totalVideoFrames")


def test_the_status_page_plays_webrtc_with_a_password(camstream, config, chromium):  # noqa: F811
    """The page's default view: WHEP with Digest credentials, H.264 decoded
    at the camera's rate (at least 25 of its 30 frames/s over 5 s), the
    mode, size, rate and bit rate shown; the MJPEG switch stops the
    session (its resource DELETEd) and shows the MJPEG picture; nothing is
    written to the console as an error."""
    from playwright.sync_api import expect

    cs = camstream("--config", str(config), "--width", "640", "--height", "360")
    page, errors = signed_in_page(chromium, cs.http + "/")
    receiving = page.locator("#receiving")
    expect(receiving).to_have_text(re.compile(r"^receiving WebRTC H\.264 640x360, [\d.]+ frames/s, [\d.]+ Mbit/s$"),
                                   timeout=20000)
    first = frames_decoded(page)
    time.sleep(5)
    rate = (frames_decoded(page) - first) / 5
    print(f"Chromium decoded {rate:.1f} frames/s over WebRTC (the camera makes 30)")
    assert rate >= 25, rate
    shown = receiving.text_content()
    assert page.locator("#url-whep").text_content() == f"{cs.http}/whep/h264"
    auth = HTTPDigestAuth(USER, PASSWORD)
    m = requests.get(cs.http + "/metrics", auth=auth, timeout=10).text
    assert metric(m, "camstream_clients", protocol="webrtc") == 1, m
    assert metric(m, "camstream_webrtc_sessions_total", state="connected") == 1, m
    assert metric(m, "camstream_frames_sent_total", protocol="webrtc") > 100, m
    # The browser's packets on the event loop: its ICE checks, its DTLS
    # handshake's flights (a key exchange and a signature), its RTCP.
    n = metric(m, "camstream_input_stall_seconds_count", kind="webrtc")
    total = metric(m, "camstream_input_stall_seconds_sum", kind="webrtc")
    longest = min(float(le) for le, c in re.findall(
        r'^camstream_input_stall_seconds_bucket\{kind="webrtc",le="([\d.e+-]+)"\} (\d+)', m, re.M) if float(c) == n)
    assert n > 10, m
    figure(f"Chromium's WebRTC packets: {n:.0f} taken, the event loop held {total / n * 1e6:.0f} us each on average, "
           f"the longest under {longest * 1000:g} ms")
    session = cs.wait_for("connected (")

    page.locator("input[value=mjpeg]").check()
    expect(receiving).to_have_text(re.compile(r"^receiving MJPEG 640x360, [\d.]+ frames/s"), timeout=15000)
    ended = cs.wait_for("ended (")
    assert page.locator("#picture").is_visible() and not page.locator("#video").is_visible()
    first = page.locator("#picture").screenshot()
    time.sleep(1)
    assert page.locator("#picture").screenshot() != first, "the MJPEG picture did not change in a second"
    assert not errors, errors
    assert re.search(r"frames/s, [1-9][\d.]* Mbit/s|frames/s, 0\.[1-9]", shown), shown
    sid = re.search(r"WebRTC session (\w+) connected", session).group(1)
    assert sid in ended and re.search(r": [1-9]\d+ frames sent, 0 dropped", ended), (session, ended)


def browser_offer(chromium, video: bool = True) -> str:
    """An offer as Chromium makes one for a receive-only video track (or,
    with video False, audio only)."""
    page = chromium.new_page()
    kind = "video" if video else "audio"
    sdp = page.evaluate("""async kind => {
        const pc = new RTCPeerConnection();
        pc.addTransceiver(kind, { direction: "recvonly" });
        const offer = await pc.createOffer();
        return offer.sdp;
    }""", kind)
    page.close()
    return sdp


def test_whep_requests_that_are_refused(camstream, config, chromium):  # noqa: F811
    """Each WHEP request that cannot be served gets a clear status: no
    password (401), a stream that is not H.264 (404), not SDP (415), SDP
    the camera cannot read (400), an offer without video (406), a trickle
    PATCH (405), more sessions than max_clients (503). A session that never
    completes ICE and DTLS ends after 10 s; a DELETE ends a session only
    for its own user."""
    cs = camstream("--config", str(config), "--width", "320", "--height", "240", "--max-clients", "1")
    auth = HTTPDigestAuth(USER, PASSWORD)
    offer = browser_offer(chromium)
    sdp = {"Content-Type": "application/sdp"}
    url = cs.http + "/whep/h264"

    def post(body, headers=sdp, path=url, **kw):
        return requests.post(path, data=body, headers=headers, timeout=10, **kw)

    r = post(offer)
    assert r.status_code == 401 and "Digest" in r.headers["WWW-Authenticate"], r
    assert post(offer, path=cs.http + "/whep/stream", auth=auth).status_code == 404
    r = post(offer, headers={"Content-Type": "text/plain"}, auth=auth)
    assert r.status_code == 415 and "application/sdp" in r.text, r.text
    r = post(b"v=0\r\nthis is not SDP\r\n", auth=auth)
    assert r.status_code == 400 and "SDP" in r.text, r.text
    r = post(browser_offer(chromium, video=False), auth=auth)
    assert r.status_code == 406 and "H.264" in r.text, r.text

    r = post(offer, auth=auth)
    assert r.status_code == 201 and r.headers["Content-Type"] == "application/sdp", r
    location = r.headers["Location"]
    assert re.fullmatch(r"/whep/h264/[0-9a-f]{32}", location), location
    assert "a=ice-lite" in r.text and "H264/90000" in r.text and "packetization-mode=1" in r.text, r.text
    assert re.search(r"a=candidate:\S+ 1 udp \d+ 127\.0\.0\.1 \d+ typ host", r.text), r.text
    assert requests.patch(cs.http + location, data=b"", auth=auth, timeout=10).status_code == 405
    # The session counts as a client from its offer on: max_clients is 1.
    r = post(offer, auth=auth)
    assert r.status_code == 503 and "max_clients" in r.text, r.text
    assert requests.delete(cs.http + location, timeout=10).status_code == 401
    assert requests.delete(cs.http + "/whep/h264/" + "0" * 32, auth=auth, timeout=10).status_code == 404

    # Nobody completes ICE for this one: it ends after 10 s.
    r = post(offer, auth=auth)
    assert r.status_code == 503, "the first session should still hold max_clients"
    assert requests.delete(cs.http + location, auth=auth, timeout=10).status_code == 200
    r = post(offer, auth=auth)
    assert r.status_code == 201, r.text
    cs.wait_for("ICE and DTLS did not finish within 10 s", timeout=15)
    m = requests.get(cs.http + "/metrics", auth=auth, timeout=10).text
    assert metric(m, "camstream_clients", protocol="webrtc") == 0, m
    assert metric(m, "camstream_webrtc_sessions_total", state="offered") == 2, m
    assert metric(m, "camstream_webrtc_sessions_total", state="connected") == 0, m
    # What an offer holds the event loop for (each answered or refused).
    n = metric(m, "camstream_input_stall_seconds_count", kind="whep")
    total = metric(m, "camstream_input_stall_seconds_sum", kind="whep")
    assert n >= 8, m
    figure(f"WHEP offers: {n:.0f} answered or refused, the event loop held {total / n * 1000:.2f} ms each on average")


def firefox_gmp() -> str:
    """The OpenH264 plugin ci/test builds from Debian's sources
    (scripts/lib-build.sh, firefox_openh264): Firefox's MOZ_GMP_PATH."""
    found = sorted((ROOT / "output/firefox-gmp/gmp-gmpopenh264").glob("*/libgmpopenh264.so"))
    assert found, "run ci/test: it builds Firefox's OpenH264 plugin (scripts/lib-build.sh, firefox_openh264)"
    return str(found[-1].parent)


@contextlib.contextmanager
def firefox(gmp: str | None):
    """Debian's Firefox ESR, headless, through geckodriver (built from
    crates.io by ci/test) and Selenium, with the OpenH264 plugin in `gmp`
    or with none. Loopback candidates are Firefox's to refuse by default
    (a page could probe local services); the camera is on loopback in
    the fallback's test, so they are allowed."""
    from selenium import webdriver

    geckodriver = shutil.which("geckodriver") or str(ROOT / "output/geckodriver/bin/geckodriver")
    binary = shutil.which("firefox-esr")
    assert binary and Path(geckodriver).exists(), "run ci/test: it installs firefox-esr and geckodriver"
    opts = webdriver.FirefoxOptions()
    opts.add_argument("-headless")
    opts.binary_location = binary
    opts.set_preference("media.peerconnection.ice.loopback", True)
    # A URL with credentials opens without "you are about to log in" asked.
    opts.set_preference("network.http.phishy-userpass-length", 255)
    # Nothing fetched: no plugin updates from Mozilla's servers.
    opts.set_preference("media.gmp-manager.url", "")
    env = {k: v for k, v in os.environ.items() if k != "MOZ_GMP_PATH"}
    if gmp:
        env["MOZ_GMP_PATH"] = gmp
    service = webdriver.FirefoxService(executable_path=geckodriver, env=env)
    driver = webdriver.Firefox(options=opts, service=service)
    try:
        yield driver
    finally:
        driver.quit()


def firefox_offer(driver) -> str:
    driver.get("about:blank")
    return driver.execute_async_script("""const done = arguments[0];
        const pc = new RTCPeerConnection();
        pc.addTransceiver("video", { direction: "recvonly" });
        pc.createOffer().then(o => { pc.close(); done(o.sdp); });""")


def shows(driver, cs, want: str) -> str:
    """The page's "receiving" line, once it starts with `want`."""
    end = time.monotonic() + 25
    shown = ""
    while time.monotonic() < end and not shown.startswith(want):
        time.sleep(0.5)
        shown = driver.find_element("id", "receiving").text
    assert shown.startswith(want), (shown, cs.log())
    return shown


def test_firefox_plays_the_page_with_a_password(config):  # noqa: F811
    """Firefox ESR signs in with Digest (the credentials in the URL) and
    plays the page's WebRTC view: at least 25 frames/s decoded over 5 s.
    Firefox offers H.264 over WebRTC only with the OpenH264 plugin, which
    it downloads from Cisco at its first start; this one is built from
    Debian's sources (no host but Debian's archive is reached). Without a
    camera or microphone permission, Firefox gathers candidates on its
    default route's address only, as it would on a LAN: so the camera
    and Firefox are in two namespaces on a veth pair, the client's
    default route through it."""
    from helpers import Camstream, in_netns, veth_namespaces

    gmp = firefox_gmp()
    with veth_namespaces() as ns:
        run(["ip", "-n", ns.client, "route", "add", "default", "via", "192.0.2.1"], timeout=10)
        cs = Camstream(["--config", str(config), "--width", "640", "--height", "360"], netns=ns.cam,
                       host="192.0.2.1")
        try:
            with in_netns(ns.client), firefox(gmp) as driver:
                assert "H264/90000" in firefox_offer(driver), "Firefox did not load the OpenH264 plugin"
                driver.get(f"http://{USER}:{PASSWORD}@192.0.2.1:{cs.http_port}/")
                shows(driver, cs, "receiving WebRTC H.264 640x360, ")
                # Frames presented (Firefox counts no frames of a MediaStream
                # in getVideoPlaybackQuality).
                driver.execute_script("""const v = document.getElementById('video'); window.presented = 0;
                    const count = () => { window.presented++; v.requestVideoFrameCallback(count); };
                    v.requestVideoFrameCallback(count);""")
                time.sleep(1)
                first = driver.execute_script("return window.presented")
                time.sleep(5)
                rate = (driver.execute_script("return window.presented") - first) / 5
            figure(f"Firefox ESR presented {rate:.1f} frames/s over WebRTC (30 sent)")
            assert rate >= 25, rate
            cs.wait_for("connected (")
        finally:
            cs.stop()


def test_firefox_without_openh264_falls_back_to_mjpeg(camstream, config):  # noqa: F811
    """A Firefox that has not got its OpenH264 plugin yet offers VP8, VP9
    and AV1 only: the offer is answered 406, and the page plays MJPEG and
    says why."""
    cs = camstream("--config", str(config), "--width", "640", "--height", "360")
    with firefox(None) as driver:
        assert "H264/90000" not in firefox_offer(driver)
        driver.get(f"http://{USER}:{PASSWORD}@127.0.0.1:{cs.http_port}/")
        shown = shows(driver, cs, "receiving MJPEG 640x360, ")
        assert "WebRTC: 406" in shown and "MJPEG instead" in shown, shown
        cs.wait_for("WHEP: 406 the offer has no video track that takes H.264")
        assert driver.execute_script("return document.getElementById('picture').naturalWidth") == 640
        cs.wait_for("MJPEG stream to 127.0.0.1")


def test_go2rtc_pulls_the_stream_over_whep_with_the_password(camstream, config, tmp_path):  # noqa: F811
    """A WHEP client no one here wrote: go2rtc (v1.9.14, built from the Go
    module proxy as the benchmark builds it; its WebRTC is pion) asks for
    /whep/h264 with the user's password (Basic: basic_auth is on), receives
    the stream over WebRTC and serves it again over RTSP, where FFmpeg
    decodes 30 frames of it."""
    from helpers import go2rtc_decode

    config.write_text("basic_auth = true\n" + config.read_text())
    w, h = 640, 360
    cs = camstream("--config", str(config), "--width", str(w), "--height", str(h))
    source = f"webrtc:http://{USER}:{PASSWORD}@127.0.0.1:{cs.http_port}/whep/h264#format=whep"
    pictures, said = go2rtc_decode(tmp_path / "go2rtc.yaml", source, (w, h))
    assert len(pictures) == 30, (said, cs.log())
    assert re.search(r"WebRTC session \w+ connected \(\S+ over Udp\)", cs.log()), cs.log()


def test_the_browser_plays_through_5_percent_loss(config):  # noqa: F811
    """The camera and the browser in two network namespaces joined by a
    veth pair; the camera's side drops 5 % of the UDP datagrams it sends,
    at random (nftables' numgen: this kernel has no netem). Chromium keeps
    playing: NACKs get lost packets resent, a PLI gets a key frame where
    that is too late; the frames/s it decodes, and the NACKs and PLIs it
    sent, are reported."""
    from playwright.sync_api import expect, sync_playwright

    from helpers import Camstream, in_netns, veth_namespaces

    chromium = shutil.which("chromium")
    assert chromium and shutil.which("nft"), "run ci/test: it installs chromium and nftables"
    with veth_namespaces() as ns:
        run(["ip", "netns", "exec", ns.cam, "nft", "add table inet loss"], timeout=10)
        run(["ip", "netns", "exec", ns.cam, "nft",
             "add chain inet loss out { type filter hook output priority 0; }"], timeout=10)
        run(["ip", "netns", "exec", ns.cam, "nft",
             "add rule inet loss out meta l4proto udp numgen random mod 100 < 5 counter drop"], timeout=10)
        cs = Camstream(["--config", str(config), "--width", "640", "--height", "360"], netns=ns.cam,
                       host="192.0.2.1")
        try:
            with in_netns(ns.client), sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
                try:
                    page = browser.new_context(http_credentials={"username": USER, "password": PASSWORD}).new_page()
                    page.goto(cs.http + "/")
                    expect(page.locator("#receiving")).to_have_text(re.compile(r"^receiving WebRTC H\.264"),
                                                                    timeout=20000)
                    first = frames_decoded(page)
                    time.sleep(10)
                    rate = (frames_decoded(page) - first) / 10
                    stats = page.evaluate("""async () => {
                        const pc = player.pc; let out = {};
                        (await pc.getStats()).forEach(x => {
                          if (x.type === "inbound-rtp" && x.kind === "video")
                            out = { nacks: x.nackCount, plis: x.pliCount, lost: x.packetsLost,
                                    received: x.packetsReceived, frames: x.framesDecoded };
                        });
                        return out; }""")
                finally:
                    browser.close()
            dropped = run(["ip", "netns", "exec", ns.cam, "nft", "list ruleset"], timeout=10).stdout.decode()
        finally:
            cs.stop()
    figure(f"WebRTC through 5 % loss: Chromium decoded {rate:.1f} frames/s (30 sent); "
           f"{stats['lost']} of {stats['lost'] + stats['received']} packets lost on the way; "
           f"it sent {stats['nacks']} NACKs and {stats['plis']} PLIs")
    assert re.search(r"counter packets [1-9]\d* bytes", dropped), dropped
    assert stats["nacks"] > 0, stats
    assert rate >= 20, stats
