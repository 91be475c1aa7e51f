"""Start-up: settings from file and flags, and one clear line and a non-zero
exit for every mistake; bad frames later are skipped, not fatal."""

from __future__ import annotations

import os
import pwd
import re
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from helpers import BIN, ROOT, Camstream, assert_frames_match, frames_of, free_port
from rtsp import Client
from test_interop import H, W, ffmpeg_client

KEYS = ["source", "width", "height", "fps", "quality", "format", "buffers", "listen", "rtsp_port", "http_port",
        "rtp_port",
        "path", "mtu", "max_clients", "client_queue", "session_timeout", "rtcp_interval", "max_request_size",
        "max_connections_per_ip", "max_connections_per_user", "request_timeout", "idle_timeout", "user", "log_level",
        "basic_auth", "nonce_lifetime", "anonymous"]


def fails(*args: str) -> str:
    """Runs camstream expecting a start-up error; returns its one line."""
    p = subprocess.run([str(BIN), "--listen", "127.0.0.1", "--rtsp-port", str(free_port()), "--http-port", "0", *args],
                       capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
    assert p.returncode != 0, p
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("camstream: error: "), lines
    return lines[0]


def test_help_documents_every_setting():
    out = subprocess.run([str(BIN), "--help"], capture_output=True, text=True, check=True).stdout
    for key in KEYS + ["config", "control"]:
        assert f"--{key.replace('_', '-')}" in out, key
    assert "[default: " in out
    # What only the file sets: its sections, and where users come from.
    after = out[out.index("Settings come from the config file"):]
    for section in ("[users.NAME]", "camstream passwd NAME", "[streams.sub]", "enabled = false", "[controls]"):
        assert section in after, (section, after)
    v = subprocess.run([str(BIN), "--version"], capture_output=True, text=True, check=True).stdout
    assert v.startswith("camstream ")


def test_config_file_and_flags(camstream, tmp_path):
    cfg = tmp_path / "camstream.toml"
    cfg.write_text('path = "cam/front"\nwidth = 320\nheight = 240\nfps = 10\n')
    cs = camstream("--config", str(cfg), "--fps", "12")
    c = Client(cs.port, path="cam/front")
    sdp = c.call("DESCRIBE").body.decode()
    assert "a=framerate:12" in sdp, "the flag wins over the file"
    assert c.setup_tcp().status == 200
    assert Client(cs.port).call("DESCRIBE").status == 404, "the old path is gone"


def test_config_mistakes(tmp_path):
    cfg = tmp_path / "camstream.toml"
    cfg.write_text("fps = 10\nrtsp_prot = 554\n")
    line = fails("--config", str(cfg))
    assert f"config {cfg}:2:1: unknown field `rtsp_prot`" in line
    cfg.write_text('fps = "fast"\n')
    assert "invalid type" in fails("--config", str(cfg))
    # What the TOML parser and the types say, with the key it is about.
    for text, error in [
        ("fps = -1\n", "1:7: fps: invalid value: integer `-1`, expected a whole number from 0 to 4294967295"),
        ('listen = "camera"\n', "1:10: listen: invalid IP address syntax"),
        ("fps = 10\n\n[streams.sub]\nwidth = 70000\n",
         "4:9: streams.sub.width: invalid value: integer `70000`, expected a whole number from 0 to 65535"),
        ('rtsp_port = "28554"\n',
         '1:13: rtsp_port: invalid type: text "28554", expected a whole number from 0 to 65535'),
        ("[streams.sub]\nsize = 1\n",
         "2:1: streams.sub.size: unknown field `size`, expected one of `enabled`, `width`, `height`, `fps`, "
         "`codec`, `quality`, `bitrate`, `gop`, `encoder`"),
        ('[users.viewer]\nmd5 = "00"\n', "1:1: users.viewer: missing field `sha256`"),
        ('[users.viewer]\npassword_hash = "$y$jB5$s$h"\nmd5 = "00"\n',
         "1:1: users.viewer: password_hash and md5/sha256 both given: a user has one or the other"),
        ("fps = 10\nfps = 12\n", "2:1: fps: duplicate key"),
        ("[controls]\nbrightness = 1\n  brightness = 2\n", "3:3: controls.brightness: duplicate key"),
        ("[streams.sub]\nfps = 1\n[streams.sub]\n", "3:10: streams.sub: duplicate key"),
        ('users.viewer.md5 = "00"\nusers.viewer.md5 = "01"\n', "2:14: users.viewer.md5: duplicate key"),
        ('[users.viewer]\nmd5 = "00"\nuser_level = "boss"\n',
         "3:14: users.viewer.user_level: unknown variant `boss`, expected one of `administrator`, `operator`, "
         "`user`"),
    ]:
        cfg.write_text(text)
        assert fails("--config", str(cfg)) == f"camstream: error: config {cfg}:{error}", text
        # The same line from `camstream passwd`, which rewrites the file.
        p = subprocess.run([str(BIN), "passwd", "nvr", "--config", str(cfg)], input="pw\n", capture_output=True,
                           text=True, timeout=10)
        assert p.returncode != 0 and p.stderr == f"camstream: error: config {cfg}:{error}\n", p.stderr
    # A value out of its range: where it came from (the flag, or the
    # file's line) and what it may be, in words.
    assert fails("--fps", "500") == "camstream: error: --fps 500: must be from 1 to 120 (a flag)"
    for text, error in [
        ("fps = 500\n", "1:7: fps = 500: must be from 1 to 120"),
        ("[streams.sub]\nwidth = 4000\n",
         "2:9: streams.sub.width = 4000: must be from 16 to the main stream's width, 1280, and even"),
        ("fps = 10\n[streams.sub]\nfps = 15\n",
         "3:7: streams.sub.fps = 15: must be from 1 to the main stream's rate, 10"),
        ('encoder = "/dev/video99"\n', '1:11: encoder = "/dev/video99": no such device (`camstream encoders` lists the '
         'kernel\'s encoders; "auto" takes one if there is one)'),
        # A password hash this camera cannot check, or would spend 1 TiB on.
        ('[users.viewer]\npassword_hash = "$6$s$h"\n', '2:17: users.viewer.password_hash = "$6$s$h": not a yescrypt '
         'hash ($y$...: what Raspberry Pi Imager and mkpasswd write)'),
        ('[users.viewer]\npassword_hash = "$y$jR5$s$h"\n', '2:17: users.viewer.password_hash = "$y$jR5$s$h": '
         'yescrypt parameters "jR5" ask for 1048576 MiB per sign-in: at most 64 MiB'),
    ]:
        cfg.write_text(text)
        assert fails("--config", str(cfg)) == f"camstream: error: config {cfg}:{error}", text
    # The flag's value is the one refused, not the file's.
    cfg.write_text("fps = 15\n")
    assert fails("--config", str(cfg), "--fps", "0") == "camstream: error: --fps 0: must be from 1 to 120 (a flag)"
    # One port for both: said, not "Address already in use" (fails() gives
    # its own ports as flags, so these run without it).
    port = str(free_port())
    cfg.write_text(f'listen = "127.0.0.1"\nrtsp_port = {port}\nhttp_port = {port}\n')
    for args, error in [(["--config", str(cfg)], f"config {cfg}:3:13: http_port = {port}"),
                        (["--listen", "127.0.0.1", "--rtsp-port", port, "--http-port", port],
                         f"--http-port {port}")]:
        p = subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
        assert p.returncode == 1, p
        said = f"camstream: error: {error}: must differ from rtsp_port (or be 0: no HTTP)"
        assert p.stderr.startswith(said), p.stderr
    assert "cannot read config" in fails("--config", str(tmp_path / "missing.toml"))
    assert "use auto, libcamera:auto, libcamera:ID, v4l2:auto, v4l2:/dev/videoN, testpattern or file:PATH" \
        in fails("--source", "webcam")
    assert "must be even" in fails("--width", "641")
    assert "use NAME=VALUE" in subprocess.run([str(BIN), "--control", "brightness"], capture_output=True,
                                              text=True).stderr
    assert "must be even" in fails("--rtp-port", "5001")


def test_port_in_use():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = subprocess.run([str(BIN), "--listen", "127.0.0.1", "--rtsp-port", str(port), "--http-port", "0"],
                           capture_output=True, text=True, timeout=20)
    assert p.returncode != 0
    assert p.stderr.strip() == (f"camstream: error: cannot listen on 127.0.0.1:{port} (rtsp_port): "
                                "Address already in use (os error 98)")


def test_unreadable_or_unsupported_files(media, tmp_path):
    assert "cannot open" in fails("--source", f"file:{tmp_path / 'nope.mjpeg'}")
    (tmp_path / "text.mjpeg").write_text("hello")
    assert "no JPEG frames in the file" in fails("--source", f"file:{tmp_path / 'text.mjpeg'}")
    # Frames the normalizer cannot repair either: 12-bit samples.
    twelve = tmp_path / "12-bit.mjpeg"
    twelve.write_bytes(twelve_bit(media))
    assert "JPEG sample precision is not 8 bits" in fails("--source", f"file:{twelve}")


def twelve_bit(media) -> bytes:
    """A frame whose SOF says 12-bit samples (the 12-bit JPEGs some
    industrial cameras make): no 8-bit decoder reads it."""
    frame = frames_of(media.ffmpeg("ffmpeg-320x240.mjpeg", "320x240", 1).read_bytes())[0]
    sof = frame.index(b"\xff\xc0")
    return frame[:sof + 4] + b"\x0c" + frame[sof + 5:]


def test_bad_frames_in_the_stream_are_skipped(camstream, media, tmp_path):
    """A file whose every fourth frame cannot be carried or repaired, and
    every tenth is cut short: those are counted and logged, the rest reach
    the client intact."""
    good = media.ffmpeg("ffmpeg-testsrc2-640x360-420.mjpeg", f"{W}x{H}", 60).read_bytes()
    bad = twelve_bit(media)
    frames = frames_of(good)
    mixed = tmp_path / "mixed.mjpeg"
    with open(mixed, "wb") as f:
        for i, fr in enumerate(frames):
            f.write(fr)
            if i % 4 == 3:
                f.write(bad)
            if i % 10 == 9:
                f.write(fr[: len(fr) // 2])  # truncated, as UVC cameras send
    cs = camstream("--source", f"file:{mixed}")
    got = ffmpeg_client(cs.url, "tcp", 60, "yuvj420p")
    ref = media.ffmpeg_reference(media.path("ffmpeg-testsrc2-640x360-420.mjpeg"), W, H, "yuvj420p")
    assert_frames_match(got, ref, min_frames=60)
    cs.wait_for("frame not sent: JPEG sample precision is not 8 bits (1 so far")
    assert cs.alive()


def test_sigterm_stops_cleanly(camstream):
    cs = camstream("--width", "160", "--height", "120")
    c = Client(cs.port)
    c.setup_tcp()
    c.play()
    assert cs.stop() == 0
    assert "stopping" in cs.log()
    assert "ended (server stopping)" in cs.log()


def test_default_port_and_url_in_the_log():
    cs = Camstream(["--width", "160", "--height", "120"])
    try:
        line = cs.wait_for("streaming ")
        assert f"rtsp://127.0.0.1:{cs.port}/stream" in line
    finally:
        assert cs.stop() == 0


def test_the_shipped_config_is_valid(tmp_path):
    """rootfs-overlay's camstream.toml, with every example uncommented, is
    read without error (checked up to opening the camera)."""
    shipped = (ROOT / "rootfs-overlay/etc/camstream.toml").read_text()
    uncommented = "\n".join(line[1:] if line.startswith("#") and "=" in line or line.startswith("#[")
                            else line for line in shipped.splitlines())
    cfg = tmp_path / "camstream.toml"
    cfg.write_text(uncommented.replace('source = "auto"', 'source = "v4l2:/dev/null"'))
    assert "/dev/null is not a V4L2 device" in fails("--config", str(cfg))


def test_camera_mistakes():
    """What the host can check without a camera (the QEMU tests use real
    V4L2 drivers): a node that is not V4L2 is a start-up error; a camera
    that is not there yet is waited for while RTSP is served, and the log
    says so, not that it streams."""
    assert fails("--source", "v4l2:/dev/null") == "camstream: error: /dev/null is not a V4L2 device"
    p = subprocess.run([str(BIN), "probe", "/dev/null"], capture_output=True, text=True, timeout=20)
    assert p.returncode != 0 and "/dev/null" in p.stderr
    cs = Camstream(["--source", "v4l2:/dev/video-absent"], wait=False)
    try:
        cs.wait_for("/dev/video-absent: No such file or directory (os error 2); waiting for /dev/video-absent")
        cs.wait_for(f"waiting for /dev/video-absent: streaming on {cs.url} starts once it is there")
        c = Client(cs.port)
        assert c.call("DESCRIBE").status == 200
        assert c.setup_tcp().status == 200
        assert c.call("PLAY").status == 200
    finally:
        assert cs.stop() == 0
    assert not [line for line in cs.lines if "streaming " in line and "waiting for" not in line], cs.log()


def test_check_gets_a_frame_or_says_why(camstream):
    """`camstream check`, the firmware's health check after an update: one
    whole frame over RTP/TCP, decoded, from every stream camstream serves
    (JPEG and H.264); a clear reason when there is none; a 4xx ends it at
    once (trying again would get the same)."""
    cs = camstream("--source", "testpattern", "--width", "640", "--height", "480")
    root = cs.url.removesuffix("/stream")
    for path, size, codec in [("stream", "640x480", "JPEG"), ("h264", "640x480", "H.264"),
                              ("sub", "640x360", "JPEG")]:
        ok = subprocess.run([str(BIN), "check", f"{root}/{path}", "--timeout", "10"], capture_output=True, text=True,
                            timeout=30)
        assert ok.returncode == 0, ok.stderr
        said = rf"{root}/{path}: {size} frame, \d+ bytes \({codec}\), after \d+ ms\n"
        assert re.fullmatch(said, ok.stdout), ok.stdout
    # Asked to try for ten minutes, it stops at the first answer.
    bad = subprocess.run([str(BIN), "check", cs.url + "/nothing", "--timeout", "600"], capture_output=True, text=True,
                         timeout=30)
    assert bad.returncode == 1, bad
    assert bad.stderr == f"camstream: error: {cs.url}/nothing: not tried again: DESCRIBE answered 404 Not Found\n", \
        bad.stderr
    url = f"rtsp://127.0.0.1:{free_port()}/stream"
    gone = subprocess.run([str(BIN), "check", url, "--timeout", "2"], capture_output=True, text=True, timeout=30)
    assert gone.returncode == 1, gone
    assert gone.stderr.startswith(f"camstream: error: no frame from {url} within 2 s: connecting"), gone.stderr


def test_check_waits_for_a_full_camera(camstream):
    """453 (max_clients reached) is not a final answer: clients leave, and
    an update's health check must not fail for them. The check tries again
    and gets its frame once the one client there has gone."""
    cs = camstream("--source", "testpattern", "--width", "320", "--height", "240", "--max-clients", "1")
    holder = Client(cs.port)
    assert holder.setup_tcp().status == 200
    check = subprocess.Popen([str(BIN), "check", cs.url, "--timeout", "30"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    cs.wait_for("SETUP refused: 453")
    holder.call("TEARDOWN", holder.url + "/")
    holder.close()
    out, err = check.communicate(timeout=60)
    assert check.returncode == 0, err
    assert f"{cs.url}: 320x240 frame, " in out, out
    assert "SETUP answered 453 Not Enough Bandwidth" in err and "trying again" in err, err


def silent_server(answer_until: str | None) -> tuple[socket.socket, str]:
    """A server that answers RTSP requests until `answer_until` (a method; None
    answers nothing) and then says nothing more, keeping the connection open:
    a daemon stuck on its way up or a stream that never starts."""
    sdp = b"v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=x\r\nt=0 0\r\nm=video 0 RTP/AVP 26\r\na=control:track1\r\n"
    listener = socket.create_server(("127.0.0.1", 0))
    url = f"rtsp://127.0.0.1:{listener.getsockname()[1]}/stream"

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            buf = b""
            while answer_until:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(4096)
                    if not data:
                        return
                    buf += data
                head, buf = buf.split(b"\r\n\r\n", 1)
                method = head.split()[0].decode()
                cseq = next(line for line in head.split(b"\r\n") if line.lower().startswith(b"cseq:")).split(b":")[1]
                body = sdp if method == "DESCRIBE" else b""
                conn.sendall(b"RTSP/1.0 200 OK\r\nCSeq:" + cseq + b"\r\nSession: 1\r\nContent-Type: application/sdp\r\n"
                             b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
                if method == answer_until:
                    break
            while conn.recv(4096):  # until the client gives up
                pass

    threading.Thread(target=serve, daemon=True).start()
    return listener, url


def test_check_says_where_a_server_went_silent():
    for answer_until, said in [(None, "waiting for the answer to DESCRIBE: the server sent nothing for "),
                               ("PLAY", "0 RTP packets but no whole frame in the ")]:
        listener, url = silent_server(answer_until)
        with listener:
            p = subprocess.run([str(BIN), "check", url, "--timeout", "2"], capture_output=True, text=True, timeout=30)
        assert p.returncode == 1, p
        assert said in p.stderr, p.stderr


def test_check_tries_a_new_connection_after_a_silent_one(camstream):
    """One connection that stays silent (a stuck session) does not fail the
    check while the server can still serve a fresh one; it is told on stderr."""
    cs = camstream("--source", "testpattern", "--width", "640", "--height", "480")
    listener = socket.create_server(("127.0.0.1", 0))
    url = f"rtsp://127.0.0.1:{listener.getsockname()[1]}/stream"

    def pipe(a: socket.socket, b: socket.socket) -> None:
        while data := a.recv(65536):
            b.sendall(data)
        b.shutdown(socket.SHUT_WR)

    def serve() -> None:
        silent, _ = listener.accept()
        with silent:
            second, _ = listener.accept()
            upstream = socket.create_connection(("127.0.0.1", cs.port))
            threading.Thread(target=pipe, args=(upstream, second), daemon=True).start()
            pipe(second, upstream)

    threading.Thread(target=serve, daemon=True).start()
    with listener:
        p = subprocess.run([str(BIN), "check", url, "--timeout", "30"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert f"{url}: 640x480 frame, " in p.stdout, p.stdout
    notes = p.stderr.strip().splitlines()
    assert len(notes) == 1, p.stderr
    said = "camstream check: waiting for the answer to DESCRIBE: the server sent nothing for 10."
    assert notes[0].startswith(said), notes
    assert notes[0].endswith("trying again"), notes


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping privileges needs root")
def test_drops_root_after_binding(camstream):
    """Started as root with `--user nobody`: serves as nobody, with no
    capabilities and no way back."""
    cs = camstream("--user", "nobody", "--width", "160", "--height", "120")
    status = dict(line.split(":", 1) for line in Path(f"/proc/{cs.proc.pid}/status").read_text().splitlines())
    assert status["Uid"].split()[0] == status["Uid"].split()[1] == str(pwd.getpwnam("nobody").pw_uid), status["Uid"]
    assert int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0, status
    assert status["NoNewPrivs"].strip() == "1"
    assert Client(cs.port).call("OPTIONS").status == 200
    cs.wait_for("running as nobody")


def test_passwd_leaves_a_kept_password_to_the_files_owner_alone(tmp_path):
    """`camstream passwd NAME --config FILE` writes the new text beside FILE
    and renames it over (a new inode, nothing left beside it), keeping the
    owner, and the mode while the file holds digests only; once it holds a
    password kept for ONVIF (`--onvif`, this user's or another's), only
    the owner may read it: 0600, whatever it was."""
    cfg = tmp_path / "camstream.toml"
    cfg.write_text("fps = 15\n")
    os.chown(cfg, 4321, 4322)
    cfg.chmod(0o644)

    def passwd(*args: str) -> tuple[str, int, int, int]:
        p = subprocess.run([str(BIN), "passwd", *args, "--config", str(cfg)], input="a password\n", text=True,
                           capture_output=True, timeout=10)
        assert p.returncode == 0, p.stderr
        st = cfg.stat()
        return oct(st.st_mode & 0o7777), st.st_uid, st.st_gid, st.st_ino

    *kept, ino = passwd("viewer")
    assert kept == ["0o644", 4321, 4322], kept
    *kept, new_ino = passwd("nvr", "--onvif")
    assert kept == ["0o600", 4321, 4322], kept
    assert new_ino != ino, "written in place, not renamed over"
    text = cfg.read_text()
    assert text.startswith("fps = 15\n") and 'onvif_password = "a password"' in text, text
    # Another user, no --onvif: nvr's password is still in the file.
    cfg.chmod(0o644)
    assert passwd("viewer")[:3] == ("0o600", 4321, 4322)
    # A world-readable leftover of an interrupted run beside it is not
    # written into (a second link to it shows what it holds afterwards).
    leftover = tmp_path / "camstream.toml.new"
    leftover.write_text("")
    leftover.chmod(0o666)
    seen = tmp_path / "seen"
    os.link(leftover, seen)
    assert passwd("nvr", "--onvif")[:3] == ("0o600", 4321, 4322)
    assert seen.read_text() == "", "the password went into a world-readable file"
    seen.unlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["camstream.toml"]


def test_passwd_sets_a_user_level_and_keeps_the_rest(tmp_path):
    """`camstream passwd NAME --user-level LEVEL` writes ONVIF's user level
    into that user's table only; the file's comments and other users stay,
    and a new password without the flag keeps the level."""
    cfg = tmp_path / "camstream.toml"

    def passwd(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(BIN), "passwd", *args, "--config", str(cfg)], input="a password\n", text=True,
                              capture_output=True, timeout=10)

    cfg.write_text("# the camera\nfps = 15\n")
    assert passwd("nvr").returncode == 0
    assert passwd("viewer").returncode == 0
    before = cfg.read_text().replace("[users.viewer]\n", "[users.viewer]\n# the front door's screen\n")
    cfg.write_text(before)
    p = passwd("viewer", "--user-level", "user")
    assert p.returncode == 0, p.stderr
    text = cfg.read_text()
    nvr, _, viewer = text.partition("[users.viewer]\n")
    assert nvr == before.partition("[users.viewer]\n")[0], text
    assert viewer.startswith("# the front door's screen\n") and viewer.endswith('user_level = "user"\n'), text
    assert text.count("user_level") == 1, text
    # A new password alone: the level stays.
    assert passwd("viewer").returncode == 0
    assert 'user_level = "user"' in cfg.read_text()
    assert passwd("viewer", "--user-level", "operator").returncode == 0
    assert cfg.read_text().count("user_level") == 1 and 'user_level = "operator"' in cfg.read_text()
    # Printed without --config too; a level ONVIF does not have is refused.
    p = subprocess.run([str(BIN), "passwd", "cam", "--user-level", "administrator"], input="pw\n", text=True,
                       capture_output=True, timeout=10)
    assert p.returncode == 0 and 'user_level = "administrator"' in p.stdout, p
    p = passwd("viewer", "--user-level", "boss")
    assert p.returncode != 0 and "administrator, operator or user" in p.stderr, p.stderr
