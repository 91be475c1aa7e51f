"""ONVIF (Profile S) on camstream's HTTP port, with the client NVRs and
Home Assistant use: onvif-zeep-async finds the profiles, the stream and
snapshot URIs with a password, then FFmpeg streams the URI it returned and
the snapshot decodes; and the ways a token is refused (wrong password,
replayed, none at all), with the faults ONVIF's Core specification names.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import datetime
import hashlib
import os
import re
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from helpers import BIN, ROOT, Camstream, in_netns, run
from test_http import jpeg_size

USER, PASSWORD = "admin", "onvif-secret"
DEVICE, MEDIA = "/onvif/device_service", "/onvif/media_service"
SOAP = "application/soap+xml; charset=utf-8"


@pytest.fixture
def config(tmp_path):
    """A config with one user whose password is kept for ONVIF."""
    lines = run([str(BIN), "passwd", USER, "--onvif"], input=(PASSWORD + "\n").encode(), timeout=10).stdout
    path = tmp_path / "camstream.toml"
    path.write_bytes(lines)
    assert b"onvif_password" in lines
    return path


def envelope(body: str, user: str | None = None, password: str | None = None,
             nonce: bytes | None = None, created: str | None = None) -> bytes:
    """A SOAP 1.2 request with a UsernameToken (PasswordDigest) as the
    OASIS profile defines it, when a user is given."""
    header = ""
    if user is not None:
        nonce = nonce or os.urandom(16)
        created = created or datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        digest = base64.b64encode(hashlib.sha1(nonce + created.encode() + password.encode()).digest()).decode()
        header = (
            '<s:Header><wsse:Security xmlns:wsse="http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity'
            '-secext-1.0.xsd" xmlns:wsu="http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-utility'
            f'-1.0.xsd"><wsse:UsernameToken><wsse:Username>{user}</wsse:Username><wsse:Password Type="http://docs.'
            'oasis-open.org/wss/2004/01/oasis-200401-wss-username-token-profile-1.0#PasswordDigest">'
            f'{digest}</wsse:Password><wsse:Nonce>{base64.b64encode(nonce).decode()}</wsse:Nonce>'
            f'<wsu:Created>{created}</wsu:Created></wsse:UsernameToken></wsse:Security></s:Header>')
    return (f'<?xml version="1.0" encoding="UTF-8"?><s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope">'
            f'{header}<s:Body>{body}</s:Body></s:Envelope>').encode()


DEVICE_INFO = '<GetDeviceInformation xmlns="http://www.onvif.org/ver10/device/wsdl"/>'


def fault(r: requests.Response) -> list[str]:
    """The fault's code and subcodes."""
    return re.findall(r"<env:Value>([^<]+)</env:Value>", r.text)


def with_camera(port: int, work, user: str = USER, password: str = PASSWORD):
    """`await work(cam)` with onvif-zeep-async's camera (Home Assistant's
    library) signed in as `user`, its service addresses read; closed after."""
    from onvif import ONVIFCamera

    async def session():
        cam = ONVIFCamera("127.0.0.1", port, user, password, no_cache=True)
        try:
            await cam.update_xaddrs()
            return await work(cam)
        finally:
            await cam.close()

    return asyncio.run(session())


def test_onvif_zeep_async_profiles_stream_and_snapshot(camstream, config, tmp_path):
    cs = camstream("--config", str(config), "--width", "1280", "--height", "720")

    async def ask(cam):
        dev = await cam.create_devicemgmt_service()
        info = await dev.GetDeviceInformation()
        wsdl = await dev.GetWsdlUrl()
        media = await cam.create_media_service()
        profiles = await media.GetProfiles()
        token = profiles[0].token
        setup = {"Stream": "RTP-Unicast", "Transport": {"Protocol": "RTSP"}}
        uris = [(await media.GetStreamUri({"StreamSetup": setup, "ProfileToken": p.token})).Uri
                for p in profiles]
        snap_uri = await media.GetSnapshotUri({"ProfileToken": token})
        snapshot = await cam.get_snapshot(token)
        h264 = await media.GetVideoEncoderConfigurationOptions({"ConfigurationToken": "h264"})
        return info, wsdl, profiles, uris, snap_uri.Uri, snapshot, h264

    info, wsdl, profiles, uris, snap_uri, snapshot, h264 = with_camera(cs.http_port, ask)
    assert info.Manufacturer == "camstream" and info.FirmwareVersion
    assert wsdl.startswith("http://www.onvif.org/"), wsdl
    # The main stream and the detection sub-stream, both JPEG, and the
    # main stream in H.264.
    sizes = [(p.token, p.VideoEncoderConfiguration.Encoding, p.VideoEncoderConfiguration.Resolution.Width,
              p.VideoEncoderConfiguration.Resolution.Height, p.VideoEncoderConfiguration.RateControl.FrameRateLimit)
             for p in profiles]
    assert sizes == [("main", "JPEG", 1280, 720, 30), ("sub", "JPEG", 640, 360, 5),
                     ("h264", "H264", 1280, 720, 30)], sizes
    assert uris == [f"rtsp://127.0.0.1:{cs.port}/stream", f"rtsp://127.0.0.1:{cs.port}/sub",
                    f"rtsp://127.0.0.1:{cs.port}/h264"], uris
    h264_conf = profiles[2].VideoEncoderConfiguration
    assert (h264_conf.H264.GovLength, h264_conf.H264.H264Profile, h264_conf.RateControl.BitrateLimit) == \
        (60, "Baseline", 2000), h264_conf
    assert (h264.H264.GovLengthRange.Min, h264.H264.GovLengthRange.Max, h264.H264.H264ProfilesSupported) == \
        (1, 1000, ["Baseline"]), h264
    assert snap_uri == f"http://127.0.0.1:{cs.http_port}/snapshot.jpg", snap_uri
    assert jpeg_size(snapshot, tmp_path) == "1280x720"
    # FFmpeg streams each URI the camera gave, with the same user.
    for uri, (w, h) in zip(uris, [(1280, 720), (640, 360), (1280, 720)], strict=True):
        authed = uri.replace("rtsp://", f"rtsp://{USER}:{PASSWORD}@")
        out = run(["ffmpeg", "-v", "error", "-rtsp_transport", "tcp", "-i", authed, "-frames:v", "10",
                   "-f", "rawvideo", "-pix_fmt", "yuvj420p", "-"], timeout=60).stdout
        assert len(out) == 10 * w * h * 3 // 2, uri


