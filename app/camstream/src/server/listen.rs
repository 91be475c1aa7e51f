//! The listening sockets: the RTSP port and, unless http_port = 0, the
//! HTTP port.

use std::io;
use std::net::SocketAddr;

use anyhow::{Context, Result};
use mio::net::{TcpListener, TcpStream};
use mio::{Interest, Registry, Token};

use super::conn::Port;
use crate::config::Config;

pub struct Listeners {
    rtsp: TcpListener,
    http: Option<TcpListener>,
}

impl Listeners {
    /// Binds both; a port in use is a start-up error.
    pub fn bind(cfg: &Config) -> Result<Listeners> {
        let bind = |port: u16, key: &str| {
            let addr = SocketAddr::new(cfg.listen, port);
            TcpListener::bind(addr).with_context(|| format!("cannot listen on {addr} ({key})"))
        };
        Ok(Listeners {
            rtsp: bind(cfg.rtsp_port, "rtsp_port")?,
            http: match cfg.http_port {
                0 => None,
                port => Some(bind(port, "http_port")?),
            },
        })
    }

    pub fn register(&mut self, r: &Registry, rtsp: Token, http: Token) -> io::Result<()> {
        r.register(&mut self.rtsp, rtsp, Interest::READABLE)?;
        if let Some(l) = &mut self.http {
            r.register(l, http, Interest::READABLE)?;
        }
        Ok(())
    }

    /// The next connection waiting on `port`'s listener: None once there
    /// is none (or the accept failed, logged).
    pub fn accept(&self, port: Port) -> Option<(TcpStream, SocketAddr)> {
        let listener = match port {
            Port::Rtsp => &self.rtsp,
            Port::Http => self.http.as_ref()?,
        };
        loop {
            match listener.accept() {
                Ok(c) => return Some(c),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    log::warn!("accept: {e}");
                    return None;
                }
            }
        }
    }

    pub fn rtsp_addr(&self) -> io::Result<SocketAddr> {
        self.rtsp.local_addr()
    }

    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http.as_ref()?.local_addr().ok()
    }
}
