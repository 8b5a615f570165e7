//! Whether an endpoint is on this machine or its network. Warming a
//! session's prompt cache costs a local server only idle time, but a hosted
//! one bills it; so local endpoints warm by default.

use std::net::IpAddr;

/// True for `localhost`, loopback, private (RFC 1918, IPv6 unique local)
/// and link-local addresses, and `.local`/`.internal` names.
pub fn is_local_endpoint(endpoint: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(endpoint) else {
        return false;
    };
    let Some(host) = url.host_str() else {
        return false;
    };
    if let Ok(ip) = host.trim_start_matches('[').trim_end_matches(']').parse() {
        return is_local_ip(ip);
    }
    let name = host.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost"
        || [".localhost", ".local", ".internal", ".lan"]
            .iter()
            .any(|suffix| name.ends_with(suffix))
}

fn is_local_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(ip) => ip.is_loopback() || ip.is_private() || ip.is_link_local(),
        IpAddr::V6(ip) => {
            let first = ip.segments()[0];
            ip.is_loopback()
                // fc00::/7: unique local; fe80::/10: link-local.
                || first & 0xfe00 == 0xfc00
                || first & 0xffc0 == 0xfe80
                || ip.to_ipv4_mapped().is_some_and(|v4| is_local_ip(IpAddr::V4(v4)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_local_endpoint;

    #[test]
    fn loopback_private_and_local_names_are_local_and_the_rest_hosted() {
        let cases = [
            ("http://127.0.0.1:8080/v1", true),
            ("http://localhost:11434", true),
            ("http://[::1]:8080", true),
            ("http://10.1.2.3/v1", true),
            ("http://172.20.0.5:8000", true),
            ("http://192.168.1.10:11434", true),
            ("http://[fd12::1]:8080", true),
            ("http://gpu-box.local:8080", true),
            ("http://ollama.internal", true),
            ("https://api.openai.com/v1", false),
            ("https://api.anthropic.com", false),
            ("http://172.32.0.1", false),
            ("http://8.8.8.8", false),
            ("not a url", false),
        ];
        for (endpoint, local) in cases {
            assert_eq!(is_local_endpoint(endpoint), local, "{endpoint}");
        }
    }
}
