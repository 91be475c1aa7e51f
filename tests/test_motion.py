"""Motion detection ([motion]): the test pattern's box and ramp move, and
SIGUSR2 stops and starts them; /metrics and the log say when motion
starts and stops. The frame number and time (top left) and the clock
strip (bottom) change in every frame: they are regions to ignore, as a
camera's clock overlay would be."""

import signal
import time

import pytest
import requests

from test_http import metric

MOTION = """[motion]
enabled = true
fps = 5
min_duration = 0.4
hold = 1.5
ignore = [[0, 0, 0.6, 0.1], [0, 0.94, 1, 0.06]]
"""


def motion(cs) -> tuple[float, float, float]:
    m = requests.get(cs.http + "/metrics", timeout=10).text
    return (metric(m, "camstream_motion"), metric(m, "camstream_motion_events_total", 'state="started"'),
            metric(m, "camstream_motion_events_total", 'state="stopped"'))


def until(cs, want: tuple[float, float, float], timeout: float = 10) -> None:
    end = time.monotonic() + timeout
    got = motion(cs)
    while got != want and time.monotonic() < end:
        time.sleep(0.2)
        got = motion(cs)
    assert got == want, (got, cs.log())


def test_motion_starts_and_stops_with_the_picture(camstream, tmp_path):
    conf = tmp_path / "camstream.toml"
    conf.write_text(MOTION)
    cs = camstream("--config", str(conf), "--width", "640", "--height", "360")
    cs.wait_for("motion detection: 5 pictures a second, sensitivity 50")
    # The box moves from the start.
    until(cs, (1, 1, 0))
    cs.wait_for("motion started (")
    # Standing still: motion stops once nothing changed for 1.5 s.
    cs.proc.send_signal(signal.SIGUSR2)
    until(cs, (0, 1, 1))
    cs.wait_for("motion stopped")
    # No motion while it stands, whatever the clock and the strip do.
    time.sleep(3)
    assert motion(cs) == (0, 1, 1)
    m = requests.get(cs.http + "/metrics", timeout=10).text
    assert metric(m, "camstream_motion_pictures_total") >= 20
    # Moving again.
    cs.proc.send_signal(signal.SIGUSR2)
    until(cs, (1, 2, 1))


@pytest.mark.parametrize("line,says", [
    ("sensitivity = 0", ":3:15: motion.sensitivity = 0: must be from 1 to 100"),
    ("min_duration = -1", "motion.min_duration"),
    ("ignore = [[0, 0, 2, 1]]", "motion.ignore = [0.0, 0.0, 2.0, 1.0]: a region must be inside the picture"),
    ("ignore = [[0, 0, 1]]", "[x, y, width, height]"),
    ("fps = 99", "motion.fps"),
])
def test_a_wrong_motion_setting_is_refused_with_why(camstream, tmp_path, line, says):
    conf = tmp_path / "camstream.toml"
    conf.write_text(f"[motion]\nenabled = true\n{line}\n")
    cs = camstream("--config", str(conf), wait=False)
    assert cs.proc.wait(20) != 0
    assert says in cs.log(), cs.log()


def test_the_status_page_shows_motion_live(camstream, tmp_path):
    """Chromium (Playwright) on the status page: the Motion row follows the
    picture, moving then still."""
    import re
    import shutil

    from playwright.sync_api import expect, sync_playwright

    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is missing: run ci/test, which installs it"
    conf = tmp_path / "camstream.toml"
    conf.write_text(MOTION)
    cs = camstream("--config", str(conf), "--width", "320", "--height", "240")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto(cs.http + "/?mode=mjpeg")
            row = page.locator("#motion")
            expect(row).to_have_text(re.compile(r"^moving \(\d+ % of the picture changed\); 1 start "), timeout=15000)
            cs.proc.send_signal(signal.SIGUSR2)
            expect(row).to_have_text(re.compile(r"^still; 1 start "), timeout=15000)
            cs.proc.send_signal(signal.SIGUSR2)
            expect(row).to_have_text(re.compile(r"^moving .*; 2 starts "), timeout=15000)
        finally:
            browser.close()

