//! The seccomp profile side: which rule makes the kernel ask us about execs.

use std::path::{Path, PathBuf};

use oci_spec::runtime::{LinuxSeccomp, LinuxSeccompAction, LinuxSyscall};

/// The syscalls that load a new program image. `execveat` must be covered
/// too, otherwise `fexecve(3)` (glibc implements it with `execveat`) or a
/// direct `execveat` would run unrecorded.
pub const NOTIFIED_SYSCALLS: [&str; 2] = ["execve", "execveat"];

/// Why [`add_to`] refused to change a profile. In every case the profile is
/// left untouched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    /// The runtime rejects NOTIFY as the default action (every syscall,
    /// including the `write` that passes the fd, would wait for us).
    #[error("seccomp default action is SCMP_ACT_NOTIFY; refusing to add the exec audit")]
    NotifyDefault,
    /// Another seccomp agent is already configured; there is only one
    /// listener per container.
    #[error("seccomp listenerPath is already set to {0}")]
    ListenerPathTaken(PathBuf),
    /// A rule already decides `syscall` with something other than a plain
    /// allow (a deny, a conditional rule, ...). Replacing it with NOTIFY +
    /// CONTINUE would weaken the profile; keeping both is rejected by
    /// libseccomp.
    #[error("seccomp profile already has a {action:?} rule for {syscall}")]
    Conflict {
        /// `execve` or `execveat`.
        syscall: String,
        /// The action of the existing rule.
        action: LinuxSeccompAction,
    },
    /// The profile does not allow any exec at all; adding NOTIFY (whose
    /// answer is "continue") would *allow* it.
    #[error("seccomp profile does not permit execve/execveat; nothing to audit")]
    NotPermitted,
}

/// The rule to append to a profile's `syscalls`: NOTIFY on `execve` and
/// `execveat`, no argument conditions. Use [`add_to`] rather than appending
/// it by hand: it also sets `listenerPath` and checks for conflicts.
pub fn notify_rules() -> Vec<LinuxSyscall> {
    vec![notify_rule(&NOTIFIED_SYSCALLS)]
}

fn notify_rule(names: &[&str]) -> LinuxSyscall {
    let mut rule = LinuxSyscall::default();
    rule.set_names(names.iter().map(|s| s.to_string()).collect());
    rule.set_action(LinuxSeccompAction::ScmpActNotify);
    rule
}

/// Make `seccomp` send every exec attempt to the listener at `listener_path`.
///
/// A syscall gets NOTIFY only if the profile would otherwise allow it (the
/// default action allows, or a plain unconditional allow rule names it, which
/// is then removed): the answer we give is "continue", so NOTIFY on a denied
/// syscall would turn the deny into an allow. Architectures and other rules
/// are left as they are; calls from a non-native architecture enabled in the
/// profile are still notified and recorded with an error (see
/// [`ExecEvent::error`](crate::ExecEvent::error)).
pub fn add_to(seccomp: &mut LinuxSeccomp, listener_path: &Path) -> Result<(), ProfileError> {
    if seccomp.default_action() == LinuxSeccompAction::ScmpActNotify {
        return Err(ProfileError::NotifyDefault);
    }
    if let Some(existing) = seccomp.listener_path() {
        if existing != listener_path {
            return Err(ProfileError::ListenerPathTaken(existing.clone()));
        }
    }
    let default_allows = matches!(
        seccomp.default_action(),
        LinuxSeccompAction::ScmpActAllow | LinuxSeccompAction::ScmpActLog
    );
    let mut allowed = [default_allows; NOTIFIED_SYSCALLS.len()];

    // Work on a copy so that an error leaves the caller's profile untouched.
    let mut rules = seccomp.syscalls().clone().unwrap_or_default();
    for rule in &mut rules {
        if !rule.names().iter().any(|n| is_notified(n)) {
            continue;
        }
        let plain = rule.args().as_ref().is_none_or(|a| a.is_empty());
        let ours_or_allow = matches!(
            rule.action(),
            LinuxSeccompAction::ScmpActAllow | LinuxSeccompAction::ScmpActNotify
        );
        if !(plain && ours_or_allow) {
            let syscall = rule.names().iter().find(|n| is_notified(n)).cloned();
            return Err(ProfileError::Conflict {
                syscall: syscall.unwrap_or_default(),
                action: rule.action(),
            });
        }
        for (i, name) in NOTIFIED_SYSCALLS.iter().enumerate() {
            if rule.names().iter().any(|n| n == name) {
                // An explicit allow (or our own rule from an earlier call)
                // means the syscall is permitted.
                allowed[i] = true;
            }
        }
        let names: Vec<String> = rule
            .names()
            .iter()
            .filter(|n| !is_notified(n))
            .cloned()
            .collect();
        rule.set_names(names);
    }
    rules.retain(|r| !r.names().is_empty());

    let names: Vec<&str> = NOTIFIED_SYSCALLS
        .iter()
        .zip(allowed)
        .filter_map(|(name, ok)| ok.then_some(*name))
        .collect();
    if names.is_empty() {
        return Err(ProfileError::NotPermitted);
    }
    rules.push(notify_rule(&names));
    seccomp.set_syscalls(Some(rules));
    seccomp.set_listener_path(Some(listener_path.to_path_buf()));
    Ok(())
}

