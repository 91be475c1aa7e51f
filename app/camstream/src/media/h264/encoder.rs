//! The H.264 stream's software encoder: a main-stream frame made 4:2:0
//! planes ([`ToI420`]) and encoded by OpenH264 (Cisco's encoder, BSD-2-Clause, built from source
//! into camstream: no patent-encumbered binary is loaded at run time, and
//! the license asks only for its notice) as Constrained Baseline, which
//! every RTSP client and NVR decodes. Its output is one access unit in
//! Annex B, SPS and PPS before each IDR picture.

use anyhow::Result;
use openh264::OpenH264API;
use openh264::encoder::{
    BitRate, Encoder, EncoderConfig, FrameRate, IntraFramePeriod, Profile, RateControlMode,
    SpsPpsStrategy, UsageType,
};
use openh264::formats::YUVSlices;

use crate::config::H264Settings;
use crate::media::i420::ToI420;
use crate::media::worker::{Encode, Picture};

pub struct H264Encoder {
    i420: ToI420,
    /// The pictures' size (None: the main stream's).
    size: Option<(usize, usize)>,
    config: EncoderConfig,
    /// Made at the first frame after a rest: OpenH264 keeps reference
    /// pictures and buffers for the size it encodes (about 12 MiB at 720p).
    encoder: Option<Encoder>,
}

impl H264Encoder {
    pub fn new(
        settings: &H264Settings,
        size: Option<(usize, usize)>,
        fps: u32,
    ) -> Result<H264Encoder> {
        let config = EncoderConfig::new()
            .bitrate(BitRate::from_bps(settings.bitrate))
            .max_frame_rate(FrameRate::from_hz(fps as f32))
            .rate_control_mode(RateControlMode::Bitrate)
            .usage_type(UsageType::CameraVideoRealTime)
            .profile(Profile::Baseline)
            // OpenH264 holds the bit rate only if it may skip a frame that
            // would overrun it (an empty access unit, not published).
            .skip_frames(true)
            .intra_frame_period(IntraFramePeriod::from_num_frames(settings.gop))
            // The parameter sets before each IDR picture.
            .sps_pps_strategy(SpsPpsStrategy::ConstantId)
            // One thread: the worker is one; the event loop keeps a core.
            .num_threads(1);
        Ok(H264Encoder {
            i420: ToI420::new()?,
            size,
            config,
            encoder: None,
        })
    }
}

impl Encode for H264Encoder {
    fn encode(&mut self, pic: Picture<'_>, key: bool, out: &mut Vec<u8>) -> Result<()> {
        out.clear();
        let ([y, u, v], (w, h)) = self.i420.picture(pic, self.size)?;
        let encoder = match &mut self.encoder {
            Some(e) => e,
            // A new encoder's first picture is an IDR picture anyway.
            None => self.encoder.insert(
                Encoder::with_api_config(OpenH264API::from_source(), self.config)
                    .map_err(|e| anyhow::anyhow!("OpenH264: {e}"))?,
            ),
        };
        if key {
            encoder.force_intra_frame();
        }
        let yuv = YUVSlices::new((y, u, v), (w, h), ToI420::strides((w, h)).into());
        let bitstream = encoder
            .encode(&yuv)
            .map_err(|e| anyhow::anyhow!("OpenH264: {e}"))?;
        bitstream.write_vec(out);
        Ok(())
    }

    fn rest(&mut self) {
        self.encoder = None;
        self.i420.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::v4l2::m2m::Choice;
    use camstream_h264::AccessUnit;

    fn frame() -> Vec<u8> {
        std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../camstream-rtp/testdata/ffmpeg-5.1-mjpeg-yuvj420p-huffman-default-160x120.jpg"
        ))
        .unwrap()
    }

    #[test]
    fn key_frames_carry_their_parameter_sets_and_come_when_asked() {
        let settings = H264Settings {
            bitrate: 500_000,
            gop: 100,
            encoder: Choice::Software,
        };
        let mut enc = H264Encoder::new(&settings, None, 30).unwrap();
        let jpeg = frame();
        let mut out = Vec::new();
        let mut kinds = Vec::new();
        for i in 0..6 {
            enc.encode(Picture::Jpeg(&jpeg), i == 4, &mut out).unwrap();
            let au = AccessUnit::parse(&out).unwrap();
            kinds.push((au.idr, au.sps.is_some() && au.pps.is_some()));
        }
        // The first is an IDR picture with SPS and PPS; then P pictures,
        // until one is asked for.
        assert_eq!(
            kinds,
            [
                (true, true),
                (false, false),
                (false, false),
                (false, false),
                (true, true),
                (false, false)
            ]
        );
        // Constrained Baseline (profile_idc 66).
        let au = {
            enc.encode(Picture::Jpeg(&jpeg), true, &mut out).unwrap();
            AccessUnit::parse(&out).unwrap()
        };
        assert_eq!(au.sps.unwrap()[1], 66);
    }

    #[test]
    fn a_broken_frame_is_an_error() {
        let settings = H264Settings {
            bitrate: 500_000,
            gop: 60,
            encoder: Choice::Software,
        };
        let mut enc = H264Encoder::new(&settings, None, 30).unwrap();
        let mut out = Vec::new();
        assert!(
            enc.encode(Picture::Jpeg(b"not a jpeg"), false, &mut out)
                .is_err()
        );
        enc.encode(Picture::Jpeg(&frame()), false, &mut out)
            .unwrap();
        assert!(AccessUnit::parse(&out).unwrap().idr);
    }
}
