//! Tool names the model can call: `{server}__{tool}` within
//! `^[a-zA-Z0-9_-]{1,64}$` (what OpenAI and Anthropic accept), unique across
//! all servers of a session. The original names are kept beside the result,
//! so a call maps back exactly.

use std::collections::HashSet;

/// The longest tool name providers accept.
pub const MAX_TOOL_NAME: usize = 64;

/// `_` and 8 hex digits.
const HASH_SUFFIX: usize = 9;

/// Hands out unique names for one listing of all servers' tools.
#[derive(Debug, Default)]
pub struct NameAllocator {
    taken: HashSet<String>,
}

impl NameAllocator {
    pub fn new() -> Self {
        Self::default()
    }

    /// The name for `tool` of `server`. A name that needs no change is kept;
    /// one that had to be cut gets a hash of the original names (so two long
    /// names sharing a prefix stay apart, the same way on every run); one that
    /// still collides gets the hash too, then a counter.
    pub fn allocate(&mut self, server: &str, tool: &str) -> String {
        self.allocate_as(&format!("{server}__{tool}"), server, tool)
    }

    /// The name for `tool` of `server` under the server's own `prefix`
    /// (Crucible's `prefix = "gh_"` gives `gh_search_code`), made unique the
    /// same way.
    pub fn allocate_prefixed(&mut self, prefix: &str, server: &str, tool: &str) -> String {
        self.allocate_as(&format!("{prefix}{tool}"), server, tool)
    }

    fn allocate_as(&mut self, wanted: &str, server: &str, tool: &str) -> String {
        let clean = sanitize(wanted);
        if clean.len() <= MAX_TOOL_NAME && self.taken.insert(clean.clone()) {
            return clean;
        }
        let hash = format!("{:08x}", short_hash(server, tool));
        let mut counter = 0u32;
        loop {
            let extra = if counter == 0 {
                String::new()
            } else {
                counter.to_string()
            };
            let keep = MAX_TOOL_NAME - HASH_SUFFIX - extra.len();
            // `clean` is ASCII, so any byte index is a char boundary.
            let prefix = &clean[..clean.len().min(keep)];
            let candidate = format!("{prefix}_{hash}{extra}");
            if self.taken.insert(candidate.clone()) {
                return candidate;
            }
            counter += 1;
        }
    }
}

/// Every character outside `[a-zA-Z0-9_-]` becomes `_`.
pub fn sanitize(name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.is_empty() {
        "_".to_string()
    } else {
        clean
    }
}

/// FNV-1a over both names, folded to 32 bits: stable across runs and builds
/// (std's hasher is not promised to be).
fn short_hash(server: &str, tool: &str) -> u32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in server.bytes().chain([0]).chain(tool.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    // Truncation intended: the two halves are folded together.
    ((hash >> 32) ^ (hash & 0xffff_ffff)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(name: &str) -> bool {
        regex::Regex::new("^[a-zA-Z0-9_-]{1,64}$")
            .unwrap()
            .is_match(name)
    }

    /// Allocates each (server, tool) in turn from one allocator: each gets
    /// the name expected, and a valid one.
    fn assert_allocates(cases: &[(&str, &str, &str)]) {
        let mut names = NameAllocator::new();
        for &(server, tool, expected) in cases {
            let name = names.allocate(server, tool);
            assert_eq!(name, expected, "{server} / {tool}");
            assert!(valid(&name), "{name}");
        }
    }

    #[test]
    fn plain_names_are_kept() {
        assert_allocates(&[
            ("everything", "get-sum", "everything__get-sum"),
            ("fs", "read_file", "fs__read_file"),
        ]);
    }

    #[test]
    fn odd_characters_become_underscores() {
        assert_allocates(&[
            ("my server", "read.file", "my_server__read_file"),
            ("ünï", "tööl/x", "_n___t__l_x"),
            ("a:b", "c d", "a_b__c_d"),
            ("🦀", "🚀", "____"),
        ]);
    }

    #[test]
    fn a_prefix_replaces_the_server_name() {
        let mut names = NameAllocator::new();
        assert_eq!(
            names.allocate_prefixed("gh_", "github", "search_code"),
            "gh_search_code"
        );
        // Unique across servers all the same.
        let again = names.allocate_prefixed("gh_", "other", "search_code");
        assert!(again.starts_with("gh_search_code_"), "{again}");
    }

    #[test]
    fn sanitize_never_returns_an_empty_name() {
        assert_eq!(sanitize(""), "_");
    }

    #[test]
    fn long_names_are_cut_with_a_stable_hash() {
        let long_tool = "t".repeat(100);
        let mut names = NameAllocator::new();
        let name = names.allocate("server", &long_tool);
        assert_eq!(name.len(), MAX_TOOL_NAME);
        assert!(valid(&name), "{name}");
        assert!(name.starts_with("server__ttt"), "{name}");
        // The same on another run.
        assert_eq!(NameAllocator::new().allocate("server", &long_tool), name);

        // Two long names that differ only past the cut stay apart.
        let other = names.allocate("server", &format!("{long_tool}x"));
        assert_ne!(other, name);
        assert_eq!(other.len(), MAX_TOOL_NAME);
        assert!(valid(&other));
    }

    #[test]
    fn a_name_of_exactly_64_characters_is_kept() {
        let tool = "x".repeat(MAX_TOOL_NAME - "s__".len());
        let name = NameAllocator::new().allocate("s", &tool);
        assert_eq!(name, format!("s__{tool}"));
    }

    /// Allocates each (server, tool) in turn from one allocator: the names
    /// all differ, and each is valid.
    fn allocate_distinct(pairs: &[(&str, &str)]) -> Vec<String> {
        let mut names = NameAllocator::new();
        let all: Vec<String> = pairs
            .iter()
            .map(|(server, tool)| names.allocate(server, tool))
            .collect();
        let unique: HashSet<&String> = all.iter().collect();
        assert_eq!(unique.len(), all.len(), "{all:?}");
        for name in &all {
            assert!(valid(name), "{name}");
        }
        all
    }

    #[test]
    fn collisions_after_sanitizing_are_told_apart() {
        let all = allocate_distinct(&[("a.b", "c"), ("a_b", "c"), ("a b", "c")]);
        assert_eq!(all[0], "a_b__c");
        assert!(all[1].starts_with("a_b__c_"), "{}", all[1]);
    }

    #[test]
    fn the_same_pair_twice_still_gets_two_names() {
        // A server listing one tool twice must not make two tools share a name.
        let all = allocate_distinct(&[("s", "t"); 3]);
        assert_eq!(all[0], "s__t");
    }

    #[test]
    fn long_colliding_names_stay_within_the_limit() {
        let long = "n".repeat(80);
        allocate_distinct(&[(long.as_str(), long.as_str()); 5]);
    }
}
