"""RTSP 1.0 (RFC 2326) behaviour, RTP framing and RTCP, byte by byte."""

from __future__ import annotations

import re
import socket
import struct
import time
from itertools import pairwise

import pytest

from helpers import BIN, free_port, run
from rtsp import Client, Rtp, auth_params, complete_frames, digest_response


@pytest.fixture
def server(camstream):
    return camstream("--width", "320", "--height", "240", "--fps", "25", "--session-timeout", "5")


def test_options_and_cseq_echo(server):
    c = Client(server.port)
    c.send_raw(f"OPTIONS {c.url} RTSP/1.0\r\nCSeq: 0042\r\nUser-Agent: test\r\n\r\n".encode())
    r = c.response()
    assert r.status == 200
    assert r.header("cseq") == "0042"
    assert set(r.header("public").replace(" ", "").split(",")) == {
        "OPTIONS", "DESCRIBE", "SETUP", "PLAY", "PAUSE", "TEARDOWN", "GET_PARAMETER", "SET_PARAMETER"}
    assert r.header("server").startswith("camstream/")


def test_describe(server):
    c = Client(server.port)
    r = c.call("DESCRIBE", headers={"Accept": "application/sdp"})
    assert r.status == 200
    assert r.header("content-type") == "application/sdp"
    assert r.header("content-base") == c.url + "/"
    sdp = r.body.decode().split("\r\n")
    for line in ["m=video 0 RTP/AVP 26", "a=control:trackID=0", "a=control:*", "a=range:npt=now-",
                 "a=framerate:25", "a=rtpmap:26 JPEG/90000"]:
        assert line in sdp, (line, sdp)
    assert not any(s.startswith("a=x-dimensions") for s in sdp)
    assert c.call("DESCRIBE", url=f"rtsp://127.0.0.1:{server.port}/other").status == 404


