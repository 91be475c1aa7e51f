"""The kernel's memory-to-memory encoders, in the firmware under QEMU.

vicodec is the kernel's virtual stateful codec: an encoder and a decoder
with the interface of the Pi's VideoCore codec (bcm2835-codec), coding
FWHT instead of H.264. Debian's kernel leaves it out: tests/qemu/build
builds it for the image's kernel (the Buildroot kernel has it as a
module). camstream's encoder path (source/v4l2/m2m) sends a moving test
picture through vicodec's encoder with `camstream encoders --try`, once
with the module single-planar and once multi-planar (the VideoCore's
API); vicodec's decoder, driven by v4l2-ctl, decodes what came back, and
the picture is compared with the one sent. With `--from`, vivid's YU12
frames go in as the daemon hands a camera's frames over: vicodec reads
vivid's own buffers (DMABUF) where their layout is the one it reads, and
they are copied where it is not. And the daemon must see that vicodec
codes neither H.264 nor JPEG: by itself it encodes in software, told to
use vicodec it says why it cannot.
"""

from __future__ import annotations

import base64
import math
import re

import pytest

import guest
from helpers import figure
from test_v4l2 import start, stop

# vicodec's least frame, whose rows it rounds up to 368: camstream's frame
# goes in padded, the encoder told the picture's size by a crop.
W, H, FRAMES = 640, 360, 8
V4L2_CTL = "LD_LIBRARY_PATH=/tmp/t/v4l2/lib /tmp/t/v4l2/v4l2-ctl"
# Camera frames sent and decoded at 720p: more than the guest's /tmp holds.
SHM = "/dev/shm/m2m"


@pytest.fixture(scope="module")
def firmware():
    guest.build()
    if guest.FIRMWARE:
        pytest.skip("v4l2-ctl comes on the test drive, which is built for Debian's kernel")
    g = guest.Guest()
    g.sh("/etc/init.d/S50camstream stop")
    yield g
    g.close()


def load(g: guest.Guest, multiplanar: bool) -> tuple[str, str]:
    """(Re)loads vicodec; its encoder's and decoder's device nodes."""
    before = g.camera_records()
    g.sh("rmmod vicodec 2>/dev/null; modprobe v4l2_mem2mem && "
         f"insmod /tmp/t/vicodec.ko multiplanar={int(multiplanar)}")
    g.wait_for("cat /sys/class/video4linux/*/name", "stateful-decoder")

    def node(name: str) -> str:
        return g.sh(f"grep -lx {name} /sys/class/video4linux/*/name").strip().split("/")[-2]

    nodes = [node("stateful-encoder"), node("stateful-decoder")]
    g.camera_nodes_settled(nodes, before)
    return "/dev/" + nodes[0], "/dev/" + nodes[1]