async def set_refused(media, conf) -> str | None:
    """SetVideoEncoderConfiguration's fault, or None if it took `conf`."""
    from zeep.exceptions import Fault

    try:
        await media.SetVideoEncoderConfiguration({"Configuration": conf, "ForcePersistence": False})
    except Fault as f:
        return f.message
    return None


def test_set_video_encoder_configuration(camstream, config):
    cs = camstream("--config", str(config), "--width", "1280", "--height", "720")

    async def change(cam):
        media = await cam.create_media_service()
        main, sub, _h264 = await media.GetProfiles()
        opts = await media.GetVideoEncoderConfigurationOptions({"ConfigurationToken": "sub"})
        sizes = [(r.Width, r.Height) for r in opts.JPEG.ResolutionsAvailable]
        conf = sub.VideoEncoderConfiguration
        conf.Resolution.Width, conf.Resolution.Height = 320, 176
        conf.RateControl.FrameRateLimit = 2
        conf.Quality = 50
        await media.SetVideoEncoderConfiguration({"Configuration": conf, "ForcePersistence": False})
        after = (await media.GetProfiles())[1].VideoEncoderConfiguration
        # The main stream's size is the camera's: refused.
        conf = main.VideoEncoderConfiguration
        conf.Resolution.Width = 640
        refused = await set_refused(media, conf)
        return sizes, opts.JPEG.FrameRateRange, after, refused

    sizes, fps_range, after, refused = with_camera(cs.http_port, change)
    assert (640, 360) in sizes and (320, 176) in sizes, sizes
    assert (fps_range.Min, fps_range.Max) == (1, 30)
    assert (after.Resolution.Width, after.Resolution.Height, after.RateControl.FrameRateLimit, after.Quality) == \
        (320, 176, 2, 50), after
    assert refused and "camstream.toml" in refused, refused
    authed = f"rtsp://{USER}:{PASSWORD}@127.0.0.1:{cs.port}/sub"
    out = run(["ffmpeg", "-v", "error", "-rtsp_transport", "tcp", "-i", authed, "-frames:v", "3",
               "-f", "rawvideo", "-pix_fmt", "yuvj420p", "-"], timeout=60).stdout
    assert len(out) == 3 * 320 * 176 * 3 // 2


def test_set_h264_bit_rate_and_key_frame_interval(camstream, config):
    cs = camstream("--config", str(config), "--width", "1280", "--height", "720")

    async def change(cam):
        media = await cam.create_media_service()
        conf = (await media.GetProfiles())[2].VideoEncoderConfiguration
        conf.RateControl.BitrateLimit = 1500
        conf.H264.GovLength = 15
        await media.SetVideoEncoderConfiguration({"Configuration": conf, "ForcePersistence": False})
        # Another change at once: a new encoder starts with an IDR picture,
        # and changes on a loop must not make one more than once a second.
        conf.RateControl.BitrateLimit = 1400
        refused = [await set_refused(media, conf)]
        after = (await media.GetProfiles())[2].VideoEncoderConfiguration
        for field, value in (("GovLength", 5000), ("H264Profile", "High")):
            bad = (await media.GetProfiles())[2].VideoEncoderConfiguration
            setattr(bad.H264, field, value)
            refused.append(await set_refused(media, bad))
        return after, refused

    after, refused = with_camera(cs.http_port, change)
    assert (after.RateControl.BitrateLimit, after.H264.GovLength) == (1500, 15), after
    assert "less than a second ago" in refused[0], refused
    assert "GovLength" in refused[1] and "Baseline" in refused[2], refused
    # The stream carries on with the new encoder: a key frame every 15
    # frames (before, 60: one in the first 50 frames, the one a joining
    # client is sent).
    authed = f"rtsp://{USER}:{PASSWORD}@127.0.0.1:{cs.port}/h264"
    keys = run(["ffprobe", "-v", "error", "-rtsp_transport", "tcp", "-i", authed, "-select_streams", "v",
                "-show_entries", "frame=key_frame", "-of", "csv=p=0", "-read_intervals", "%+#50"],
               timeout=60).stdout.split()
    assert len(keys) >= 45 and keys.count(b"1") >= 3, keys


SET_H264 = ('<SetVideoEncoderConfiguration xmlns="http://www.onvif.org/ver10/media/wsdl"><Configuration '
            'token="h264"><Encoding xmlns="http://www.onvif.org/ver10/schema">H264</Encoding><RateControl '
            'xmlns="http://www.onvif.org/ver10/schema"><BitrateLimit>64</BitrateLimit></RateControl><H264 '
            'xmlns="http://www.onvif.org/ver10/schema"><GovLength>1</GovLength></H264></Configuration>'
            '<ForcePersistence>false</ForcePersistence></SetVideoEncoderConfiguration>')


# A viewer and an operator (ONVIF's User and Operator levels), by name:
# their level and password.
LEVELS = {"viewer": ("user", "viewer-secret"), "op": ("operator", "op-secret")}


def levels_config(path) -> dict[str, tuple[str, str]]:
    """A config at `path` with LEVELS' users, each with a password kept for
    ONVIF; LEVELS."""
    for name, (level, password) in LEVELS.items():
        run([str(BIN), "passwd", name, "--onvif", "--user-level", level, "--config", str(path)],
            input=(password + "\n").encode(), timeout=10)
    return LEVELS


