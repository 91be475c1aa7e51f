"""The firmware on a network, as a user meets it under QEMU: DHCP on the
virtio NIC through user networking, the link going down and up, a static
address, the hostname and its mDNS announcement, ntpd with no server to
reach and the clock stepped by hand, SSH with a key only, and the Wi-Fi and
SSH files left on the boot partition, and an NVR finding the camera by
WS-Discovery on a second network. One boot (a snapshot); the guest can open
no connection out."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
import time
import urllib.parse
from itertools import pairwise

import pytest

import guest
from helpers import figure
from rtsp import Client
from test_onvif import LISTENER, PROBE_CLIENT

BOOT = "/boot/firmware"
CONF = "/data/etc/network.conf"
# QEMU's first NIC has MAC 52:54:00:12:34:56: the default name ends in 3456.
NAME = "camstream-3456"


firmware = guest.firmware_fixture(testdrive=False, ssh=True)


def streams(firmware: guest.Guest, timeout: float = 60) -> None:
    try:
        firmware.first_frame(timeout=timeout)
    except TimeoutError as e:
        raise AssertionError(firmware.diagnose()) from e


def test_dhcp_gives_the_address_and_the_name(firmware):
    assert firmware.sh("hostname").strip() == NAME
    # Chosen at the first boot and kept: interfaces come up in no fixed order.
    assert firmware.sh("cat /data/etc/hostname.default").strip() == NAME
    assert "inet 10.0.2.15/24" in firmware.sh("ip -4 addr show dev eth0")
    log = firmware.sh("logread | grep -E 'network|udhcpc'")
    assert "eth0: link up, asking for an address (DHCP)" in log, log
    assert "lease of 10.0.2.15 obtained" in log, log
    # udhcpc tells the DHCP server the name, and asks for time servers.
    assert re.search(rf"udhcpc .*-x hostname:{NAME} -O ntpsrv", firmware.sh("ps")), firmware.sh("ps")
    assert re.search(rf"camstream: rtsp://{NAME}\.local/stream \(rtsp://10\.0\.2\.15/stream\)",
                     firmware.console_text), firmware.console_text
    # RTSP on its own port, 554, reached through QEMU's forwarded port.
    assert ":554 " in firmware.sh("netstat -ltn")
    streams(firmware)


def test_the_link_going_down_and_up(firmware):
    since = firmware.log_since_mark()
    firmware.qmp("set_link", name="net", up=False)
    firmware.wait_for(f"{since} | grep network", "eth0: link down", timeout=30)
    assert "inet " not in firmware.sh("ip -4 addr show dev eth0")
    assert not firmware.sh("pidof udhcpc", check=False).strip(), "no DHCP client while the link is down"
    firmware.qmp("set_link", name="net", up=True)
    firmware.wait_for(f"{since} | grep udhcpc", "lease of 10.0.2.15 obtained", timeout=60)
    streams(firmware)


def test_an_interface_plugged_in_later(firmware):
    """A second network card hot-plugged (as a USB Ethernet adapter would
    be), on a network of its own: mdev reports it, it gets ifplugd and a
    DHCP lease; unplugged, its daemons go."""
    firmware.qmp("netdev_add", type="user", id="net2", net="10.0.3.0/24", restrict=True)
    since = firmware.log_since_mark()
    firmware.qmp("device_add", driver="virtio-net-pci", netdev="net2", bus="hp0", id="nic2", mac="52:54:00:12:34:57")
    firmware.wait_for(f"{since} | grep udhcpc", r"eth1: 10\.0\.3\.15/24", timeout=60)
    assert "ifplugd -i eth1" in firmware.sh("ps")
    firmware.qmp("device_del", id="nic2")
    firmware.wait_for("ps | grep -c '[i]fplugd -i eth1'", "^0", timeout=60)
    assert not firmware.sh("ls /sys/class/net/eth1 2>/dev/null", check=False).strip()
    streams(firmware)


def query_until(firmware: guest.Guest, command: str, answer: str, timeout: float = 30) -> None:
    """Runs `command` again until its output has `answer`; fails after
    `timeout` seconds without it."""
    deadline = time.monotonic() + timeout
    while True:
        out = firmware.sh(command)
        if answer in out:
            return
        assert time.monotonic() < deadline, f"no {answer!r} within {timeout} s:\n{out}"


def test_mdns_answers_to_the_name_and_lists_the_stream(firmware):
    services = firmware.sh("cat /run/mdns.d/rtsp.service")
    assert services.split("\n")[:4] == [f"name {NAME}", "type _rtsp._tcp", "port 554", "txt path=/stream"]
    # A query on the camera's own network (QEMU's user network carries no
    # multicast to the host): the name's address record, then a browse.
    # Asked again while unanswered, as a resolver does: mdnsd takes the
    # interfaces up anew after they change (the tests before this one take
    # the link down and plug a card in and out), and under a loaded
    # emulator one 3 s query once went unanswered.
    query_until(firmware, f"mquery -i eth0 -l debug -w 3 -t 1 {NAME}.local 2>&1",
                f"Got Answer: Name: {NAME}.local., Type: 1")
    query_until(firmware, "mquery -i eth0 -w 4 2>&1", f"+ {NAME}._rtsp._tcp.local. (10.0.2.15)")
    # The web page, on HTTP's own port, at its root.
    services = firmware.sh("cat /run/mdns.d/http.service")
    assert services.split("\n")[:4] == [f"name {NAME}", "type _http._tcp", "port 80", "txt path=/"]
    query_until(firmware, "mquery -i eth0 -w 4 2>&1", f"+ {NAME}._http._tcp.local. (10.0.2.15)")


def test_an_nvr_on_a_second_network_finds_the_camera(firmware, tmp_path):
    """The image on a network with multicast (QEMU's user network has none):
    a second card hot-plugged onto a tap device that sits in a network
    namespace of its own, with a DHCP server and an NVR there. The camera
    follows the new address: it says Hello there, answers the NVR's Probe
    with that address, and its device service answers there."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.fail("a tap device in a network namespace needs root and iproute2's ip")
    tag = f"{os.getpid() % 100000}"
    ns, tap = f"cs-nvr-{tag}", f"cstap{tag}"
    subprocess.run(["ip", "tuntap", "add", "dev", tap, "mode", "tap"], check=True, timeout=10)
    listener = udhcpd = None
    try:
        firmware.qmp("netdev_add", type="tap", id="net3", ifname=tap, script="no", downscript="no")
        # Into the NVR's namespace once QEMU holds it: QEMU opens it by name.
        for c in (["ip", "netns", "add", ns], ["ip", "link", "set", tap, "netns", ns],
                  ["ip", "-n", ns, "addr", "add", "198.51.100.1/24", "dev", tap],
                  ["ip", "-n", ns, "link", "set", "lo", "up"], ["ip", "-n", ns, "link", "set", tap, "up"]):
            subprocess.run(c, check=True, timeout=10)
        (tmp_path / "udhcpd.conf").write_text(
            f"interface {tap}\nstart 198.51.100.10\nend 198.51.100.20\nmax_leases 10\n"
            f"lease_file {tmp_path}/leases\npidfile {tmp_path}/udhcpd.pid\noption subnet 255.255.255.0\n")
        (tmp_path / "leases").write_bytes(b"")
        udhcpd = subprocess.Popen(["ip", "netns", "exec", ns, "busybox", "udhcpd", "-f", str(tmp_path / "udhcpd.conf")],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        listener = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", LISTENER, "198.51.100.1", "20"],
                                    stdout=subprocess.PIPE, text=True)
        assert listener.stdout.readline().strip() == "READY"
        since = firmware.log_since_mark()
        firmware.qmp("device_add", driver="virtio-net-pci", netdev="net3", bus="hp0", id="nic3",
                     mac="52:54:00:12:34:58")
        address = firmware.wait_for(f"{since} | grep udhcpc", r"eth1: (198\.51\.100\.[0-9]+)/24", timeout=60).group(1)
        xaddr = f"http://{address}/onvif/device_service"
        found = ""
        deadline = time.monotonic() + 30
        while "FOUND" not in found and time.monotonic() < deadline:
            found = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", PROBE_CLIENT],
                                   capture_output=True, text=True, timeout=60).stdout
        line = next((x for x in found.splitlines() if x.startswith("FOUND")), None)
        assert line, "no ProbeMatches:\n" + firmware.sh("logread | grep camstream | tail -20")
        _, epr, xaddrs, *scopes = line.split()
        assert epr.startswith("urn:uuid:") and xaddrs == xaddr, line
        assert {"onvif://www.onvif.org/Profile/Streaming", f"onvif://www.onvif.org/name/{NAME}"} <= set(scopes), line
        # The board as its device tree names it (QEMU's virt board:
        # "linux,dummy-virt"), one percent-encoded path segment.
        model = firmware.sh("tr -d '\\000' </proc/device-tree/model").strip()
        assert f"onvif://www.onvif.org/hardware/{urllib.parse.quote(model, safe='-._~')}" in scopes, (line, model)
        # The device service at that address, from the NVR (QEMU's image is
        # anonymous: no password).
        body = ('<?xml version="1.0"?><s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope"><s:Body>'
                '<GetDeviceInformation xmlns="http://www.onvif.org/ver10/device/wsdl"/></s:Body></s:Envelope>')
        answer = subprocess.run(["ip", "netns", "exec", ns, "curl", "-sS", "--fail", "-H",
                                 "Content-Type: application/soap+xml; charset=utf-8", "--data-binary", "@-", xaddr],
                                input=body, capture_output=True, text=True, timeout=60)
        assert "<tds:Manufacturer>camstream</tds:Manufacturer>" in answer.stdout, answer
        listener.terminate()
        heard = listener.communicate(timeout=30)[0]
        hellos = [m for m in heard.split("GOT ")[1:] if "<d:Hello>" in m]
        assert any(xaddr in m and epr in m for m in hellos), heard
    finally:
        for p in (listener, udhcpd):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        firmware.qmp("device_del", id="nic3")
        firmware.wait_for("ls /sys/class/net | grep -c eth1", "^0", timeout=60)
        firmware.qmp("netdev_del", id="net3")
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", tap], capture_output=True)
    streams(firmware)


