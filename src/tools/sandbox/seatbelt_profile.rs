//! The Seatbelt profile (SBPL) a confined command runs under on macOS,
//! generated for its writable directories and network choice. Plain text,
//! so it is built and tested on every platform. Paths go in as parameters
//! (`-DWRITABLE_0=/path`), never spliced into the text, so no path can
//! change the profile. The shape follows codex-rs's Seatbelt policy.

use std::ffi::OsString;
use std::path::PathBuf;

use super::Network;

/// Closed by default; what any program needs to run; reading everywhere
/// (as with Landlock); writing only to the harmless devices.
const BASE: &str = r#"(version 1)
(deny default)
; Programs start programs, which inherit this profile.
(allow process-exec process-fork)
(allow signal (target same-sandbox))
(allow process-info* (target same-sandbox))
; Reading is allowed everywhere.
(allow file-read*)
(allow sysctl-read)
(allow user-preference-read)
(allow ipc-posix-sem)
(allow mach-lookup
  (global-name "com.apple.system.opendirectoryd.libinfo")
  (global-name "com.apple.PowerManagement.control"))
; Terminals, and devices whose writing changes no file.
(allow pseudo-tty)
(allow file-read* file-write* file-ioctl (literal "/dev/ptmx"))
(allow file-write-data file-ioctl
  (literal "/dev/null")
  (literal "/dev/zero")
  (literal "/dev/tty")
  (literal "/dev/stdout")
  (literal "/dev/stderr")
  (regex #"^/dev/fd/[0-9]+$")
  (regex #"^/dev/ttys[0-9]+$"))
"#;

/// Connections in and out, and the services name lookups and TLS need.
const NETWORK: &str = r#"(allow network-outbound)
(allow network-inbound)
(allow system-socket)
(allow mach-lookup
  (global-name "com.apple.dnssd.service")
  (global-name "com.apple.SystemConfiguration.configd")
  (global-name "com.apple.SystemConfiguration.DNSConfiguration")
  (global-name "com.apple.trustd.agent"))
"#;

/// A profile and the parameters it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Profile {
    pub text: String,
    /// `(name, value)` for each `-Dname=value` of sandbox-exec.
    pub params: Vec<(String, OsString)>,
}

impl Profile {
    /// sandbox-exec's arguments before the command: `-p TEXT -Dname=value…`.
    pub fn args(&self) -> Vec<OsString> {
        let mut args = vec![OsString::from("-p"), OsString::from(&self.text)];
        for (name, value) in &self.params {
            let mut arg = OsString::from(format!("-D{name}="));
            arg.push(value);
            args.push(arg);
        }
        args
    }
}

/// The profile of a command that may write beneath `writable` (canonical
/// paths: Seatbelt matches the real path, e.g. /private/tmp for /tmp) and
/// may use the network only if it is allowed.
pub(super) fn profile(writable: &[PathBuf], network: Network) -> Profile {
    let mut text = BASE.to_string();
    let mut params = Vec::new();
    if !writable.is_empty() {
        text.push_str("; The directories commands may write to.\n(allow file-write*");
        for (index, dir) in writable.iter().enumerate() {
            let name = format!("WRITABLE_{index}");
            text.push_str(&format!("\n  (subpath (param \"{name}\"))"));
            params.push((name, dir.clone().into_os_string()));
        }
        text.push_str(")\n");
    }
    if network == Network::Allowed {
        text.push_str(NETWORK);
    }
    Profile { text, params }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn balanced(text: &str) -> bool {
        let mut depth = 0i32;
        let mut in_string = false;
        for c in text.chars() {
            match c {
                '"' => in_string = !in_string,
                '(' if !in_string => depth += 1,
                ')' if !in_string => depth -= 1,
                _ => {}
            }
            if depth < 0 {
                return false;
            }
        }
        depth == 0 && !in_string
    }

    #[test]
    fn writes_are_allowed_only_beneath_the_given_directories() {
        // Writable directories, network, in the profile, not in it.
        type Row = (
            &'static [&'static str],
            Network,
            &'static [&'static str],
            &'static [&'static str],
        );
        let table: [Row; 3] = [
            (
                &["/Users/me/project", "/private/tmp"],
                Network::Denied,
                &[
                    "(subpath (param \"WRITABLE_0\"))",
                    "(subpath (param \"WRITABLE_1\"))",
                ],
                &["network-outbound", "WRITABLE_2"],
            ),
            (
                &["/private/tmp"],
                Network::Allowed,
                &[
                    "(subpath (param \"WRITABLE_0\"))",
                    "(allow network-outbound)",
                ],
                &["WRITABLE_1"],
            ),
            (
                &[],
                Network::Denied,
                &["(deny default)"],
                &["(allow file-write*\n"],
            ),
        ];
        for (dirs, network, present, absent) in table {
            let dirs: Vec<PathBuf> = dirs.iter().map(PathBuf::from).collect();
            let profile = profile(&dirs, network);
            assert!(balanced(&profile.text), "{}", profile.text);
            assert!(profile.text.starts_with("(version 1)\n(deny default)\n"));
            for part in present {
                assert!(profile.text.contains(part), "{dirs:?}: {part}");
            }
            for part in absent {
                assert!(!profile.text.contains(part), "{dirs:?}: {part}");
            }
            assert_eq!(profile.params.len(), dirs.len());
            // Reading stays open; the network is closed unless asked for.
            assert!(profile.text.contains("(allow file-read*)"));
            assert_eq!(
                profile.text.contains("system-socket"),
                network == Network::Allowed
            );
        }
    }

    #[test]
    fn paths_are_parameters_never_profile_text() {
        let odd = PathBuf::from("/tmp/a\") (allow default) (\"b");
        let profile = profile(std::slice::from_ref(&odd), Network::Denied);
        assert!(!profile.text.contains("allow default"), "{}", profile.text);
        let args = profile.args();
        assert_eq!(args[0], "-p");
        assert_eq!(args[1], OsString::from(&profile.text));
        let mut expected = OsString::from("-DWRITABLE_0=");
        expected.push(odd.as_os_str());
        assert_eq!(args[2], expected);
    }
}