def test_a_user_watches_and_only_an_operator_changes_the_encoders(camstream, tmp_path):
    # ONVIF's user levels: a User may watch, not change what every viewer
    # sees (SetVideoEncoderConfiguration is of access class ACTUATE); an
    # Operator may.
    path = tmp_path / "camstream.toml"
    users = levels_config(path)
    cs = camstream("--config", str(path), "--width", "1280", "--height", "720")

    def h264_conf(cam_user):
        async def ask(cam):
            media = await cam.create_media_service()
            return (await media.GetProfiles())[2].VideoEncoderConfiguration
        return with_camera(cs.http_port, ask, cam_user, users[cam_user][1])

    # The User, by UsernameToken (onvif-zeep-async): reads the profiles,
    # is refused the change.
    async def viewer_sets(cam):
        media = await cam.create_media_service()
        conf = (await media.GetProfiles())[2].VideoEncoderConfiguration
        conf.RateControl.BitrateLimit = 64
        conf.H264.GovLength = 1
        return await set_refused(media, conf)

    refused = with_camera(cs.http_port, viewer_sets, "viewer", users["viewer"][1])
    assert refused and "not authorized" in refused, refused
    cs.wait_for('ONVIF SetVideoEncoderConfiguration refused to user "viewer" (user)')
    # By HTTP Digest (curl --digest, no token): the same fault.
    p = run(["curl", "-sS", "--digest", "-u", f"viewer:{users['viewer'][1]}", "-H", f"Content-Type: {SOAP}",
             "--data-binary", "@-", "-w", "\n%{http_code}", f"{cs.http}{MEDIA}"],
            input=envelope(SET_H264), timeout=30)
    body, _, code = p.stdout.decode().rpartition("\n")
    assert code == "400" and "ter:NotAuthorized" in body, (code, body)
    # The stream is as it was, and the User still watches it.
    conf = h264_conf("viewer")
    assert (conf.RateControl.BitrateLimit, conf.H264.GovLength) == (2000, 60), conf
    authed = f"rtsp://viewer:{users['viewer'][1]}@127.0.0.1:{cs.port}/h264"
    out = run(["ffmpeg", "-v", "error", "-rtsp_transport", "tcp", "-i", authed, "-frames:v", "3",
               "-f", "rawvideo", "-pix_fmt", "yuv420p", "-"], timeout=60).stdout
    assert len(out) == 3 * 1280 * 720 * 3 // 2
    # The Operator may, by HTTP Digest too (again while the encoder made a
    # key frame for FFmpeg's join less than a second before).
    for _ in range(10):
        p = run(["curl", "-sS", "--digest", "-u", f"op:{users['op'][1]}", "-H", f"Content-Type: {SOAP}",
                 "--data-binary", "@-", "-w", "\n%{http_code}", f"{cs.http}{MEDIA}"],
                input=envelope(SET_H264.replace(">64<", ">500<").replace(">1<", ">30<")), timeout=30)
        body, _, code = p.stdout.decode().rpartition("\n")
        if "less than a second ago" not in body:
            break
        time.sleep(0.5)
    assert code == "200", (code, body)
    conf = h264_conf("op")
    assert (conf.RateControl.BitrateLimit, conf.H264.GovLength) == (500, 30), conf


def test_an_h264_sub_stream_an_nvr_sets_and_plays(camstream, config):
    # The sub-stream in H.264 (what an NVR records for detection): its
    # profile says H264 and lists its sizes; a client sets size, rate, bit
    # rate and key frame interval together; FFmpeg plays the URI it gets.
    with open(config, "a") as f:
        f.write('[streams.sub]\ncodec = "h264"\n')
    cs = camstream("--config", str(config), "--width", "1280", "--height", "720")

    async def change(cam):
        media = await cam.create_media_service()
        sub = (await media.GetProfiles())[1]
        opts = await media.GetVideoEncoderConfigurationOptions({"ConfigurationToken": "sub"})
        conf = sub.VideoEncoderConfiguration
        before = (conf.Encoding, conf.Resolution.Width, conf.Resolution.Height, conf.RateControl.FrameRateLimit,
                  conf.RateControl.BitrateLimit, conf.H264.GovLength)
        conf.Resolution.Width, conf.Resolution.Height = 320, 176
        conf.RateControl.FrameRateLimit = 10
        conf.RateControl.BitrateLimit = 300
        conf.H264.GovLength = 5
        await media.SetVideoEncoderConfiguration({"Configuration": conf, "ForcePersistence": False})
        after = (await media.GetProfiles())[1].VideoEncoderConfiguration
        # A JPEG configuration for it is refused.
        bad = (await media.GetProfiles())[1].VideoEncoderConfiguration
        bad.Encoding = "JPEG"
        refused = await set_refused(media, bad)
        setup = {"Stream": "RTP-Unicast", "Transport": {"Protocol": "RTSP"}}
        uri = (await media.GetStreamUri({"StreamSetup": setup, "ProfileToken": "sub"})).Uri
        return before, opts.H264, after, refused, uri

    before, opts, after, refused, uri = with_camera(cs.http_port, change)
    assert before == ("H264", 640, 360, 5, 500, 10), before
    sizes = [(r.Width, r.Height) for r in opts.ResolutionsAvailable]
    assert (640, 360) in sizes and (320, 176) in sizes and opts.H264ProfilesSupported == ["Baseline"], opts
    assert (opts.FrameRateRange.Min, opts.FrameRateRange.Max, opts.GovLengthRange.Max) == (1, 30, 1000), opts
    assert (after.Resolution.Width, after.Resolution.Height, after.RateControl.FrameRateLimit,
            after.RateControl.BitrateLimit, after.H264.GovLength) == (320, 176, 10, 300, 5), after
    assert refused and "H264" in refused, refused
    assert uri == f"rtsp://127.0.0.1:{cs.port}/sub", uri
    authed = uri.replace("rtsp://", f"rtsp://{USER}:{PASSWORD}@")
    frames = run(["ffprobe", "-v", "error", "-rtsp_transport", "tcp", "-i", authed, "-select_streams", "v",
                  "-show_entries", "frame=key_frame,width,height,pts_time", "-of", "csv=p=0",
                  "-read_intervals", "%+#21"], timeout=60).stdout.decode().split()
    rows = [f.split(",") for f in frames]  # key_frame,pts_time,width,height (ffprobe's order)
    assert len(rows) >= 20 and {(r[2], r[3]) for r in rows} == {("320", "176")}, rows
    # A key frame every 5 frames, 10 frames a second.
    assert sum(r[0] == "1" for r in rows) >= 3, rows
    times = [float(r[1]) for r in rows if r[1] != "N/A"]
    assert 0.07 < (times[-1] - times[0]) / (len(times) - 1) < 0.13, times


