//! The NETLINK_AUDIT socket: the audit status, switching audit on or off, a user-space marker
//! record, and a reader on the read-only multicast group.
//!
//! The reader joins `AUDIT_NLGRP_READLOG`, the group journald uses: it receives a copy of every
//! record and takes nothing from auditd (which stays the one unicast consumer, if there is one).
//! Joining needs CAP_AUDIT_READ in the initial user namespace, so a rootless shadow cannot.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use crate::record::{self, Record};

const NETLINK_AUDIT: libc::c_int = 9;
const AUDIT_GET: u16 = 1000;
const AUDIT_SET: u16 = 1001;
const AUDIT_USER: u16 = 1005;
const AUDIT_STATUS_ENABLED: u32 = 1;
/// `AUDIT_NLGRP_READLOG` is group 1, i.e. bit 0.
const READLOG_GROUPS: u32 = 1;
const NLMSG_ERROR: u16 = 2;
const NLMSG_HDRLEN: usize = 16;
/// Kernel buffer for the reader: a burst of denials must not overflow it while the thread is
/// not scheduled (an overflow loses records; it is counted).
const RCVBUF: libc::c_int = 4 << 20;

/// The kernel's audit status (the fields used here of `struct audit_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// 0 off, 1 on, 2 on and locked.
    pub enabled: u32,
    /// The registered audit daemon's pid, 0 if none.
    pub pid: u32,
    /// Records the kernel has lost.
    pub lost: u32,
}

fn open(groups: u32) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the result is checked and owned below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            NETLINK_AUDIT,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_nl is plain data; all-zero is a valid value.
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    addr.nl_groups = groups;
    // SAFETY: addr is a valid sockaddr_nl of the size passed.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

fn message(kind: u16, payload: &[u8]) -> Vec<u8> {
    let len = NLMSG_HDRLEN + payload.len();
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&kind.to_ne_bytes());
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16;
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes()); // seq
    m.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it in
    m.extend_from_slice(payload);
    m
}

/// Splits a datagram into (type, payload) messages.
fn messages(buf: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    let mut off = 0;
    while off + NLMSG_HDRLEN <= buf.len() {
        let len = u32::from_ne_bytes(buf[off..off + 4].try_into().unwrap_or_default()) as usize;
        let kind = u16::from_ne_bytes(buf[off + 4..off + 6].try_into().unwrap_or_default());
        // The kernel's audit records do not always count their header in nlmsg_len; take
        // what is there.
        let end = if len >= NLMSG_HDRLEN {
            (off + len).min(buf.len())
        } else {
            buf.len()
        };
        out.push((kind, &buf[off + NLMSG_HDRLEN..end]));
        let next = off + ((len.max(NLMSG_HDRLEN) + 3) & !3);
        if next <= off {
            break;
        }
        off = next;
    }
    out
}

