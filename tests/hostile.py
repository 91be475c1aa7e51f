"""The hostile sequences of issue 39, as an attacker on the camera's
network runs them, each a function that runs one against a `Camera` and
returns what the daemon got wrong (nothing, when it holds):

1. a tunnel's leftover POST reaches no other connection (a tunnel has one
   POST; closing its GET closes it): `leftover_post`;
2. a second POST into a live tunnel is refused, and nothing it carries
   (interleaved RTCP, garbage) reaches the tunnel's client: `second_post`;
3. slow senders and idle requests from six addresses lock no one else out:
   `slow_senders`, `empty_onvif_posts`;
4. a request with an empty body is answered (curl's Digest against ONVIF):
   `curl_digest_onvif`;
5. every pipelined request is answered without waiting for more bytes:
   `pipelined_snapshots`;

and issue 51's:

6. one password does not fill a port: `password_fill`;
7. SOAP requests of 64 KB whose cost grew with the square of their
   attributes (or namespace declarations), sent back to back without a
   user, cost an H.264 and an MJPEG viewer no frame: `soap_flood`.

tests/test_hostile.py runs each against the daemon in a network namespace,
scripts/soak all of them on a loop against the firmware under QEMU. The
camera has the users of PASSWORDS; every other setting is its own.
"""

from __future__ import annotations

import base64
import hashlib
import queue
import re
import select
import socket
import statistics
import subprocess
import threading
import time
from collections.abc import Callable

from rtsp import Response, auth_params, digest_response
from test_onvif import DEVICE, DEVICE_INFO, SOAP, envelope

PASSWORDS = {"viewer": "viewer-secret", "nvr": "nvr-secret"}
# An RTCP receiver report without report blocks, then a BYE, both for SSRC 0x01020304.
RR_BYE = bytes.fromhex("80c9000101020304" "81cb000101020304")


class Camera:
    """The camera as the sequences reach it: from the honest clients'
    source or one of six attackers', on its RTSP or HTTP port. A subclass
    gives `connect`, `client` and the log; the attributes say where."""

    # How clients name the camera (request lines, Host), and its ports as
    # the honest clients reach them.
    host: str
    rtsp_port: int
    http_port: int
    # Sources to connect from: the honest clients', six attackers'.
    honest: str
    attackers: list[str]
    # The honest clients' address as the daemon logs it.
    honest_peer: str
    # The main stream's size, as ffprobe prints it ("1280,720").
    size: str
    # How much longer than on a machine's own namespace answers may take
    # (an emulated board is slower).
    patience: float = 1.0

    @property
    def url(self) -> str:
        return f"rtsp://{self.host}:{self.rtsp_port}/stream"

    @property
    def http(self) -> str:
        return f"http://{self.host}:{self.http_port}"

    def connect(self, source: str, port: str, timeout: float = 5, rcvbuf: int | None = None) -> socket.socket:
        """A TCP connection from `source` to the camera's `port` ("rtsp" or
        "http"), with a receive buffer of `rcvbuf` bytes if given (set
        before connecting, as the window scale is agreed then)."""
        raise NotImplementedError

    def client(self, cmd: list[str], timeout: float) -> subprocess.CompletedProcess:
        """A program run as an honest client (curl, ffprobe)."""
        raise NotImplementedError

    def log_mark(self) -> int:
        """A position in the daemon's log: `log_since` gives what follows."""
        raise NotImplementedError

    def log_since(self, mark: int) -> list[str]:
        raise NotImplementedError

    def sent_bytes(self, start: float, end: float) -> int | None:
        """What the camera sent a client that kept up between two
        `time.monotonic()` instants, if it is known (an emulated board's
        frame rate follows its load); None: the same in every window."""
        return None

    def blames(self, line: str) -> bool:
        """Whether a line of the daemon's log names the honest clients."""
        return f"{self.honest_peer}:" in line


def closed_within(sock: socket.socket, seconds: float) -> bytes | None:
    """What the server sent before it closed `sock` (EOF or reset), or
    None if it was still open after `seconds`."""
    got = b""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            break
        except ConnectionResetError:
            return got
        if not chunk:
            return got
        got += chunk
    return None


def send_quietly(sock: socket.socket, data: bytes) -> bool:
    """The attacker's write: whether it went out (the server may have
    closed the connection already, as it should)."""
    try:
        sock.sendall(data)
        return True
    except OSError:
        return False


def parse_head(head: bytes) -> tuple[str, list[tuple[str, str]]]:
    """The status line and the header lines of a response head."""
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = []
    for line in lines:
        k, _, v = line.partition(":")
        headers.append((k.strip().lower(), v.strip()))
    return status, headers


