"""ONVIF events (Profile S's PullPoint) from motion detection, with the
clients that use them: onvif-zeep-async's PullPoint manager, as Home
Assistant's ONVIF integration drives it, and Node's `onvif` event API. The
box of the test pattern moves from the start and SIGUSR2 stops and starts
it (test_motion.py): each client hears IsMotion true, false, true. Then,
in raw SOAP, what bounds the subscriptions: each is its user's, a user
holds at most four, and Unsubscribe frees one."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import threading
import time
from typing import NamedTuple

import pytest
import requests

from helpers import BIN, run
from test_http import metric
from test_motion import MOTION
from test_onvif import NODE_MODULES, PASSWORD, SOAP, USER, config, envelope, fault, with_camera  # noqa: F401 (config: a fixture)

EVENTS = "/onvif/events_service"
EVENTS_NS = "http://www.onvif.org/ver10/events/wsdl"
# Where onvif-zeep-async keeps the address CreatePullPointSubscription gave.
PULLPOINT_NS = EVENTS_NS + "/PullPointSubscription"
CELL, ALARM = "tns1:RuleEngine/CellMotionDetector/Motion", "tns1:VideoSource/MotionAlarm"
# Each topic's one Data item and its Source items, in order (Home Assistant
# reads Data.SimpleItem[0] and, for MotionAlarm, Source.SimpleItem[0]).
DATA = {CELL: "IsMotion", ALARM: "State"}
SOURCES = {CELL: ["VideoSourceConfigurationToken", "VideoAnalyticsConfigurationToken", "Rule"], ALARM: ["Source"]}
# Home Assistant's subscription term (homeassistant/components/onvif/event_manager.py).
TERM = dt.timedelta(minutes=10)


@pytest.fixture
def events_config(config):  # noqa: F811
    """test_onvif's config (USER with an ONVIF password) and test_motion's
    [motion]: the event service is there while motion detection runs."""
    with open(config, "a") as f:
        f.write(MOTION)
    return config


class Note(NamedTuple):
    """One NotificationMessage as onvif-zeep-async parsed it."""
    topic: str
    operation: str | None
    utc: dt.datetime | None
    source: dict[str, str]
    data: dict[str, str]

    @property
    def moving(self) -> bool:
        return self.data[DATA[self.topic]] == "true"


def note(msg) -> Note:
    """The fields Home Assistant reads: msg.Topic._value_1 and
    msg.Message._value_1 (the tt:Message)."""
    m = msg.Message._value_1

    def items(item_list) -> dict[str, str]:
        return {i.Name: i.Value for i in (item_list.SimpleItem if item_list is not None else [])}

    return Note(msg.Topic._value_1, m.PropertyOperation, m.UtcTime, items(m.Source), items(m.Data))


def states(seen: list[Note]) -> dict[str, bool]:
    """Each topic's last value."""
    return {n.topic: n.moving for n in seen}


