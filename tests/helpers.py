"""What the system tests share: the camstream binary started on free ports,
the clients' command lines and their known quirks, test media made by real
encoders (FFmpeg, libjpeg-turbo's cjpeg) and reference decodes of that media
by the same decoders the clients use, and the figures a run measures. The
fixtures built on them are conftest.py's."""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from itertools import pairwise
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(os.environ.get("CAMSTREAM_BIN", ROOT / "app/target/release/camstream"))


def free_port(kind=socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Camstream:
    """A camstream process; stderr is collected for assertions. On the
    host it listens on 127.0.0.1 and free ports; with `netns` (a namespace
    of the test's own, where every port is free) on `host` and the default
    ports, or `ports` (RTSP, HTTP) beside another camstream there."""

    def __init__(self, args: list[str], wait: bool = True, netns: str | None = None, host: str = "127.0.0.1",
                 ports: tuple[int, int] | None = None):
        self.host = host
        self.port, self.http_port = ports or ((8554, 8080) if netns else (free_port(), free_port()))
        self.args = [str(BIN), "--listen", host, "--rtsp-port", str(self.port),
                     "--http-port", str(self.http_port), *args]
        # `ip netns exec` execs the command: the process is camstream itself.
        cmd = ["ip", "netns", "exec", netns, *self.args] if netns else self.args
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if wait:
            self.wait_for("streaming ")

    @property
    def url(self) -> str:
        return f"rtsp://{self.host}:{self.port}/stream"

    @property
    def http(self) -> str:
        return f"http://{self.host}:{self.http_port}"

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def log(self) -> str:
        # The process may have exited before the reader took its last lines
        # from the pipe: once it has, read to the pipe's end first.
        if self.proc.poll() is not None:
            self._reader.join(5)
        return "\n".join(self.lines)

    def wait_for(self, text: str, timeout: float = 20) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for line in self.lines:
                if text in line:
                    return line
            if self.proc.poll() is not None:
                self._reader.join(2)
                raise AssertionError(f"camstream exited ({self.proc.returncode}):\n{self.log()}")
            time.sleep(0.05)
        raise AssertionError(f"no {text!r} in camstream's log:\n{self.log()}")

    def rss_kb(self) -> int:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(2)
        return self.proc.returncode


def run(cmd: list[str], timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, timeout=timeout, capture_output=True, **kw)
    if p.returncode != 0:
        # What the program said, not only that it failed.
        err = p.stderr if isinstance(p.stderr, str) else p.stderr.decode(errors="replace")
        raise AssertionError(f"{' '.join(map(str, cmd))}\nexited {p.returncode}:\n{err[-4000:]}")
    return p


class Namespaces(NamedTuple):
    """Two network namespaces joined by a veth pair: the camera's, its end
    of the pair named `cam_if`, and its clients'."""
    cam: str
    client: str
    cam_if: str


@contextlib.contextmanager
def veth_namespaces(cam_address: str = "192.0.2.1",
                    client_addresses: Sequence[str] = ("192.0.2.2",)) -> Iterator[Namespaces]:
    """The camera's namespace with `cam_address` and the clients' with
    `client_addresses` (all /24; the first is the one clients send from
    unless they bind another), removed afterwards. What is sent there,
    multicast included, stays there."""
    assert os.geteuid() == 0 and shutil.which("ip"), "network namespaces need root and iproute2's ip"
    tag = f"{os.getpid() % 100000}"
    cam, client = f"cs-cam-{tag}", f"cs-cli-{tag}"
    cam_if, client_if = f"csc{tag}", f"csn{tag}"
    cmds = [["ip", "netns", "add", cam], ["ip", "netns", "add", client],
            ["ip", "link", "add", cam_if, "type", "veth", "peer", "name", client_if],
            ["ip", "link", "set", cam_if, "netns", cam], ["ip", "link", "set", client_if, "netns", client],
            ["ip", "-n", cam, "addr", "add", f"{cam_address}/24", "dev", cam_if],
            *(["ip", "-n", client, "addr", "add", f"{a}/24", "dev", client_if] for a in client_addresses),
            ["ip", "-n", cam, "link", "set", "lo", "up"], ["ip", "-n", client, "link", "set", "lo", "up"],
            ["ip", "-n", cam, "link", "set", cam_if, "up"], ["ip", "-n", client, "link", "set", client_if, "up"]]
    try:
        for c in cmds:
            run(c, timeout=10)
        yield Namespaces(cam, client, cam_if)
    finally:
        for ns in (cam, client):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


@contextlib.contextmanager
def in_netns(name: str) -> Iterator[None]:
    """The calling thread in network namespace `name` (made by `ip netns
    add`); the sockets it makes meanwhile stay in that namespace after."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if _libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {name}")
        try:
            yield
        finally:
            if _libc.setns(home, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back")
    finally:
        os.close(target)
        os.close(home)


# GStreamer 1.22's RTSP connection reports any blocking write that fails
# before a byte is out as end-of-file (writev_bytes in gstrtspconnection.c),
# a write its own flush cancelled included. When the pipeline stops, rtspsrc
# queues PAUSE and at once CLOSE, which flushes the connection: if that lands
# while PAUSE is being written, rtspsrc posts "Could not send message.
# (Received end-of-file)" from gst_rtspsrc_pause although the server never saw
# the PAUSE, and then sends TEARDOWN on the same connection and gets its 200.
# A server that really closed the connection fails differently: "Could not
# receive message", or an error from gst_rtspsrc_close (its TEARDOWN).
GST_ERROR = re.compile(r"^ERROR: from element .*\nAdditional debug info:\n.*: (\w+) \(\): .*\n(.*)$", re.M)


def gst_stopped_cleanly(returncode: int, output: str) -> bool:
    """True if gst-launch succeeded, or failed only by rtspsrc's PAUSE race."""
    if returncode == 0:
        return True
    errors = GST_ERROR.findall(output)
    return (returncode == 1 and output.count("ERROR:") == len(errors)
            and ("gst_rtspsrc_pause", "Could not send message. (Received end-of-file)") in errors
            and all(fn in ("gst_rtspsrc_try_send", "gst_rtspsrc_pause")
                    and msg == "Could not send message. (Received end-of-file)" for fn, msg in errors))


def gst_launch(args: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    """gst-launch-1.0 -q ARGS, failing on any error but rtspsrc's PAUSE race."""
    cmd = ["gst-launch-1.0", "-q", *args]
    p = subprocess.run(cmd, timeout=timeout, capture_output=True, text=True)
    assert gst_stopped_cleanly(p.returncode, p.stdout + p.stderr), \
        f"{' '.join(cmd)}\nexited {p.returncode}:\n{(p.stdout + p.stderr)[-4000:]}"
    return p


def live555_frames(folder: Path) -> list[bytes]:
    """The JPEG files openRTSP -F PREFIX wrote in `folder`, in order (named
    PREFIXvideo-JPEG-1-SECONDS by their presentation time)."""
    return [f.read_bytes() for f in sorted(folder.glob("*video-JPEG-*"),
                                           key=lambda f: float(f.name.rsplit("-", 1)[1]))]


class Media:
    """MJPEG streams made by real encoders, and how they decode."""

    def __init__(self, root: Path):
        self.root = root

    def path(self, name: str) -> Path:
        return self.root / name

    def ffmpeg(self, name: str, size: str, frames: int, pix_fmt: str = "yuvj420p",
               huffman: str = "default", quality: int = 4, src: str = "testsrc2") -> Path:
        """`ffmpeg -f mjpeg` output: a concatenated MJPEG stream."""
        out = self.path(name)
        if not out.exists():
            run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", f"{src}=size={size}:rate=30",
                 "-frames:v", str(frames), "-c:v", "mjpeg", "-pix_fmt", pix_fmt, "-huffman", huffman,
                 "-q:v", str(quality), "-f", "mjpeg", str(out)])
        return out

    def cjpeg(self, name: str, size: str, frames: int, args: list[str]) -> Path:
        """Frames encoded one by one with libjpeg-turbo's cjpeg, concatenated."""
        out = self.path(name)
        if not out.exists():
            ppm = self.path(name + ".ppm.d")
            ppm.mkdir(exist_ok=True)
            run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", f"testsrc2=size={size}:rate=30",
                 "-frames:v", str(frames), str(ppm / "%04d.ppm")])
            with open(out, "wb") as f:
                for p in sorted(ppm.glob("*.ppm")):
                    f.write(run(["cjpeg", *args, str(p)]).stdout)
        return out

    def jpegtran(self, name: str, src: Path, args: list[str]) -> Path:
        """Each frame of `src` through libjpeg-turbo's jpegtran (lossless)."""
        out = self.path(name)
        if not out.exists():
            with open(out, "wb") as f:
                for frame in frames_of(src.read_bytes()):
                    f.write(run(["jpegtran", *args], input=frame).stdout)
        return out

    @staticmethod
    def frame_size(w: int, h: int, pix_fmt: str) -> int:
        return {"yuvj420p": w * h * 3 // 2, "yuv420p": w * h * 3 // 2, "yuvj422p": w * h * 2,
                "I420": w * h * 3 // 2, "rgb24": w * h * 3, "gray": w * h, "Y42B": w * h * 2}[pix_fmt]

    def ffmpeg_reference(self, path: Path, w: int, h: int, pix_fmt: str) -> list[bytes]:
        """Frames as FFmpeg's decoder outputs them."""
        raw = run(["ffmpeg", "-v", "error", "-f", "mjpeg", "-i", str(path), "-f", "rawvideo",
                   "-pix_fmt", pix_fmt, "-"]).stdout
        return split(raw, self.frame_size(w, h, pix_fmt))

    def gst_reference(self, path: Path, w: int, h: int, fmt: str) -> list[bytes]:
        """Frames as GStreamer's jpegdec (libjpeg-turbo) outputs them."""
        out = path.with_suffix(".gst.raw")
        run(["gst-launch-1.0", "-q", "filesrc", f"location={path}", "!", "jpegdec",
             "!", "videoconvert", "!", f"video/x-raw,format={fmt}", "!", "filesink", f"location={out}"])
        return split(out.read_bytes(), self.frame_size(w, h, fmt))


def frames_of(data: bytes) -> list[bytes]:
    """The frames of a concatenated MJPEG stream made by FFmpeg or cjpeg (no
    embedded thumbnails, so each EOI ends a frame; 0xFFD9 cannot occur in
    entropy-coded data)."""
    out, pos = [], 0
    while (start := data.find(b"\xff\xd8", pos)) >= 0:
        end = data.find(b"\xff\xd9", start) + 2
        out.append(data[start:end])
        pos = end
    return out


def split(raw: bytes, size: int) -> list[bytes]:
    assert size and len(raw) % size == 0, (len(raw), size)
    return [raw[i:i + size] for i in range(0, len(raw), size)]


def digest(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def assert_frames_match(received: list[bytes], reference: list[bytes], min_frames: int,
                        consecutive: bool = True) -> None:
    """Every received frame is pixel-identical to a source frame, in source
    order (the file source loops); with `consecutive`, none is missing."""
    index = {digest(f): i for i, f in enumerate(reference)}
    assert len(index) == len(reference), "reference frames must differ from each other"
    positions = []
    for n, f in enumerate(received):
        d = digest(f)
        assert d in index, f"frame {n} of {len(received)} matches no source frame (corrupt or re-encoded)"
        positions.append(index[d])
    assert len(received) >= min_frames, f"only {len(received)} frames received, wanted {min_frames}"
    for a, b in pairwise(positions):
        step = (b - a) % len(reference)
        if consecutive:
            assert step == 1, f"frames out of order or lost: {positions}"
        else:
            assert step >= 1, f"frames out of order or repeated: {positions}"


FIGURES: list[str] = []


def figure(line: str) -> None:
    """A measured figure: printed with the test's output and again in the
    run's summary, so that CI logs show it."""
    print(line)
    FIGURES.append(line)


# The 75 % colour bars (white, yellow, cyan, green, magenta, red, blue,
# black) as RGB: what the test pattern draws, and vivid's and vimc's
# test pattern generator.
BARS_75 = [(191, 191, 191), (191, 191, 0), (0, 191, 191), (0, 191, 0),
           (191, 0, 191), (191, 0, 0), (0, 0, 191), (0, 0, 0)]


def colour_bars(frames: list[bytes], w: int, bars_h: int, each_row: bool = False) -> list[tuple[int, int, int]]:
    """Each of eight vertical bars' colour in decoded RGB frames (rgb24, `w`
    wide; bars in the top `bars_h` rows): a small patch at the bar's centre
    averaged, at three heights (`each_row`: every row, one row high), the
    median over those and the frames (a moving box or text covers a patch
    in some, never in most)."""
    out = []
    ys = range(bars_h) if each_row else (bars_h // 4, bars_h // 2, bars_h * 3 // 4)
    high = 1 if each_row else 4
    for bar in range(8):
        x0 = (2 * bar + 1) * w // 16 - w // 64
        samples = []
        for f in frames:
            for y in ys:
                rows = [f[(y + dy) * w * 3 + x0 * 3:(y + dy) * w * 3 + (x0 + w // 32) * 3] for dy in range(high)]
                px = b"".join(rows)
                samples.append(tuple(round(sum(px[c::3]) / (len(px) // 3)) for c in range(3)))
        out.append(tuple(sorted(s[c] for s in samples)[len(samples) // 2] for c in range(3)))
    return out


def bars_off(got: list[tuple[int, int, int]], want: list[tuple[int, int, int]]) -> int:
    """The largest difference of any bar's R, G or B from its true value."""
    return max(abs(a - b) for g, t in zip(got, want, strict=True) for a, b in zip(g, t, strict=True))


def bench_module():
    """scripts/bench as a module: its builds of the peers (go2rtc,
    mediamtx) and of the Go they are built with."""
    import importlib.util
    import sys
    from importlib.machinery import SourceFileLoader

    loader = SourceFileLoader("bench", str(ROOT / "scripts/bench"))
    bench = importlib.util.module_from_spec(importlib.util.spec_from_loader("bench", loader))
    sys.modules["bench"] = bench  # its dataclasses look their module up
    loader.exec_module(bench)
    return bench


def go2rtc() -> Path:
    """go2rtc's binary, built from the Go module proxy as scripts/bench
    builds it (once per machine: kept in Go's module cache)."""
    return bench_module().build_peer("go2rtc")


def go2rtc_relay(conf: Path, source: str) -> tuple[subprocess.Popen, int]:
    """go2rtc relaying `source` as its stream `cam`, served over RTSP on
    127.0.0.1 (and nothing else listening); the process and its RTSP port.
    Its log is the process's output."""
    port, api = free_port(), free_port()
    conf.write_text(f"""log:
  level: warn
api:
  listen: "127.0.0.1:{api}"
rtsp:
  listen: "127.0.0.1:{port}"
webrtc:
  listen: ""
srtp:
  listen: ""
rtmp:
  listen: ""
streams:
  cam: "{source}"
""")
    p = subprocess.Popen([str(go2rtc()), "-c", str(conf)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return p, port


def go2rtc_decode(conf: Path, source: str, size: tuple[int, int], frames: int = 30) -> tuple[list[bytes], str]:
    """go2rtc relaying `source`, and FFmpeg decoding `frames` pictures of
    what it serves over RTSP: the pictures (grey, `size`; none if FFmpeg's
    output is not whole pictures), and what FFmpeg and go2rtc said."""
    relay, port = go2rtc_relay(conf, source)
    try:
        out = subprocess.run(["ffmpeg", "-v", "error", "-rtsp_transport", "tcp", "-i",
                              f"rtsp://127.0.0.1:{port}/cam", "-frames:v", str(frames), "-f", "rawvideo",
                              "-pix_fmt", "gray", "-"], capture_output=True, timeout=60)
    finally:
        relay.terminate()
        log = relay.communicate(timeout=10)[0].decode(errors="replace")
    said = out.stderr.decode(errors="replace") + log
    one = size[0] * size[1]
    return (split(out.stdout, one) if len(out.stdout) % one == 0 else []), said


def picture_gray(jpeg: bytes, w: int = 64, h: int = 36) -> bytes:
    """A JPEG's luma, scaled to w x h (FFmpeg), for what a picture shows:
    how bright it is, which side is dark."""
    return run(["ffmpeg", "-v", "error", "-f", "image2pipe", "-c:v", "mjpeg", "-i", "-", "-vf", f"scale={w}:{h}",
                "-pix_fmt", "gray", "-f", "rawvideo", "-"], input=jpeg, timeout=30).stdout


def sides(gray: bytes, w: int = 64, h: int = 36) -> tuple[float, float]:
    """Mean luma of the left and right eighths of the picture's lower half
    (below vivid's text)."""
    rows = range(h // 2, h)
    left = [gray[r * w + c] for r in rows for c in range(w // 8)]
    right = [gray[r * w + c] for r in rows for c in range(w - w // 8, w)]
    return sum(left) / len(left), sum(right) / len(right)