def announced(firmware, heard: int, timeout: float = 30) -> None:
    """Waits until the console, past its first `heard` characters, has
    said where the stream is at 10.0.2.15."""
    end = time.monotonic() + timeout
    while not re.search(r"camstream: rtsp://\S+ \(rtsp://10\.0\.2\.15/", firmware.console_text[heard:]):
        assert time.monotonic() < end, f"no stream address on the console:\n{firmware.console_text[heard:][-2000:]}"
        firmware.sh("sleep 0.5")


def test_a_static_address_then_a_wrong_one(firmware):
    firmware.sh(f"cp {CONF} /tmp/network.conf.saved")
    try:
        # The address QEMU's forwarded port leads to, set by hand.
        firmware.sh(f"sed -i 's|^address =.*|address = 10.0.2.15/24|; s|^gateway =.*|gateway = 10.0.2.2|;"
              f" s|^dns =.*|dns = 10.0.2.3 192.0.2.53|' {CONF}")
        since = firmware.log_since_mark()
        heard = len(firmware.console_text)
        firmware.sh("/etc/init.d/S40network restart")
        firmware.wait_for(f"{since} | grep network", r"eth0: link up, 10\.0\.2\.15/24 via 10\.0\.2\.2 \(static")
        # The stream's address goes to the console just after that log
        # line: waited for, or it lands inside the next command's output
        # (it once came back as pidof's).
        announced(firmware, heard)
        assert not firmware.sh("pidof udhcpc", check=False).strip()
        assert "default via 10.0.2.2 dev eth0" in firmware.sh("ip route")
        assert firmware.sh("cat /etc/resolv.conf").split() == ["nameserver", "10.0.2.3", "nameserver", "192.0.2.53"]
        streams(firmware)
        # A mistake is said on the console and DHCP takes over: still reachable.
        firmware.sh(f"sed -i 's|^address =.*|address = 10.0.2.15|' {CONF}")
        since = firmware.log_since_mark()
        firmware.sh("/etc/init.d/S40network restart")
        firmware.wait_for(f"{since} | grep udhcpc", "lease of 10.0.2.15 obtained")
        assert "address 10.0.2.15 in /data/etc/network.conf is not ADDRESS/PREFIX: using DHCP" in firmware.console_text
        streams(firmware)
    finally:
        firmware.sh(f"cp /tmp/network.conf.saved {CONF}; /etc/init.d/S40network restart")