def set_encoder_body(token: str, **values: str) -> str:
    """SetVideoEncoderConfiguration of an H.264 configuration as an NVR
    sends it back, the sub-stream's as configured, with `values` (by
    element name) written as they are."""
    v = {"Encoding": "H264", "Width": "640", "Height": "360", "Quality": "50", "FrameRateLimit": "5",
         "EncodingInterval": "1", "BitrateLimit": "500", "GovLength": "10"} | values
    tt = lambda name: f"<tt:{name}>{v[name]}</tt:{name}>"  # noqa: E731
    return (f'<SetVideoEncoderConfiguration xmlns="http://www.onvif.org/ver10/media/wsdl" '
            f'xmlns:tt="http://www.onvif.org/ver10/schema"><Configuration token="{token}">'
            f'<tt:Name>{token}</tt:Name><tt:UseCount>1</tt:UseCount>{tt("Encoding")}'
            f'<tt:Resolution>{tt("Width")}{tt("Height")}</tt:Resolution>{tt("Quality")}'
            f'<tt:RateControl>{tt("FrameRateLimit")}{tt("EncodingInterval")}{tt("BitrateLimit")}</tt:RateControl>'
            f'<tt:H264>{tt("GovLength")}<tt:H264Profile>Baseline</tt:H264Profile></tt:H264>'
            '<tt:SessionTimeout>PT60S</tt:SessionTimeout></Configuration>'
            '<ForcePersistence>false</ForcePersistence></SetVideoEncoderConfiguration>')


def test_values_outside_the_options_and_unknown_tokens_refused(camstream, config):
    # An H.264 sub-stream (640x360, 5 frames/s, 500 kbit/s, a key frame
    # every 10) and the H.264 stream: values GetVideoEncoderConfigurationOptions
    # does not offer, or that are not the schema's xs:int, are
    # ter:ConfigModify; a token that names nothing is ter:NoConfig (or
    # ter:NoProfile), whatever the rest says. Before, each was taken (1e3
    # as 1000 kbit/s, 99999.9 as 100000) or got the encoding's fault.
    with open(config, "a") as f:
        f.write('[streams.sub]\ncodec = "h264"\n')
    cs = camstream("--config", str(config), "--width", "1280", "--height", "720")
    url = f"{cs.http}{MEDIA}"

    def post(body: str) -> requests.Response:
        return requests.post(url, data=envelope(body, USER, PASSWORD), headers={"Content-Type": SOAP}, timeout=10)

    def configuration(token: str) -> str:
        r = post(f'<GetVideoEncoderConfiguration xmlns="http://www.onvif.org/ver10/media/wsdl">'
                 f'<ConfigurationToken>{token}</ConfigurationToken></GetVideoEncoderConfiguration>')
        assert r.status_code == 200, r.text
        return r.text

    before = {t: configuration(t) for t in ("sub", "h264")}
    modify = ["env:Sender", "ter:InvalidArgVal", "ter:ConfigModify"]
    for token, values in [("sub", {"BitrateLimit": "1e3"}), ("sub", {"BitrateLimit": "99999.9"}),
                          ("sub", {"Quality": "1000"}), ("sub", {"EncodingInterval": "0"}),
                          ("sub", {"FrameRateLimit": "5.0"}), ("sub", {"Width": "-640"}),
                          ("h264", {"Width": "1280", "Height": "720", "FrameRateLimit": "30", "Quality": "1000"}),
                          ("h264", {"Width": "1280", "Height": "720", "FrameRateLimit": "30",
                                    "EncodingInterval": "0"})]:
        r = post(set_encoder_body(token, **values))
        assert r.status_code == 400 and fault(r) == modify, (token, values, r.text)
    r = post(set_encoder_body("nosuch"))
    assert fault(r) == ["env:Sender", "ter:InvalidArgVal", "ter:NoConfig"], r.text
    for arg, code in [("ConfigurationToken", "ter:NoConfig"), ("ProfileToken", "ter:NoProfile")]:
        r = post(f'<GetVideoEncoderConfigurationOptions xmlns="http://www.onvif.org/ver10/media/wsdl">'
                 f'<{arg}>nosuch</{arg}></GetVideoEncoderConfigurationOptions>')
        assert fault(r) == ["env:Sender", "ter:InvalidArgVal", code], (arg, r.text)
    # Nothing changed, and the sub-stream plays as it was.
    assert {t: configuration(t) for t in ("sub", "h264")} == before
    assert "stream now" not in cs.log() and "(H.264) now" not in cs.log(), cs.log()
    authed = f"rtsp://{USER}:{PASSWORD}@127.0.0.1:{cs.port}/sub"
    probe = run(["ffprobe", "-v", "error", "-rtsp_transport", "tcp", "-i", authed, "-select_streams", "v",
                 "-show_entries", "stream=width,height", "-of", "csv=p=0"], timeout=60).stdout.decode().strip()
    assert probe == "640,360", probe
    # XML Schema's xs:int allows a leading '+' (and zeros): '+01000' is
    # 1000 kbit/s, within BitrateRange, and taken.
    r = post(set_encoder_body("sub", BitrateLimit="+01000"))
    assert r.status_code == 200, r.text
    assert "<tt:BitrateLimit>1000</tt:BitrateLimit>" in configuration("sub")


