//! Roles, token secrets and their hashes. Pure: the storage layer keeps only the hash.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use utoipa::ToSchema;
use uuid::Uuid;

/// agent: ingest and inventory; reader: queries; admin: everything, including tokens and rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Agent,
    Reader,
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Agent => "agent",
            Role::Reader => "reader",
            Role::Admin => "admin",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Role::Agent, Role::Reader, Role::Admin]
            .into_iter()
            .find(|r| r.as_str() == s)
    }
}

/// What a call needs. Admin may do everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    /// Write signals and inventory.
    Ingest,
    /// Read inventory (agents and readers both need it).
    ReadInventory,
    /// Queries and analytics.
    Query,
    /// Token and catalog management.
    Admin,
}

impl Role {
    pub fn allows(self, p: Permission) -> bool {
        matches!(
            (self, p),
            (Role::Admin, _)
                | (Role::Agent, Permission::Ingest | Permission::ReadInventory)
                | (Role::Reader, Permission::Query | Permission::ReadInventory)
        )
    }
}

pub const TOKEN_PREFIX: &str = "flt_";

/// Longest lifetime a token may be given (ten years), so `ttl_seconds` cannot overflow a timestamp.
pub const MAX_TOKEN_TTL_SECONDS: i64 = 10 * 366 * 24 * 3600;

/// When a new token expires: at `expires_at`, or `ttl_seconds` after `now`, or never (both absent).
/// Naming both, a time not after `now`, or a lifetime beyond [`MAX_TOKEN_TTL_SECONDS`] is refused.
pub fn token_expiry(
    expires_at: Option<DateTime<Utc>>,
    ttl_seconds: Option<i64>,
    now: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>, String> {
    let latest = now + Duration::seconds(MAX_TOKEN_TTL_SECONDS);
    match (expires_at, ttl_seconds) {
        (Some(_), Some(_)) => Err("give expires_at or ttl_seconds, not both".into()),
        (None, None) => Ok(None),
        (None, Some(ttl)) if !(1..=MAX_TOKEN_TTL_SECONDS).contains(&ttl) => {
            Err(format!("ttl_seconds {ttl} is not in 1..={MAX_TOKEN_TTL_SECONDS}"))
        }
        (None, Some(ttl)) => Ok(Some(now + Duration::seconds(ttl))),
        (Some(at), None) if at <= now => Err(format!("expires_at ({}) is not in the future", at.to_rfc3339())),
        (Some(at), None) if at > latest => Err(format!(
            "expires_at ({}) is more than {MAX_TOKEN_TTL_SECONDS} seconds (ten years) away",
            at.to_rfc3339()
        )),
        (Some(at), None) => Ok(Some(at)),
    }
}

/// Whether a token with this expiry is expired at `now` (it stops working at `expires_at`).
pub fn is_expired(expires_at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> bool {
    expires_at.is_some_and(|at| at <= now)
}

/// A freshly minted token: `flt_<id as 32 hex>_<64 hex secret>`. The id lets us find the row
/// without an index on the secret; the secret is compared by hash in constant time.
pub struct MintedToken {
    pub id: Uuid,
    pub token: String,
    pub secret_hash: Vec<u8>,
}

pub fn mint_token() -> MintedToken {
    let id = Uuid::new_v4();
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).expect("the OS random source is available");
    let secret_hex = hex(&secret);
    MintedToken {
        id,
        token: format!("{TOKEN_PREFIX}{}_{secret_hex}", id.simple()),
        secret_hash: hash_secret(&secret_hex),
    }
}

/// Splits a presented token into (id, secret); None when it is not of our format.
pub fn split_token(token: &str) -> Option<(Uuid, &str)> {
    let rest = token.strip_prefix(TOKEN_PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    if secret.len() != 64 {
        return None;
    }
    Some((Uuid::try_parse(id).ok()?, secret))
}

pub fn hash_secret(secret: &str) -> Vec<u8> {
    Sha256::digest(secret.as_bytes()).to_vec()
}

/// Compares by hash so that timing reveals nothing about the stored value.
pub fn secret_matches(presented: &str, stored_hash: &[u8]) -> bool {
    hash_secret(presented).ct_eq(stored_hash).into()
}

/// A random admin token for first start, when none is configured.
pub fn generate_admin_token() -> String {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).expect("the OS random source is available");
    format!("{TOKEN_PREFIX}admin_{}", hex(&secret))
}

pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 0xf) as usize] as char);
    }
    s
}

/// Inverse of [`hex`]; None for odd length or a non-hex digit.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| text.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_token_splits_and_verifies() {
        let t = mint_token();
        let (id, secret) = split_token(&t.token).unwrap();
        assert_eq!(id, t.id);
        assert!(secret_matches(secret, &t.secret_hash));
        assert!(!secret_matches(
            &secret.replace('a', "b").replace('0', "1"),
            &t.secret_hash
        ));
        assert!(split_token("flt_nothex_abc").is_none());
        assert!(split_token("Bearer x").is_none());
    }

    #[test]
    fn roles_allow_what_the_issue_says() {
        assert!(Role::Agent.allows(Permission::Ingest));
        assert!(!Role::Agent.allows(Permission::Query));
        assert!(Role::Reader.allows(Permission::Query));
        assert!(!Role::Reader.allows(Permission::Ingest));
        assert!(!Role::Reader.allows(Permission::Admin));
        assert!(Role::Admin.allows(Permission::Admin) && Role::Admin.allows(Permission::Ingest));
        assert_eq!(hex(&[0x0f, 0xa0]), "0fa0");
        assert_eq!(unhex("0fa0"), Some(vec![0x0f, 0xa0]));
        assert_eq!((unhex("abc"), unhex("zz")), (None, None));
    }

    #[test]
    fn expiry_from_a_time_or_a_lifetime() {
        let now: DateTime<Utc> = "2026-12-01T00:00:00Z".parse().unwrap();
        let at: DateTime<Utc> = "2026-12-02T00:00:00Z".parse().unwrap();
        assert_eq!(token_expiry(None, None, now), Ok(None));
        assert_eq!(token_expiry(Some(at), None, now), Ok(Some(at)));
        assert_eq!(token_expiry(None, Some(86_400), now), Ok(Some(at)));
        assert!(token_expiry(Some(at), Some(60), now).unwrap_err().contains("not both"));
        assert!(
            token_expiry(Some(now), None, now)
                .unwrap_err()
                .contains("not in the future")
        );
        assert!(token_expiry(None, Some(0), now).unwrap_err().contains("not in 1..="));
        assert!(token_expiry(None, Some(MAX_TOKEN_TTL_SECONDS + 1), now).is_err());
        assert!(is_expired(Some(now), now) && !is_expired(Some(at), now) && !is_expired(None, now));
    }
}
