"""Clients that misbehave must not cost the others a frame: one that stops
reading, and a flood of malformed requests, while a real client watches."""

from __future__ import annotations

import random
import socket
import threading
import time

import pytest

from conftest import assert_frames_match
from rtsp import Client, complete_frames
from test_interop import H, W, ffmpeg_client


@pytest.fixture
def clip(media):
    return media.ffmpeg("ffmpeg-testsrc2-640x360-420.mjpeg", f"{W}x{H}", 60)


def watch(url: str, frames: int, out: dict) -> threading.Thread:
    """FFmpeg receiving `frames` frames over TCP in the background."""
    def run():
        try:
            out["frames"] = ffmpeg_client(url, "tcp", frames, "yuvj420p")
        except BaseException as e:  # noqa: BLE001 - checked by the test
            out["error"] = e
    t = threading.Thread(target=run)
    t.start()
    return t


def test_a_client_that_stops_reading(camstream, media, clip):
    cs = camstream("--source", f"file:{clip}", "--client-queue", "3")
    slow = Client(cs.port)
    # Keep the client's own kernel buffer small, as on a congested link.
    slow.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
    slow.setup_tcp()
    assert slow.play().status == 200
    time.sleep(1)  # let its socket buffers fill
    rss_before = cs.rss_kb()

    out: dict = {}
    watcher = watch(cs.url, 240, out)
    watcher.join(60)
    assert "error" not in out, out.get("error")
    assert_frames_match(out["frames"], media.ffmpeg_reference(clip, W, H, "yuvj420p"), min_frames=240)
    growth = cs.rss_kb() - rss_before
    assert growth < 4096, f"RSS grew by {growth} KiB while a client did not read"

    # When it reads again it gets whole frames: some were dropped, none cut.
    slow.sock.settimeout(5)
    packets = list(slow.packets(2))
    start = next(i for i, p in enumerate(packets) if p.fragment_offset == 0 and i > 0)
    frames = complete_frames(packets[start:])
    assert len(frames) >= 20
    slow.call("TEARDOWN", slow.url + "/")
    line = cs.wait_for(f"session {slow.session} from 127.0.0.1:{slow.sock.getsockname()[1]} ended (TEARDOWN)")
    dropped = int(line.split(" dropped")[0].rsplit(" ", 1)[1])
    assert dropped > 100, line


GARBAGE = [
    b"\x00\x01\x02\x03" * 256,
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    b"OPTIONS * RTSP/1.0\r\nCSeq: 1\r\n",  # never finished
    b"DESCRIBE rtsp://127.0.0.1/stream RTSP/1.0\r\nCSeq: x\r\nContent-Length: 99999999\r\n\r\nabc",
    b"SETUP rtsp://127.0.0.1/stream/trackID=0 RTSP/1.0\r\nCSeq: 2\r\nTransport: \xff\xfe;;;==\r\n\r\n",
    b"PLAY rtsp://127.0.0.1/stream RTSP/1.0\r\nCSeq: 3\r\nSession: " + b"9" * 5000 + b"\r\n\r\n",
    b"$\x00\xff\xff" + b"\xaa" * 1000,  # interleaved data, announced longer than sent
    b"$\x01\x00\x08\x81\xc9\x00\x07\x00\x00",  # a truncated RTCP receiver report
    b"OPTIONS rtsp://127.0.0.1/stream RTSP/1.0\r\n" + b"X-A: b\r\n" * 2000 + b"\r\n",
    b"\r\n" * 3000,
    b"TEARDOWN rtsp://%%%/ RTSP/1.0\r\nCSeq: 4\r\n\r\n" * 50,
]


def flood(port: int, until: float, seed: int, counter: list[int]) -> None:
    rnd = random.Random(seed)
    while time.monotonic() < until:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                for _ in range(rnd.randint(1, 5)):
                    payload = rnd.choice(GARBAGE)
                    if rnd.random() < 0.3:
                        payload = bytes(rnd.getrandbits(8) for _ in range(rnd.randint(1, 3000)))
                    # Split across writes at random points.
                    cut = rnd.randint(0, len(payload))
                    s.sendall(payload[:cut])
                    s.sendall(payload[cut:])
                    counter[0] += 1
                if rnd.random() < 0.5:
                    s.settimeout(0.2)
                    try:
                        s.recv(4096)
                    except OSError:
                        pass
        except OSError:
            pass  # the server closed on us: expected for some payloads


def test_flood_of_malformed_requests(camstream, media, clip):
    cs = camstream("--source", f"file:{clip}")
    out: dict = {}
    watcher = watch(cs.url, 240, out)
    time.sleep(0.5)
    sent = [0]
    until = time.monotonic() + 7
    floods = [threading.Thread(target=flood, args=(cs.port, until, i, sent)) for i in range(6)]
    for t in floods:
        t.start()
    for t in floods:
        t.join()
    watcher.join(60)
    assert "error" not in out, out.get("error")
    assert_frames_match(out["frames"], media.ffmpeg_reference(clip, W, H, "yuvj420p"), min_frames=240)
    assert sent[0] > 500, sent
    assert cs.alive()
    # Still answering properly afterwards.
    assert Client(cs.port).call("OPTIONS").status == 200
    assert cs.rss_kb() < 32 * 1024
