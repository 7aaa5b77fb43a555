//! Fetch allowlist entries (decision 35) and the screen on resolved addresses.
//!
//! An entry is a host and a port rule: `api.example.com` (the scheme's default port only),
//! `api.example.com:8443`, `api.example.com:*`, `*.example.com` (the domain and its subdomains;
//! names only), IPv4 literals (`10.0.0.5`, `10.0.0.5:8080`) and bracketed IPv6 literals
//! (`[::1]`, `[::1]:*`). Entries are parsed as URL hosts are (WHATWG rules, so `127.1` is
//! `127.0.0.1` and `Example.COM.` is `example.com`), and an entry that could never match is
//! refused when the options are built.
//!
//! After a name is resolved, an address that is loopback, private, link-local or unspecified is
//! refused unless `allowAddresses` lists a range holding it ([`AddressScreen`]); an IP literal in
//! the URL was matched by that very address on the allowlist, so it is not screened.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The host part of an entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostPattern {
    /// One name, exactly (lower case, no trailing dot).
    Name(String),
    /// `*.suffix`: the suffix itself and any name ending in `.suffix`.
    Suffix(String),
    /// One address.
    Ip(IpAddr),
}

/// The port part of an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortRule {
    /// No port written: the scheme's default port only (80 for `http:`, 443 for `https:`).
    Default,
    /// `:N`.
    Exact(u16),
    /// `:*`: any port.
    Any,
}

/// One parsed allowlist entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllowEntry {
    /// Which hosts.
    pub host: HostPattern,
    /// Which ports.
    pub port: PortRule,
}

fn refuse(entry: &str, why: &str) -> String {
    format!("entry '{entry}' {why}")
}

impl AllowEntry {
    /// Parses an entry.
    ///
    /// # Errors
    /// Why the entry could never match, naming it and saying what to write instead.
    pub fn parse(entry: &str) -> Result<AllowEntry, String> {
        if entry.is_empty() {
            return Err(refuse(entry, "is empty; remove it"));
        }
        if entry.trim() != entry {
            return Err(refuse(
                entry,
                &format!("has spaces around it; write '{}'", entry.trim()),
            ));
        }
        if entry.contains("://") || entry.contains('/') {
            return Err(refuse(
                entry,
                "is a URL; write the host and, if not the scheme's default, the port (e.g. 'api.example.com' or 'api.example.com:8443')",
            ));
        }
        let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
            let Some((inside, after)) = rest.split_once(']') else {
                return Err(refuse(entry, "opens '[' without closing it; write '[::1]'"));
            };
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or_else(|| {
                    refuse(entry, "has text after ']' that is not ':PORT' or ':*'")
                })?),
            };
            let ip: Ipv6Addr = inside.parse().map_err(|_| {
                refuse(
                    entry,
                    "is not an IPv6 address in brackets; write e.g. '[::1]' or '[2001:db8::1]:8080'",
                )
            })?;
            return Ok(AllowEntry {
                host: HostPattern::Ip(IpAddr::V6(ip)),
                port: port_rule(entry, port)?,
            });
        } else {
            match entry.matches(':').count() {
                0 => (entry, None),
                1 => {
                    let (h, p) = entry.split_once(':').unwrap_or((entry, ""));
                    (h, Some(p))
                }
                _ => return Err(refuse(
                    entry,
                    "looks like an IPv6 address without brackets; write '[::1]' or '[::1]:8080'",
                )),
            }
        };
        let port = port_rule(entry, port)?;
        if host == "*" {
            return Err(refuse(
                entry,
                "would allow every host; list the hosts (or '*.example.com' for a domain)",
            ));
        }
        if let Some(suffix) = host.strip_prefix("*.") {
            if suffix.contains('*') {
                return Err(refuse(entry, "has a '*' that is not a leading '*.'"));
            }
            return match url::Host::parse(suffix) {
                Ok(url::Host::Domain(d)) => Ok(AllowEntry {
                    host: HostPattern::Suffix(d.trim_end_matches('.').to_string()),
                    port,
                }),
                Ok(_) => Err(refuse(
                    entry,
                    "puts a wildcard on an address; wildcards match names only, list the address itself",
                )),
                Err(e) => Err(refuse(entry, &format!("is not a valid domain: {e}"))),
            };
        }
        if host.contains('*') {
            return Err(refuse(
                entry,
                "has a '*' that is not a leading '*.'; write '*.example.com'",
            ));
        }
        let host = match url::Host::parse(host) {
            Ok(url::Host::Domain(d)) => HostPattern::Name(d.trim_end_matches('.').to_string()),
            Ok(url::Host::Ipv4(a)) => HostPattern::Ip(IpAddr::V4(a)),
            Ok(url::Host::Ipv6(a)) => HostPattern::Ip(IpAddr::V6(a)),
            Err(e) => return Err(refuse(entry, &format!("is not a valid host: {e}"))),
        };
        if matches!(&host, HostPattern::Name(n) if n.is_empty()) {
            return Err(refuse(entry, "has no host"));
        }
        Ok(AllowEntry { host, port })
    }

    /// Whether the entry names this host (a URL's host, already normalized by the URL parser).
    pub fn host_matches(&self, host: &url::Host<&str>) -> bool {
        match (&self.host, host) {
            (HostPattern::Name(n), url::Host::Domain(d)) => d.trim_end_matches('.') == n,
            (HostPattern::Suffix(s), url::Host::Domain(d)) => {
                let d = d.trim_end_matches('.');
                d == s
                    || d.strip_suffix(s.as_str())
                        .is_some_and(|head| head.ends_with('.'))
            }
            (HostPattern::Ip(IpAddr::V4(a)), url::Host::Ipv4(b)) => a == b,
            (HostPattern::Ip(IpAddr::V6(a)), url::Host::Ipv6(b)) => a == b,
            _ => false,
        }
    }

    /// Whether the entry allows `port` on a scheme whose default port is `default`.
    pub fn port_matches(&self, port: u16, default: u16) -> bool {
        match self.port {
            PortRule::Default => port == default,
            PortRule::Exact(p) => port == p,
            PortRule::Any => true,
        }
    }
}