def test_tokens_refused_and_faults(camstream, config):
    cs = camstream("--config", str(config))
    url = f"{cs.http}{DEVICE}"
    post = lambda body, **kw: requests.post(url, data=body, headers={"Content-Type": SOAP}, timeout=10, **kw)  # noqa: E731
    # The time answers without a user (clients need it to make a token).
    r = post(envelope('<GetSystemDateAndTime xmlns="http://www.onvif.org/ver10/device/wsdl"/>'))
    assert r.status_code == 200 and "<tt:UTCDateTime>" in r.text, r.text
    # A good token, once.
    nonce = os.urandom(16)
    good = envelope(DEVICE_INFO, USER, PASSWORD, nonce)
    r = post(good)
    assert r.status_code == 200 and "<tds:Manufacturer>camstream</tds:Manufacturer>" in r.text, r.text
    r = post(good)
    assert r.status_code == 400 and fault(r) == ["env:Sender", "ter:NotAuthorized"], r.text
    cs.wait_for("the token was used before")
    # A wrong password; a token made an hour ago (the camera's clock is the
    # machine's, set).
    assert fault(post(envelope(DEVICE_INFO, USER, "wrong"))) == ["env:Sender", "ter:NotAuthorized"]
    hour_ago = (datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1)).strftime(
        "%Y-%m-%dT%H:%M:%SZ")
    r = post(envelope(DEVICE_INFO, USER, PASSWORD, created=hour_ago))
    assert r.status_code == 400, r.text
    # No token: HTTP Digest is asked for; with it, the same answer.
    r = post(envelope(DEVICE_INFO))
    assert r.status_code == 401 and "Digest" in r.headers["WWW-Authenticate"], r.headers
    r = post(envelope(DEVICE_INFO), auth=requests.auth.HTTPDigestAuth(USER, PASSWORD))
    assert r.status_code == 200 and "<tds:Model>" in r.text, r.text
    # What the camera does not do, what is not SOAP, what is too big.
    r = post(envelope('<SystemReboot xmlns="http://www.onvif.org/ver10/device/wsdl"/>', USER, PASSWORD))
    assert r.status_code == 500 and fault(r) == ["env:Receiver", "ter:ActionNotSupported"], r.text
    assert r.reason == "Internal Server Error", r.reason
    r = post(b"<s:Envelope")
    assert r.status_code == 400 and fault(r) == ["env:Sender", "ter:WellFormed"], r.text
    with socket.create_connection(("127.0.0.1", cs.http_port), timeout=10) as c:
        c.sendall(f"POST {DEVICE} HTTP/1.1\r\nContent-Type: {SOAP}\r\nContent-Length: 100000\r\n\r\n".encode())
        assert c.recv(4096).startswith(b"HTTP/1.1 413 "), "no 413"
    # A body without a length (requests sends an iterator chunked).
    r = post(iter([envelope(DEVICE_INFO, USER, PASSWORD)]))
    assert r.status_code == 411 and r.reason == "Length Required", (r.status_code, r.reason)
    r = requests.get(url, timeout=10)
    assert r.status_code == 405 and r.headers["Allow"] == "POST"
    # Through all of it the camera streams on.
    r = requests.get(f"{cs.http}/snapshot.jpg", auth=requests.auth.HTTPDigestAuth(USER, PASSWORD), timeout=10)
    assert r.status_code == 200 and r.content[:2] == b"\xff\xd8"


def post_soap(url: str, body: bytes, session=requests) -> requests.Response:
    return session.post(url, data=body, headers={"Content-Type": SOAP}, timeout=10)


def created_in(delta: datetime.timedelta) -> str:
    """A Created that far from this machine's clock (the camera's here)."""
    return (datetime.datetime.now(datetime.UTC) + delta).strftime("%Y-%m-%dT%H:%M:%SZ")


NODE_MODULES = ROOT / "output/node/node_modules"
# Node's `onvif` (0.8.x; ci/test installs it into output/node): connects
# (GetSystemDateAndTime first, whose answer sets its timeShift, then
# GetServices, GetProfiles, GetVideoSources), then asks GetDeviceInformation
# with a UsernameToken dated by the camera's clock.
NODE_CLIENT = """
const { Cam } = require("onvif");
const [port, user, password] = process.argv.slice(1);
new Cam({ hostname: "127.0.0.1", port: Number(port), username: user, password, timeout: 10000 }, function (err) {
    if (err) { console.log("ERROR connect: " + err.message); process.exit(1); }
    this.getDeviceInformation(function (err, info) {
        if (err) { console.log("ERROR GetDeviceInformation: " + err.message); process.exit(1); }
        console.log("INFO " + JSON.stringify(info));
    });
});
"""


def node_onvif_signs_in(port: int) -> str:
    """What Node's `onvif` printed: INFO and the device's information, or
    ERROR and why."""
    assert (NODE_MODULES / "onvif/package.json").exists(), \
        "Node's onvif is not installed: npm install --prefix output/node onvif@0.8.3 (ci/test does)"
    r = subprocess.run(["node", "-e", NODE_CLIENT, str(port), USER, PASSWORD], capture_output=True, timeout=60,
                       env={**os.environ, "NODE_PATH": str(NODE_MODULES)}, check=False)
    return (r.stdout + r.stderr).decode().strip()


