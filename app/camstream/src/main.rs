//! The camstream daemon: settings, then the server (main.rs of the library
//! this binary is a thin shell around).

use camstream::{check, config, encoders, logger, preseed, privileges, server, source};

use std::process::ExitCode;

fn run() -> anyhow::Result<()> {
    #[cfg(feature = "libcamera")]
    source::libcamera::init();
    let opts = config::Options::from_command_line();
    if let Some(config::Command::Probe { device }) = &opts.command {
        if device.is_none() {
            if let Some(cameras) = source::libcamera::probe() {
                print!("{cameras}");
            }
        }
        print!("{}", source::v4l2::probe(device.as_deref())?);
        return Ok(());
    }
    if let Some(config::Command::Encoders {
        trial,
        size,
        frames,
        save,
        from,
    }) = &opts.command
    {
        let trial = match trial {
            false => None,
            true => {
                let (w, h) = size
                    .split_once('x')
                    .and_then(|(w, h)| Some((w.parse().ok()?, h.parse().ok()?)))
                    .ok_or_else(|| {
                        anyhow::anyhow!("--size {size:?}: use WIDTHxHEIGHT, e.g. 1280x720")
                    })?;
                Some(encoders::Trial {
                    width: w,
                    height: h,
                    frames: *frames,
                    save: save.clone(),
                    from: from.clone(),
                })
            }
        };
        print!("{}", encoders::run(trial)?);
        return Ok(());
    }
    if let Some(config::Command::Passwd {
        name,
        onvif,
        user_level,
    }) = &opts.command
    {
        if !config::valid_user_name(name) {
            anyhow::bail!(
                "{name:?}: a user name has 1-64 characters, none of them ':', '\"', '\\' or control"
            );
        }
        let mut password = String::new();
        std::io::stdin().read_line(&mut password)?;
        let password = password.trim_end_matches(['\r', '\n']);
        if password.is_empty() {
            anyhow::bail!("no password on standard input");
        }
        let u = camstream_rtsp::auth::User::from_password(name, config::REALM, password);
        let kept = onvif.then_some(password);
        match &opts.config {
            Some(path) => {
                config::set_user(path, &u, kept, *user_level)?;
                eprintln!(
                    "camstream: user {name} set in {}; restart camstream to apply",
                    path.display()
                );
            }
            None => println!(
                "{}",
                config::with_user("", &u, kept, *user_level)?.trim_end()
            ),
        }
        return Ok(());
    }
    if let Some(config::Command::Preseed { file, data }) = &opts.command {
        let text = std::fs::read_to_string(file)
            .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        let plan =
            preseed::plan(&text).map_err(|e| anyhow::anyhow!("{}: {e:#}", file.display()))?;
        for done in preseed::apply(&plan, &preseed::Targets::under(data))? {
            println!("{done}");
        }
        for skipped in &plan.not_applied {
            println!("not applied: {skipped}");
        }
        return Ok(());
    }
    if let Some(config::Command::Check { url, timeout }) = opts.command.clone() {
        // The config (if any) gives the default URL and, on the device, the
        // user whose stored digests answer a password request.
        let cfg = config::Config::load(opts)?;
        let url = url.unwrap_or_else(|| {
            let host = match cfg.listen {
                a if a.is_unspecified() => "127.0.0.1".to_string(),
                std::net::IpAddr::V6(a) => format!("[{a}]"),
                a => a.to_string(),
            };
            format!("rtsp://{host}:{}/{}", cfg.rtsp_port, cfg.path)
        });
        let target = camstream_rtsp::url::parse(&url)?;
        let user = match &target.credentials {
            Some((name, password)) => Some(camstream_rtsp::auth::User::from_password(
                name,
                config::REALM,
                password,
            )),
            // A user set from Imager's hash has digests once it signed in.
            None => cfg
                .users
                .iter()
                .chain(cfg.hashed_users.iter().filter_map(|h| h.learnt.as_ref()))
                .next()
                .cloned(),
        };
        let url = target.url;
        let seen = check::run(&url, user.as_ref(), std::time::Duration::from_secs(timeout))
            .map_err(|e| match cfg.hashed_users.first() {
                Some(h) if user.is_none() => e.context(format!(
                    "user {:?} is known by its password hash only until it signs in once on the camera's page",
                    h.name
                )),
                _ => e,
            })?;
        println!(
            "{url}: {}x{} frame, {} bytes ({}), after {} ms",
            seen.width,
            seen.height,
            seen.bytes,
            seen.codec,
            seen.elapsed.as_millis()
        );
        return Ok(());
    }
    let cfg = config::Config::load_to_serve(opts)?;
    logger::init(cfg.log_level);
    let source = source::open(&cfg.source)?;
    let info = source.info();
    let server = server::Server::bind(cfg.clone(), info)?;
    if let Some(user) = &cfg.user {
        privileges::drop_to(user)?;
    }
    let addr = server.rtsp_addr()?;
    let host = if addr.ip().is_unspecified() {
        "127.0.0.1".to_string()
    } else {
        addr.ip().to_string()
    };
    let url = format!("rtsp://{host}:{}/{}", addr.port(), cfg.path);
    let streaming = format!(
        "streaming {}x{} at {} fps from {} on {url}",
        info.width, info.height, info.fps, cfg.source.spec
    );
    // A camera not there yet: said when it is, not before.
    let source = if source.present() {
        log::info!("{streaming}");
        source
    } else {
        log::info!(
            "waiting for {}: streaming on {url} starts once it is there \
             (clients may connect meanwhile)",
            cfg.source.spec
        );
        Box::new(source::Awaited::new(source, streaming))
    };
    if let Some(http) = server.http_addr() {
        log::info!(
            "HTTP on http://{host}:{}/: snapshot.jpg, stream.mjpg, metrics, RTSP over HTTP",
            http.port()
        );
        if let (Some(udp), Some(_)) = (server.webrtc_port(), &cfg.h264) {
            log::info!(
                "WebRTC (WHEP) on http://{host}:{}/whep/{}, media on port {udp} (UDP, and TCP where UDP does not pass)",
                http.port(),
                server::H264_PATH
            );
        }
    }
    if let Some(h) = cfg.hashed_users.iter().find(|h| h.learnt.is_none()) {
        log::info!(
            "user {:?} is known by a password hash (Raspberry Pi Imager's): \
             it signs in once on http://CAMERA/, then RTSP and ONVIF take its password too",
            h.name
        );
    }
    match (cfg.users.len() + cfg.hashed_users.len(), cfg.anonymous) {
        (0, false) => log::warn!(
            "no user is set: only clients on this machine may stream \
             (add one with `camstream passwd NAME`, or anonymous = true on a trusted network)"
        ),
        (0, true) => log::warn!(
            "no user is set and anonymous = true: anyone who reaches the port may stream"
        ),
        (n, anonymous) => log::info!(
            "{n} user(s) may stream{}",
            if anonymous {
                " (anonymous = true is ignored once users are set)"
            } else {
                ""
            }
        ),
    }
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
