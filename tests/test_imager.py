"""Raspberry Pi Imager's OS customisation, as a user meets it: the
rpi-preseed.toml Imager 2.0.11.1 writes on the card's boot partition (made
by Imager's own generator: testdata/rpi-imager/README.md), our sdcard.img
with it booted under QEMU, on the virt board and the emulated Raspberry Pi
3. At the first boot the camera takes the host name (answered over mDNS),
the SSH key (root logs in with it; a password never), the Wi-Fi network
(wpa_supplicant's file: no radio here) and the user, whose password the
camera then asks for (Imager's hash checked at the first sign-in, then
Digest for RTSP too), deletes the file, and says what it does not take. A
file with a wrong value is kept and nothing applied."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest
import requests

import guest
from helpers import ROOT, run

IMAGER = ROOT / "tests/testdata/rpi-imager"
PRESEED = IMAGER / "rpi-imager-2.0.11.1-rpi-preseed.toml"
NAME = "cam-garden"


def card_with(board: str, tmp_path: Path, files: dict[str, bytes]) -> Path:
    """A copy of `board`'s sdcard.img with `files` on its boot partition (the
    first of the MBR), as Imager leaves them after writing the card."""
    card = tmp_path / "sdcard.img"
    subprocess.run(["cp", "--sparse=always", str(guest.image_of(board) / "sdcard.img"), str(card)], check=True)
    with card.open("rb") as f:
        mbr = f.read(512)
    assert mbr[510:] == b"\x55\xaa"
    start = struct.unpack_from("<I", mbr, 446 + 8)[0] * 512
    for name, data in files.items():
        src = tmp_path / name
        src.write_bytes(data)
        subprocess.run(["mcopy", "-o", "-i", f"{card}@@{start}", str(src), f"::{name}"], check=True)
    return card


def ssh(g: guest.Guest, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    key = tmp_path / "key"
    if not key.exists():
        shutil.copy(IMAGER / "imager-test-key", key)
        key.chmod(0o600)
    return subprocess.run(["ssh", "-p", str(g.ssh_port), "-o", "StrictHostKeyChecking=no",
                           "-o", f"UserKnownHostsFile={tmp_path / 'known_hosts'}", "-o", "BatchMode=yes",
                           "-o", "ConnectTimeout=30", "-i", str(key), *args],
                          capture_output=True, text=True, timeout=120)


# The emulated Pi repeats the virt board's test (pytest -m slow): its
# SD card and USB network under TCG are slow enough on a loaded machine
# that CI runs the virt board's alone.
@pytest.mark.parametrize("board", ["qemu_aarch64", pytest.param("rpi3_64", marks=pytest.mark.slow)])
def test_imagers_settings_at_the_first_boot(board, tmp_path):
    guest.build(board)
    card = card_with(board, tmp_path, {"rpi-preseed.toml": PRESEED.read_bytes()})
    g = guest.Guest(board=board, image=card, ssh=True, testdrive=False, wait=False)
    try:
        # The emulated Pi reads its kernel off the SD card slowly.
        g.wait_booted(timeout=300)
        g.wait_for("logread | grep camstream", "streaming ", timeout=120)
        console = g.console_text
        assert "Applying Raspberry Pi Imager's settings: OK" in console, console
        # What the camera does not take, said where the one setting it up
        # looks.
        assert 'preseed: not applied: locale.timezone = "Europe/London"' in console, console
        assert g.sh("hostname").strip() == NAME
        # The file is gone from the boot partition: it held the Wi-Fi key.
        assert "rpi-preseed.toml" not in g.sh("ls /boot/firmware")
        wpa = g.sh("cat /data/etc/wpa_supplicant.conf")
        assert "country=GB" in wpa and "ssid=47617264656e2057692d4669" in wpa, wpa
        assert "psk=ea114401cc10e72a143cd33f5af994e28869d962392e8c6a1e755bde98b9cdf4" in wpa, wpa
        assert g.sh("ls -ln /data/etc/wpa_supplicant.conf").split()[0] == "-rw-------"
        # The name over mDNS, on the camera's own network.
        nic = g.sh("ip -o -4 addr show scope global | awk '{ print $2; exit }'").strip()
        # Asked again (up to a minute) until mdnsd, started late in the
        # boot, answers: the emulated Pi under load once took longer than
        # one query's 3 s.
        for _ in range(15):
            out = g.sh(f"mquery -i {nic} -l debug -w 3 -t 1 {NAME}.local 2>&1")
            if f"Got Answer: Name: {NAME}.local., Type: 1" in out:
                break
        assert f"Got Answer: Name: {NAME}.local., Type: 1" in out, out
        # The stream has a password from the first boot: Imager's user's.
        # The page asks with Basic alone until it signs in once (its hash
        # checked beside the loop); then Digest, for RTSP too.
        assert 'camstream user "alice" (level user)' in g.sh("logread | grep preseed")
        snapshot = f"http://127.0.0.1:{g.http_port}/snapshot.jpg"
        r = requests.get(snapshot, timeout=30)
        assert r.status_code == 401 and r.raw.headers.getlist("WWW-Authenticate") == ['Basic realm="camstream"'], \
            r.headers
        assert requests.get(snapshot, auth=("alice", "Correct horse 8"), timeout=60).status_code == 401
        r = requests.get(snapshot, auth=("alice", "Correct horse 7"), timeout=60)
        assert r.status_code == 200 and r.content[:2] == b"\xff\xd8", r.status_code
        url = f"rtsp://alice:Correct%20horse%207@127.0.0.1:{g.rtsp_port}/stream"
        out = run(["ffprobe", "-v", "error", "-rtsp_transport", "tcp", "-show_entries", "stream=codec_name",
                   "-of", "csv=p=0", url], timeout=120).stdout.decode().strip()
        assert out == "mjpeg", out
        # The digests learnt are kept in the one file the daemon may write.
        assert g.sh("ls -ln /data/etc/camstream.digests.toml").split()[0] == "-rw-------"
        assert "[users.alice]" in g.sh("cat /data/etc/camstream.digests.toml")
        # Root logs in with Imager's key; a password is never asked for.
        out = ssh(g, tmp_path, "root@127.0.0.1", "hostname")
        assert out.returncode == 0 and out.stdout.strip() == NAME, out
        out = ssh(g, tmp_path, "-o", "PubkeyAuthentication=no", "-o",
                  "PreferredAuthentications=password,keyboard-interactive", "root@127.0.0.1", "true")
        assert out.returncode != 0 and "Permission denied (publickey)" in out.stderr, out
    finally:
        g.close()


def test_a_wrong_value_applies_nothing_and_keeps_the_file(tmp_path):
    board = "qemu_aarch64"
    guest.build(board)
    wrong = PRESEED.read_text().replace('country = "GB"', 'country = "Britain"')
    card = card_with(board, tmp_path, {"rpi-preseed.toml": wrong.encode()})
    g = guest.Guest(board=board, image=card, testdrive=False)
    try:
        console = g.console_text
        assert ('preseed: /boot/firmware/rpi-preseed.toml: wlan.country = "Britain": must be a two-letter '
                "country code (ISO 3166), e.g. \"GB\"; nothing applied, the file is kept") in console, console
        assert "rpi-preseed.toml" in g.sh("ls /boot/firmware")
        assert g.sh("hostname").strip() != NAME
        assert g.sh("ls /data/etc/wpa_supplicant.conf 2>&1", check=False).strip().endswith("No such file or directory")
    finally:
        g.close()