fn recv(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: buf is valid for writes of buf.len() bytes.
    let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

fn send(fd: &OwnedFd, m: &[u8]) -> io::Result<()> {
    // SAFETY: m is valid for reads of m.len() bytes; the kernel is the destination (bound
    // socket, no address needed).
    let n = unsafe { libc::send(fd.as_raw_fd(), m.as_ptr().cast(), m.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sends a request and returns the reply of type `want` (or `None` when `want` is 0 and the
/// request was acknowledged).
fn request(kind: u16, payload: &[u8], want: u16) -> io::Result<Option<Vec<u8>>> {
    let fd = open(0)?;
    // The kernel answers from a kernel thread and may fail to (memory pressure): never hang.
    let tv = libc::timeval {
        tv_sec: 2,
        tv_usec: 0,
    };
    // SAFETY: the option value is a timeval of the size passed.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        );
    }
    send(&fd, &message(kind, payload))?;
    let mut buf = vec![0u8; 8192];
    let mut reply = None;
    for _ in 0..8 {
        let n = recv(&fd, &mut buf)?;
        for (t, p) in messages(&buf[..n]) {
            if t == NLMSG_ERROR {
                let errno = i32::from_ne_bytes(
                    p.get(..4)
                        .and_then(|b| b.try_into().ok())
                        .unwrap_or_default(),
                );
                if errno != 0 {
                    return Err(io::Error::from_raw_os_error(-errno));
                }
                if want == 0 || reply.is_some() {
                    return Ok(reply);
                }
            } else if t == want {
                reply = Some(p.to_vec());
            }
        }
        if reply.is_some() && want != 0 {
            return Ok(reply);
        }
    }
    Err(io::Error::other("no reply from the kernel's audit socket"))
}

/// The audit status (AUDIT_GET; needs CAP_AUDIT_CONTROL and the initial pid namespace).
pub fn status() -> io::Result<Status> {
    let p = request(AUDIT_GET, &[], AUDIT_GET)?.unwrap_or_default();
    let word = |i: usize| {
        p.get(i * 4..i * 4 + 4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_ne_bytes)
            .unwrap_or(0)
    };
    Ok(Status {
        enabled: word(1),
        pid: word(3),
        lost: word(6),
    })
}

/// Switches audit on or off for the whole machine (AUDIT_SET; needs CAP_AUDIT_CONTROL).
pub fn set_enabled(on: bool) -> io::Result<()> {
    let mut st = [0u32; 11];
    st[0] = AUDIT_STATUS_ENABLED;
    st[1] = u32::from(on);
    let payload: Vec<u8> = st.iter().flat_map(|w| w.to_ne_bytes()).collect();
    request(AUDIT_SET, &payload, 0).map(|_| ())
}

/// Writes a user-space record (AUDIT_USER; needs CAP_AUDIT_WRITE). The kernel logs it after every
/// record queued before it, which makes it a sync point for a reader.
pub fn send_user(text: &str) -> io::Result<()> {
    // The kernel overwrites the payload's last byte with a NUL: send one.
    let mut payload = text.as_bytes().to_vec();
    payload.push(0);
    request(AUDIT_USER, &payload, 0).map(|_| ())
}

/// A reader on the read-only multicast group.
#[derive(Debug)]
pub struct Reader {
    fd: OwnedFd,
    buf: Vec<u8>,
    /// Datagrams the kernel dropped because the buffer was full (ENOBUFS seen).
    pub overflows: u64,
}

impl Reader {
    /// Joins the group (EPERM without CAP_AUDIT_READ).
    pub fn open() -> io::Result<Reader> {
        let fd = open(READLOG_GROUPS)?;
        for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
            // SAFETY: the option value is a c_int of the size passed.
            let r = unsafe {
                libc::setsockopt(
                    fd.as_raw_fd(),
                    libc::SOL_SOCKET,
                    opt,
                    (&RCVBUF as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            if r == 0 {
                break;
            }
        }
        Ok(Reader {
            fd,
            buf: vec![0u8; 1 << 16],
            overflows: 0,
        })
    }

    /// The records of the next datagram, waiting at most `timeout`; empty on timeout.
    pub fn next(&mut self, timeout: Duration) -> io::Result<Vec<Record>> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(vec![])
            } else {
                Err(e)
            };
        }
        if r == 0 {
            return Ok(vec![]);
        }
        let n = match recv(&self.fd, &mut self.buf) {
            Ok(n) => n,
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                self.overflows += 1;
                return Ok(vec![]);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(vec![]),
            Err(e) => return Err(e),
        };
        Ok(messages(&self.buf[..n])
            .into_iter()
            .filter_map(|(t, p)| {
                let text = String::from_utf8_lossy(p);
                record::parse(t, text.trim_end_matches('\0'))
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_message_is_laid_out_as_nlmsghdr() {
        let m = message(AUDIT_GET, &[]);
        assert_eq!(m.len(), 16);
        assert_eq!(u32::from_ne_bytes(m[0..4].try_into().unwrap()), 16);
        assert_eq!(u16::from_ne_bytes(m[4..6].try_into().unwrap()), 1000);
        assert_eq!(u16::from_ne_bytes(m[6..8].try_into().unwrap()), 0x5);
    }

    #[test]
    fn datagrams_split_into_messages() {
        let mut d = message(1423, b"audit(1.000:1): a=b");
        while d.len() % 4 != 0 {
            d.push(0);
        }
        d.extend(message(1320, b"audit(1.000:1): "));
        let m = messages(&d);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].0, 1423);
        assert_eq!(m[0].1, b"audit(1.000:1): a=b");
        assert_eq!(m[1], (1320, &b"audit(1.000:1): "[..]));
        assert!(messages(&d[..10]).is_empty());
    }
}
