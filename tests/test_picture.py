"""Picture settings on the host: who may read and change them (GET and
POST /picture, ONVIF's Imaging service), and what a source without camera
controls (the test pattern) answers. The settings themselves are set on
vivid under QEMU (test_v4l2.py, test_firmware.py)."""

from __future__ import annotations

import requests
from requests.auth import HTTPDigestAuth

from helpers import run
from test_onvif import SOAP, envelope, fault, levels_config

IMAGING = "/onvif/imaging_service"
GET_SETTINGS = ('<GetImagingSettings xmlns="http://www.onvif.org/ver20/imaging/wsdl">'
                '<VideoSourceToken>camera</VideoSourceToken></GetImagingSettings>')


def test_a_viewer_reads_and_only_an_operator_changes_the_picture(camstream, tmp_path):
    path = tmp_path / "camstream.toml"
    users = levels_config(path)
    cs = camstream("--config", str(path), "--width", "640", "--height", "360")
    url = cs.http + "/picture"
    viewer, op = (HTTPDigestAuth(n, users[n][1]) for n in ("viewer", "op"))

    assert requests.get(url, timeout=10).status_code == 401
    # None to list (the status page shows no form).
    r = requests.get(url, auth=viewer, timeout=10)
    assert r.status_code == 200 and r.json() == {"settings": []}, r.text
    r = requests.post(url, json={"brightness": 140}, auth=viewer, timeout=10)
    assert r.status_code == 403 and 'user "viewer" (user) may not change the picture' in r.json()["error"], r.text
    cs.wait_for('picture: user "viewer" (user) may not change the picture')
    # An operator passes, and is told why nothing was set.
    r = requests.post(url, json={"brightness": 140}, auth=op, timeout=10)
    assert r.status_code == 400 and r.json()["error"] == "this source has no picture settings", r.text
    for body, status, why in [
        (b'{"brightness": ', 400, "not JSON"),
        (b'{"zoom_absolute": 2}', 400, "not a picture setting"),
        (b'{"brightness": 1.5}', 400, "whole number"),
        (b"{}", 400, "no settings"),
    ]:
        r = requests.post(url, data=body, headers={"Content-Type": "application/json"}, auth=op, timeout=10)
        assert (r.status_code, why in r.json()["error"]) == (status, True), (body, r.text)
    # Not JSON, or too much of it: refused unread, the connection closed.
    r = requests.post(url, data="brightness=140", auth=op, timeout=10,
                      headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status_code == 415, r.text
    r = requests.post(url, data=b"{" + b" " * 5000 + b"}", auth=op, timeout=10,
                      headers={"Content-Type": "application/json"})
    assert r.status_code == 413, r.text
    assert requests.put(url, json={}, auth=op, timeout=10).status_code == 405

    # ONVIF: no Imaging service to announce, and its address says why.
    caps = run(["curl", "-sS", "--digest", "-u", "op:op-secret", "-H", f"Content-Type: {SOAP}", "--data-binary",
                "@-", cs.http + "/onvif/device_service"],
               input=envelope('<GetServices xmlns="http://www.onvif.org/ver10/device/wsdl">'
                              '<IncludeCapability>false</IncludeCapability></GetServices>'),
               timeout=30).stdout.decode()
    assert "ver10/media/wsdl" in caps and "imaging" not in caps, caps
    r = requests.post(cs.http + IMAGING, data=envelope(GET_SETTINGS), auth=op, timeout=10,
                      headers={"Content-Type": SOAP})
    assert r.status_code == 500 and "no picture settings" in r.text, r.text
    assert "ter:ActionNotSupported" in fault(r)
    # The stream went on through all of it.
    assert requests.get(cs.http + "/snapshot.jpg", auth=viewer, timeout=10).content[:2] == b"\xff\xd8"
