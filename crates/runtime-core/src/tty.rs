//! Terminals: receiving a pty master over a console socket, and proxying it to our own stdio.
//!
//! `run` of a spec with `process.terminal: true` and no `--console-socket` (and `shadow run` on a
//! terminal) binds a private console socket, lets libcontainer send the pty master through it,
//! then copies bytes between our stdio and the master, keeps the window size in step (SIGWINCH)
//! and puts our own terminal in raw mode so that Ctrl-C, Ctrl-Z and job control reach the
//! container's shell instead of acting on the runtime.

use std::fs::File;
use std::io::{IoSliceMut, Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use nix::cmsg_space;
use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
use nix::sys::termios::{self, SetArg, Termios};

use crate::error::{Error, Result};

/// A listening console socket that receives exactly one pty master.
#[derive(Debug)]
pub struct ConsoleListener {
    listener: UnixListener,
    path: PathBuf,
}

impl ConsoleListener {
    /// Bind at `path` (which must not exist).
    pub fn bind(path: &Path) -> Result<Self> {
        let listener = UnixListener::bind(path)
            .map_err(|e| Error::io(format!("bind console socket {}", path.display()), e))?;
        Ok(Self {
            listener,
            path: path.to_path_buf(),
        })
    }

    /// The socket's path, to pass as `--console-socket`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Accept one connection and receive the pty master sent with SCM_RIGHTS.
    pub fn receive(&self) -> Result<OwnedFd> {
        let (stream, _) = self
            .listener
            .accept()
            .map_err(|e| Error::io("accept on console socket", e))?;
        recv_fd(stream.as_raw_fd())
    }
}

impl Drop for ConsoleListener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Receive one file descriptor from a connected unix socket.
pub fn recv_fd(sock: RawFd) -> Result<OwnedFd> {
    let mut buf = [0u8; 4096];
    let mut iov = [IoSliceMut::new(&mut buf)];
    let mut cmsg = cmsg_space!([RawFd; 1]);
    let msg = recvmsg::<()>(sock, &mut iov, Some(&mut cmsg), MsgFlags::MSG_CMSG_CLOEXEC)
        .map_err(|e| Error::runtime(format!("receive pty master: {e}")))?;
    for c in msg
        .cmsgs()
        .map_err(|e| Error::runtime(format!("receive pty master: {e}")))?
    {
        if let ControlMessageOwned::ScmRights(fds) = c {
            if let Some(&fd) = fds.first() {
                // SAFETY: the kernel just installed this fd for us; nobody else owns it.
                return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
            }
        }
    }
    Err(Error::runtime(
        "console socket: no file descriptor received",
    ))
}

/// Our terminal in raw mode for as long as this lives.
#[derive(Debug)]
pub struct RawMode {
    saved: Termios,
}

impl RawMode {
    /// Put stdin in raw mode if it is a terminal.
    pub fn enable() -> Option<Self> {
        let stdin = std::io::stdin();
        let saved = termios::tcgetattr(stdin.as_fd()).ok()?;
        let mut raw = saved.clone();
        termios::cfmakeraw(&mut raw);
        termios::tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw).ok()?;
        Some(Self { saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = termios::tcsetattr(std::io::stdin().as_fd(), SetArg::TCSANOW, &self.saved);
    }
}

/// Copy our window size (from stdin's terminal) to the pty `master`.
pub fn sync_winsize(master: RawFd) {
    // SAFETY: winsize is plain integers; all-zero is a valid value.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ/TIOCSWINSZ read/write a winsize struct we own.
    unsafe {
        if libc::ioctl(0, libc::TIOCGWINSZ, &mut ws) == 0 {
            libc::ioctl(master, libc::TIOCSWINSZ, &ws);
        }
    }
}

/// Start copying stdin → master and master → stdout on two threads. The returned handle finishes
/// when the master reports EOF/EIO (every slave fd closed).
pub fn spawn_proxy(master: OwnedFd) -> Result<std::thread::JoinHandle<()>> {
    let out_fd = master
        .try_clone()
        .map_err(|e| Error::io("dup pty master", e))?;
    let mut input = File::from(master);
    std::thread::Builder::new()
        .name("tty-in".into())
        .spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let mut buf = [0u8; 8192];
            loop {
                match stdin.read(&mut buf) {
                    Ok(0) => {
                        // EOF on our stdin: send the terminal's EOF character.
                        let _ = input.write_all(&[4]);
                        break;
                    }
                    Ok(n) => {
                        if input.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        })
        .map_err(|e| Error::io("spawn tty thread", e))?;
    let mut output = File::from(out_fd);
    std::thread::Builder::new()
        .name("tty-out".into())
        .spawn(move || {
            let mut stdout = std::io::stdout();
            let mut buf = [0u8; 8192];
            loop {
                match output.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        if stdout.write_all(&buf[..n]).is_err() {
                            break;
                        }
                        let _ = stdout.flush();
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break, // EIO: the last slave fd closed.
                }
            }
        })
        .map_err(|e| Error::io("spawn tty thread", e))
}

/// Our side of a container's terminal: the master (for window-size updates), our terminal in
/// raw mode, and the copy threads.
#[derive(Debug)]
pub struct Attached {
    /// The pty master's fd (owned by the copy threads).
    pub master: RawFd,
    _raw: Option<RawMode>,
    /// Ends when every slave fd has closed.
    pub output: std::thread::JoinHandle<()>,
}

impl ConsoleListener {
    /// Receive the pty master and attach our stdio to it: window size copied, raw mode, copy
    /// threads started.
    pub fn attach(&self) -> Result<Attached> {
        let master = self.receive()?;
        let fd = master.as_raw_fd();
        sync_winsize(fd);
        let raw = RawMode::enable();
        let output = spawn_proxy(master)?;
        Ok(Attached {
            master: fd,
            _raw: raw,
            output,
        })
    }
}
