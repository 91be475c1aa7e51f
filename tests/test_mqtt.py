"""MQTT ([mqtt]): motion and the picture it started in, published to a
broker with Home Assistant's MQTT discovery. The broker is Debian's
Mosquitto, with a password file; the subscriber is paho-mqtt (Eclipse's
client, the one Home Assistant's own MQTT integration uses). The test
pattern's box moves from the start, and SIGUSR2 stops and starts it
(test_motion.py)."""

from __future__ import annotations

import getpass
import json
import queue
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import requests

from helpers import free_port, run
from test_http import metric
from test_motion import MOTION

# In /usr/sbin, which a user's PATH may not have.
MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"

USER, PASSWORD = "camera", "mqtt-secret"


class Broker:
    """Mosquitto on 127.0.0.1:`port`, anonymous clients refused."""

    def __init__(self, tmp_path: Path, port: int | None = None):
        assert Path(MOSQUITTO).exists(), "Debian's mosquitto is not installed (ci/test installs it)"
        self.port = port or free_port()
        passwd = tmp_path / "mosquitto.passwd"
        if not passwd.exists():
            run(["mosquitto_passwd", "-b", "-c", str(passwd), USER, PASSWORD], timeout=10)
            run(["mosquitto_passwd", "-b", str(passwd), "viewer", "viewer-secret"], timeout=10)
        conf = tmp_path / "mosquitto.conf"
        # As this user: run as root, Mosquitto would become user mosquitto,
        # which cannot read the test's folder.
        conf.write_text(f"listener {self.port} 127.0.0.1\nallow_anonymous false\npassword_file {passwd}\n"
                        f"persistence false\nuser {getpass.getuser()}\n")
        log = tmp_path / "mosquitto.log"
        self.log = open(log, "ab")
        before = self.log.tell()
        self.proc = subprocess.Popen([MOSQUITTO, "-c", str(conf)], stdout=self.log, stderr=self.log)
        end = time.monotonic() + 10
        while "running" not in log.read_bytes()[before:].decode(errors="replace"):
            assert time.monotonic() < end and self.proc.poll() is None, log.read_text()
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.log.close()


@pytest.fixture
def broker(tmp_path):
    started: list[Broker] = []

    def start(port: int | None = None) -> Broker:
        b = Broker(tmp_path, port)
        started.append(b)
        return b

    yield start
    for b in started:
        b.stop()