async def pull_until(service, seen: list[Note], moving: bool, timeout: float = 20) -> None:
    """PullMessages (Home Assistant's request, with a shorter Timeout) until
    both topics last said `moving`; what came is added to `seen`."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while states(seen) != {CELL: moving, ALARM: moving}:
        assert loop.time() < end, f"both topics did not say {moving} within {timeout} s: {seen}"
        r = await service.PullMessages({"Timeout": dt.timedelta(seconds=5), "MessageLimit": 100})
        seen.extend(note(m) for m in r.NotificationMessage or [])


def test_zeep_pullpoint_sees_motion_start_and_stop(camstream, events_config):
    cs = camstream("--config", str(events_config), "--width", "640", "--height", "360")
    cs.wait_for("motion started (")
    lost: list[bool] = []

    async def watch(cam):
        from zeep.exceptions import Fault

        dev = await cam.create_devicemgmt_service()
        services = {s.Namespace: s.XAddr for s in await dev.GetServices({"IncludeCapability": False})}
        events_caps = (await cam.get_capabilities())["Events"]
        media = await cam.create_media_service()
        video_source = (await media.GetProfiles())[0].VideoSourceConfiguration
        # Home Assistant's PullPoint manager: CreatePullPointSubscription at
        # the events XAddr, then its pull point and subscription manager at
        # the address the camera gave, a synchronization point, and pulls.
        manager = await cam.create_pullpoint_manager(TERM, lambda: lost.append(True))
        await manager.set_synchronization_point()
        service = manager.get_service()
        address = cam.xaddrs[PULLPOINT_NS]
        seen: list[Note] = []
        await pull_until(service, seen, True)
        initial = len(seen)
        # Renew, as the manager's timer does: relative (what it sends), and
        # absolute (what it sends to a camera whose relative times it found
        # broken).
        sub = await cam.create_subscription_service("PullPointSubscription")
        renewed = [await sub.Renew(cam.get_next_termination_time(TERM))]
        until = (dt.datetime.now(dt.UTC) + TERM).isoformat(timespec="seconds").replace("+00:00", "Z")
        renewed.append(await sub.Renew(until))
        # The box stops: motion stops once nothing changed for 1.5 s.
        cs.proc.send_signal(signal.SIGUSR2)
        await pull_until(service, seen, False)
        # Nothing changes while it stands: a pull waits at the camera (in
        # a task of this loop) while the camera answers others at once.
        parked = asyncio.create_task(service.PullMessages({"Timeout": dt.timedelta(seconds=20),
                                                           "MessageLimit": 100}))
        done, _ = await asyncio.wait({parked}, timeout=3)
        assert not done, f"PullMessages (Timeout 20 s) did not wait for a change: {parked.result()}"
        start = time.monotonic()
        metrics = await asyncio.to_thread(requests.get, cs.http + "/metrics", timeout=10,
                                          auth=requests.auth.HTTPDigestAuth(USER, PASSWORD))
        metrics_took = time.monotonic() - start
        # The box moves: the waiting pull is answered with the change.
        cs.proc.send_signal(signal.SIGUSR2)
        start = time.monotonic()
        r = await asyncio.wait_for(parked, 15)
        woke = time.monotonic() - start
        seen.extend(note(m) for m in r.NotificationMessage or [])
        await pull_until(service, seen, True)
        # Unsubscribe (the manager's shutdown, which swallows a fault): the
        # pull point is gone after.
        await manager.shutdown()
        try:
            await service.PullMessages({"Timeout": dt.timedelta(seconds=1), "MessageLimit": 10})
            after = None
        except Fault as f:
            after = f.message
        return (services, events_caps, video_source, address, seen, initial, renewed, metrics, metrics_took,
                woke, after)

    (services, caps, video_source, address, seen, initial, renewed, metrics, metrics_took, woke,
     after) = with_camera(cs.http_port, watch)
    base = f"http://127.0.0.1:{cs.http_port}"
    assert services.get(EVENTS_NS) == base + EVENTS, services
    assert caps["XAddr"] == base + EVENTS and caps["WSPullPointSupport"] is True, caps
    assert re.fullmatch(re.escape(base + EVENTS) + r"/pullpoint/[^/?#]+", address), address
    # The state when subscribed (the box moving), then what changed.
    for topic in (CELL, ALARM):
        mine = [n for n in seen if n.topic == topic]
        assert mine[0].operation == "Initialized" and mine[0].moving, mine
        firsts = [n for n in seen[:initial] if n.topic == topic]
        assert all(n.operation == "Initialized" and n.moving for n in firsts), firsts
        changes = [n for n in seen[initial:] if n.topic == topic]
        assert [(n.operation, n.moving) for n in changes] == [("Changed", False), ("Changed", True)], changes
    now = dt.datetime.now(dt.UTC)
    for n in seen:
        assert list(n.data) == [DATA[n.topic]] and n.data[DATA[n.topic]] in ("true", "false"), n
        assert list(n.source) == SOURCES[n.topic] and all(n.source.values()), n
        assert n.utc is not None and abs(n.utc - now) < dt.timedelta(minutes=2), n
    # The sources are the camera's: its video source and its configuration.
    assert {n.source.get("VideoSourceConfigurationToken") for n in seen if n.topic == CELL} == {video_source.token}
    assert {n.source.get("Source") for n in seen if n.topic == ALARM} == {video_source.SourceToken}
    # Each Renew gave the term asked for (more than half of it: less makes
    # onvif-zeep-async think the camera's relative times are broken).
    for r in renewed:
        term = r.TerminationTime - r.CurrentTime
        assert TERM / 2 < term <= TERM + dt.timedelta(seconds=5), r
    assert metrics.status_code == 200 and metric(metrics.text, "camstream_motion") == 0, metrics.text
    assert metrics_took < 3, f"/metrics took {metrics_took:.1f} s while a PullMessages waited"
    assert woke < 10, f"the waiting PullMessages was answered {woke:.1f} s after the box moved"
    assert after is not None, "the pull point still answered after Unsubscribe"
    assert not lost, "the manager lost its subscription"


CONCRETE_SET = "http://www.onvif.org/ver10/tev/topicExpression/ConcreteSet"


def test_zeep_subscription_filtered_to_a_topic(camstream, events_config):
    """A Filter's TopicExpression, as onvif-zeep-async's zeep writes it
    (the way NVRs ask for the topics they record): the subscription gets
    that topic only; a topic the camera has not, or a dialect it does not
    speak, is refused with WS-BaseNotification's fault."""
    cs = camstream("--config", str(events_config), "--width", "640", "--height", "360")
    cs.wait_for("motion started (")

    async def subscribe(cam):
        from zeep import xsd
        from zeep.exceptions import Fault

        events = await cam.create_events_service()
        expression = events.zeep_client.get_element("{http://docs.oasis-open.org/wsn/b-2}TopicExpression")

        async def create(expr: str, dialect: str = CONCRETE_SET):
            topic = xsd.AnyObject(expression, expression(_value_1=expr, Dialect=dialect))
            return await events.CreatePullPointSubscription(
                {"Filter": {"_value_1": [topic]}, "InitialTerminationTime": "PT60S"})

        refusals = []
        for expr, dialect in (("tns1:RuleEngine/FieldDetector//.", CONCRETE_SET),
                              ("tns1:VideoSource//.", "http://docs.oasis-open.org/wsn/t-1/TopicExpression/Full"),
                              ("tns1:VideoSource//./x", CONCRETE_SET)):
            try:
                await create(expr, dialect)
                refusals.append(None)
            except Fault as f:
                refusals.append([q.localname for q in f.subcodes or []])
        r = await create("tns1:VideoSource//.")
        cam.xaddrs[PULLPOINT_NS] = r.SubscriptionReference.Address._value_1
        pullpoint = await cam.create_pullpoint_service()
        seen: list[Note] = []
        cs.proc.send_signal(signal.SIGUSR2)  # the box stops: a change
        end = time.monotonic() + 20
        while not any(n.operation == "Changed" for n in seen) and time.monotonic() < end:
            m = await pullpoint.PullMessages({"Timeout": dt.timedelta(seconds=5), "MessageLimit": 100})
            seen.extend(note(n) for n in m.NotificationMessage or [])
        return refusals, seen

    refusals, seen = with_camera(cs.http_port, subscribe)
    assert refusals == [["InvalidArgVal", "TopicNotSupportedFault"],
                        ["InvalidArgVal", "TopicExpressionDialectUnknownFault"],
                        ["InvalidArgVal", "InvalidTopicExpressionFault"]], refusals
    # MotionAlarm's state, then its change; CellMotionDetector's never.
    assert [(n.topic, n.operation, n.moving) for n in seen] == \
        [(ALARM, "Initialized", True), (ALARM, "Changed", False)], seen