def test_x_dimensions_for_sizes_the_header_cannot_hold(camstream):
    cs = camstream("--width", "2560", "--height", "1440", "--fps", "2")
    c = Client(cs.port)
    sdp = c.call("DESCRIBE").body.decode()
    assert "a=x-dimensions:2560,1440\r\n" in sdp
    c.setup_tcp()
    c.play()
    first = next(c.packets(5))
    assert first.payload[6:8] == bytes([0, 1440 // 8]), "width/8 is 0 above 2040; height/8 fits"


def test_status_codes(server):
    c = Client(server.port)
    track = c.url + "/trackID=0"
    tcp = {"Transport": "RTP/AVP/TCP;unicast;interleaved=0-1"}
    # SETUP names the stream, not the presentation.
    assert c.call("SETUP", c.url, tcp).status == 459
    assert c.call("SETUP", f"rtsp://127.0.0.1:{server.port}/nope/trackID=0", tcp).status == 404
    assert c.call("SETUP", track, {"Transport": "RTP/AVP;multicast"}).status == 461
    assert c.call("SETUP", track, {"Transport": "RTP/SAVP;unicast;client_port=4000-4001"}).status == 461
    assert c.call("SETUP", track, {"Transport": "RTP/AVP;unicast"}).status == 461
    # RTCP's channel is RTP's plus one (RFC 2326 12.39): another pair is not echoed back.
    assert c.call("SETUP", track, {"Transport": "RTP/AVP/TCP;unicast;interleaved=7-6"}).status == 461
    assert c.call("SETUP", track).status == 400
    assert c.call("SETUP", track, {**tcp, "Session": "DEADBEEF"}).status == 454
    assert c.call("PLAY", c.url + "/").status == 454
    assert c.call("PLAY", c.url + "/", {"Session": "nope"}).status == 454
    assert c.call("ANNOUNCE", c.url).status == 405
    assert c.call("RECORD", c.url).status == 405
    assert c.call("FROB", c.url).status == 501
    r = c.call("OPTIONS", c.url, {"Require": "play.scale"})
    assert r.status == 551 and r.header("unsupported") == "play.scale"
    assert c.call("GET_PARAMETER", c.url, body=b"position\r\n").status == 451
    # A session that plays cannot change transport.
    assert c.setup_tcp().status == 200
    assert c.play().status == 200
    assert c.call("SETUP", track, tcp).status == 455
    # Wrong version, missing CSeq.
    c.send_raw(f"OPTIONS {c.url} RTSP/2.0\r\nCSeq: 77\r\n\r\n".encode())
    assert c.response().status == 505
    c.send_raw(f"OPTIONS {c.url} RTSP/1.0\r\n\r\n".encode())
    r = c.response()
    assert r.status == 400 and r.header("cseq") is None


def test_max_clients(camstream):
    cs = camstream("--width", "160", "--height", "120", "--max-clients", "2")
    clients = [Client(cs.port) for _ in range(3)]
    assert clients[0].setup_tcp().status == 200
    assert clients[1].setup_udp(free_port(socket.SOCK_DGRAM)).status == 200
    assert clients[2].setup_tcp().status == 453
    clients[0].call("TEARDOWN", clients[0].url + "/")
    assert clients[2].setup_tcp().status == 200


def test_pipelined_and_split_requests(server):
    c = Client(server.port)
    batch = b"".join(c.request(m, send=False) for m in ("OPTIONS", "DESCRIBE", "OPTIONS", "GET_PARAMETER"))
    c.send_raw(batch)
    for cseq in range(1, 5):
        r = c.response()
        assert (r.status, r.header("cseq")) == (200, str(cseq))
    # One byte at a time, with a body.
    data = c.request("SET_PARAMETER", body=b"", send=False)
    for b in data:
        c.send_raw(bytes([b]))
        time.sleep(0.001)
    r = c.response()
    assert (r.status, r.header("cseq")) == (200, "5")


def test_frames_over_tcp_are_whole_and_carry_tables(server):
    c = Client(server.port)
    setup = c.setup_tcp()
    assert "interleaved=0-1" in setup.header("transport")
    assert setup.header("session").endswith(";timeout=5")
    play = c.play()
    assert play.status == 200
    assert play.header("range") == "npt=now-"
    info = dict(kv.split("=", 1) for kv in play.header("rtp-info").split(";")[1:])
    assert play.header("rtp-info").startswith(f"url={c.url}/trackID=0;")
    packets = list(c.packets(2))
    assert packets[0].seq == int(info["seq"]), "RTP-Info names the first packet"
    # rtptime is the RTP time of "now" (Range: npt=now-): the newest frame's
    # when it is fresh and goes out at once, else the clock's at PLAY; the
    # next frame is stamped when it was due, which may be a moment before
    # PLAY (a busy loop sent it late) or after it (its tick had not come):
    # less than a frame interval either way (40 ms = 3600 ticks at 25 fps;
    # 7 ticks after PLAY was seen on a loaded machine).
    ahead = (packets[0].timestamp - int(info["rtptime"]) + 2**31) % 2**32 - 2**31
    assert abs(ahead) < 3600, (info, packets[0].timestamp)
    frames = complete_frames(packets)
    assert len(frames) >= 40
    # Over TCP nothing is lost or repeated: sequence numbers run on.
    assert all(b.seq == (a.seq + 1) & 0xFFFF for a, b in pairwise(packets))
    ssrcs = {p.ssrc for p in packets}
    assert len(ssrcs) == 1 and f"ssrc={ssrcs.pop():08X}" in setup.header("transport")
    for _, pkts in frames:
        first = pkts[0].payload
        assert first[4] == 1, "4:2:0 is type 1"
        assert first[5] == 255, "Q = 255: tables in every frame"
        assert (first[6], first[7]) == (320 // 8, 240 // 8)
        mbz, precision, length = struct.unpack("!BBH", first[8:12])
        assert (mbz, precision, length) == (0, 0, 128)
        assert all(p.payload[5] == 255 for p in pkts)
        assert all(len(p.payload) + 12 <= 1400 for p in pkts)
        assert all(p.payload_type == 26 for p in pkts)
    # Timestamps advance by 90000 / 25 per frame (the source's capture clock).
    steps = {(b[0] - a[0]) & 0xFFFFFFFF for a, b in pairwise(frames)}
    assert steps <= {3600}, steps


def test_two_sessions_on_one_connection(server):
    c = Client(server.port)
    a = c.setup_tcp("0-1")
    session_a = c.session
    c.session = None
    b = c.setup_tcp("0-1")  # taken: the server picks another pair
    session_b = c.session
    assert session_a != session_b
    assert "interleaved=0-1" in a.header("transport")
    assert "interleaved=2-3" in b.header("transport")
    for s in (session_a, session_b):
        c.session = s
        assert c.play().status == 200
    got = {0: [], 2: []}
    end = time.monotonic() + 2
    while time.monotonic() < end:
        m = c.read_message()
        if isinstance(m, tuple) and m[0] in got:
            got[m[0]].append(Rtp.parse(m[1]))
    for ch, packets in got.items():
        assert len(complete_frames(packets)) >= 40, ch


def test_pause_play_teardown(server):
    c = Client(server.port)
    c.setup_tcp()
    c.play()
    assert len(list(c.packets(1))) > 0
    assert c.call("PAUSE", c.url + "/").status == 200
    time.sleep(0.3)
    list(c.packets(0.3))  # what was in flight
    assert list(c.packets(1)) == [], "no RTP while paused"
    assert c.play().status == 200
    assert len(complete_frames(list(c.packets(1)))) >= 15
    assert c.call("TEARDOWN", c.url + "/").status == 200
    time.sleep(0.3)
    list(c.packets(0.3))
    assert list(c.packets(1)) == []
    assert c.call("PLAY", c.url + "/").status == 454, "the session is gone"
    server.wait_for("ended (TEARDOWN)")


def test_udp_rtp_and_rtcp(server):
    rtp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rtp.bind(("127.0.0.1", 0))
    rtcp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rtcp.bind(("127.0.0.1", rtp.getsockname()[1] + 1))
    rtp.settimeout(3)
    rtcp.settimeout(5)
    c = Client(server.port)
    r = c.setup_udp(rtp.getsockname()[1])
    transport = r.header("transport")
    server_rtcp = int(transport.split("server_port=")[1].split(";")[0].split("-")[1])
    assert c.play().status == 200
    packets = [Rtp.parse(rtp.recv(2048)) for _ in range(200)]
    assert len(complete_frames(packets[packets.index(next(p for p in packets if p.fragment_offset == 0)):])) > 5
    # A sender report at PLAY, before the first packet (it counts none),
    # and another within the first seconds: NTP time is now, RTP time is
    # on the stream's clock.
    counts = []
    while not counts or counts[-1] == 0:
        data, src = rtcp.recvfrom(2048)
        assert src[1] == server_rtcp
        v_rc, pt, _ = struct.unpack("!BBH", data[:4])
        assert pt == 200 and v_rc >> 6 == 2
        ssrc, ntp_hi, ntp_lo, rtp_time, count, octets = struct.unpack("!IIIIII", data[4:28])
        assert ssrc == packets[0].ssrc
        assert abs((ntp_hi - 2208988800) - time.time()) < 5
        counts.append(count)
    assert counts[0] == 0 and len(counts) == 2 and octets > 0
    assert (rtp_time - packets[0].timestamp) & 0xFFFFFFFF < 90000 * 5
    assert data[28 + 1] == 202, "SDES with CNAME follows the SR"
    # RTCP BYE from the client stops the stream; TEARDOWN still works.
    bye = struct.pack("!BBHI", 0x81, 203, 1, 0x1234)
    rr = struct.pack("!BBHI", 0x80, 201, 1, 0x1234)
    rtcp.sendto(rr + bye, ("127.0.0.1", server_rtcp))
    server.wait_for(f"session {c.session}: RTCP BYE from 127.0.0.1:{c.sock.getsockname()[1]}, stopped sending")
    rtp.settimeout(0.5)
    try:
        while True:
            rtp.recv(2048)  # what was in flight
    except TimeoutError:
        pass
    with pytest.raises(TimeoutError):
        rtp.recv(2048)
    assert c.call("TEARDOWN", c.url + "/").status == 200


def test_rtcp_sender_reports_interleaved(server):
    c = Client(server.port)
    c.setup_tcp()
    c.play()
    # A frame is written whole before the report queued meanwhile, so the
    # report counts exactly the RTP packets and payload octets (after the
    # 12-byte header) that came before it on the connection.
    packets = octets = 0
    end = time.monotonic() + 4
    while time.monotonic() < end:
        m = c.read_message()
        if isinstance(m, tuple) and m[0] == 0:
            packets += 1
            octets += len(m[1]) - 12
        elif isinstance(m, tuple) and m[0] == 1:
            assert m[1][1] == 200
            count, sent = struct.unpack("!II", m[1][20:28])
            assert (count, sent) == (packets, octets)
            # The first comes at PLAY, before any packet; the next after some.
            if packets > 0:
                return
    pytest.fail("no RTCP sender report on channel 1 after the first packets")


def test_session_expires_without_keepalive(server):
    quiet, talking = Client(server.port), Client(server.port)
    quiet.setup_udp(free_port(socket.SOCK_DGRAM))
    talking.setup_udp(free_port(socket.SOCK_DGRAM))
    for _ in range(4):
        time.sleep(2)
        assert talking.call("GET_PARAMETER", talking.url + "/").status == 200
    assert quiet.call("GET_PARAMETER", quiet.url + "/").status == 454
    assert talking.call("TEARDOWN", talking.url + "/").status == 200
    server.wait_for("ended (timed out)")


def test_malformed_request_gets_400_and_the_connection_survives(server):
    c = Client(server.port)
    c.send_raw(b"THIS IS NOT RTSP\r\nCSeq: 9\r\n\r\n")
    r = c.response()
    assert (r.status, r.header("cseq")) == (400, "9")
    assert c.call("OPTIONS").status == 200, "resynchronized after the bad request"
    # A request with a bad URI is malformed too.
    c.send_raw(b"OPTIONS rtsp://[::bad RTSP/1.0\r\nCSeq: 10\r\n\r\n")
    assert c.response().status == 400
    assert c.call("OPTIONS").status == 200


def test_oversized_request_gets_400_and_close(server):
    c = Client(server.port)
    c.send_raw(b"OPTIONS * RTSP/1.0\r\nCSeq: 1\r\nX-Long: " + b"a" * 20000)
    r = c.response()
    assert r.status == 400
    with pytest.raises((ConnectionError, OSError)):
        for _ in range(10):
            c.call("OPTIONS")
            time.sleep(0.1)


# What the transcripts with a password were recorded with (the user admin).
TRANSCRIPT_PASSWORD = "s3cret"


def replayed(request: str, port: int, session: str | None, nonce: str | None) -> tuple[str, int]:
    """A recorded request made this server's (its port, session and, for
    Digest, nonce `nonce`: the response is computed again for it with the
    recorded uri, qop, nc and cnonce) and the status it must get: 200, or
    401 where it carries no credentials or a response that the transcripts'
    password does not explain (a wrong password)."""
    method = request.split(" ", 1)[0]
    header = re.search(r"^Authorization: Digest (.*)$", request, re.M)
    genuine = header is not None and (
        digest_response(p := auth_params(header.group(1)), method, TRANSCRIPT_PASSWORD) == p["response"])
    old = re.search(r"rtsp://127\.0\.0\.1:\d+/", request).group(0)
    request = request.replace(old, f"rtsp://127.0.0.1:{port}/")
    if session:
        request = re.sub(r"Session: [0-9A-F]+", f"Session: {session}", request)
    if nonce is None:
        return request, 200
    if header is None:
        return request, 401
    value = re.search(r"^Authorization: Digest (.*)$", request, re.M).group(1)
    new = re.sub(r'nonce="[^"]*"', f'nonce="{nonce}"', value)
    if genuine:
        response = digest_response(auth_params(new), method, TRANSCRIPT_PASSWORD)
        new = re.sub(r'response="[^"]*"', f'response="{response}"', new)
    return request.replace(value, new), 200 if genuine else 401


def test_replay_real_client_transcripts(server, camstream, tmp_path):
    """The requests FFmpeg, GStreamer and live555 (VLC's RTSP client) sent
    (tests/testdata/rtsp, recorded with tests/record_transcript.py) replayed
    against a new server: every one succeeds once the session, address and
    nonce are this server's. Those recorded with a password go to a server
    with that user, and must pass with the uri each client chose (live555
    names the presentation in its SETUP of the stream), or be refused where
    the recording was made with a wrong password."""
    from pathlib import Path

    config = tmp_path / "admin.toml"
    config.write_text(run([str(BIN), "passwd", "admin"], input=TRANSCRIPT_PASSWORD + "\n", text=True).stdout)
    protected = camstream("--config", str(config), "--width", "320", "--height", "240")
    files = sorted((Path(__file__).parent / "testdata" / "rtsp").glob("*.rtsp"))
    assert len([f for f in files if f.name.startswith("live555-")]) >= 5
    refused = 0
    for f in files:
        data = f.read_bytes().decode()
        requests = [r + "\r\n\r\n" for r in data.split("\r\n\r\n") if r]
        nonce = None
        port = server.port
        if "Authorization: Digest" in data:
            port = protected.port
            challenge = Client(port).call("OPTIONS").all("www-authenticate")
            nonce = auth_params(challenge[0])["nonce"]
        c = Client(port)
        for recorded in requests:
            req, status = replayed(recorded, port, c.session, nonce)
            c.send_raw(req.encode())
            r = c.response()
            method = req.split(" ", 1)[0]
            assert r.status == status, (f.name, req, r)
            assert r.header("cseq") == re.search(r"CSeq: (\d+)", req).group(1)
            refused += status == 401 and "Authorization" in req
            if method == "SETUP":
                c.session = r.header("session").split(";")[0]
        c.close()
    assert refused == 2, "live555's two requests with a wrong password"


def test_file_source_timestamps_are_evenly_spaced(camstream, media):
    """Frames are stamped with when their tick was due, not when the loop got
    to them: 90000 / fps apart, or a whole multiple of that when the machine
    stalled the daemon past a tick (which then skips a frame)."""
    clip = media.ffmpeg("ffmpeg-testsrc2-640x360-420.mjpeg", "640x360", 60)
    cs = camstream("--source", f"file:{clip}", "--fps", "30")
    c = Client(cs.port)
    c.setup_tcp()
    c.play()
    frames = complete_frames(list(c.packets(3)))
    assert len(frames) >= 80
    steps = [(b[0] - a[0]) & 0xFFFFFFFF for a, b in pairwise(frames)]
    assert all(s > 0 and s % 3000 == 0 for s in steps), steps
    assert steps.count(3000) >= len(steps) * 3 // 4, steps