def zeep_signs_in(port: int) -> str:
    """What onvif-zeep-async got for GetDeviceInformation, having taken the
    camera's time (adjust_time) as Home Assistant's camera does: the
    manufacturer, or the fault."""
    from onvif import ONVIFCamera
    from zeep.exceptions import Fault

    async def session():
        cam = ONVIFCamera("127.0.0.1", port, USER, PASSWORD, no_cache=True, adjust_time=True)
        try:
            await cam.update_xaddrs()
            dev = await cam.create_devicemgmt_service()
            return (await dev.GetDeviceInformation()).Manufacturer
        except Fault as f:
            return f"fault: {f.message} {[q.localname for q in f.subcodes or []]}"
        finally:
            await cam.close()

    return asyncio.run(session())


def test_a_token_from_the_future_locks_nobody_out(camstream, config):
    """Created is checked against a window around the camera's clock, the
    same whether that clock is synchronised or not: a client whose clock
    is an hour ahead, or one dated year 9999, signing in with the right
    password moves nothing, and clients that take the camera's time from
    GetSystemDateAndTime (onvif-zeep-async, Node's onvif) still get in."""
    cs = camstream("--config", str(config))
    url = f"{cs.http}{DEVICE}"
    ahead = [post_soap(url, envelope(DEVICE_INFO, USER, PASSWORD, created=created))
             for created in (created_in(datetime.timedelta(hours=1)), "9999-12-31T23:59:59Z")]
    zeep, node = zeep_signs_in(cs.http_port), node_onvif_signs_in(cs.http_port)
    assert zeep == "camstream" and node.startswith("INFO ") and '"manufacturer":"camstream"' in node, \
        (zeep, node, cs.log())
    # The two tokens themselves are out of the window: refused.
    for r in ahead:
        assert r.status_code == 400 and fault(r) == ["env:Sender", "ter:NotAuthorized"], r.text
    cs.wait_for("the token's Created is too far from the camera's clock")


def test_a_token_is_refused_again_after_thousands_more(camstream, config):
    """A nonce is kept for as long as its token's Created is in the window,
    bounded per user: a user's memory full of tokens still in the window
    refuses that user's new tokens rather than forget a nonce, and slows
    no one else."""
    with open(config, "ab") as f:
        f.write(run([str(BIN), "passwd", "viewer", "--onvif"], input=b"viewer-secret\n", timeout=10).stdout)
    cs = camstream("--config", str(config))
    url = f"{cs.http}{DEVICE}"
    first = envelope(DEVICE_INFO, USER, PASSWORD)
    assert post_soap(url, first).status_code == 200
    # 4,200 fresh tokens of the same user on one connection (the camera
    # keeps 4,096 a user).
    answers = collections.Counter()
    with requests.Session() as s:
        for _ in range(4200):
            answers[post_soap(url, envelope(DEVICE_INFO, USER, PASSWORD), s).status_code] += 1
    r = post_soap(url, first)
    assert r.status_code == 400 and fault(r) == ["env:Sender", "ter:NotAuthorized"], (answers, r.text)
    cs.wait_for("the token was used before")
    assert answers == {200: 4095, 400: 105}, answers
    cs.wait_for("of this user's tokens are still within 5 minutes of the camera's clock")
    # Another user signs in; the first one still by HTTP Digest.
    r = post_soap(url, envelope(DEVICE_INFO, "viewer", "viewer-secret"))
    assert r.status_code == 200 and "<tds:Manufacturer>camstream</tds:Manufacturer>" in r.text, r.text
    r = requests.post(url, data=envelope(DEVICE_INFO), headers={"Content-Type": SOAP}, timeout=10,
                      auth=requests.auth.HTTPDigestAuth(USER, PASSWORD))
    assert r.status_code == 200, r.text


def test_a_user_signed_in_by_token_holds_at_most_its_share_of_connections(camstream, config):
    """max_connections_per_user counts connections a UsernameToken signed in,
    as it counts those HTTP Digest did: one ONVIF password cannot hold a
    port's connections idle (issue 51's password fill, over ONVIF)."""
    config.write_bytes(b"max_connections_per_user = 4\nmax_connections_per_ip = 32\n" + config.read_bytes())
    cs = camstream("--config", str(config))
    held = []
    for _ in range(8):
        request = envelope(DEVICE_INFO, USER, PASSWORD)
        s = socket.create_connection(("127.0.0.1", cs.http_port), timeout=5)
        s.sendall(f"POST {DEVICE} HTTP/1.1\r\nHost: camera\r\nContent-Type: {SOAP}\r\n"
                  f"Content-Length: {len(request)}\r\n\r\n".encode() + request)
        got = b""
        while not ((m := re.search(rb"(?im)^content-length: *(\d+)\r$", got)) and b"\r\n\r\n" in got
                   and len(got) >= got.index(b"\r\n\r\n") + 4 + int(m.group(1))):
            chunk = s.recv(65536)
            assert chunk, got
            got += chunk
        assert got.startswith(b"HTTP/1.1 200"), got[:200]
        held.append(s)
    # The four oldest were told 503 and closed as the newer ones signed in.
    closed = []
    time.sleep(0.5)
    for i, s in enumerate(held):
        s.settimeout(0.1)
        try:
            rest = s.recv(65536)
        except TimeoutError:
            continue
        if not rest or b"503" in rest:
            closed.append(i)
    for s in held:
        s.close()
    assert closed == [0, 1, 2, 3], closed
    cs.wait_for("connection pushed out: 503")


# ---- WS-Discovery, between network namespaces ----------------------------
# QEMU's user network carries no multicast: the camera runs in one network
# namespace, the NVR side in another, joined by a veth pair (conftest.py's
# `netns`).