def hostname(g: guest.Guest) -> str:
    """The guest's host name. Marked: a daemon's line to the console (camstream
    says its new address when the name changes) can come amid the output."""
    m = re.search(r"^name=(\S*)$", g.sh("echo name=$(hostname)"), re.M)
    assert m, "no host name"
    return m[1]


def test_a_hostname_from_the_settings(firmware):
    firmware.sh(f"cp {CONF} /tmp/network.conf.saved")
    try:
        firmware.sh(f"sed -i 's|^hostname =.*|hostname = porch-cam|' {CONF}")
        firmware.sh("/etc/init.d/S40network restart && /etc/init.d/S50mdnsd restart")
        assert hostname(firmware) == "porch-cam"
        firmware.wait_for("mquery -i eth0 -l debug -w 3 -t 1 porch-cam.local 2>&1",
                    r"Got Answer: Name: porch-cam\.local\., Type: 1", timeout=30)
        # Not a host name: said, and the default used.
        firmware.sh(f"sed -i 's|^hostname =.*|hostname = porch_cam!|' {CONF}")
        firmware.sh("/etc/init.d/S40network restart")
        assert hostname(firmware) == NAME
        assert 'hostname "porch_cam!" in /data/etc/network.conf is not a host name' in firmware.console_text
    finally:
        firmware.sh(f"cp /tmp/network.conf.saved {CONF}; /etc/init.d/S40network restart; /etc/init.d/S50mdnsd restart")
    assert hostname(firmware) == NAME


