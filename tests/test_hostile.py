"""Hostile clients on the camera's network, the sequences of
tests/hostile.py as an attacker there runs them: the daemon in a network
namespace of its own with the users viewer and nvr and every other setting
at its default, its clients in another namespace on the same veth pair,
from seven addresses: six are the attacker's, one the honest clients'.
Each test runs one sequence, which collects every way the daemon falls
short, and fails with all of them."""

from __future__ import annotations

import socket
import subprocess

import pytest

import hostile
from helpers import BIN, Camstream, Namespaces, in_netns, run, veth_namespaces

CAM = "192.0.2.1"
HONEST = "192.0.2.2"  # the clients' namespace's first address: what curl and FFmpeg send from
ATTACKER = [f"192.0.2.{n}" for n in range(11, 17)]


class NamespaceCamera(hostile.Camera):
    """The daemon in its namespace, reached from the clients' namespace,
    every source an address there."""

    def __init__(self, ns: Namespaces, cs: Camstream):
        self.ns, self.cs = ns, cs
        self.host, self.rtsp_port, self.http_port = CAM, cs.port, cs.http_port
        self.honest, self.attackers, self.honest_peer = HONEST, ATTACKER, HONEST
        self.size = "1280,720"

    def connect(self, source: str, port: str, timeout: float = 5, rcvbuf: int | None = None) -> socket.socket:
        with in_netns(self.ns.client):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                if rcvbuf:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
                s.settimeout(timeout)
                s.bind((source, 0))
                s.connect((CAM, self.rtsp_port if port == "rtsp" else self.http_port))
            except OSError:
                s.close()
                raise
            return s

    def client(self, cmd: list[str], timeout: float) -> subprocess.CompletedProcess:
        """A program run in the clients' namespace (it sends from HONEST)."""
        return subprocess.run(["ip", "netns", "exec", self.ns.client, *cmd], capture_output=True, text=True,
                              errors="replace", timeout=timeout, stdin=subprocess.DEVNULL)

    def log_mark(self) -> int:
        return len(self.cs.lines)

    def log_since(self, mark: int) -> list[str]:
        return self.cs.lines[mark:]


@pytest.fixture
def namespaces():
    # Requested before `camstream`: torn down after the daemon stopped.
    with veth_namespaces(CAM, [HONEST, *ATTACKER]) as ns:
        yield ns


def users(tmp_path, extra: str = ""):
    config = tmp_path / "camstream.toml"
    config.write_bytes(b"".join(run([str(BIN), "passwd", user], input=(password + "\n").encode(), timeout=10).stdout
                                for user, password in hostile.PASSWORDS.items()) + extra.encode())
    return config


@pytest.fixture
def camera(namespaces, camstream, tmp_path) -> NamespaceCamera:
    config = users(tmp_path)
    return NamespaceCamera(namespaces, camstream("--config", str(config), netns=namespaces.cam, host=CAM))


@pytest.fixture
def camera_with_imagers_user(namespaces, camstream, tmp_path) -> NamespaceCamera:
    """As `camera`, with Raspberry Pi Imager's user too, not signed in yet."""
    name, hash_, _ = hostile.IMAGER_USER
    config = users(tmp_path, f'[users.{name}]\npassword_hash = "{hash_}"\nuser_level = "user"\n')
    return NamespaceCamera(namespaces, camstream("--config", str(config), netns=namespaces.cam, host=CAM))


def check(problems: list[str]) -> None:
    # A list, and empty: a sequence that forgot to return its findings
    # must not pass as one that found nothing.
    assert isinstance(problems, list), f"the sequence returned {problems!r}, not its problems"
    assert not problems, "\n".join(problems)


def test_a_leftover_tunnel_post_reaches_no_other_connection(camera):
    check(hostile.leftover_post(camera))


def test_a_second_post_into_a_live_tunnel_is_refused(camera):
    check(hostile.second_post(camera))


def test_slow_senders_from_six_addresses_lock_no_one_out(camera):
    check(hostile.slow_senders(camera))


def test_empty_onvif_posts_from_six_addresses_lock_no_one_out(camera):
    check(hostile.empty_onvif_posts(camera))


def test_curl_digest_against_onvif(camera):
    check(hostile.curl_digest_onvif(camera))


def test_pipelined_snapshots_are_all_answered(camera):
    check(hostile.pipelined_snapshots(camera))


def test_one_password_does_not_fill_the_rtsp_port(camera):
    check(hostile.password_fill(camera))


def test_a_soap_flood_costs_viewers_no_frame(camera):
    check(hostile.soap_flood(camera))


def test_password_hash_guesses_cost_viewers_no_frame(camera_with_imagers_user):
    check(hostile.hash_guesses(camera_with_imagers_user))
