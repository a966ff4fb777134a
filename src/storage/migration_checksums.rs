//! Migrations whose files were edited after they were released (comments only: the SQL they run is
//! unchanged). sqlx stores a SHA-384 checksum of each applied migration and refuses to start when a
//! file no longer matches it, so a database migrated with an earlier text of these files gets its
//! stored checksum moved from that exact earlier text to the current one before the migrator runs.
//! A checksum that matches neither is left alone, so a real change still fails loudly.

use sqlx::PgPool;

use super::MIGRATOR;

/// (version, SHA-384 of an earlier released text of its file, hex). Append a row whenever a released
/// migration's comments are reworded; never edit a released migration's SQL.
const REWORDED: &[(i64, &str)] = &[
    (
        8,
        "6a9f488b581a4b0bfe0a0fb0626674868d48e23158d1ddacfa678b95f0987f1fa3c086921ad2195e68038d809c846731",
    ),
    (
        9,
        "a1d5b37317e9a0417ec087819802287ed130b68490e4964ad199b94e1bb5589d7cc0179d729b7b1ba1c9c3c30fc40f79",
    ),
    (
        11,
        "21309e365c6d05e889b01c7f988c32d5a21605b489d5a49a273e12bc1acd0c1789cd2e533a3e0fc8da691fe2e8b89c57",
    ),
    (
        12,
        "fa92d9f803b94768b76aad43bb8143dd6823fd3b3ead852f626bed8cc037e747eac3eb59f117e13f3ddb616391ac6a42",
    ),
    (
        13,
        "d038bd6d9e6bbc1b83fda3606fda5b3c1003678bd4538c447787db478b2e73a04bf260f07e8af6c5e8dc64d94fc4cabd",
    ),
    (
        14,
        "f2d45b6dca03f4c5ab63e66caf95d191d1fc019fadfc40f83249c224df768c2079e41cc7be762a9a7d37664ca39f4f86",
    ),
    (
        15,
        "79a050739794a2adce86323dc3b7d46793aae02ccb6152583c30b738e1855ed455ab55ab30e5fb093c5b5f4f761671a3",
    ),
    (
        18,
        "e13644bcf7cdbb51248a6a1a329aa72ba124d1f30fc2637035b7c4fc3f2bde87eed9f8668d0944aaae182fde40c67f5c",
    ),
];

/// Moves each stored checksum of [`REWORDED`] from its earlier text to the current file's. Does
/// nothing on a database never migrated (no `_sqlx_migrations`). Idempotent, and safe when several
/// instances start at once (each update matches only the old checksum). Returns the rows updated.
pub async fn adopt_reworded(db: &PgPool) -> Result<u64, sqlx::Error> {
    // The same unqualified name sqlx uses, so the same search_path resolves it.
    let migrated: bool = sqlx::query_scalar!(r#"SELECT to_regclass('_sqlx_migrations') IS NOT NULL AS "migrated!""#)
        .fetch_one(db)
        .await?;
    if !migrated {
        return Ok(0);
    }
    let mut updated = 0;
    for (version, old) in REWORDED {
        let Some(current) = MIGRATOR
            .iter()
            .find(|m| m.version == *version && !m.migration_type.is_down_migration())
        else {
            continue;
        };
        let old = decode_hex(old);
        if old.as_slice() == &*current.checksum {
            continue;
        }
        updated += sqlx::query!(
            "UPDATE _sqlx_migrations SET checksum = $1 WHERE version = $2 AND checksum = $3",
            &*current.checksum,
            version,
            &old,
        )
        .execute(db)
        .await?
        .rows_affected();
    }
    if updated > 0 {
        tracing::info!(
            migrations = updated,
            "stored checksums of reworded migrations updated (comments only)"
        );
    }
    Ok(updated)
}

/// The earlier checksums of [`REWORDED`], as stored in `_sqlx_migrations` (for tests).
pub fn reworded() -> Vec<(i64, Vec<u8>)> {
    REWORDED.iter().map(|(v, h)| (*v, decode_hex(h))).collect()
}

fn decode_hex(hex: &str) -> Vec<u8> {
    hex.as_bytes()
        .chunks(2)
        .map(|pair| {
            let digit = |c: u8| (c as char).to_digit(16).expect("a hex digit") as u8;
            digit(pair[0]) << 4 | digit(pair[1])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reworded_migration_exists_and_its_old_checksum_differs_from_the_file() {
        for (version, old) in reworded() {
            assert_eq!(old.len(), 48, "SHA-384 of {version}");
            let current = MIGRATOR
                .iter()
                .find(|m| m.version == version)
                .unwrap_or_else(|| panic!("migration {version}"));
            assert_ne!(old.as_slice(), &*current.checksum, "migration {version}");
        }
    }

    #[test]
    fn hex_decodes() {
        assert_eq!(decode_hex("00ff7a"), [0x00, 0xff, 0x7a]);
    }
}
