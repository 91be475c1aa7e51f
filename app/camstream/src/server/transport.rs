//! A client connection's byte stream, behind one type: plain TCP today.
//! RTSP, HTTP and ONVIF read and write bytes through it and never learn
//! what carries them, so an encrypted stream (RTSPS, HTTPS) can be another
//! arm here without them changing.

use std::io::{self, IoSlice, Read, Write};

use mio::event::Source;
use mio::net::TcpStream;
use mio::{Interest, Registry, Token};

pub enum Transport {
    Tcp(TcpStream),
}

impl Read for Transport {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Transport::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Transport {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Transport::Tcp(s) => s.write(buf),
        }
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Transport::Tcp(s) => s.write_vectored(bufs),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Transport::Tcp(s) => s.flush(),
        }
    }
}

impl Source for Transport {
    fn register(&mut self, r: &Registry, token: Token, interests: Interest) -> io::Result<()> {
        match self {
            Transport::Tcp(s) => s.register(r, token, interests),
        }
    }

    fn reregister(&mut self, r: &Registry, token: Token, interests: Interest) -> io::Result<()> {
        match self {
            Transport::Tcp(s) => s.reregister(r, token, interests),
        }
    }

    fn deregister(&mut self, r: &Registry) -> io::Result<()> {
        match self {
            Transport::Tcp(s) => s.deregister(r),
        }
    }
}