PROBE_CLIENT = """
import sys
from wsdiscovery.discovery import ThreadedWSDiscovery
from wsdiscovery import QName
w = ThreadedWSDiscovery()
w.start()
try:
    for s in w.searchServices(types=[QName("http://www.onvif.org/ver10/network/wsdl", "NetworkVideoTransmitter")],
                              timeout=3):
        print("FOUND", s.getEPR(), " ".join(s.getXAddrs()), " ".join(str(x) for x in s.getScopes()))
finally:
    w.stop()
"""

LISTENER = """
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("", 3702))
s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
             struct.pack("4s4s", socket.inet_aton("239.255.255.250"), socket.inet_aton(sys.argv[1])))
print("READY", flush=True)
# Until nothing has come for this long.
s.settimeout(float(sys.argv[2]))
try:
    while True:
        d, a = s.recvfrom(65535)
        print("GOT", a[0], d.decode(), flush=True)
except socket.timeout:
    pass
"""


def test_nvr_finds_the_camera_by_ws_discovery(netns, tmp_path):
    cam_ns, nvr_ns, cam_if = netns
    listener = subprocess.Popen(["ip", "netns", "exec", nvr_ns, sys.executable, "-c", LISTENER, "192.0.2.2", "60"],
                                stdout=subprocess.PIPE, text=True)
    assert listener.stdout.readline().strip() == "READY"
    http_port = 18080
    cam = subprocess.Popen(["ip", "netns", "exec", cam_ns, str(BIN), "--listen", "0.0.0.0", "--rtsp-port", "8554",
                            "--http-port", str(http_port), "--source", "testpattern", "--anonymous", "true"],
                           stderr=subprocess.PIPE, text=True)
    try:
        # The NVR probes for NetworkVideoTransmitter.
        found = ""
        deadline = time.monotonic() + 20
        while "FOUND" not in found and time.monotonic() < deadline:
            found = run(["ip", "netns", "exec", nvr_ns, sys.executable, "-c", PROBE_CLIENT], timeout=30).stdout.decode()
        xaddr = f"http://192.0.2.1:{http_port}/onvif/device_service"
        line = next(x for x in found.splitlines() if x.startswith("FOUND"))
        _, epr, xaddrs, *scopes = line.split()
        assert epr.startswith("urn:uuid:") and xaddrs == xaddr, line
        assert "onvif://www.onvif.org/Profile/Streaming" in scopes, line
        # The device service at that address answers a client in the NVR's
        # namespace (the camera has no user and is anonymous: no password).
        body = envelope('<GetDeviceInformation xmlns="http://www.onvif.org/ver10/device/wsdl"/>')
        curl = run(["ip", "netns", "exec", nvr_ns, "curl", "-sS", "--fail", "-H", f"Content-Type: {SOAP}",
                    "--data-binary", "@-", xaddr], input=body, timeout=30).stdout.decode()
        assert "<tds:Manufacturer>camstream</tds:Manufacturer>" in curl, curl
        # /metrics (and the status page, which reads it) says discovery is on.
        metrics = run(["ip", "netns", "exec", nvr_ns, "curl", "-sS", "--fail",
                       f"http://192.0.2.1:{http_port}/metrics"], timeout=30).stdout.decode()
        assert re.search(r'^camstream_info\{[^}]*onvif="true",discovery="true"', metrics, re.M), metrics
        body = envelope('<GetNetworkInterfaces xmlns="http://www.onvif.org/ver10/device/wsdl"/>')
        curl = run(["ip", "netns", "exec", nvr_ns, "curl", "-sS", "--fail", "-H", f"Content-Type: {SOAP}",
                    "--data-binary", "@-", xaddr], input=body, timeout=30).stdout.decode()
        link = run(["ip", "-n", cam_ns, "-o", "link", "show", cam_if], timeout=10).stdout.decode()
        mac = re.search(r"link/ether (\S+)", link).group(1)
        assert f'<tds:NetworkInterfaces token="{cam_if}">' in curl, curl
        assert f"<tt:HwAddress>{mac}</tt:HwAddress>" in curl, curl
        assert ("<tt:Manual><tt:Address>192.0.2.1</tt:Address><tt:PrefixLength>24</tt:PrefixLength></tt:Manual>"
                "<tt:DHCP>false</tt:DHCP>") in curl, curl
        # A second address: its Hello. A clean stop: Bye.
        run(["ip", "-n", cam_ns, "addr", "add", "192.0.2.10/24", "dev", cam_if], timeout=10)
        time.sleep(1)
        cam.terminate()
        cam.wait(timeout=10)
        time.sleep(1)
        listener.terminate()
        heard = listener.communicate(timeout=30)[0]
    finally:
        if cam.poll() is None:
            cam.kill()
        listener.kill()
    hellos = [m for m in heard.split("GOT ")[1:] if "<d:Hello>" in m]
    byes = [m for m in heard.split("GOT ")[1:] if "<d:Bye>" in m]
    assert any(f"http://192.0.2.10:{http_port}/onvif/device_service" in m for m in hellos), heard
    assert byes and all(epr in m for m in byes), heard



