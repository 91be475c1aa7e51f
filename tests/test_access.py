"""Who may watch the firmware's stream, and what its daemon may touch, as on
a board on a network: booted with scripts/qemu --password-needed, so that
the host's clients count as the network's. A fresh camera serves only
itself; users come from camstream-password.txt on the boot partition; the
daemon runs as user camstream, without capabilities, and keeps the camera
across an unplug."""

from __future__ import annotations

import re
import subprocess

import requests

import guest
from helpers import run
from rtsp import Client

CONFIG = "/data/etc/camstream.toml"
PASSWORDS = "/boot/firmware/camstream-password.txt"


firmware = guest.firmware_fixture(testdrive=False, password_needed=True)


def status(firmware: guest.Guest, method: str = "DESCRIBE") -> int:
    c = Client(firmware.rtsp_port, timeout=20)
    try:
        return c.call(method).status
    finally:
        c.close()


def test_a_fresh_camera_serves_only_itself(firmware):
    assert status(firmware) == 403
    assert status(firmware, "OPTIONS") == 403
    # HTTP keeps the same rule: port 80, forwarded from the host.
    r = requests.get(f"http://127.0.0.1:{firmware.http_port}/snapshot.jpg", timeout=20)
    assert r.status_code == 403 and "no user is set" in r.text, (r.status_code, r.text)
    log = firmware.sh("logread | grep camstream")
    assert "no user is set: only clients on this machine may stream" in log, log
    assert "request refused: 403, no user is set" in log, log
    # On the camera itself (the OTA health check's way in), it streams.
    out = firmware.sh("camstream check --config /data/etc/camstream.toml")
    assert re.search(r"rtsp://127\.0\.0\.1:554/stream: 1280x720 frame", out), out


def test_the_daemon_runs_as_its_own_user(firmware):
    pid = firmware.sh("pidof camstream").split()[0]
    st = dict(line.split(":", 1) for line in firmware.sh(f"cat /proc/{pid}/status").splitlines() if ":" in line)
    uid = firmware.sh("sed -n 's/^camstream:x:\\([0-9]*\\):.*/\\1/p' /etc/passwd").strip()
    gid = firmware.sh("sed -n 's/^camstream:x:\\([0-9]*\\):.*/\\1/p' /etc/group").strip()
    assert uid and uid != "0" and gid and gid != "0"
    assert st["Uid"].split() == [uid] * 4, st["Uid"]
    assert st["Gid"].split() == [gid] * 4, st["Gid"]
    # Group video for the camera, audio for the sound card.
    video, audio = (firmware.sh(f"sed -n 's/^{name}:x:\\([0-9]*\\):.*/\\1/p' /etc/group").strip()
                    for name in ("video", "audio"))
    assert sorted(st["Groups"].split()) == sorted([video, audio, gid]), st["Groups"]
    for caps in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert int(st[caps], 16) == 0, (caps, st[caps])
    assert st["NoNewPrivs"].strip() == "1"
    # Its config (users' digests) is root's, readable by its group only; the
    # camera's nodes are group video's.
    assert firmware.sh(f"ls -ln {CONFIG}").split()[:4] == ["-rw-r-----", "1", "0", gid]
    assert firmware.sh("ls -ln /dev/video0").split()[0:4:3] == ["crw-rw----", video]
    # What it holds open: the camera, sockets, its log pipe (made and
    # unlinked by the init script), the random source, nothing else on disk.
    fds = firmware.sh(f"ls -l /proc/{pid}/fd | sed -n 's/.* -> //p'").split()
    files = [f for f in fds if f.startswith("/") and not f.startswith("/dev/video")]
    assert set(files) <= {"/dev/null", "/dev/urandom", "/run/camstream.log"}, fds


def test_the_camera_comes_back_to_the_unprivileged_daemon(firmware):
    firmware.sh("echo vivid.0 > /sys/bus/platform/drivers/vivid/unbind")
    firmware.wait_for("logread | grep camstream", "camera lost")
    firmware.sh("sleep 2; echo vivid.0 > /sys/bus/platform/drivers/vivid/bind")
    firmware.wait_for("logread | grep camstream", "camera back after")
    out = firmware.sh("camstream check --config /data/etc/camstream.toml")
    assert "1280x720 frame" in out, out


def test_users_from_the_boot_partition(firmware, tmp_path):
    # As written on a PC (CRLF), a comment, a password with ':' in it.
    firmware.sh(f"printf '# viewers\\r\\nviewer:pass:word\\r\\nnvr:nvr-secret' > {PASSWORDS}")
    since = firmware.log_since_mark()
    firmware.sh("/etc/init.d/S50camstream restart")
    firmware.wait_for(f"{since} | grep camstream", "2 user\\(s\\) may stream")
    assert firmware.sh(f"ls {PASSWORDS} 2>&1", check=False).strip().endswith("No such file or directory")
    cfg = firmware.sh(f"cat {CONFIG}")
    assert "[users.viewer]" in cfg and "[users.nvr]" in cfg, cfg
    assert "pass:word" not in cfg and "nvr-secret" not in cfg
    assert firmware.sh(f"ls -ln {CONFIG}").split()[0] == "-rw-r-----"
    # The network: asked for a password, refused a wrong one, let in with it.
    assert status(firmware) == 401
    url = f"rtsp://nvr:nvr-secret@127.0.0.1:{firmware.rtsp_port}/stream"
    got = run(["ffmpeg", "-v", "error", "-rtsp_transport", "tcp", "-i", url, "-frames:v", "5",
               "-f", "rawvideo", "-pix_fmt", "gray", "-"], timeout=120).stdout
    assert len(got) == 5 * 1280 * 720
    wrong = subprocess.run(["ffprobe", "-v", "error", url.replace("nvr-secret", "nvr-guess")],
                           capture_output=True, text=True, timeout=60)
    assert wrong.returncode != 0 and "401" in wrong.stderr, wrong.stderr
    # The camera itself now answers the password request too: with the
    # password's ':' percent-encoded in a URL, or the stored digests.
    out = firmware.sh("camstream check rtsp://viewer:pass%3Aword@127.0.0.1/stream")
    assert "1280x720 frame" in out, out
    assert "1280x720 frame" in firmware.sh("camstream check --config /data/etc/camstream.toml")


def test_a_wrong_password_file_is_kept_and_said_why(firmware):
    # Each wrong line with its own reason (the third's was the second's).
    firmware.sh(f"printf 'viewer:new-one\\nbad\\001name:pw\\nno colon here\\nnvr:\\n' > {PASSWORDS}")
    since = firmware.log_since_mark()
    firmware.sh("/etc/init.d/S50camstream restart")
    firmware.wait_for(f"{since} | grep camstream", "streaming ")
    log = firmware.sh("logread | grep camstream-password.txt")
    reasons = re.findall(r"camstream-password.txt line (\d): want NAME:PASSWORD \((.*)\); the file is kept", log)
    assert [n for n, _ in reasons] == ["2", "3", "4"], log
    assert reasons[0][1].startswith('"bad\\u{1}name": a user name has 1-64 characters'), reasons
    assert reasons[1][1] == "no ':' after the name", reasons
    assert reasons[2][1] == "no password after ':'", reasons
    assert "camstream-password.txt line 2" in firmware.console_text
    # Kept (nothing lost), the good line applied, the camera still serving.
    assert firmware.sh(f"cat {PASSWORDS}").startswith("viewer:new-one")
    out = firmware.sh("camstream check rtsp://viewer:new-one@127.0.0.1/stream")
    assert "1280x720 frame" in out, out
    firmware.sh(f"rm {PASSWORDS}")
