"""A deliberately small RTSP/RTP client for protocol tests.

Real clients (FFmpeg, GStreamer, VLC) prove interoperability; this one lets a
test send exactly the bytes it wants (malformed, pipelined, split), stop
reading, or inspect every RTP header.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import socket
import struct
import time
from itertools import pairwise


@dataclasses.dataclass
class Response:
    status: int
    reason: str
    headers: dict[str, str]
    body: bytes
    # Every header line in order (`headers` keeps the last of a name).
    lines: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    def all(self, name: str) -> list[str]:
        return [v for k, v in self.lines if k == name.lower()]


@dataclasses.dataclass
class Rtp:
    marker: bool
    payload_type: int
    seq: int
    timestamp: int
    ssrc: int
    payload: bytes

    @classmethod
    def parse(cls, data: bytes) -> Rtp:
        b0, b1, seq, ts, ssrc = struct.unpack("!BBHII", data[:12])
        assert b0 >> 6 == 2, "RTP version 2"
        return cls(bool(b1 & 0x80), b1 & 0x7F, seq, ts, ssrc, data[12:])

    @property
    def fragment_offset(self) -> int:
        return int.from_bytes(self.payload[1:4], "big")


class Client:
    def __init__(self, port: int, host: str = "127.0.0.1", path: str = "stream", timeout: float = 10):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.url = f"rtsp://{host}:{port}/{path}"
        self.cseq = 0
        self.buf = b""
        self.session: str | None = None
        self.interleaved: list[tuple[int, bytes]] = []

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def request(self, method: str, url: str | None = None, headers: dict[str, str] | None = None,
                body: bytes = b"", send: bool = True) -> bytes:
        """Builds (and by default sends) a request; returns its bytes."""
        self.cseq += 1
        lines = [f"{method} {url or self.url} RTSP/1.0", f"CSeq: {self.cseq}"]
        if self.session and not (headers and "Session" in headers):
            lines.append(f"Session: {self.session}")
        for k, v in (headers or {}).items():
            lines.append(f"{k}: {v}")
        if body:
            lines.append(f"Content-Length: {len(body)}")
        data = ("\r\n".join(lines) + "\r\n\r\n").encode() + body
        if send:
            self.send_raw(data)
        return data

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed by server")
        self.buf += chunk

    def read_message(self) -> Response | tuple[int, bytes]:
        """The next response, or an interleaved (channel, packet)."""
        while True:
            if self.buf.startswith(b"$"):
                if len(self.buf) >= 4:
                    (n,) = struct.unpack("!H", self.buf[2:4])
                    if len(self.buf) >= 4 + n:
                        ch, pkt = self.buf[1], self.buf[4:4 + n]
                        self.buf = self.buf[4 + n:]
                        return ch, pkt
            elif b"\r\n\r\n" in self.buf:
                head, rest = self.buf.split(b"\r\n\r\n", 1)
                lines = head.decode("latin-1").split("\r\n")
                version, status, *reason = lines[0].split(" ", 2)
                assert version == "RTSP/1.0", lines[0]
                headers = {}
                every = []
                for line in lines[1:]:
                    k, _, v = line.partition(":")
                    headers[k.strip().lower()] = v.strip()
                    every.append((k.strip().lower(), v.strip()))
                n = int(headers.get("content-length", "0"))
                if len(rest) >= n:
                    self.buf = rest[n:]
                    return Response(int(status), reason[0] if reason else "", headers, rest[:n], every)
            self._fill()

    def response(self) -> Response:
        """The next response, keeping interleaved packets read meanwhile."""
        while True:
            m = self.read_message()
            if isinstance(m, Response):
                return m
            self.interleaved.append(m)

    def call(self, method: str, url: str | None = None, headers: dict[str, str] | None = None,
             body: bytes = b"") -> Response:
        self.request(method, url, headers, body)
        r = self.response()
        assert r.header("cseq") == str(self.cseq), (r, self.cseq)
        return r

    def setup_tcp(self, channels: str = "0-1") -> Response:
        r = self.call("SETUP", self.url + "/trackID=0",
                      {"Transport": f"RTP/AVP/TCP;unicast;interleaved={channels}"})
        if r.status == 200:
            self.session = r.header("session").split(";")[0]
        return r

    def setup_udp(self, rtp_port: int) -> Response:
        r = self.call("SETUP", self.url + "/trackID=0",
                      {"Transport": f"RTP/AVP;unicast;client_port={rtp_port}-{rtp_port + 1}"})
        if r.status == 200:
            self.session = r.header("session").split(";")[0]
        return r

    def play(self) -> Response:
        return self.call("PLAY", self.url + "/", {"Range": "npt=now-"})

    def packets(self, seconds: float, channel: int = 0):
        """Interleaved RTP packets on `channel` for `seconds`."""
        end = time.monotonic() + seconds
        pending, self.interleaved = self.interleaved, []
        for ch, pkt in pending:
            if ch == channel:
                yield Rtp.parse(pkt)
        timeout = self.sock.gettimeout()
        try:
            while (left := end - time.monotonic()) > 0:
                self.sock.settimeout(left)
                try:
                    m = self.read_message()
                except TimeoutError:
                    return
                if isinstance(m, tuple) and m[0] == channel:
                    yield Rtp.parse(m[1])
        finally:
            self.sock.settimeout(timeout)


def complete_frames(packets) -> list[tuple[int, list[Rtp]]]:
    """Groups packets into frames (by timestamp); checks each is whole:
    consecutive sequence numbers, offsets that add up, marker on the last."""
    frames: list[tuple[int, list[Rtp]]] = []
    current: list[Rtp] = []
    for p in packets:
        current.append(p)
        if p.marker:
            frames.append((current[0].timestamp, current))
            current = []
    for ts, pkts in frames:
        assert pkts[0].fragment_offset == 0, "frame starts at offset 0"
        offset = 0
        for a, b in pairwise(pkts):
            assert b.seq == (a.seq + 1) & 0xFFFF, "consecutive sequence numbers within a frame"
            assert b.timestamp == ts, "one timestamp per frame"
        for p in pkts:
            assert p.fragment_offset == offset, "fragment offsets add up"
            offset += len(p.payload) - jpeg_headers_len(p, first=p is pkts[0])
    return frames


def jpeg_headers_len(p: Rtp, first: bool) -> int:
    n = 8
    if 64 <= p.payload[4] < 128:
        n += 4
    if first and p.payload[5] >= 128:
        (length,) = struct.unpack("!H", p.payload[n + 2:n + 4])
        n += 4 + length
    return n


def auth_params(value: str) -> dict[str, str]:
    """The name=value parameters of a WWW-Authenticate or Authorization value."""
    return {k: v1 or v2 for k, v1, v2 in re.findall(r'(\w+)=(?:"([^"]*)"|([^,\s]+))', value)}


def digest_response(p: dict[str, str], method: str, password: str) -> str:
    """The Digest response (RFC 7616 3.4.1) for the Authorization parameters
    `p` (username, realm, nonce, uri; algorithm, qop, nc, cnonce if there)."""
    h = {"MD5": hashlib.md5, "SHA-256": hashlib.sha256}[p.get("algorithm", "MD5").upper()]

    def hx(*parts: str) -> str:
        return h(":".join(parts).encode()).hexdigest()
    ha1, ha2 = hx(p["username"], p["realm"], password), hx(method, p["uri"])
    if "qop" in p:
        return hx(ha1, p["nonce"], p["nc"], p["cnonce"], p["qop"], ha2)
    return hx(ha1, p["nonce"], ha2)