fn port_rule(entry: &str, port: Option<&str>) -> Result<PortRule, String> {
    match port {
        None => Ok(PortRule::Default),
        Some("*") => Ok(PortRule::Any),
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()) => Ok(PortRule::Exact(n)),
            _ => Err(refuse(
                entry,
                &format!("has port '{p}', not a number from 1 to 65535 or '*'"),
            )),
        },
    }
}

/// An address range of `allowAddresses`: `10.0.0.0/8`, `fd00::/8`, or one address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Parses `ADDRESS/PREFIX` or a single address.
    ///
    /// # Errors
    /// Why the range is not one, naming it.
    pub fn parse(range: &str) -> Result<Cidr, String> {
        let bad = |why: &str| format!("range '{range}' {why}");
        let (addr, prefix) = match range.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (range, None),
        };
        let addr: IpAddr = addr.trim_start_matches('[').trim_end_matches(']').parse().map_err(|_| {
            bad("is not an address or a range; write e.g. '10.0.0.0/8', '127.0.0.1' or 'fd00::/8'")
        })?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => match p.parse::<u8>() {
                Ok(n) if n <= max && p.bytes().all(|b| b.is_ascii_digit()) => n,
                _ => {
                    return Err(bad(&format!(
                        "has prefix '{p}', not a number from 0 to {max}"
                    )))
                }
            },
        };
        Ok(Cidr { addr, prefix })
    }

    /// Whether the range holds `ip` (an IPv4-mapped IPv6 address counts as its IPv4 address).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                masked(u128::from(u32::from(net)) << 96, self.prefix)
                    == masked(u128::from(u32::from(ip)) << 96, self.prefix)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                masked(u128::from(net), self.prefix) == masked(u128::from(ip), self.prefix)
            }
            _ => false,
        }
    }
}

fn masked(bits: u128, prefix: u8) -> u128 {
    if prefix == 0 {
        0
    } else {
        bits & (u128::MAX << (128 - u32::from(prefix)))
    }
}

/// What kind of address must be allowed by address, or `None` for a public one.
pub fn special_kind(ip: IpAddr) -> Option<&'static str> {
    match ip.to_canonical() {
        IpAddr::V4(a) => v4_kind(a),
        IpAddr::V6(a) => {
            let s = a.segments();
            if a.is_loopback() {
                Some("loopback")
            } else if a.is_unspecified() {
                Some("unspecified")
            } else if s[0] & 0xfe00 == 0xfc00 {
                Some("private")
            } else if s[0] & 0xffc0 == 0xfe80 {
                Some("link-local")
            } else if s[0] & 0xffc0 == 0xfec0 {
                Some("private (site-local)")
            } else if s[..6] == [0; 6] || (s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0; 4]) {
                // IPv4-compatible and NAT64 forms reach the IPv4 address inside
                let [a, b] = s[6].to_be_bytes();
                let [c, d] = s[7].to_be_bytes();
                v4_kind(Ipv4Addr::new(a, b, c, d))
            } else {
                None
            }
        }
    }
}

fn v4_kind(a: Ipv4Addr) -> Option<&'static str> {
    let o = a.octets();
    if a.is_loopback() {
        Some("loopback")
    } else if a.is_unspecified() || o[0] == 0 {
        Some("unspecified")
    } else if a.is_private() || (o[0] == 100 && o[1] & 0xc0 == 64) {
        Some("private")
    } else if a.is_link_local() {
        Some("link-local")
    } else {
        None
    }
}

/// The screen on the addresses a name resolves to (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AddressScreen {
    /// Ranges whose loopback, private, link-local or unspecified addresses may be reached.
    pub allow: Vec<Cidr>,
}

impl AddressScreen {
    /// Parses `allowAddresses`.
    ///
    /// # Errors
    /// The first range that is not one ([`Cidr::parse`]).
    pub fn parse(ranges: &[String]) -> Result<AddressScreen, String> {
        Ok(AddressScreen {
            allow: ranges
                .iter()
                .map(|r| Cidr::parse(r))
                .collect::<Result<_, _>>()?,
        })
    }

    /// `Err(message)` when `ip`, resolved from `host`, may not be reached.
    ///
    /// # Errors
    /// A message naming the host, the address and what to add to allow it.
    pub fn check(&self, host: &str, ip: IpAddr) -> Result<(), String> {
        let Some(kind) = special_kind(ip) else {
            return Ok(());
        };
        if self.allow.iter().any(|c| c.contains(ip)) {
            return Ok(());
        }
        Err(format!(
            "Fetch blocked: {host} resolved to {ip}, a {kind} address. To allow it, add '{ip}' (or its range) to fetch.allowAddresses, or list the address itself in fetch.domains"
        ))
    }
}
