//! What `faultline serve` prints once it listens: where to go next. With the token it signs the
//! dashboard in (`/#token=...`, a fragment the browser never sends) and completes a `curl` that
//! works as shown.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// An analysis that shows data on the demo fleet in the default window, and needs no parameter.
pub const EXAMPLE_PATH: &str = "/v1/analytics/failure-mix";

/// The base URL a browser on this machine reaches `addr` at: a wildcard bind (0.0.0.0, ::) is
/// reached on the loopback address.
pub fn base_url(addr: SocketAddr) -> String {
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    format!("http://{}", SocketAddr::new(ip, addr.port()))
}

/// The lines printed at start. `token`: the admin token when it may be shown (generated now, or a
/// demo's stored one); None prints where to put it instead.
pub fn message(addr: SocketAddr, token: Option<&str>) -> String {
    let base = base_url(addr);
    let mut out = format!("Faultline is listening on {base}\n");
    match token {
        Some(token) => {
            let fragment: String = form_urlencoded::Serializer::new(String::new())
                .append_pair("token", token)
                .finish();
            out.push_str(&format!(
                "  Dashboard (signed in with the admin token): {base}/#{fragment}\n"
            ));
            out.push_str(&format!("  API reference (Swagger UI):                  {base}/docs\n"));
            out.push_str(&format!(
                "  Try the API:\n    curl -H {} {}\n",
                shell_quote(&format!("Authorization: Bearer {token}")),
                shell_quote(&format!("{base}{EXAMPLE_PATH}"))
            ));
        }
        None => {
            out.push_str(&format!("  Dashboard (paste the admin token there):     {base}/\n"));
            out.push_str(&format!("  API reference (Swagger UI):                  {base}/docs\n"));
            out.push_str(&format!(
                "  Try the API (with the admin token in $FAULTLINE_ADMIN_TOKEN):\n    curl -H \"Authorization: Bearer $FAULTLINE_ADMIN_TOKEN\" {}\n",
                shell_quote(&format!("{base}{EXAMPLE_PATH}"))
            ));
        }
    }
    out
}

/// `s` as one word for a POSIX shell: single-quoted, each `'` written `'\''`.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wildcard_bind_is_shown_as_loopback() {
        assert_eq!(base_url("0.0.0.0:8080".parse().unwrap()), "http://127.0.0.1:8080");
        assert_eq!(base_url("[::]:8080".parse().unwrap()), "http://[::1]:8080");
        assert_eq!(base_url("10.0.0.5:80".parse().unwrap()), "http://10.0.0.5:80");
    }

    #[test]
    fn the_token_is_encoded_in_the_fragment_and_quoted_for_the_shell() {
        let m = message("127.0.0.1:8080".parse().unwrap(), Some("fl_admin_ab'c d"));
        assert!(m.contains("http://127.0.0.1:8080/#token=fl_admin_ab%27c+d\n"), "{m}");
        assert!(
            m.contains(
                r"curl -H 'Authorization: Bearer fl_admin_ab'\''c d' 'http://127.0.0.1:8080/v1/analytics/failure-mix'"
            ),
            "{m}"
        );
        assert!(m.contains("http://127.0.0.1:8080/docs\n"), "{m}");
    }

    #[test]
    fn without_a_token_it_says_where_the_token_goes() {
        let m = message("127.0.0.1:8080".parse().unwrap(), None);
        assert!(m.contains("$FAULTLINE_ADMIN_TOKEN"), "{m}");
        assert!(!m.contains("#token="), "{m}");
    }
}