# Node's `onvif` (0.8.x) event API: connects (GetSystemDateAndTime,
# GetServices), then an 'event' listener starts its loop:
# CreatePullPointSubscription, then PullMessages (Timeout PT1M) and Renew
# at the subscription's address, over and over. One JSON line per event;
# a line on stdin unsubscribes and ends it.
NODE_EVENTS = """
const { Cam } = require("onvif");
const readline = require("readline");
const [port, user, password] = process.argv.slice(1);
const say = (o) => console.log(JSON.stringify(o));
new Cam({ hostname: "127.0.0.1", port: Number(port), username: user, password, timeout: 10000 }, function (err) {
    if (err) { say({ error: "connect: " + err.message }); process.exit(1); }
    const cam = this;
    cam.on("eventsError", (e) => say({ error: String((e && e.message) || e) }));
    cam.on("event", (m) => {
        const msg = m.message.message;
        const items = (x) => [].concat((x && x.simpleItem) || []).map((i) => i.$);
        say({ topic: m.topic._, operation: msg.$.PropertyOperation, utc: msg.$.UtcTime,
              source: items(msg.source), data: items(msg.data),
              address: cam.events.subscription.subscriptionReference.address.href });
    });
    readline.createInterface({ input: process.stdin }).once("line", () => {
        cam.removeAllListeners("event");
        cam.unsubscribe((err) => {
            say(err ? { error: "unsubscribe: " + err.message } : { unsubscribed: true });
            process.exit(0);
        });
    });
});
"""