def test_a_second_camstream_on_the_machine_says_it_shares_ws_discovery(camstream, netns):
    """Two daemons in one network namespace (one machine): the first has UDP
    3702 to itself and says nothing of it; the second takes the port too
    (both get the multicast Probes) and warns that another program listens
    there and what that does to discovery. A program that holds the port
    without sharing it leaves a third without discovery, saying why."""
    def start(ports: tuple[int, int]) -> Camstream:
        return camstream("--anonymous", "true", "--width", "160", "--height", "120", netns=netns.cam,
                         host="0.0.0.0", ports=ports)

    first = start((8554, 18080))
    first.wait_for("WS-Discovery: announcing http://192.0.2.1:18080/onvif/device_service")
    second = start((8555, 18081))
    second.wait_for("WS-Discovery: announcing http://192.0.2.1:18081/onvif/device_service")
    # What the warning says: both answer a Probe from the clients' side,
    # with one endpoint, which python-wsdiscovery lists once.
    found = run(["ip", "netns", "exec", netns.client, sys.executable, "-c", PROBE_CLIENT], timeout=30).stdout.decode()
    found = [line for line in found.splitlines() if line.startswith("FOUND")]
    assert len(found) == 1 and "http://192.0.2.1:1808" in found[0], found
    assert [first.stop(), second.stop()] == [0, 0], (first.log(), second.log())
    warning = [line for line in second.lines if "3702" in line]
    assert len(warning) == 1 and warning[0].startswith("camstream: warn: WS-Discovery: another program already "
                                                       "listens on UDP 3702"), second.log()
    assert "same endpoint" in warning[0] and "onvif = false" in warning[0], warning
    assert "3702" not in first.log(), first.log()
    assert "WS-Discovery off" not in second.log(), second.log()
    holder = subprocess.Popen(["ip", "netns", "exec", netns.cam, sys.executable, "-c",
                               "import socket, sys; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                               "s.bind(('', 3702)); print('BOUND', flush=True); sys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "BOUND"
        start((8554, 18080)).wait_for("WS-Discovery off: another program holds UDP 3702 and does not share it")
    finally:
        holder.kill()
        holder.wait()


def _probes_answered(sources: list[socket.socket], probe: bytes, count: int, target: str,
                     quiet: float = 1.5) -> dict[str, list[float]]:
    """Sends `count` copies of `probe` from each socket to `target`:3702 at
    once, then collects the answers until none came for `quiet` s: the
    times each source got one."""
    for _ in range(count):
        for s in sources:
            s.sendto(probe, (target, 3702))
    got: dict[str, list[float]] = {s.getsockname()[0]: [] for s in sources}
    end = time.monotonic() + quiet
    while (left := end - time.monotonic()) > 0:
        readable, _, _ = select.select(sources, [], [], left)
        for s in readable:
            data, _ = s.recvfrom(65536)
            if b"ProbeMatches" in data:
                got[s.getsockname()[0]].append(time.monotonic())
                end = time.monotonic() + quiet
    return got


def _most_per_second(times: list[float], rate: int) -> int:
    """The most answers a sender held to `rate` a second may send over the
    span `times` cover."""
    return rate * (int(max(times) - min(times)) + 1) if times else 0


def test_ws_discovery_answers_are_bounded_and_stay_on_the_subnet(netns):
    """A burst of Probes (python-wsdiscovery's, recorded) from one address
    gets one answer a second; from forty addresses at once, 20 a second in
    all; from an address outside the camera's subnet (reached through a
    router), none: a spoofed source does not make the camera a reflector."""
    cam_ns, client_ns, _ = netns
    client_if = run(["ip", "-n", client_ns, "-o", "link", "show", "type", "veth"], timeout=10).stdout.decode()
    client_if = client_if.split(":")[1].strip().split("@")[0]
    many = [f"192.0.2.{n}" for n in range(30, 70)]
    outside = "198.51.100.2"
    for a in [*many, "192.0.2.3"]:
        run(["ip", "-n", client_ns, "addr", "add", f"{a}/24", "dev", client_if], timeout=10)
    run(["ip", "-n", client_ns, "addr", "add", f"{outside}/24", "dev", client_if], timeout=10)
    # The clients' namespace routes for the outside network.
    run(["ip", "-n", cam_ns, "route", "add", "198.51.100.0/24", "via", "192.0.2.2"], timeout=10)
    probe = (Path(__file__).parent / "testdata/onvif/wsdiscovery-2.1.2-probe.xml").read_bytes()
    cam = subprocess.Popen(["ip", "netns", "exec", cam_ns, str(BIN), "--listen", "0.0.0.0", "--rtsp-port", "8554",
                            "--http-port", "18080", "--source", "testpattern", "--anonymous", "true"],
                           stderr=subprocess.DEVNULL)
    socks: dict[str, socket.socket] = {}
    try:
        with in_netns(client_ns):
            for a in ["192.0.2.2", "192.0.2.3", *many, outside]:
                socks[a] = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                socks[a].setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
                socks[a].bind((a, 0))
        deadline = time.monotonic() + 20
        while not _probes_answered([socks["192.0.2.3"]], probe, 1, "192.0.2.1", quiet=0.5)["192.0.2.3"]:
            assert time.monotonic() < deadline, "the camera never answered a Probe"
        problems = []
        time.sleep(1.1)
        one = _probes_answered([socks["192.0.2.2"]], probe, 1000, "192.0.2.1")["192.0.2.2"]
        print(f"1000 Probes from one address: {len(one)} answered")
        if not 1 <= len(one) <= _most_per_second(one, 1):
            problems.append(f"1000 Probes from one address: {len(one)} answered, not one a second")
        time.sleep(1.1)
        got = _probes_answered([socks[a] for a in many], probe, 5, "192.0.2.1")
        times = sorted(t for ts in got.values() for t in ts)
        span = max(times) - min(times) if times else 0
        print(f"5 Probes from each of {len(many)} addresses: {len(times)} answered, over {span:.2f} s")
        if not 1 <= len(times) <= _most_per_second(times, 20):
            problems.append(f"5 Probes from each of {len(many)} addresses: {len(times)} answered over "
                            f"{span:.2f} s, not 20 a second")
        if any(len(ts) > _most_per_second(ts, 1) for ts in got.values()):
            problems.append("an address of the forty got more than one answer a second")
        time.sleep(1.1)
        off = _probes_answered([socks[outside]], probe, 10, "192.0.2.1")[outside]
        print(f"10 Probes from outside the subnet: {len(off)} answered")
        if off:
            problems.append(f"10 Probes from outside the camera's subnet: {len(off)} answered")
        assert not problems, "\n".join(problems)
    finally:
        for s in socks.values():
            s.close()
        cam.terminate()
        cam.wait(timeout=10)
