//! What planning and enforcing a policy costs, measured in-process (hack/bench's `confine`
//! scenario measures whole runs, whose noise is larger than this). Usage:
//! `cargo run --release -p shadow-landlock --example enforce_cost -- POLICY.json [N]`
//! (the policy as `shadow run --dry-run` puts it in the `run.shadow.landlock` annotation).

use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: enforce_cost POLICY.json [N]");
    let n: usize = args.next().map_or(200, |s| s.parse().expect("N"));
    let text = std::fs::read_to_string(&path).expect("read policy");
    let policy = shadow_landlock::Policy::from_json(&text).expect("policy");
    let mut micros = Vec::with_capacity(n);
    for _ in 0..n {
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
        // SAFETY: the child only measures, writes 8 bytes and exits; no locks are shared.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            drop(r);
            let t = Instant::now();
            let ok = shadow_landlock::enforce(&policy).is_ok();
            let us = if ok {
                t.elapsed().as_micros() as u64
            } else {
                u64::MAX
            };
            let _ = std::io::Write::write_all(&mut &w, &us.to_le_bytes());
            // SAFETY: exit without running the parent's destructors.
            unsafe { libc::_exit(0) };
        }
        drop(w);
        let mut buf = [0u8; 8];
        std::io::Read::read_exact(&mut &r, &mut buf).expect("child result");
        // SAFETY: reap our own child.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
        micros.push(u64::from_le_bytes(buf));
    }
    assert!(micros.iter().all(|m| *m != u64::MAX), "enforce failed");
    micros.sort();
    println!(
        "plan+enforce over {n} runs: median {} us, p90 {} us, rules planned {}",
        micros[n / 2],
        micros[n * 9 / 10],
        shadow_landlock::plan(&policy).len()
    );
}
