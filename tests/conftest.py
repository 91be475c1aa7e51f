"""Fixtures: the camstream binary started on free ports, live555's
openRTSP, and test media made by real encoders (helpers.py has what they
are built on)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import guest
from helpers import FIGURES, Camstream, Media, veth_namespaces


@pytest.fixture
def camstream(request):
    """Starts camstream with extra arguments (and Camstream's keywords);
    stops it after the test and checks it stopped cleanly (exit status 0 on
    SIGTERM). Prints its log when the test failed."""
    started: list[Camstream] = []

    def start(*args: str, wait: bool = True, **kw) -> Camstream:
        c = Camstream(list(args), wait=wait, **kw)
        started.append(c)
        return c

    yield start
    call = getattr(request.node, "report_call", None)
    for c in started:
        if call is not None and call.failed:
            print(f"--- camstream {' '.join(c.args[1:])}:\n{c.log()[-8000:]}")
        was_running = c.alive()
        code = c.stop()
        if was_running:
            assert code == 0, f"camstream exited with {code} on SIGTERM:\n{c.log()}"


@pytest.fixture
def openrtsp(tmp_path):
    """live555's openRTSP (`$CAMSTREAM_OPENRTSP`): VLC's RTSP client and RFC
    2435 depacketizer, run as VLC runs them. live555 is not in Debian (nor is
    a VLC with it), so the test is skipped without one; its recorded
    exchanges (testdata/rtsp/live555-*) are replayed either way. Returns a
    function running it with ARGS in a folder of its own, where `-F PREFIX`
    puts one JPEG file per frame; it gives that folder and the result."""
    path = os.environ.get("CAMSTREAM_OPENRTSP")
    if not path:
        pytest.skip("no live555 openRTSP given (CAMSTREAM_OPENRTSP=/path/to/openRTSP: tests/README.md)")
    assert os.access(path, os.X_OK), f"CAMSTREAM_OPENRTSP={path} is not a program"

    def start(*args: str, name: str = "openrtsp") -> tuple[Path, subprocess.CompletedProcess]:
        folder = tmp_path / name
        folder.mkdir()
        return folder, subprocess.run([path, *args], cwd=folder, capture_output=True, text=True,
                                      errors="replace", timeout=60, stdin=subprocess.DEVNULL)
    return start


@pytest.fixture
def netns():
    """Two network namespaces, camera (192.0.2.1) and clients (192.0.2.2),
    on a veth pair; removed afterwards (helpers.veth_namespaces)."""
    with veth_namespaces() as ns:
        yield ns


@pytest.fixture(scope="session")
def media(tmp_path_factory) -> Media:
    for tool in ("ffmpeg", "gst-launch-1.0", "cjpeg"):
        assert shutil.which(tool), f"{tool} is missing: run ci/test, which installs it"
    return Media(tmp_path_factory.mktemp("media"))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: what the emulated Raspberry Pi repeats of the virt board's tests, at 4 times "
        "their time; ci/test leaves them out (-m 'not slow'), `-m slow` runs them")
    config.addinivalue_line(
        "markers", "guest: boots the firmware under QEMU (set on every test of a file that imports "
        "guest.py, by conftest.py); `-m 'not guest'` runs the host's tests alone")


def pytest_collection_modifyitems(items):
    # By file, not by the `firmware` fixture: test_grow and README's update
    # steps boot guests of their own, without it.
    for item in items:
        if getattr(getattr(item, "module", None), "guest", None) is guest:
            item.add_marker(pytest.mark.guest)


def pytest_terminal_summary(terminalreporter):
    if FIGURES:
        terminalreporter.section("measured")
        for line in FIGURES:
            terminalreporter.write_line(line)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    # Kept on the test item, so fixtures can tell in teardown whether the
    # test failed (and leave evidence, such as a guest's console).
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report
