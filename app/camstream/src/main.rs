//! camstream: an RTSP server for camera firmware. Frames come from a source
//! (test pattern, MJPEG file, camera), are checked and packetized as RFC 2435
//! RTP/JPEG once, and are fanned out to every client.

mod clock;
mod config;
mod jpegenc;
mod logger;
mod server;
mod source;

use std::process::ExitCode;

use clap::Parser;

fn run() -> anyhow::Result<()> {
    let cfg = config::Config::load(config::Options::parse())?;
    logger::init(cfg.log_level);
    let source = source::open(&cfg)?;
    let info = source.info();
    let server = server::Server::bind(cfg.clone(), info)?;
    let addr = server.rtsp_addr()?;
    let host = if addr.ip().is_unspecified() {
        "127.0.0.1".to_string()
    } else {
        addr.ip().to_string()
    };
    log::info!(
        "streaming {}x{} at {} fps from {} on rtsp://{host}:{}/{}",
        info.width,
        info.height,
        info.fps,
        match &cfg.source {
            source::SourceSpec::TestPattern => "the test pattern".to_string(),
            source::SourceSpec::File(p) => p.display().to_string(),
        },
        addr.port(),
        cfg.path
    );
    server.run(source)
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line: the error and its causes.
            eprintln!("camstream: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
