-- Catalog rebuilds: an edit of the classification catalog commits at once with a new version; the
-- failures classified under older versions are then rebuilt in the background, a chunk of
-- correlation keys per transaction. One row per target version; its progress (the last key done,
-- in (cluster, key) order) is stored with each chunk, so a restart resumes where it stopped.
-- Fleet-wide, small: a reference table on Citus.
CREATE TABLE catalog_rebuilds (
    version          bigint      PRIMARY KEY,
    state            text        NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'done', 'superseded')),
    started_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz,
    -- Failures to rebuild when the work began (NULL until then), failures rebuilt, and of those
    -- the ones whose classification (category, component, severity) changed.
    total_failures   bigint,
    done_failures    bigint      NOT NULL DEFAULT 0,
    changed_failures bigint      NOT NULL DEFAULT 0,
    chunks           bigint      NOT NULL DEFAULT 0,
    cursor_cluster   text,
    cursor_key       text,
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- The rebuild walks each cluster's failures in key order and skips those already at its version.
CREATE INDEX failures_cluster_key_version_idx ON failures (cluster, correlation_key, catalog_version);