def rows(g: guest.Guest, path: str, frame: int, every: int = 7, size: tuple[int, int] = (W, H)) -> bytes:
    """Every `every`th luma row of 4:2:0 frame `frame` in `path` (the
    serial console carries them): 7 is prime to the test picture's stripes
    of 4 rows, so a row out of place shows."""
    w, h = size
    skips = " ".join(str((frame * w * h * 3 // 2 + r * w) // w) for r in range(0, h, every))
    return base64.b64decode(g.sh(
        f"for s in {skips}; do dd if={path} bs={w} skip=$s count=1 2>/dev/null; done | base64"))


def psnr(a: bytes, b: bytes) -> float:
    assert len(a) == len(b) > 0, (len(a), len(b))
    se = sum((x - y) ** 2 for x, y in zip(a, b, strict=True))
    return math.inf if se == 0 else 10 * math.log10(255 * 255 * len(a) / se)


@pytest.mark.parametrize("multiplanar", [False, True], ids=["single-planar", "multi-planar"])
def test_frames_through_vicodec_and_back(firmware, multiplanar):
    enc, dec = load(firmware, multiplanar)
    listed = firmware.sh("camstream encoders")
    api = "multi" if multiplanar else "single"
    assert re.search(rf"^{enc}: vicodec \(vicodec\), {api}-planar: FWHT from .*\bYU12\b", listed, re.M), listed
    # The decoder takes FWHT in: not an encoder.
    assert dec not in listed, listed

    out = firmware.sh(f"rm -rf /tmp/m2m; camstream encoders --try --size {W}x{H} --frames {FRAMES} "
                      "--save /tmp/m2m; echo status=$?")
    assert "status=0" in out, out
    # (vicodec marks key frames only where it decodes.)
    m = re.search(rf"^{enc} FWHT {W}x{H}: {FRAMES} frames, ([\d.]+) ms a frame, (\d+) bytes a frame", out, re.M)
    assert m, out
    raw = W * H * 3 // 2
    assert 0 < int(m[2]) < raw, out
    figure(f"vicodec ({api}-planar, under QEMU) through camstream's encoder path: {FRAMES} frames "
           f"{W}x{H}, {m[1]} ms and {m[2]} bytes a frame (raw: {raw})")

    # vicodec's decoder gives back what its encoder was sent.
    coded = f"/tmp/m2m/{enc.split('/')[-1]}.FWHT"
    firmware.sh(f"{V4L2_CTL} -d {dec} --set-fmt-video-out=pixelformat=FWHT --stream-mmap --stream-out-mmap "
                f"--stream-from {coded} --stream-to /tmp/m2m/decoded.yuv --stream-count {FRAMES} 2>&1")
    # v4l2-ctl writes the picture (the decoder's compose rectangle), not
    # the padding.
    assert int(firmware.sh("wc -c < /tmp/m2m/decoded.yuv")) == FRAMES * raw
    for frame in (0, FRAMES - 1):
        sent = rows(firmware, "/tmp/m2m/input.yu12", frame)
        back = rows(firmware, "/tmp/m2m/decoded.yuv", frame)
        p = psnr(sent, back)
        figure(f"vicodec ({api}-planar): frame {frame} decoded {p:.1f} dB from the picture sent (luma)")
        # FWHT at vicodec's default quantizers keeps the picture: the
        # moving square and the gradients. A plane in the wrong place, a
        # wrong stride or another frame would be far below.
        assert p > 30, p
    # Frames differ (the square moves), and each came back as itself.
    last = rows(firmware, "/tmp/m2m/decoded.yuv", FRAMES - 1)
    assert psnr(rows(firmware, "/tmp/m2m/input.yu12", 0), last) < 30


@pytest.mark.parametrize(("size", "in_place", "multiplanar"),
                         [((1280, 720), True, True), ((1280, 720), True, False), ((640, 360), False, True)],
                         ids=["in-place-multi-planar", "in-place-single-planar", "copied"])
def test_a_cameras_frames_through_vicodec(firmware, size, in_place, multiplanar):
    enc, dec = load(firmware, multiplanar)
    w, h = size
    frames = 6
    # vivid's bars sliding fast: each frame differs from the one before,
    # so a frame read from another of the camera's buffers shows. (vivid
    # as it was bound at boot: one bound again can refuse an open for a
    # moment after its node is there.)
    firmware.sh(f"rm -rf {SHM}; {V4L2_CTL} -d /dev/video0 -c horizontal_movement=0")
    out = firmware.sh(f"camstream encoders --try --from /dev/video0 --size {w}x{h} --frames {frames} "
                      f"--save {SHM}; echo status=$?", timeout=120)
    assert "status=0" in out, out
    line = re.search(rf"^{enc} FWHT {w}x{h}: {frames} frames, ([\d.]+) ms a frame, .*$", out, re.M)
    assert line, out
    if in_place:
        # vicodec reads 720 rows of 1280 bytes, as vivid lays them out.
        assert line[0].endswith("reading the camera's buffers in place (DMABUF)"), line[0]
    else:
        # It reads 368 rows at 640x360: vivid's 360 are copied in, padded.
        assert line[0].endswith("copying each frame in (not the camera's buffers: the encoder reads "
                                "368 rows of 640 bytes, the camera's buffers hold 360 of 640)"), line[0]
    api = "multi" if multiplanar else "single"
    figure(f"vivid's {w}x{h} YU12 through vicodec ({api}-planar, under QEMU), "
           f"{'in place' if in_place else 'copied'}: {line[1]} ms a frame")

    name = enc.split("/")[-1]
    sent = f"{SHM}/{name}.FWHT.yu12"
    assert int(firmware.sh(f"wc -c < {sent}")) == frames * w * h * 3 // 2

    def decode() -> tuple[int, str]:
        out = firmware.sh(f"{V4L2_CTL} -d {dec} --set-fmt-video-out=pixelformat=FWHT,width={w},height={h} "
                          f"--stream-mmap --stream-out-mmap --stream-from {SHM}/{name}.FWHT "
                          f"--stream-to {SHM}/decoded.yuv --stream-count {frames} 2>&1")
        return int(firmware.sh(f"wc -c < {SHM}/decoded.yuv")), out

    # Once (a CI run under load) v4l2-ctl, draining vicodec's decoder at the
    # file's end, got only the first frame back (and exited 0); the same
    # file decoded again is the judge of what camstream sent.
    got, out = decode()
    if got != frames * w * h * 3 // 2:
        figure(f"vicodec's decoder, driven by v4l2-ctl: {got} bytes of {frames} frames; decoded again. "
               f"v4l2-ctl said: {out.strip()!r}")
        got, out = decode()
    assert got == frames * w * h * 3 // 2, out
    for frame in (0, frames - 1):
        p = psnr(rows(firmware, sent, frame, size=size), rows(firmware, f"{SHM}/decoded.yuv", frame, size=size))
        figure(f"vivid {w}x{h} through vicodec: frame {frame} decoded {p:.1f} dB from the frame sent (luma)")
        assert p > 30, p
    # The frames sent differ: the comparison above tells them apart.
    apart = psnr(rows(firmware, sent, 0, size=size), rows(firmware, f"{SHM}/decoded.yuv", frames - 1, size=size))
    assert apart < 25, apart
    firmware.sh(f"rm -r {SHM}")


def test_a_size_the_encoder_cannot_code_is_an_error(firmware):
    enc, _ = load(firmware, True)
    out = firmware.sh("camstream encoders --try --size 320x240 --frames 2; echo status=$?")
    assert "status=1" in out, out
    assert re.search(rf"^{enc} FWHT 320x240: FAILED: {enc}: 320x240 in the driver's 640x368: "
                     r"the driver cropped to 640x360", out, re.M), out


def test_the_daemon_does_not_take_vicodec_for_h264(firmware):
    enc, _ = load(firmware, True)
    log = start(firmware, "--source testpattern --width 320 --height 240")
    stop(firmware)
    assert "encoded by OpenH264 (software)" in log, log

    firmware.sh(f"printf '[streams.h264]\\nencoder = \"{enc}\"\\n' > /tmp/m2m.toml")
    log = start(firmware, "--config /tmp/m2m.toml --source testpattern --width 320 --height 240")
    stop(firmware)
    assert f'no H.264 stream: streams.h264.encoder = "{enc}" is not an H.264 encoder taking YU12' in log, log

    # Nor for the JPEG it makes of a raw camera's frames (vivid's YUYV).
    out = firmware.sh(f"camstream --anonymous true --format YUYV --encoder {enc} 2>&1; echo status=$?", timeout=60)
    assert f'encoder = "{enc}" is not a JPEG encoder taking YU12' in out and "status=1" in out, out