@pytest.mark.skipif(not shutil.which("node") or not (NODE_MODULES / "onvif/package.json").exists(),
                    reason="Node or its onvif is missing: npm install --prefix output/node onvif@0.8.3 "
                           "(ci/test does)")
def test_node_onvif_event_api_sees_motion(camstream, events_config):
    cs = camstream("--config", str(events_config), "--width", "640", "--height", "360")
    cs.wait_for("motion started (")
    node = subprocess.Popen(["node", "-e", NODE_EVENTS, str(cs.http_port), USER, PASSWORD], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "NODE_PATH": str(NODE_MODULES)})
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in node.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    said: list[str] = []

    def line(end: float) -> str:
        try:
            got = lines.get(timeout=max(0.0, end - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"node said nothing more in time:\n{''.join(said)}\n{cs.log()[-3000:]}") from None
        assert got is not None, f"node ended ({node.wait()}):\n{''.join(said)}"
        said.append(got)
        return got

    def until(want, timeout: float = 30) -> dict:
        """The next event `want` takes (an error before it fails)."""
        end = time.monotonic() + timeout
        while True:
            try:
                got = json.loads(line(end))
            except ValueError:
                continue  # a warning of Node's
            assert "error" not in got, "".join(said)
            if want(got):
                return got

    def motion(moving: bool):
        return lambda e: e.get("topic") == CELL and e["data"] == [{"Name": "IsMotion", "Value": moving}]

    try:
        first = until(lambda e: e.get("topic") == CELL)
        assert first["operation"] == "Initialized" and first["data"] == [{"Name": "IsMotion", "Value": True}], first
        cs.proc.send_signal(signal.SIGUSR2)
        stopped = until(motion(False))
        cs.proc.send_signal(signal.SIGUSR2)
        moving = until(motion(True))
        alarm = until(lambda e: e.get("topic") == ALARM and e["data"] == [{"Name": "State", "Value": True}])
        node.stdin.write("stop\n")
        node.stdin.flush()
        # Unsubscribe. An error line after it is the waiting pull's end (its
        # subscription is gone): only Unsubscribe's answer counts.
        end = time.monotonic() + 30
        while '"unsubscribed":true' not in line(end):
            pass
        assert node.wait(10) == 0, "".join(said)
    finally:
        if node.poll() is None:
            node.kill()
            node.wait()
    for e in (stopped, moving):
        assert e["operation"] == "Changed", e
        assert [i["Name"] for i in e["source"]] == SOURCES[CELL], e
    assert alarm["operation"] == "Changed" and [i["Name"] for i in alarm["source"]] == ["Source"], alarm
    assert re.fullmatch(rf"http://127\.0\.0\.1:{cs.http_port}{EVENTS}/pullpoint/[^/?#]+", first["address"]), first


CREATE = (f'<CreatePullPointSubscription xmlns="{EVENTS_NS}"><InitialTerminationTime>PT60S'
          '</InitialTerminationTime></CreatePullPointSubscription>')
PULL = f'<PullMessages xmlns="{EVENTS_NS}"><Timeout>PT1S</Timeout><MessageLimit>10</MessageLimit></PullMessages>'
RENEW = '<Renew xmlns="http://docs.oasis-open.org/wsn/b-2"><TerminationTime>PT60S</TerminationTime></Renew>'
UNSUBSCRIBE = '<Unsubscribe xmlns="http://docs.oasis-open.org/wsn/b-2"/>'


def test_subscriptions_are_per_user_and_bounded(camstream, events_config):
    with open(events_config, "ab") as f:
        f.write(run([str(BIN), "passwd", "viewer", "--onvif"], input=b"viewer-secret\n", timeout=10).stdout)
    cs = camstream("--config", str(events_config))

    def post(url: str, body: str, user: str | None = USER, password: str | None = PASSWORD,
             **kw) -> requests.Response:
        return requests.post(url, data=envelope(body, user, password), headers={"Content-Type": SOAP},
                             timeout=10, **kw)

    def subscribe(user: str = USER, password: str = PASSWORD) -> str:
        r = post(cs.http + EVENTS, CREATE, user, password)
        assert r.status_code == 200, r.text
        return re.search(r"<(?:\w+:)?Address>([^<]+)</", r.text).group(1)

    def refused(r: requests.Response) -> bool:
        return r.status_code >= 400 and bool(fault(r)) and "PullMessagesResponse" not in r.text

    mine = subscribe()
    assert re.fullmatch(rf"http://127\.0\.0\.1:{cs.http_port}{EVENTS}/pullpoint/[^/?#]+", mine), mine
    r = post(mine, PULL)
    assert r.status_code == 200 and "IsMotion" in r.text, r.text
    # Another user (by token, or by HTTP Digest) may not pull, renew or
    # end it.
    for body in (PULL, RENEW, UNSUBSCRIBE):
        r = post(mine, body, "viewer", "viewer-secret")
        assert r.status_code == 400 and fault(r) == ["env:Sender", "ter:NotAuthorized"], (body, r.text)
    r = post(mine, PULL, None, None, auth=requests.auth.HTTPDigestAuth("viewer", "viewer-secret"))
    assert r.status_code == 400 and fault(r) == ["env:Sender", "ter:NotAuthorized"], r.text
    # Nor may a request without a user: HTTP Digest is asked for (as
    # everywhere on the port), or it is NotAuthorized.
    r = post(mine, PULL, None, None)
    assert (r.status_code == 401 and "Digest" in r.headers.get("WWW-Authenticate", "")) or \
        (r.status_code == 400 and fault(r) == ["env:Sender", "ter:NotAuthorized"]), (r.status_code, r.text)
    # All that left it as it was: its user pulls and renews it.
    assert post(mine, PULL).status_code == 200
    r = post(mine, RENEW)
    assert r.status_code == 200 and "TerminationTime" in r.text, r.text
    # An address that names no subscription: a fault.
    base, _, sid = mine.rpartition("/")
    for unknown in (f"{base}/{'f' * len(sid) if set(sid) != {'f'} else '0' * len(sid)}", f"{base}/nosuch",
                    f"{base}/{sid}0"):
        r = post(unknown, PULL)
        assert refused(r), (unknown, r.status_code, r.text)
    # Four a user: the fifth is refused; another user still subscribes.
    more = [subscribe() for _ in range(3)]
    r = post(cs.http + EVENTS, CREATE)
    assert refused(r), (r.status_code, r.text)
    theirs = subscribe("viewer", "viewer-secret")
    assert post(theirs, PULL, "viewer", "viewer-secret").status_code == 200
    # Unsubscribe ends one (its address names nothing after) and frees a
    # place for a new one.
    r = post(mine, UNSUBSCRIBE)
    assert r.status_code == 200 and "UnsubscribeResponse" in r.text, r.text
    r = post(mine, PULL)
    assert refused(r), (r.status_code, r.text)
    newer = subscribe()
    assert newer not in (mine, *more), newer
    for address in (newer, *more):
        assert post(address, PULL).status_code == 200, address
