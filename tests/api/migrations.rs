//! Released migrations whose comments were reworded: a database migrated with their earlier text
//! still starts (its stored checksums move to the current files'), and a real change still fails.

use crate::helpers::spawn_app;

async fn stored(db: &sqlx::PgPool, version: i64) -> Vec<u8> {
    sqlx::query_scalar("SELECT checksum FROM _sqlx_migrations WHERE version = $1")
        .bind(version)
        .fetch_one(db)
        .await
        .unwrap()
}

fn current(version: i64) -> Vec<u8> {
    faultline::storage::MIGRATOR
        .iter()
        .find(|m| m.version == version)
        .unwrap()
        .checksum
        .to_vec()
}

#[tokio::test]
async fn a_database_migrated_with_the_earlier_comments_migrates_again() {
    let app = spawn_app().await;
    let reworded = faultline::storage::migration_checksums::reworded();
    assert!(!reworded.is_empty());
    // As a database migrated before the comments changed stores them.
    for (version, old) in &reworded {
        sqlx::query("UPDATE _sqlx_migrations SET checksum = $1 WHERE version = $2")
            .bind(old)
            .bind(version)
            .execute(&app.db)
            .await
            .unwrap();
    }
    // The plain migrator refuses such a database... (on a connection of its own, closed after: it
    // returns that error still holding its advisory lock)
    let mut conn = app.db.acquire().await.unwrap().detach();
    let refused = faultline::storage::MIGRATOR.run(&mut conn).await;
    assert!(
        matches!(refused, Err(sqlx::migrate::MigrateError::VersionMismatch(_))),
        "{refused:?}"
    );
    sqlx::Connection::close(conn).await.unwrap();
    // ...ours accepts it, and stores the current checksums.
    faultline::storage::migrate(&app.db).await.unwrap();
    for (version, _) in &reworded {
        assert_eq!(
            stored(&app.db, *version).await,
            current(*version),
            "migration {version}"
        );
    }
    // Again: nothing left to do.
    assert_eq!(
        faultline::storage::migration_checksums::adopt_reworded(&app.db)
            .await
            .unwrap(),
        0
    );
    faultline::storage::migrate(&app.db).await.unwrap();
}

#[tokio::test]
async fn a_checksum_matching_no_known_text_still_fails() {
    let app = spawn_app().await;
    let (version, _) = faultline::storage::migration_checksums::reworded()[0];
    sqlx::query("UPDATE _sqlx_migrations SET checksum = $1 WHERE version = $2")
        .bind(vec![0u8; 48])
        .bind(version)
        .execute(&app.db)
        .await
        .unwrap();
    let refused = faultline::storage::migrate(&app.db).await;
    assert!(
        matches!(refused, Err(sqlx::migrate::MigrateError::VersionMismatch(v)) if v == version),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_database_never_migrated_is_left_to_the_migrator() {
    let server_url = crate::helpers::test_server_url().await.unwrap();
    let database = crate::helpers::TestDatabase::create(&server_url).await;
    let db = sqlx::PgPool::connect(&database.url()).await.unwrap();
    assert_eq!(
        faultline::storage::migration_checksums::adopt_reworded(&db)
            .await
            .unwrap(),
        0
    );
    let tables: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_tables WHERE tablename = '_sqlx_migrations'")
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(tables, 0);
    db.close().await;
}
