#!/usr/bin/env python3
"""Records what a real RTSP client sends to camstream, for tests/testdata/.

    tests/record_transcript.py NAME CAMSTREAM_PORT [PATH] -- CLIENT COMMAND WITH {url} ...

Listens on a free port, relays to camstream on 127.0.0.1:CAMSTREAM_PORT, runs
the client with {url} replaced by the relay's URL (rtsp://127.0.0.1:PORT/PATH,
PATH stream unless given, such as h264), and {hostport} by its host and port, and writes
tests/testdata/rtsp/NAME.rtsp (the client's RTSP requests, byte for byte) and,
if the client sent RTCP over the connection, app/camstream-rtp/testdata/rtcp/
NAME.rtcp (one packet per line, hex). RTP/RTCP over UDP does not pass through
the relay. The client runs in an empty folder (openRTSP writes what it
receives there) and may fail (a wrong password is worth recording too): its
exit status is printed.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "testdata" / "rtsp"
OUT_RTCP = ROOT / "app" / "camstream-rtp" / "testdata" / "rtcp"


def split_client_stream(data: bytes) -> tuple[bytes, list[bytes]]:
    """Separates RTSP requests from interleaved ($) packets."""
    requests, rtcp = b"", []
    while data:
        if data[:1] == b"$":
            n = int.from_bytes(data[2:4], "big")
            if data[1] % 2 == 1:
                rtcp.append(data[4:4 + n])
            data = data[4 + n:]
            continue
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            requests += data
            break
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        requests += head + sep + rest[:length]
        data = rest[length:]
    return requests, rtcp


def main() -> None:
    name, port = sys.argv[1], int(sys.argv[2])
    split = sys.argv.index("--")
    path = sys.argv[3] if split > 3 else "stream"
    command = sys.argv[split + 1:]
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    hostport = f"127.0.0.1:{listener.getsockname()[1]}"
    url = f"rtsp://{hostport}/{path}"
    sent = bytearray()

    def relay() -> None:
        client, _ = listener.accept()
        server = socket.create_connection(("127.0.0.1", port))

        def pump(src, dst, log) -> None:
            try:
                while chunk := src.recv(65536):
                    if log is not None:
                        log += chunk
                    dst.sendall(chunk)
            except OSError:
                pass
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        back = threading.Thread(target=pump, args=(server, client, None))
        back.start()
        pump(client, server, sent)
        back.join()

    t = threading.Thread(target=relay, daemon=True)
    t.start()
    with tempfile.TemporaryDirectory() as folder:
        status = subprocess.run([a.replace("{url}", url).replace("{hostport}", hostport) for a in command],
                                timeout=60, cwd=folder,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    t.join(5)
    requests, rtcp = split_client_stream(bytes(sent))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{name}.rtsp").write_bytes(requests)
    if rtcp:
        OUT_RTCP.mkdir(parents=True, exist_ok=True)
        (OUT_RTCP / f"{name}.rtcp").write_text("".join(p.hex() + "\n" for p in rtcp))
    print(f"{name}: {requests.count(b'RTSP/1.0')} requests, {len(rtcp)} RTCP packets; the client exited {status}")


if __name__ == "__main__":
    main()