def test_ntpd_runs_and_fails_quietly(firmware):
    # scripts/qemu points it at the guest itself, where no server answers.
    assert re.search(r"ntpd -S /usr/lib/camstream/ntp-event -p 127\.0\.0\.1", firmware.sh("ps"))
    log = firmware.sh("logread | grep ntpd")
    assert "ntpd: asking 127.0.0.1" in log, log
    boot = firmware.console_text.split("Please press Enter to activate this console.")[0]
    # On the console, its init script's "Starting ntpd: " line and nothing else.
    assert "daemon.err" not in log and boot.count("ntpd") == boot.count("Starting ntpd: ") == 1, log + boot
    streams(firmware)


def sender_reports_and_frames(c: Client, seconds: float):
    """RTP timestamps of marked packets, and (NTP seconds, RTP time) of sender reports."""
    frames, reports = [], []
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        c.sock.settimeout(left)
        try:
            m = c.read_message()
        except (TimeoutError, OSError):
            break
        if not isinstance(m, tuple):
            continue
        ch, pkt = m
        if ch == 0 and pkt[1] & 0x80:
            frames.append(struct.unpack("!I", pkt[4:8])[0])
        elif ch == 1 and pkt[1] == 200:
            sec, frac, rtp = struct.unpack("!III", pkt[8:20])
            reports.append((sec + frac / 2**32, rtp, time.monotonic()))
    return frames, reports


def test_the_clock_set_by_hand_keeps_the_rtp_timeline(firmware):
    """As when ntpd's first answer steps the clock at boot: RTP time goes on
    without a jump, the next sender report follows the new wall clock and
    comes at once, not rtcp_interval later."""
    c = Client(firmware.rtsp_port, timeout=20)
    try:
        assert c.setup_tcp().status == 200 and c.play().status == 200
        before, reports_before = sender_reports_and_frames(c, 3)
        since = firmware.log_since_mark()
        firmware.sh('date -s "@$(( $(date +%s) + 3600 ))" >/dev/null')
        stepped = time.monotonic()
        after, reports_after = sender_reports_and_frames(c, 4)
    finally:
        c.close()
    assert re.search(r"wall clock stepped by \+3[56]\d\d\.\d{3} s", firmware.sh(f"{since} | grep camstream"))
    timeline = before + after
    steps = [(b - a) % 2**32 for a, b in pairwise(timeline)]
    # 12.5 fps is 7200 ticks a frame. While the console runs `date` the
    # client reads nothing, and frames are dropped for it (a busy CI
    # machine: more than four once): a gap of seconds at most, where the
    # step would be a jump of an hour (324,000,000 ticks).
    assert steps and all(0 < s <= 5 * 90000 for s in steps), steps
    assert sum(s > 4 * 7200 for s in steps) <= 1, steps
    assert reports_before and reports_after, (reports_before, reports_after)
    ntp0, rtp0, _ = reports_before[-1]
    ntp1, rtp1, at = reports_after[0]
    moved = (ntp1 - ntp0) - ((rtp1 - rtp0) % 2**32) / 90000
    assert 3590 < moved < 3610, moved
    assert at - stepped < 3, "a sender report right after the step"
    firmware.sh('date -s "@$(( $(date +%s) - 3600 ))" >/dev/null')


