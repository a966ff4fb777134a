-- The catalog version: bumped by every rule change. Ingest takes it FOR SHARE, a rule change
-- FOR UPDATE, so failures are never built from two versions of the rules.
CREATE TABLE catalog_state (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    version   bigint  NOT NULL
);
INSERT INTO catalog_state (singleton, version) VALUES (true, 1);

-- Failures: signals folded by (cluster, correlation key) within the correlation window.
-- Rebuilt for the affected keys on ingest and wholesale when the catalog changes.
CREATE TABLE failures (
    id                uuid        PRIMARY KEY,
    cluster           text        NOT NULL,
    correlation_key   text        NOT NULL,
    job_id            text        NULL,
    first_at          timestamptz NOT NULL,
    last_at           timestamptz NOT NULL,
    nodes             text[]      NOT NULL,
    signal_ids        uuid[]      NOT NULL,
    signal_count      integer     NOT NULL,
    root_signal       uuid        NOT NULL,
    root_node         text        NULL,
    root_kind         text        NOT NULL,
    root_code         bigint      NULL,
    -- generation from the root signal's gpu_model; the node inventory, when it knows the node, wins at read time
    signal_generation text        NOT NULL,
    category          text        NOT NULL,
    component         text        NOT NULL,
    severity          text        NOT NULL,
    transient         boolean     NOT NULL,
    action            text        NOT NULL,
    rule_id           text        NULL,
    explicit_cause    boolean     NOT NULL,
    symptom           text        NULL,
    catalog_version   bigint      NOT NULL
);
CREATE INDEX failures_time_idx ON failures (first_at);
CREATE INDEX failures_cluster_time_idx ON failures (cluster, first_at);
CREATE INDEX failures_key_idx ON failures (cluster, correlation_key, first_at);
CREATE INDEX failures_root_node_idx ON failures (cluster, root_node);
