//! What the two in-process confinements of a container cost, measured where they run: the
//! seccomp filter (`linux.seccomp`, compiled and loaded by libcontainer) and the Landlock policy
//! (`run.shadow.landlock`, planned and enforced by shadow-landlock). hack/bench's `confine`
//! scenario measures whole runs, whose noise is larger than this. Usage:
//!
//! `cargo run --release -p shadow-runtime-core --example confine_cost -- CONFIG.json [N]`
//!
//! with the config.json of `shadow run --dry-run`. Run it inside `shadow run` to see the
//! sandbox's own view (masked paths, a tmpfs `$HOME`): that is where the executor plans.
//! Each sample is a fresh forked child, as each container's init is.

use std::time::Instant;

use oci_spec::runtime::Spec;

#[derive(Clone, Copy)]
enum What {
    Seccomp,
    Landlock,
    Both,
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: confine_cost CONFIG.json [N]");
    let n: usize = args.next().map_or(200, |s| s.parse().expect("N"));
    let spec = Spec::load(&path).expect("config.json");
    let seccomp = spec
        .linux()
        .as_ref()
        .and_then(|l| l.seccomp().clone())
        .expect("linux.seccomp");
    let policy = spec
        .annotations()
        .as_ref()
        .and_then(|a| a.get(shadow_landlock::ANNOTATION))
        .map(|s| shadow_landlock::Policy::from_json(s).expect("policy"))
        .expect("landlock annotation");
    let run = |what: What| -> u64 {
        sample(|| {
            // The executor's order: no_new_privs (the filter needs it unprivileged), the filter,
            // then Landlock last.
            // SAFETY: prctl(PR_SET_NO_NEW_PRIVS, 1) only sets a flag on this process.
            unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
            let t = Instant::now();
            if matches!(what, What::Seccomp | What::Both)
                && libcontainer::seccomp::initialize_seccomp(&seccomp).is_err()
            {
                return None;
            }
            if matches!(what, What::Landlock | What::Both)
                && shadow_landlock::enforce(&policy).is_err()
            {
                return None;
            }
            Some(t.elapsed().as_micros() as u64)
        })
    };
    let mut rows = Vec::new();
    for (name, what) in [
        ("seccomp", What::Seccomp),
        ("landlock", What::Landlock),
        ("both", What::Both),
    ] {
        // Interleaved samples would be fairer on a noisy machine, but each kind is a
        // separate child anyway; take all of one kind, then the next.
        let mut us: Vec<u64> = (0..n).map(|_| run(what)).collect();
        assert!(us.iter().all(|m| *m != u64::MAX), "{name} failed");
        us.sort();
        rows.push((name, us[n / 2], us[n * 9 / 10]));
    }
    for (name, median, p90) in rows {
        println!("{name:9} median {median:5} us  p90 {p90:5} us  ({n} runs)");
    }
    println!(
        "landlock rules planned here: {}",
        shadow_landlock::plan(&policy).len()
    );
}

/// Runs `f` in a forked child and returns its result (u64::MAX when it failed).
fn sample(f: impl Fn() -> Option<u64>) -> u64 {
    let mut fds = [0; 2];
    // SAFETY: pipe writes two fds into the array, which we then own.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
    // SAFETY: both fds were just created by pipe and are owned by nothing else.
    let (r, w) = unsafe {
        use std::os::fd::FromRawFd;
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    };
    // SAFETY: the child only measures, writes 8 bytes and exits; this example is
    // single-threaded, so no lock is held across the fork.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        drop(r);
        let us = f().unwrap_or(u64::MAX);
        let _ = std::io::Write::write_all(&mut &w, &us.to_le_bytes());
        // SAFETY: exit without running the parent's destructors.
        unsafe { libc::_exit(0) };
    }
    drop(w);
    let mut buf = [0u8; 8];
    std::io::Read::read_exact(&mut &r, &mut buf).expect("child result");
    // SAFETY: reap our own child.
    unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
    u64::from_le_bytes(buf)
}