fn is_notified(name: &str) -> bool {
    NOTIFIED_SYSCALLS.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn profile(v: serde_json::Value) -> LinuxSeccomp {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn notify_rules_json() {
        assert_eq!(
            serde_json::to_value(notify_rules()).unwrap(),
            json!([{"names": ["execve", "execveat"], "action": "SCMP_ACT_NOTIFY"}])
        );
    }

    #[test]
    fn add_to_allow_by_default_profile() {
        let mut s = profile(json!({
            "defaultAction": "SCMP_ACT_ALLOW",
            "architectures": ["SCMP_ARCH_X86_64"],
            "syscalls": [
                {"names": ["mount", "umount2"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}
            ]
        }));
        add_to(&mut s, Path::new("/run/shadow/x/exec.sock")).unwrap();
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            json!({
                "defaultAction": "SCMP_ACT_ALLOW",
                "architectures": ["SCMP_ARCH_X86_64"],
                "listenerPath": "/run/shadow/x/exec.sock",
                "syscalls": [
                    {"names": ["mount", "umount2"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1},
                    {"names": ["execve", "execveat"], "action": "SCMP_ACT_NOTIFY"}
                ]
            })
        );
        // Idempotent for the same path.
        let before = s.clone();
        add_to(&mut s, Path::new("/run/shadow/x/exec.sock")).unwrap();
        assert_eq!(s, before);
    }

    #[test]
    fn add_to_allowlist_profile_replaces_allow_and_keeps_deny() {
        let mut s = profile(json!({
            "defaultAction": "SCMP_ACT_ERRNO",
            "syscalls": [
                {"names": ["read", "execve", "write"], "action": "SCMP_ACT_ALLOW"}
            ]
        }));
        add_to(&mut s, Path::new("/l.sock")).unwrap();
        // execveat was denied by default and stays denied (no NOTIFY for it).
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            json!({
                "defaultAction": "SCMP_ACT_ERRNO",
                "listenerPath": "/l.sock",
                "syscalls": [
                    {"names": ["read", "write"], "action": "SCMP_ACT_ALLOW"},
                    {"names": ["execve"], "action": "SCMP_ACT_NOTIFY"}
                ]
            })
        );
    }

    #[test]
    fn add_to_refuses_and_leaves_profile_untouched() {
        let cases = [
            (
                json!({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
                    {"names": ["execveat"], "action": "SCMP_ACT_ERRNO"}]}),
                ProfileError::Conflict {
                    syscall: "execveat".into(),
                    action: LinuxSeccompAction::ScmpActErrno,
                },
            ),
            (
                json!({"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [
                    {"names": ["execve"], "action": "SCMP_ACT_ALLOW",
                     "args": [{"index": 1, "value": 0, "op": "SCMP_CMP_NE"}]}]}),
                ProfileError::Conflict {
                    syscall: "execve".into(),
                    action: LinuxSeccompAction::ScmpActAllow,
                },
            ),
            (
                json!({"defaultAction": "SCMP_ACT_KILL_PROCESS"}),
                ProfileError::NotPermitted,
            ),
            (
                json!({"defaultAction": "SCMP_ACT_ALLOW", "listenerPath": "/other.sock"}),
                ProfileError::ListenerPathTaken("/other.sock".into()),
            ),
        ];
        for (v, want) in cases {
            let mut s = profile(v);
            let before = s.clone();
            assert_eq!(add_to(&mut s, Path::new("/l.sock")), Err(want));
            assert_eq!(s, before);
        }
    }
}

/// Route a profile's denials through the supervisor: every rule whose action is
/// `SCMP_ACT_ERRNO` with EPERM becomes `SCMP_ACT_NOTIFY` (answered EPERM and reported, see the
/// crate docs). Other errnos (e.g. ENOSYS for clone3, which makes libc fall back) stay as they
/// are: they are not denials worth a record.
pub fn notify_denials(seccomp: &mut LinuxSeccomp) {
    let Some(rules) = seccomp.syscalls().clone() else {
        return;
    };
    let rules = rules
        .into_iter()
        .map(|mut r| {
            if r.action() == LinuxSeccompAction::ScmpActErrno
                && r.errno_ret() == Some(libc::EPERM as u32)
            {
                r.set_action(LinuxSeccompAction::ScmpActNotify);
                r.set_errno_ret(None);
            }
            r
        })
        .collect();
    seccomp.set_syscalls(Some(rules));
}

#[cfg(test)]
mod denial_tests {
    use super::*;
    use oci_spec::runtime::{LinuxSeccompBuilder, LinuxSyscallBuilder};

    #[test]
    fn eperm_rules_become_notify_and_others_stay() {
        let rule = |name: &str, errno: u32| {
            LinuxSyscallBuilder::default()
                .names(vec![name.to_string()])
                .action(LinuxSeccompAction::ScmpActErrno)
                .errno_ret(errno)
                .build()
                .unwrap()
        };
        let mut s = LinuxSeccompBuilder::default()
            .default_action(LinuxSeccompAction::ScmpActAllow)
            .syscalls(vec![rule("mount", 1), rule("clone3", 38)])
            .build()
            .unwrap();
        notify_denials(&mut s);
        assert_eq!(
            serde_json::to_value(s.syscalls()).unwrap(),
            serde_json::json!([
                {"names": ["mount"], "action": "SCMP_ACT_NOTIFY"},
                {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38}
            ])
        );
    }
}