def test_ssh_with_a_key_from_the_boot_partition_and_never_a_password(firmware, tmp_path):
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test", "-f", str(key)], check=True)
    ssh = ["ssh", "-p", str(firmware.ssh_port), "-o", "StrictHostKeyChecking=no",
           "-o", f"UserKnownHostsFile={tmp_path / 'known_hosts'}", "-o", "BatchMode=yes",
           "-o", "ConnectTimeout=20"]
    # Before a key: no SSH at all.
    assert "no SSH key (authorized_keys on the boot partition, README): SSH stays off" in firmware.sh("logread")
    assert ":22 " not in firmware.sh("netstat -ltn")
    # As written on a PC: CRLF line ends.
    public = key.with_suffix(".pub").read_text().strip()
    firmware.sh(f"printf '%s\\r\\n' '{public}' > {BOOT}/authorized_keys")
    firmware.sh("/etc/init.d/S50dropbear start && /etc/init.d/S50mdnsd restart")
    assert firmware.sh(f"ls {BOOT}/authorized_keys 2>&1", check=False).strip().endswith("No such file or directory")
    assert firmware.sh("cat /data/etc/ssh/authorized_keys").strip() == public
    assert firmware.sh("ls -ln /data/etc/ssh/authorized_keys").split()[0] == "-rw-------"
    out = subprocess.run([*ssh, "-i", str(key), "root@127.0.0.1", "id -u; hostname"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.split() == ["0", NAME], out
    # No password is ever asked for.
    out = subprocess.run([*ssh, "-o", "PubkeyAuthentication=no", "-o",
                          "PreferredAuthentications=password,keyboard-interactive", "root@127.0.0.1", "true"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "Permission denied (publickey)" in out.stderr, out
    # A second key is added to the first; the host key stays what it was.
    fingerprint = firmware.sh("dropbearkey -y -f /data/etc/dropbear/dropbear_ed25519_host_key | grep Fingerprint")
    firmware.sh(f"printf 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIO4VY6rzWeSPVjiZaK3vTXK2mSdeUqIdGZH6JMKbyxfR second\\n'"
          f" > {BOOT}/authorized_keys")
    firmware.sh("/etc/init.d/S50dropbear restart")
    assert firmware.sh("grep -c ssh-ed25519 /data/etc/ssh/authorized_keys").strip() == "2"
    key = "/data/etc/dropbear/dropbear_ed25519_host_key"
    assert firmware.sh(f"dropbearkey -y -f {key} | grep Fingerprint") == fingerprint
    assert "_ssh._tcp" in firmware.sh("cat /run/mdns.d/ssh.service")


def test_wifi_settings_from_the_boot_partition(firmware):
    """No radio under QEMU: what happens to the file is what is checked."""
    firmware.sh(f"printf 'ctrl_interface=/run/wpa_supplicant\\r\\ncountry=GB\\r\\nnetwork={{\\r\\n"
          f"  ssid=\"home\"\\r\\n  psk=\"a long passphrase\"\\r\\n}}\\r\\n' > {BOOT}/wpa_supplicant.conf")
    since = firmware.log_since_mark()
    firmware.sh("/etc/init.d/S40network restart")
    assert firmware.sh(f"ls {BOOT}/wpa_supplicant.conf 2>&1", check=False).strip().endswith("No such file or directory")
    conf = firmware.sh("cat /data/etc/wpa_supplicant.conf")
    assert "\r" not in conf and "country=GB" in conf and 'psk="a long passphrase"' in conf, conf
    assert firmware.sh("ls -ln /data/etc/wpa_supplicant.conf").split()[0] == "-rw-------"
    log = firmware.sh(f"{since} | grep -E 'setup|network'")
    assert "wpa_supplicant.conf from the boot partition is now /data/etc/wpa_supplicant.conf" in log, log
    assert "country" not in log, log
    # Without a country or a network: kept, and said on the console.
    firmware.sh(f"printf 'network={{\\n  ssid=\"home\"\\n}}\\n' > {BOOT}/wpa_supplicant.conf")
    firmware.sh("/etc/init.d/S40network restart")
    assert "sets no country=XX: the radio keeps to the channels allowed everywhere" in firmware.console_text
    firmware.sh(f"printf 'country=GB\\n' > {BOOT}/wpa_supplicant.conf")
    firmware.sh("/etc/init.d/S40network restart")
    assert "has no network={...} block: Wi-Fi has nothing to join" in firmware.console_text
    streams(firmware)


def test_what_the_network_services_cost(firmware):
    """Memory of the network's daemons, as the guest sees it."""
    out = firmware.sh("for d in ifplugd udhcpc ntpd mdnsd dropbear; do for p in $(pidof $d); do "
                "echo $d $(grep -E 'VmRSS|RssAnon' /proc/$p/status | tr -s ' \\t' ' '); done; done")
    daemons = {"ifplugd", "udhcpc", "ntpd", "mdnsd", "dropbear"}
    rows = [r for r in (line.split() for line in out.split("\n")) if r and r[0] in daemons and len(r) == 7]
    # One of each: the restarts above left none behind.
    assert sorted(r[0] for r in rows) == sorted(daemons), out
    figure("network daemons, kB resident (of it their own): "
           + ", ".join(f"{r[0]} {r[2]} ({r[5]})" for r in sorted(rows)))
