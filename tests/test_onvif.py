"""ONVIF (Profile S) on camstream's HTTP port, with the client NVRs and
Home Assistant use: onvif-zeep-async finds the profiles, the stream and
snapshot URIs with a password, then FFmpeg streams the URI it returned and
the snapshot decodes; and the ways a token is refused (wrong password,
replayed, none at all), with the faults ONVIF's Core specification names.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import hashlib
import os
import re
import socket

import pytest
import requests

from conftest import BIN, run
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
        created = created or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
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


def test_onvif_zeep_async_profiles_stream_and_snapshot(camstream, config, tmp_path):
    from onvif import ONVIFCamera  # onvif-zeep-async

    cs = camstream("--config", str(config), "--width", "640", "--height", "360")

    async def ask():
        cam = ONVIFCamera("127.0.0.1", cs.http_port, USER, PASSWORD, no_cache=True)
        try:
            await cam.update_xaddrs()
            dev = await cam.create_devicemgmt_service()
            info = await dev.GetDeviceInformation()
            media = await cam.create_media_service()
            profiles = await media.GetProfiles()
            token = profiles[0].token
            setup = {"Stream": "RTP-Unicast", "Transport": {"Protocol": "RTSP"}}
            uri = await media.GetStreamUri({"StreamSetup": setup, "ProfileToken": token})
            snap_uri = await media.GetSnapshotUri({"ProfileToken": token})
            snapshot = await cam.get_snapshot(token)
            return info, profiles, uri.Uri, snap_uri.Uri, snapshot
        finally:
            await cam.close()

    info, profiles, uri, snap_uri, snapshot = asyncio.run(ask())
    assert info.Manufacturer == "camstream" and info.FirmwareVersion
    enc = profiles[0].VideoEncoderConfiguration
    assert (enc.Encoding, enc.Resolution.Width, enc.Resolution.Height) == ("JPEG", 640, 360)
    assert uri == f"rtsp://127.0.0.1:{cs.port}/stream", uri
    assert snap_uri == f"http://127.0.0.1:{cs.http_port}/snapshot.jpg", snap_uri
    assert jpeg_size(snapshot, tmp_path) == "640x360"
    # FFmpeg streams the URI the camera gave, with the same user.
    authed = uri.replace("rtsp://", f"rtsp://{USER}:{PASSWORD}@")
    out = run(["ffmpeg", "-v", "error", "-rtsp_transport", "tcp", "-i", authed, "-frames:v", "10",
               "-f", "rawvideo", "-pix_fmt", "yuvj420p", "-"], timeout=60).stdout
    assert len(out) == 10 * 640 * 360 * 3 // 2


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
    assert "used before" in cs.log()
    # A wrong password; a token made an hour ago (the camera's clock is the
    # machine's, set).
    assert fault(post(envelope(DEVICE_INFO, USER, "wrong"))) == ["env:Sender", "ter:NotAuthorized"]
    hour_ago = (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)).strftime(
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
    r = post(b"<s:Envelope")
    assert r.status_code == 400 and fault(r) == ["env:Sender", "ter:WellFormed"], r.text
    with socket.create_connection(("127.0.0.1", cs.http_port), timeout=10) as c:
        c.sendall(f"POST {DEVICE} HTTP/1.1\r\nContent-Type: {SOAP}\r\nContent-Length: 100000\r\n\r\n".encode())
        assert c.recv(4096).startswith(b"HTTP/1.1 413 "), "no 413"
    r = requests.get(url, timeout=10)
    assert r.status_code == 405 and r.headers["Allow"] == "POST"
    # Through all of it the camera streams on.
    r = requests.get(f"{cs.http}/snapshot.jpg", auth=requests.auth.HTTPDigestAuth(USER, PASSWORD), timeout=10)
    assert r.status_code == 200 and r.content[:2] == b"\xff\xd8"
