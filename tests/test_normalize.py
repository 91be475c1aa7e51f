"""Frames RTP/JPEG cannot carry as they are, from real encoders (cjpeg,
jpegtran, FFmpeg), streamed through camstream's normalizer and decoded by
FFmpeg and GStreamer clients. Lossless repairs must decode to exactly what
jpegtran's lossless transcode of the same frames decodes to; re-encoded ones
must look like the source."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from helpers import Media, assert_frames_match
from test_interop import ffmpeg_client, gst_client

W, H = 320, 240
FRAMES = 8

# name, how the frames are made, what camstream does, the lossless reference
# transcode (jpegtran arguments) where there is one, and the reason counted.
VARIETY = [
    ("ffmpeg-optimal-huffman", ("ffmpeg", "yuvj420p", "optimal"), "transcoded losslessly", [],
     "non-standard-huffman"),
    ("cjpeg-optimize", ("cjpeg", ["-optimize"]), "transcoded losslessly", [], "non-standard-huffman"),
    ("cjpeg-progressive", ("cjpeg", ["-progressive"]), "transcoded losslessly", [], "progressive"),
    ("cjpeg-arithmetic", ("cjpeg", ["-arithmetic"]), "transcoded losslessly", [], "arithmetic"),
    ("cjpeg-restart-optimize", ("cjpeg", ["-optimize", "-restart", "2"]), "transcoded losslessly", [],
     "non-standard-huffman"),
    ("cjpeg-316x236", ("cjpeg", ["-size", "316x236"]), "cropped losslessly", ["-crop", "312x232+0+0"],
     "size-not-multiple-of-8"),
    ("cjpeg-grayscale", ("cjpeg", ["-grayscale"]), "re-encoded", None, "grayscale"),
    ("cjpeg-444", ("cjpeg", ["-sample", "1x1"]), "re-encoded", None, "4:4:4"),
    ("cjpeg-411", ("cjpeg", ["-sample", "4x1"]), "re-encoded", None, "sampling"),
    ("ffmpeg-422", ("ffmpeg", "yuvj422p", "default"), "re-encoded", None, "sampling"),
    ("cjpeg-three-quant-tables", ("cjpeg", ["-qtables", "QTABLES", "-qslots", "0,1,2"]), "re-encoded", None,
     "chroma-quant-tables"),
    ("cjpeg-rgb", ("cjpeg", ["-rgb"]), "re-encoded", None, "rgb"),
]

# Luma and chroma tables of libjpeg at quality 75, and a third (coarser) one
# for Cr: the layout some webcams send.
QTABLES = """
 8  6  5  8 12 20 26 31   6  6  7 10 13 29 30 28   7  7  8 12 20 29 35 28
 7  9 11 15 26 44 40 31   9 11 19 28 34 55 52 39  12 18 28 32 41 52 57 46
25 32 39 44 52 61 60 51  36 46 48 49 56 50 52 50
 9  9 12 24 50 50 50 50   9 11 13 33 50 50 50 50  12 13 28 50 50 50 50 50
24 33 50 50 50 50 50 50  50 50 50 50 50 50 50 50  50 50 50 50 50 50 50 50
50 50 50 50 50 50 50 50  50 50 50 50 50 50 50 50
"""
QTABLES += "\n" + " ".join(["16"] * 64) + "\n"


def make(media: Media, tmp_path, name: str, how) -> tuple[Path, int, int]:
    if how[0] == "ffmpeg":
        _, pix_fmt, huffman = how
        return media.ffmpeg(f"{name}.mjpeg", f"{W}x{H}", FRAMES, pix_fmt=pix_fmt, huffman=huffman), W, H
    args = list(how[1])
    size = f"{W}x{H}"
    if "-size" in args:
        i = args.index("-size")
        size = args[i + 1]
        del args[i:i + 2]
    if "QTABLES" in args:
        qt = tmp_path / "qtables.txt"
        qt.write_text(QTABLES)
        args[args.index("QTABLES")] = str(qt)
    w, h = map(int, size.split("x"))
    return media.cjpeg(f"{name}.mjpeg", size, FRAMES, args), w, h


def psnr(a: bytes, b: bytes) -> float:
    se = sum((x - y) ** 2 for x, y in zip(a, b, strict=True))
    return math.inf if se == 0 else 10 * math.log10(255 * 255 * len(a) / se)


def assert_looks_like(received: list[bytes], reference: list[bytes], w: int, h: int, what: str) -> None:
    """Each received frame is close (luma PSNR) to one of the source frames:
    one generation of JPEG at quality 80 and halved chroma."""
    assert len(received) >= FRAMES, f"{what}: only {len(received)} frames"
    for n, f in enumerate(received[:FRAMES]):
        best = max(psnr(f[:w * h], r[:w * h]) for r in reference)
        assert best > 32, f"{what}: frame {n} is {best:.1f} dB from the nearest source frame"
        # Chroma too: a swapped or misplaced plane scores far lower.
        best_c = max(psnr(f[w * h:], r[w * h:]) for r in reference)
        assert best_c > 27, f"{what}: frame {n} chroma is {best_c:.1f} dB from the source"


@pytest.mark.parametrize("name,how,fix,lossless,reason", VARIETY, ids=[v[0] for v in VARIETY])
def test_every_frame_is_repaired_and_decodes(camstream, media, tmp_path, name, how, fix, lossless, reason):
    clip, w, h = make(media, tmp_path, name, how)
    cs = camstream("--source", f"file:{clip}")
    ow, oh = w & ~7, h & ~7
    from_ffmpeg = ffmpeg_client(cs.url, "tcp", FRAMES * 2, "yuvj420p", ow, oh)
    from_gst = gst_client(cs.url, "tcp", FRAMES * 2, "I420", ow, oh, tmp=tmp_path)
    cs.wait_for(": " + fix)
    if lossless is not None:
        # What jpegtran's lossless transcode of the same frames decodes to,
        # in each client's decoder.
        ref = media.jpegtran(f"{name}-jpegtran.mjpeg", clip, ["-copy", "none", *lossless])
        assert_frames_match(from_ffmpeg, media.ffmpeg_reference(ref, ow, oh, "yuvj420p"), FRAMES * 2)
        assert_frames_match(from_gst, media.gst_reference(ref, ow, oh, "I420"), FRAMES * 2)
    else:
        assert (ow, oh) == (w, h)
        # The source as FFmpeg decodes it (GStreamer 1.22's jpegdec itself
        # decodes RGB and 4:1:1 JPEGs wrongly); I420 and yuvj420p share a
        # layout.
        ref = media.ffmpeg_reference(clip, w, h, "yuvj420p")
        assert_looks_like(from_ffmpeg, ref, w, h, "FFmpeg")
        assert_looks_like(from_gst, ref, w, h, "GStreamer")
    assert "not sent" not in cs.log(), cs.log()
    # On stopping, camstream sums up what it repaired and refused, per reason.
    assert cs.stop() == 0
    summary = cs.wait_for("repaired: ")
    repaired = int(re.search(rf"repaired: .*\b{re.escape(reason)} (\d+)", summary).group(1))
    streamed = int(re.search(r"(\d+) streamed", summary).group(1))
    assert repaired == streamed >= FRAMES * 2, summary
    assert summary.endswith("refused: none"), summary
    print(f"{name}: {summary.split('info: ', 1)[-1]}")