def tunnel_get(camera: Camera, source: str, cookie: str) -> socket.socket:
    """An RTSP-over-HTTP tunnel's GET (as live555 and FFmpeg send it),
    after the 200 that opens it."""
    get = camera.connect(source, "http", timeout=5 * camera.patience)
    get.sendall(f"GET /stream HTTP/1.0\r\nx-sessioncookie: {cookie}\r\nAccept: application/x-rtsp-tunnelled\r\n"
                "Pragma: no-cache\r\nCache-Control: no-cache\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = get.recv(1)
        assert chunk, f"the tunnel's GET was closed: {head!r}"
        head += chunk
    assert head.startswith(b"HTTP/1.1 200 ") and b"application/x-rtsp-tunnelled" in head, head
    return get


def tunnel_post(camera: Camera, source: str, cookie: str) -> socket.socket:
    post = camera.connect(source, "http", timeout=5 * camera.patience)
    post.sendall(f"POST /stream HTTP/1.0\r\nx-sessioncookie: {cookie}\r\nContent-Type: application/x-rtsp-tunnelled"
                 "\r\nContent-Length: 32767\r\n\r\n".encode())
    return post


class Viewer:
    """An RTSP client with a password, playing over TCP interleaved. A
    thread reads everything the server sends: the RTP bytes by arrival
    time (and each packet to `on_rtp`, if given), every response (in
    `responses`, and queued for `call`), and why the connection ended."""

    def __init__(self, sock: socket.socket, url: str, user: str, send: Callable[[bytes], None] | None = None,
                 patience: float = 1.0):
        self.sock, self.url, self.user, self.patience = sock, url, user, patience
        self.send = send or sock.sendall
        self.cseq, self.nc = 0, 0
        self.sent: set[str] = set()
        self.session: str | None = None
        self.challenge: dict[str, str] | None = None
        self.responses: list[Response] = []
        self.replies: queue.Queue[Response] = queue.Queue()
        self.rtp: list[tuple[float, int]] = []
        self.ended: str | None = None
        self.on_rtp: Callable[[float, bytes], None] | None = None
        self.stop = threading.Event()
        self.sock.settimeout(0.5)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        buf = bytearray()
        while not self.stop.is_set():
            try:
                chunk = self.sock.recv(1 << 16)
            except TimeoutError:
                continue
            except OSError as e:
                self.ended = f"{e!r}"
                return
            if not chunk:
                self.ended = "closed by the server"
                return
            now = time.monotonic()
            buf += chunk
            pos = 0
            while pos < len(buf):
                if buf[pos] == 0x24:  # '$': an interleaved record
                    if len(buf) - pos < 4:
                        break
                    n = int.from_bytes(buf[pos + 2:pos + 4], "big")
                    if len(buf) - pos < 4 + n:
                        break
                    if buf[pos + 1] == 0:
                        self.rtp.append((now, n))
                        if self.on_rtp:
                            self.on_rtp(now, bytes(buf[pos + 4:pos + 4 + n]))
                    pos += 4 + n
                    continue
                end = buf.find(b"\r\n\r\n", pos)
                if end < 0:
                    break
                status, lines = parse_head(bytes(buf[pos:end]))
                headers = dict(lines)
                length = int(headers.get("content-length", "0"))
                if len(buf) < end + 4 + length:
                    break
                version, code, *reason = status.split(" ", 2)
                r = Response(int(code) if code.isdigit() else 0, reason[0] if reason else status, headers,
                             bytes(buf[end + 4:end + 4 + length]), lines)
                self.responses.append(r)
                self.replies.put(r)
                pos = end + 4 + length
            del buf[:pos]

    def rtp_bytes(self, start: float, end: float) -> int:
        return sum(n for t, n in list(self.rtp) if start <= t < end)

    def authorization(self, method: str, uri: str) -> str:
        self.nc += 1
        p = {"username": self.user, "realm": self.challenge["realm"], "nonce": self.challenge["nonce"], "uri": uri,
             "algorithm": "MD5", "qop": "auth", "nc": f"{self.nc:08x}", "cnonce": "0a1b2c3d"}
        quoted = ("username", "realm", "nonce", "uri", "cnonce")
        params = [f'{k}="{v}"' if k in quoted else f"{k}={v}" for k, v in p.items()]
        return "Digest " + ", ".join(params + [f'response="{digest_response(p, method, PASSWORDS[self.user])}"'])

    def request(self, method: str, url: str, headers: dict[str, str] | None = None) -> int:
        """Sends a request (with the password once a challenge came);
        returns its CSeq."""
        self.cseq += 1
        self.sent.add(str(self.cseq))
        lines = [f"{method} {url} RTSP/1.0", f"CSeq: {self.cseq}"]
        if self.session:
            lines.append(f"Session: {self.session}")
        if self.challenge:
            lines.append(f"Authorization: {self.authorization(method, url)}")
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        self.send(("\r\n".join(lines) + "\r\n\r\n").encode())
        return self.cseq

    def reply(self, timeout: float = 5) -> Response | None:
        try:
            return self.replies.get(timeout=timeout * self.patience)
        except queue.Empty:
            return None

    def call(self, method: str, url: str, headers: dict[str, str] | None = None) -> Response:
        for _ in range(2):
            cseq = self.request(method, url, headers)
            r = self.reply()
            assert r is not None, f"{self.user}: no answer to {method} ({self.ended or 'connection open'})"
            assert r.header("cseq") == str(cseq), (method, cseq, r)
            if r.status != 401 or self.challenge:
                return r
            self.challenge = auth_params(next(v for v in r.all("www-authenticate") if "MD5" in v))
        return r

    def play(self) -> None:
        """DESCRIBE, SETUP (TCP interleaved) and PLAY, each answered 200."""
        r = self.call("DESCRIBE", self.url, {"Accept": "application/sdp"})
        assert r.status == 200, r
        r = self.call("SETUP", self.url + "/trackID=0", {"Transport": "RTP/AVP/TCP;unicast;interleaved=0-1"})
        assert r.status == 200, r
        self.session = r.header("session").split(";")[0]
        r = self.call("PLAY", self.url + "/", {"Range": "npt=now-"})
        assert r.status == 200, r

    def keepalive_answered(self) -> str | None:
        """An authenticated GET_PARAMETER: None if the next response is its
        200, else what came instead."""
        while not self.replies.empty():
            self.replies.get()
        cseq = self.request("GET_PARAMETER", self.url + "/")
        r = self.reply(3)
        if r is None:
            return f"no answer ({self.ended or 'connection open'})"
        if r.status != 200 or r.header("cseq") != str(cseq):
            return f"{r.status} {r.reason} with CSeq {r.header('cseq')} (sent CSeq {cseq})"
        return None

    def unasked(self) -> list[str]:
        """The responses to requests this client did not send."""
        return [f"{r.status} {r.reason}, CSeq {r.header('cseq')}" for r in self.responses
                if r.header("cseq") not in self.sent]

    def close(self) -> None:
        self.stop.set()
        self.sock.close()
        self.reader.join(5)


def media_kept(name: str, viewer: Viewer, before: tuple[float, float], after: tuple[float, float],
               problems: list[str], camera: Camera) -> None:
    """RTP bytes in the window after the attack must be comparable to the
    window before (a client the stream stopped for gets only what was
    queued: a few frames), as far as the camera sent as much in both."""
    b, a = viewer.rtp_bytes(*before), viewer.rtp_bytes(*after)
    sent = camera.sent_bytes(*before), camera.sent_bytes(*after)
    expected = b * sent[1] / sent[0] if sent[0] and sent[1] is not None else b
    print(f"{name}: {b} RTP bytes in the 2 s before, {a} in the 2 s after"
          + (f" (the camera sent {sent[0]} and {sent[1]})" if sent[0] is not None else ""))
    if a < expected / 2:
        problems.append(f"{name}'s media stopped: {b} bytes in the 2 s before the attack, {a} in the 2 s after"
                        + (f", while the camera sent {sent[0]} and {sent[1]}" if sent[0] is not None else ""))


# ---- 1: a leftover POST --------------------------------------------------


def leftover_post(camera: Camera) -> list[str]:
    """GET and two POSTs with its cookie from one attacker's address, then
    the GET closes: the second POST is refused and closing the GET closes
    the first. Plain RTSP clients with a password from the honest address,
    one of them on the connection slot the GET left, then get nothing of
    what the attacker writes on the first POST (an OPTIONS with CSeq 777,
    an RTCP RR+BYE, bytes that are not RTSP): no response they did not ask
    for, their next request answered, their media on, no log line blaming
    them."""
    problems: list[str] = []
    wait = 2 * camera.patience
    attacker = camera.attackers[0]
    get = tunnel_get(camera, attacker, "leftover")
    post_a = tunnel_post(camera, attacker, "leftover")
    time.sleep(0.3 * camera.patience)  # A is the tunnel's POST before B comes
    post_b = tunnel_post(camera, attacker, "leftover")
    answer = closed_within(post_b, wait)
    if answer is None or not (answer.startswith(b"HTTP/1.") and answer[9:10] == b"4"):
        problems.append(f"a second POST for a tunnel was not answered 4xx and closed: {answer!r}")
    get.close()
    if closed_within(post_a, wait) is None:
        problems.append(f"the tunnel's POST is still open {wait:g} s after its GET closed")

    # Several, so that one takes the connection slot the GET left.
    viewers = []
    try:
        for _ in range(4):
            viewers.append(Viewer(camera.connect(camera.honest, "rtsp", timeout=5 * camera.patience), camera.url,
                                  "nvr", patience=camera.patience))
        for v in viewers:
            v.play()
        time.sleep(0.5)
        before = (time.monotonic(), time.monotonic() + 2)
        time.sleep(2)
        mark = camera.log_mark()
        # Bytes that are not RTSP may end the connection they land on:
        # they go last, after the others had their chance to land.
        for data in (f"OPTIONS rtsp://{camera.host}:{camera.http_port}/stream RTSP/1.0\r\nCSeq: 777\r\n\r\n".encode(),
                     b"$\x01" + len(RR_BYE).to_bytes(2, "big") + RR_BYE,
                     # A TLS ClientHello's first bytes.
                     bytes.fromhex("160301020001000001fc0303") + bytes(range(32))):
            send_quietly(post_a, base64.b64encode(data))
            time.sleep(0.3)
        after = (time.monotonic(), time.monotonic() + 2)
        time.sleep(2)
        for n, v in enumerate(viewers):
            name = f"honest client {n} (port {v.sock.getsockname()[1]})"
            media_kept(name, v, before, after, problems, camera)
            if wrong := v.keepalive_answered():
                problems.append(f"{name}'s GET_PARAMETER was answered {wrong}")
            if stray := v.unasked():
                problems.append(f"{name} received responses to the attacker's requests: {stray}")
        blamed = [line for line in camera.log_since(mark) if camera.blames(line)]
        if blamed:
            problems.append("the log blames the honest clients' address for the attacker's bytes:\n  "
                            + "\n  ".join(blamed))
    finally:
        for v in viewers:
            v.close()
        for s in (post_a, post_b):
            s.close()
    return problems


# ---- 2: a second POST into a live tunnel ----------------------------------


def second_post(camera: Camera) -> list[str]:
    """A client with a password streams through a tunnel (GET and one
    POST); from its address (a NAT's), without credentials, a second POST
    with its cookie is refused (4xx, closed), so the interleaved RTCP
    RR+BYE and the unfinished request head written on it reach nothing:
    the client's media goes on and its next GET_PARAMETER gets 200."""
    problems: list[str] = []
    get = tunnel_get(camera, camera.honest, "live-tunnel")
    post = tunnel_post(camera, camera.honest, "live-tunnel")
    viewer = Viewer(get, f"rtsp://{camera.host}:{camera.http_port}/stream", "viewer",
                    send=lambda data: post.sendall(base64.b64encode(data)), patience=camera.patience)
    intruder = None
    try:
        viewer.play()
        time.sleep(0.5)
        before = (time.monotonic(), time.monotonic() + 2)
        time.sleep(2)
        intruder = tunnel_post(camera, camera.honest, "live-tunnel")
        answer = closed_within(intruder, 2 * camera.patience)
        if answer is None or not (answer.startswith(b"HTTP/1.") and answer[9:10] == b"4"):
            problems.append(f"a second POST into a live tunnel was not answered 4xx and closed: {answer!r}")
        for data in (b"$\x01" + len(RR_BYE).to_bytes(2, "big") + RR_BYE,
                     b"OPTIONS * RTSP/1.0\r\nCSeq: 1\r\nX-Unfinished: "):
            send_quietly(intruder, base64.b64encode(data))
            time.sleep(0.3)
        after = (time.monotonic(), time.monotonic() + 2)
        time.sleep(2)
        media_kept("the tunnel's client", viewer, before, after, problems, camera)
        if wrong := viewer.keepalive_answered():
            problems.append(f"the tunnel's client's GET_PARAMETER was answered {wrong}")
        if stray := viewer.unasked():
            problems.append(f"the tunnel's client received responses to the attacker's requests: {stray}")
    finally:
        viewer.close()
        post.close()
        if intruder:
            intruder.close()
    return problems


# ---- 3: admission ----------------------------------------------------------


class Honest:
    """New clients from the honest address, once a second: a snapshot
    with curl and a stream with ffprobe, both with Digest; counts how many
    got through."""

    def __init__(self, camera: Camera, tries: int):
        self.camera, self.tries = camera, tries
        self.failures: dict[str, list[str]] = {"snapshot": [], "rtsp": []}
        self.threads = [threading.Thread(target=self._loop, args=(kind,)) for kind in self.failures]

    def _snapshot(self) -> str | None:
        c = self.camera
        p = c.client(["curl", "-sS", "--digest", "-u", f"viewer:{PASSWORDS['viewer']}", "--max-time",
                      f"{8 * c.patience:g}", "-o", "/dev/stdout", "-w", "\n%{http_code}", f"{c.http}/snapshot.jpg"],
                     timeout=15 * c.patience)
        code = p.stdout.rsplit("\n", 1)[-1]
        return None if p.returncode == 0 and code == "200" else f"curl {p.returncode}, HTTP {code} {p.stderr.strip()}"

    def _rtsp(self) -> str | None:
        c = self.camera
        url = c.url.replace("rtsp://", f"rtsp://viewer:{PASSWORDS['viewer']}@")
        try:
            p = c.client(["ffprobe", "-v", "error", "-rtsp_transport", "tcp", "-select_streams", "v:0",
                          "-show_entries", "stream=codec_name,width,height", "-of", "csv=p=0", url],
                         timeout=10 * c.patience)
        except subprocess.TimeoutExpired:
            return f"ffprobe: no answer in {10 * c.patience:g} s"
        out = p.stdout.strip()
        return None if p.returncode == 0 and out == f"mjpeg,{c.size}" else f"ffprobe {p.returncode}: {out} " \
            f"{p.stderr.strip()[-200:]}"

    def _loop(self, kind: str) -> None:
        attempt = self._snapshot if kind == "snapshot" else self._rtsp
        start = time.monotonic()
        for n in range(self.tries):
            time.sleep(max(0.0, start + n - time.monotonic()))
            try:
                why = attempt()
            except subprocess.TimeoutExpired:
                why = "timed out"
            if why:
                self.failures[kind].append(why)

    def run(self) -> None:
        for t in self.threads:
            t.start()
        for t in self.threads:
            t.join(60 * self.camera.patience)

    def problems(self) -> list[str]:
        out = []
        for kind, failed in self.failures.items():
            print(f"new {kind} clients: {self.tries - len(failed)} of {self.tries} got through")
            if failed:
                out.append(f"new {kind} clients: {self.tries - len(failed)} of {self.tries} got through; "
                           f"first refusal: {failed[0][:300]}")
        return out


class Slowloris:
    """From each attacker address, on both ports, as many connections as
    the daemon keeps (up to PER_PORT each), each sending one more byte of
    a request head a second; what the daemon closes is opened again."""

    PER_PORT = 32

    def __init__(self, camera: Camera):
        self.camera = camera
        self.heads = {
            "http": f"GET /snapshot.jpg HTTP/1.1\r\nHost: {camera.host}\r\nX-Slow: ".encode(),
            "rtsp": f"OPTIONS rtsp://{camera.host}/stream RTSP/1.0\r\nCSeq: 1\r\nX-Slow: ".encode(),
        }
        self.stop = threading.Event()
        # Connections each address held after its latest round.
        self.held: dict[str, int] = {}
        self.threads = [threading.Thread(target=self._address, args=(a,)) for a in camera.attackers]

    def _address(self, source: str) -> None:
        conns: list[tuple[socket.socket, str, int]] = []  # socket, port, bytes sent
        try:
            while not self.stop.is_set():
                for port in self.heads:
                    for _ in range(self.PER_PORT - sum(k == port for _, k, _ in conns)):
                        try:
                            s = self.camera.connect(source, port, timeout=1 * self.camera.patience)
                        except OSError:
                            break
                        s.setblocking(False)
                        conns.append((s, port, 0))
                time.sleep(0.2)
                # What the daemon answered (503, 408) or closed is dropped.
                readable, _, _ = select.select([s for s, _, _ in conns], [], [], 0)
                for s in readable:
                    s.close()
                conns = [c for c in conns if c[0] not in readable]
                self.held[source] = len(conns)
                kept = []
                for s, port, sent in conns:
                    head = self.heads[port]
                    byte = head[sent:sent + 1] or b"a"
                    if send_quietly(s, byte):
                        kept.append((s, port, sent + 1))
                    else:
                        s.close()
                conns = kept
                self.stop.wait(0.8)
        finally:
            for s, _, _ in conns:
                s.close()

    def __enter__(self) -> Slowloris:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(10)


def slow_senders(camera: Camera, tries: int = 11) -> list[str]:
    """Slowloris from six addresses on both ports, a byte a second on as
    many connections as the daemon keeps: a new snapshot and a new RTSP
    client from the honest address each get through `tries` times of
    `tries`."""
    with Slowloris(camera) as slow:
        time.sleep(2)
        honest = Honest(camera, tries)
        honest.run()
    print(f"slow connections held at the end, per address: {slow.held}")
    return honest.problems()


def empty_onvif_posts(camera: Camera, tries: int = 11) -> list[str]:
    """96 `POST /onvif/device_service` with `Content-Length: 0` (about 70
    bytes each), sent once from six addresses and left open: each is
    answered, and new snapshot and RTSP clients from the honest address
    get through `tries` times of `tries` in the seconds after."""
    request = f"POST {DEVICE} HTTP/1.1\r\nHost: {camera.host}\r\nContent-Length: 0\r\n\r\n".encode()
    held: list[socket.socket] = []
    problems: list[str] = []
    try:
        for source in camera.attackers:
            for _ in range(16):
                s = camera.connect(source, "http", timeout=5 * camera.patience)
                s.sendall(request)
                held.append(s)
        answered: dict[socket.socket, bytes] = {}
        wait = 3 * camera.patience
        end = time.monotonic() + wait
        while len(answered) < len(held) and (left := end - time.monotonic()) > 0:
            readable, _, _ = select.select([s for s in held if s not in answered], [], [], left)
            for s in readable:
                try:
                    answered[s] = s.recv(4096)
                except OSError as e:
                    answered[s] = repr(e).encode()
        statuses = sorted({a.split(b"\r\n", 1)[0].decode("latin-1") for a in answered.values()})
        print(f"{len(request)} bytes each; {len(answered)} of {len(held)} answered: {statuses}")
        unanswered = [s for s in held if not answered.get(s, b"").startswith(b"HTTP/1.")]
        if unanswered:
            problems.append(f"{len(unanswered)} of {len(held)} requests with Content-Length: 0 got no status line "
                            f"in {wait:g} s (answers: {statuses})")
        honest = Honest(camera, tries)
        honest.run()
        problems += honest.problems()
    finally:
        for s in held:
            s.close()
    return problems


# ---- 4: an empty body -------------------------------------------------------


def curl_digest_onvif(camera: Camera) -> list[str]:
    """curl --digest sends its POST with an empty body first to get the
    challenge: that request is answered, and so GetDeviceInformation with
    nvr's password completes."""
    body = envelope(DEVICE_INFO).decode()
    start = time.monotonic()
    p = camera.client(["curl", "-sS", "--digest", "-u", f"nvr:{PASSWORDS['nvr']}", "--max-time",
                       f"{5 * camera.patience:g}", "-H", f"Content-Type: {SOAP}", "--data-binary", body,
                       "-w", "\n%{http_code}", f"{camera.http}{DEVICE}"], timeout=15 * camera.patience)
    took = time.monotonic() - start
    code = p.stdout.rsplit("\n", 1)[-1]
    if p.returncode != 0 or code != "200":
        return [f"curl --digest against ONVIF exited {p.returncode} after {took:.1f} s, HTTP {code}: "
                f"{p.stderr.strip()}"]
    if "<tds:Manufacturer>camstream</tds:Manufacturer>" not in p.stdout:
        return [f"GetDeviceInformation answered without the manufacturer: {p.stdout[:500]}"]
    return []


# ---- 5: pipelining ----------------------------------------------------------

def http_responses(sock: socket.socket, wanted: int, seconds: float) -> list[tuple[str, dict[str, str], bytes]]:
    """The responses (status line, headers, body) read on `sock` in
    `seconds`, up to `wanted`."""
    out: list[tuple[str, dict[str, str], bytes]] = []
    buf = b""
    end = time.monotonic() + seconds
    while len(out) < wanted:
        head_end = buf.find(b"\r\n\r\n")
        if head_end >= 0:
            status, lines = parse_head(buf[:head_end])
            headers = dict(lines)
            length = int(headers.get("content-length", "0"))
            if len(buf) >= head_end + 4 + length:
                # Every challenge: `headers` keeps the last of a name.
                headers["www-authenticate"] = [v for k, v in lines if k == "www-authenticate"]
                out.append((status, headers, buf[head_end + 4:head_end + 4 + length]))
                buf = buf[head_end + 4 + length:]
                continue
        if (left := end - time.monotonic()) <= 0:
            break
        sock.settimeout(left)
        try:
            chunk = sock.recv(1 << 20)
        except (TimeoutError, ConnectionResetError):
            break
        if not chunk:
            break
        buf += chunk
    return out


def pipelined_snapshots(camera: Camera, runs: int = 3) -> list[str]:
    """50 authenticated `GET /snapshot.jpg` written at once on one
    connection (Digest over a nonce from a 401, nc counting up): all 50
    answered, each a whole JPEG, within 5 s; `runs` times. The client
    reads slower than the daemon writes, as on any link slower than the
    camera's (a 64 KiB receive buffer, reading from half a second after
    it wrote): the daemon's socket fills and it must go on with the
    requests it holds when it can write again."""
    got_jpegs = []
    for _ in range(runs):
        with camera.connect(camera.honest, "http", timeout=5 * camera.patience) as s:
            s.sendall(f"GET /snapshot.jpg HTTP/1.1\r\nHost: {camera.host}\r\n\r\n".encode())
            first = http_responses(s, 1, 5 * camera.patience)
        if len(first) != 1 or not first[0][0].startswith("HTTP/1.1 401 "):
            return [f"a snapshot without credentials was answered {[r[0] for r in first]}, not 401"]
        challenge = auth_params(next(v for v in first[0][1]["www-authenticate"] if "MD5" in v))
        requests = []
        for nc in range(1, 51):
            p = {"username": "viewer", "realm": challenge["realm"], "nonce": challenge["nonce"],
                 "uri": "/snapshot.jpg", "algorithm": "MD5", "qop": "auth", "nc": f"{nc:08x}",
                 "cnonce": hashlib.md5(str(nc).encode()).hexdigest()[:16]}
            response = digest_response(p, "GET", PASSWORDS["viewer"])
            requests.append(
                f'GET /snapshot.jpg HTTP/1.1\r\nHost: {camera.host}\r\nAuthorization: Digest username="viewer", '
                f'realm="{p["realm"]}", nonce="{p["nonce"]}", uri="/snapshot.jpg", algorithm=MD5, qop=auth, '
                f'nc={p["nc"]}, cnonce="{p["cnonce"]}", response="{response}"\r\n\r\n')
        with camera.connect(camera.honest, "http", timeout=5 * camera.patience, rcvbuf=64 << 10) as s:
            start = time.monotonic()
            s.sendall("".join(requests).encode())
            time.sleep(0.5)
            got = http_responses(s, 50, 4.5 * camera.patience)
            took = time.monotonic() - start
        jpegs = sum(status.startswith("HTTP/1.1 200 ") and body[:2] == b"\xff\xd8" and body[-2:] == b"\xff\xd9"
                    for status, _, body in got)
        print(f"50 pipelined snapshots: {len(got)} answered, {jpegs} of them whole JPEGs, in {took:.2f} s")
        got_jpegs.append(jpegs)
    if got_jpegs != [50] * runs:
        return [f"whole JPEGs answered to 50 pipelined requests, in {runs} runs: {got_jpegs}"]
    return []


# ---- 6: one password fills the port ----------------------------------------

# The daemon's max_connections_per_user.
USER_SHARE = 32


def password_fill(camera: Camera, tries: int = 11) -> list[str]:
    """From each of six addresses, 16 RTSP connections that each pass one
    Digest OPTIONS as viewer, then sit idle (no session): the daemon keeps
    at most USER_SHARE of them, refusing or pushing out the rest, and new
    snapshot and RTSP clients from the honest address, viewer too, get
    through `tries` times of `tries`."""
    problems: list[str] = []
    held: list[Viewer] = []
    passed = 0
    try:
        for source in camera.attackers:
            for _ in range(16):
                try:
                    sock = camera.connect(source, "rtsp", timeout=5 * camera.patience)
                except OSError:
                    continue
                v = Viewer(sock, camera.url, "viewer", patience=camera.patience)
                held.append(v)
                try:
                    passed += v.call("OPTIONS", camera.url).status == 200
                except AssertionError:
                    pass  # answered 503, or closed
        time.sleep(0.5)
        print(f"attacker: {passed} of {len(held)} connections passed Digest, "
              f"{sum(v.ended is None for v in held)} still open")
        honest = Honest(camera, tries)
        honest.run()
        problems += honest.problems()
        time.sleep(0.5)
        still = sum(v.ended is None for v in held)
        print(f"attacker: {still} idle authenticated connections still open after the honest clients")
        if still > USER_SHARE:
            problems.append(f"the attacker holds {still} idle connections authenticated as one user, "
                            f"more than its share ({USER_SHARE})")
    finally:
        for v in held:
            v.close()
    return problems


# ---- 7: a SOAP flood --------------------------------------------------------

# Under the 64 KiB an ONVIF body may have.
FLOOD_SIZE = 64000
# The most requests of FLOOD_SIZE a second the camera's link carries
# (100 Mbit/s: a Pi 3's Ethernet). Unpaced over loopback, the sender
# measures the machine's memory bandwidth rather than a request's cost:
# some 5,000 requests a second, and comment-padded bodies, cheap before
# the fix too, then cost the H.264 viewer a third of its frames.
FLOOD_RATE = 200
WSSE = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd"
# A token that names no user: it only makes the body look signed in.
TOKEN = f'<Security xmlns="{WSSE}"><UsernameToken><Username>x</Username></UsernameToken></Security>'


def flood_body(item: Callable[[int], str], header: str = "") -> bytes:
    """GetDeviceInformation whose element carries `item(0)`, `item(1)`...
    up to FLOOD_SIZE bytes."""
    def body(items: str) -> bytes:
        return (f'<e:Envelope xmlns:e="http://www.w3.org/2003/05/soap-envelope"><e:Header>{header}</e:Header>'
                f'<e:Body><GetDeviceInformation xmlns="http://www.onvif.org/ver10/device/wsdl"{items}/>'
                f'</e:Body></e:Envelope>').encode()
    items, i = [], 0
    while len(body("".join(items))) < FLOOD_SIZE - 32:
        items.append(item(i))
        i += 1
    return body("".join(items))


# The shapes whose cost grew with the square of their count, each as it
# comes without a user and as it comes with a UsernameToken (which gets a
# body parsed whatever its size); a comment of the same size, cheap all
# along, for comparison.
FLOODS = {
    "comment": flood_body(lambda i: " ", "<!--" + "c" * (FLOOD_SIZE - 400) + "-->"),
    "attributes": flood_body(lambda i: f' a{i:x}=""'),
    "attributes, with a token": flood_body(lambda i: f' a{i:x}=""', TOKEN),
    "namespace declarations, with a token": flood_body(lambda i: f' xmlns:p{i:x}="u"', TOKEN),
}


def frames_lost(frames: list[tuple[float, int]], start: float, end: float, modulo: int) -> tuple[int, int]:
    """Frames received and lost while [start, end): `frames` are (arrival,
    media timestamp); a gap between two received frames' timestamps of
    more than 1.5 times the usual interval is the frames it skipped."""
    if len(frames) < 3:
        return len(frames), 0
    gaps = [(b[1] - a[1]) % modulo for a, b in zip(frames, frames[1:], strict=False)]
    interval = statistics.median(gaps) or 1
    got = lost = 0
    for (t, _), gap in zip(frames[1:], gaps, strict=True):
        if start <= t < end:
            got += 1
            if gap > 1.5 * interval:
                lost += round(gap / interval) - 1
    return got, lost


def packets_missed(packets: list[tuple[float, int]], start: float, end: float) -> int:
    """RTP packets missing between those that arrived while [start, end):
    `packets` are (arrival, sequence number) in arrival order."""
    return sum((b[1] - a[1] - 1) % (1 << 16) for a, b in zip(packets, packets[1:], strict=False)
               if start <= b[0] < end)


class MjpegViewer:
    """/stream.mjpg with the viewer's password (Digest), read as fast as it
    comes in a thread: each part's arrival and X-Timestamp (microseconds)."""

    def __init__(self, camera: Camera):
        self.frames: list[tuple[float, int]] = []
        self.ended: str | None = None
        self.stop = threading.Event()
        with camera.connect(camera.honest, "http") as s:
            s.sendall(f"GET /stream.mjpg HTTP/1.1\r\nHost: {camera.host}\r\n\r\n".encode())
            first = http_responses(s, 1, 5 * camera.patience)
        offered = first[0][1]["www-authenticate"]
        self.sock = camera.connect(camera.honest, "http")
        if not any("MD5" in v for v in offered):
            # Basic alone while a user is known by its password hash only.
            basic = base64.b64encode(f"viewer:{PASSWORDS['viewer']}".encode()).decode()
            self.sock.sendall(f"GET /stream.mjpg HTTP/1.1\r\nHost: {camera.host}\r\n"
                              f"Authorization: Basic {basic}\r\n\r\n".encode())
            self.sock.settimeout(0.5)
            self.reader = threading.Thread(target=self._read, daemon=True)
            self.reader.start()
            return
        challenge = auth_params(next(v for v in offered if "MD5" in v))
        p = {"username": "viewer", "realm": challenge["realm"], "nonce": challenge["nonce"], "uri": "/stream.mjpg",
             "algorithm": "MD5", "qop": "auth", "nc": "00000001", "cnonce": "5e5e5e5e"}
        self.sock.sendall(
            f'GET /stream.mjpg HTTP/1.1\r\nHost: {camera.host}\r\nAuthorization: Digest username="viewer", '
            f'realm="{p["realm"]}", nonce="{p["nonce"]}", uri="/stream.mjpg", algorithm=MD5, qop=auth, '
            f'nc={p["nc"]}, cnonce="{p["cnonce"]}", response="{digest_response(p, "GET", PASSWORDS["viewer"])}"'
            f'\r\n\r\n'.encode())
        self.sock.settimeout(0.5)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        buf = b""
        stamp = re.compile(rb"\r\nX-Timestamp: (\d+)\.(\d{6})\r\n")
        while not self.stop.is_set():
            try:
                chunk = self.sock.recv(1 << 16)
            except TimeoutError:
                continue
            except OSError as e:
                self.ended = repr(e)
                return
            if not chunk:
                self.ended = "closed by the server"
                return
            now = time.monotonic()
            buf += chunk
            # Each part's head: only its timestamp is needed (the JPEG
            # after it is not checked here).
            pos = 0
            for m in stamp.finditer(buf):
                self.frames.append((now, int(m.group(1)) * 1_000_000 + int(m.group(2))))
                pos = m.end()
            buf = buf[max(pos, len(buf) - 256):]

    def close(self) -> None:
        self.stop.set()
        self.sock.close()
        self.reader.join(5)


def soap_flood(camera: Camera, seconds: float = 4) -> list[str]:
    """Each body of FLOODS (64 KB), sent for `seconds` one after the other
    from one attacker address without a user, each answer awaited before
    the next request, up to FLOOD_RATE a second (divided by the camera's
    patience): an H.264 viewer (RTSP
    /h264) and an MJPEG viewer (/stream.mjpg) from the honest address lose
    no frame meanwhile."""
    problems: list[str] = []
    h264_frames: list[tuple[float, int]] = []
    # Each packet's arrival and sequence number: the stream's packets are
    # made once for every viewer, so a gap in them is a frame the daemon
    # made and this viewer did not get. A gap in the H.264 timestamps with
    # none in the sequence is a frame the encoder never made (its worker
    # busy, on a machine whose cores others use too): the loop's stalls,
    # which this is about, show in the MJPEG viewer's timestamps (frames
    # straight from the camera), and in these sequence numbers.
    h264_packets: list[tuple[float, int]] = []

    def on_rtp(now: float, packet: bytes) -> None:
        h264_packets.append((now, int.from_bytes(packet[2:4], "big")))
        if packet[1] & 0x80:  # the marker: a frame's last packet
            h264_frames.append((now, int.from_bytes(packet[4:8], "big")))

    h264 = Viewer(camera.connect(camera.honest, "rtsp"), camera.url.removesuffix("/stream") + "/h264", "viewer",
                  patience=camera.patience)
    h264.on_rtp = on_rtp
    mjpeg = None
    try:
        h264.play()
        mjpeg = MjpegViewer(camera)
        viewers = (("H.264 (/h264)", h264_frames, 1 << 32), ("MJPEG (/stream.mjpg)", mjpeg.frames, 1 << 64))
        # The same count over as long without a flood: what a loaded
        # machine loses anyway (a failure then is likely the machine's).
        time.sleep(1)
        quiet = time.monotonic()
        time.sleep(seconds)
        calm: dict[str, str] = {}
        for name, frames, modulo in viewers:
            got, lost = frames_lost(list(frames), quiet, quiet + seconds, modulo)
            if modulo == 1 << 32:
                lost = packets_missed(list(h264_packets), quiet, quiet + seconds)
            print(f"no flood: {name}: {got} frames, {lost} lost")
            calm[name] = f"{lost} lost in as long without a flood just before"
        attacker = camera.attackers[0]
        for shape, body in FLOODS.items():
            request = (f"POST {DEVICE} HTTP/1.1\r\nHost: {camera.host}\r\nContent-Type: {SOAP}\r\n"
                       f"Content-Length: {len(body)}\r\n\r\n").encode() + body
            statuses: dict[str, int] = {}
            sent = 0
            start = time.monotonic()
            sock = None
            while time.monotonic() < start + seconds:
                # An emulated board's link is slower in proportion.
                pace = sent * camera.patience / FLOOD_RATE
                time.sleep(max(0.0, start + pace - time.monotonic()))
                if sock is None:
                    sock = camera.connect(attacker, "http", timeout=5 * camera.patience)
                if not send_quietly(sock, request):
                    sock.close()
                    sock = None
                    continue
                sent += 1
                got = http_responses(sock, 1, 5 * camera.patience)
                status = got[0][0].split(" ", 2)[1] if got else "none"
                statuses[status] = statuses.get(status, 0) + 1
                if not got or got[0][1].get("connection", "").lower() == "close":
                    sock.close()
                    sock = None
            end = time.monotonic()
            if sock is not None:
                sock.close()
            print(f"{shape}: {sent} requests of {len(body)} bytes in {end - start:.1f} s, answered {statuses}")
            if "none" in statuses:
                problems.append(f"{shape}: {statuses['none']} of {sent} requests unanswered")
            time.sleep(0.5)  # frames sent during the attack arrive
            for name, frames, modulo in viewers:
                got, lost = frames_lost(list(frames), start, end, modulo)
                if modulo == 1 << 32:
                    missed = packets_missed(list(h264_packets), start, end)
                    print(f"  {name}: {got} frames, {lost} not made or lost, {missed} packets lost")
                    lost = missed
                else:
                    print(f"  {name}: {got} frames, {lost} lost")
                if got == 0 or lost:
                    problems.append(f"{shape}: the {name} viewer got {got} frames and lost {lost} "
                                    f"{'packets ' if modulo == 1 << 32 else ''}in {end - start:.1f} s "
                                    f"({calm[name]})")
        for name, ended in (("H.264", h264.ended), ("MJPEG", mjpeg.ended)):
            if ended:
                problems.append(f"the {name} viewer's connection ended: {ended}")
    finally:
        h264.close()
        if mjpeg:
            mjpeg.close()
    return problems


# Raspberry Pi Imager's user, known by its yescrypt hash until it signs in
# (testdata/rpi-imager), and its password.
IMAGER_USER = ("alice", "$y$jB5$moIJ2dp95xWKdB4BoYoRE/$d/e2JkVv/IKtmuzuSVMED9PeAJq2yB30KUQ/j9tQuA8",
               "Correct horse 7")


def hash_guesses(camera: Camera, seconds: float = 5) -> list[str]:
    """With Imager's user still known by its hash: each attacker address
    guesses its password over Basic, one request after another, for
    `seconds`; an H.264 viewer (RTSP /h264) and an MJPEG viewer from the
    honest address lose no frame meanwhile (the hash is checked beside the
    event loop), every guess is answered (401, or 503 while checks are
    queued), the checks go at about one a second, and afterwards the right
    password signs in."""
    problems: list[str] = []
    h264_packets: list[tuple[float, int]] = []
    h264 = Viewer(camera.connect(camera.honest, "rtsp"), camera.url.removesuffix("/stream") + "/h264", "viewer",
                  patience=camera.patience)
    h264.on_rtp = lambda now, packet: h264_packets.append((now, int.from_bytes(packet[2:4], "big")))
    mjpeg = None
    name = IMAGER_USER[0]

    def get(source: str, password: str) -> str:
        basic = base64.b64encode(f"{name}:{password}".encode()).decode()
        try:
            with camera.connect(source, "http", timeout=10 * camera.patience) as sock:
                sock.sendall(f"GET /snapshot.jpg HTTP/1.1\r\nHost: {camera.host}\r\n"
                             f"Authorization: Basic {basic}\r\n\r\n".encode())
                got = http_responses(sock, 1, 10 * camera.patience)
        except OSError as e:
            return repr(e)
        return got[0][0].split(" ", 2)[1] if got else "none"

    try:
        h264.play()
        mjpeg = MjpegViewer(camera)
        time.sleep(1)
        statuses: dict[str, int] = {}
        lock = threading.Lock()
        start = time.monotonic()

        def guess(source: str) -> None:
            n = 0
            while time.monotonic() < start + seconds:
                n += 1
                status = get(source, f"guess {source} {n}")
                with lock:
                    statuses[status] = statuses.get(status, 0) + 1

        threads = [threading.Thread(target=guess, args=(a,)) for a in camera.attackers]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60 * camera.patience)
        end = time.monotonic()
        print(f"{sum(statuses.values())} guesses from {len(camera.attackers)} addresses in {end - start:.1f} s, "
              f"answered {statuses}")
        if set(statuses) - {"401", "503"}:
            problems.append(f"guesses answered {statuses}: each must get 401 (checked) or 503 (queue full)")
        # Checked ones: at most one a second, and the queue's at the end.
        if statuses.get("401", 0) > (end - start) + 6:
            problems.append(f"{statuses.get('401')} guesses checked in {end - start:.1f} s: more than one a second")
        time.sleep(0.5)
        got, lost = frames_lost(list(mjpeg.frames), start, end, 1 << 64)
        missed = packets_missed(list(h264_packets), start, end)
        print(f"  MJPEG: {got} frames, {lost} lost; H.264: {missed} packets lost")
        if got == 0 or lost or missed:
            problems.append(f"while guesses were checked the MJPEG viewer got {got} frames and lost {lost}, "
                            f"the H.264 viewer lost {missed} packets")
        for what, ended in (("H.264", h264.ended), ("MJPEG", mjpeg.ended)):
            if ended:
                problems.append(f"the {what} viewer's connection ended: {ended}")
        # Once the guessing stops, the right password gets in (a 503 is
        # asked again, as a browser's reload would).
        for _ in range(10):
            status = get(camera.honest, IMAGER_USER[2])
            if status != "503":
                break
            time.sleep(1)
        if status != "200":
            problems.append(f"the right password after the guesses: {status}, not 200")
    finally:
        h264.close()
        if mjpeg:
            mjpeg.close()
    return problems


# The sequences in the order, by name.
SEQUENCES: dict[str, Callable[[Camera], list[str]]] = {
    "leftover POST": leftover_post,
    "second POST": second_post,
    "slow senders": slow_senders,
    "empty ONVIF POSTs": empty_onvif_posts,
    "curl --digest ONVIF": curl_digest_onvif,
    "pipelined snapshots": pipelined_snapshots,
    "one password fills a port": password_fill,
    "SOAP flood": soap_flood,
}