class Subscriber:
    """paho-mqtt subscribed to everything: (topic, payload, retained) in
    a queue as they come."""

    def __init__(self, port: int, name: str = "test-subscriber"):
        import paho.mqtt.client as mqtt

        self.got: queue.Queue[tuple[str, bytes, bool]] = queue.Queue()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=name)
        self.client.username_pw_set("viewer", "viewer-secret")
        self.client.on_connect = lambda c, _u, _f, rc, _p: c.subscribe("#", qos=1) if rc == 0 else None
        self.client.on_message = lambda _c, _u, m: self.got.put((m.topic, m.payload, bool(m.retain)))
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()

    def until(self, want, timeout: float = 20) -> tuple[str, bytes, bool]:
        """The next message `want` takes (topic, payload)."""
        end = time.monotonic() + timeout
        seen = []
        while True:
            try:
                m = self.got.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no such message in {timeout} s; saw {[(t, p[:80]) for t, p, _ in seen]}") \
                    from None
            seen.append(m)
            if want(m[0], m[1]):
                return m

    def stop(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


def mqtt_config(tmp_path: Path, port: int, password: str = PASSWORD) -> Path:
    conf = tmp_path / "camstream.toml"
    conf.write_text(MOTION + f'[mqtt]\nenabled = true\nbroker = "127.0.0.1:{port}"\nuser = "{USER}"\n'
                    f'password = "{password}"\ntopic = "camstream/test"\n')
    return conf


def test_home_assistant_discovery_and_motion_states(camstream, broker, tmp_path):
    b = broker()
    sub = Subscriber(b.port)
    try:
        cs = camstream("--config", str(mqtt_config(tmp_path, b.port)), "--width", "640", "--height", "360")
        cs.wait_for("MQTT: connected to 127.0.0.1:")
        topic, payload, _ = sub.until(lambda t, _: t.startswith("homeassistant/binary_sensor/"))
        sensor = json.loads(payload)
        assert topic.endswith("/motion/config"), topic
        assert sensor["device_class"] == "motion" and sensor["state_topic"] == "camstream/test/motion", sensor
        assert (sensor["payload_on"], sensor["payload_off"]) == ("ON", "OFF"), sensor
        assert sensor["availability_topic"] == "camstream/test/availability" and sensor["unique_id"], sensor
        _, payload, _ = sub.until(lambda t, _: t.startswith("homeassistant/camera/"))
        camera = json.loads(payload)
        assert camera["topic"] == "camstream/test/snapshot", camera
        assert camera["device"] == sensor["device"] and camera["unique_id"] != sensor["unique_id"], camera
        sub.until(lambda t, p: t == "camstream/test/availability" and p == b"online")
        # The box moves from the start: motion, and the picture it
        # started in.
        _, picture, _ = sub.until(lambda t, _: t == "camstream/test/snapshot", 30)
        assert picture[:2] == b"\xff\xd8" and picture[-2:] == b"\xff\xd9", picture[:16]
        sub.until(lambda t, p: t == "camstream/test/motion" and p == b"ON")
        m = requests.get(cs.http + "/metrics", timeout=10).text
        assert metric(m, "camstream_mqtt_connected") == 1, m
        # The box stops: OFF; moves again: a new picture, then ON.
        cs.proc.send_signal(signal.SIGUSR2)
        sub.until(lambda t, p: t == "camstream/test/motion" and p == b"OFF")
        cs.proc.send_signal(signal.SIGUSR2)
        sub.until(lambda t, _: t == "camstream/test/snapshot")
        sub.until(lambda t, p: t == "camstream/test/motion" and p == b"ON")
        # Home Assistant starting later gets it all from the broker: all
        # of it is retained.
        late = Subscriber(b.port, "late-subscriber")
        try:
            kept = {}
            while len(kept) < 5:
                t, p, retained = late.until(lambda _t, _p: True, 10)
                assert retained, (t, p[:80])
                kept[t] = p
            assert kept["camstream/test/motion"] == b"ON" and kept["camstream/test/availability"] == b"online", kept
            assert kept["camstream/test/snapshot"][:2] == b"\xff\xd8"
            assert sum(t.startswith("homeassistant/") for t in kept) == 2, kept
        finally:
            late.stop()
        # Stopping: the broker says the camera is offline (its last will).
        cs.stop()
        sub.until(lambda t, p: t == "camstream/test/availability" and p == b"offline")
    finally:
        sub.stop()


def test_waits_for_the_broker_and_comes_back_after_it_restarts(camstream, broker, tmp_path):
    port = free_port()
    cs = camstream("--config", str(mqtt_config(tmp_path, port)), "--width", "640", "--height", "360")
    # No broker yet: said once, and everyone else is served meanwhile.
    cs.wait_for("MQTT: 127.0.0.1:")
    m = requests.get(cs.http + "/metrics", timeout=10).text
    assert metric(m, "camstream_mqtt_connected") == 0, m
    b = broker(port)
    sub = Subscriber(port)
    try:
        sub.until(lambda t, p: t == "camstream/test/motion" and p == b"ON", 40)
        # The broker restarts (a new process, nothing retained): the camera
        # connects again and says everything again.
        sub.stop()
        b.stop()
        time.sleep(2)
        b = broker(port)
        sub = Subscriber(port)
        sub.until(lambda t, _: t.startswith("homeassistant/binary_sensor/"), 60)
        sub.until(lambda t, p: t == "camstream/test/motion" and p in (b"ON", b"OFF"))
        assert cs.log().count("MQTT: connected to") == 2, cs.log()
    finally:
        sub.stop()


def test_a_wrong_password_is_said_and_costs_no_one(camstream, broker, tmp_path):
    b = broker()
    cs = camstream("--config", str(mqtt_config(tmp_path, b.port, password="wrong")))
    cs.wait_for("the broker refused the connection")
    time.sleep(4)
    # Said once, however many tries.
    assert cs.log().count("the broker refused the connection") == 1, cs.log()
    m = requests.get(cs.http + "/metrics", timeout=10).text
    assert metric(m, "camstream_mqtt_connected") == 0, m
    r = requests.get(cs.http + "/snapshot.jpg", timeout=10)
    assert r.status_code == 200 and r.content[:2] == b"\xff\xd8"
