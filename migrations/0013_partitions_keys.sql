-- Storage for retention, a distributed Postgres and cheaper writes:
--  * `events` is partitioned by month of occurred_at, so retention drops whole partitions (no
--    DELETE, no bloat) and each partition's indexes stay small; the ledger `event_ids` keeps the
--    sender's id as its key (see below) and loses a dropped month's ids by DELETE;
--  * every primary key and unique index of a per-cluster table includes `cluster`, the distribution
--    column a Citus deployment would use (docs/scaling.md);
--  * fewer, time-ordered indexes on `events`: the primary key (cluster, occurred_at, id) replaces
--    the random-UUID key and the (cluster, occurred_at) index; one (cluster, node, end) index serves
--    both burst extension and node folding; the kind index covers only the kinds read by kind;
--  * failures keep each signal's (kind, code), so the signal-kind analysis needs no join to
--    `events` (by id, not cluster) and survives retention.

-- Where retained signals begin: the upper bound of the newest partition retention dropped.
-- Signals older than it are refused (their ids left the ledger with the partition).
CREATE TABLE signal_retention (
    singleton     boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    retained_from timestamptz NOT NULL DEFAULT '-infinity'
);
INSERT INTO signal_retention DEFAULT VALUES;

-- One entry per signal of the failure, in signal_ids order: kind, U+001F, code ('' when none).
ALTER TABLE failures ADD COLUMN signal_kinds text[] NOT NULL DEFAULT '{}';
UPDATE failures f
   SET signal_kinds = ARRAY(SELECT e.kind || E'\x1f' || COALESCE(e.code::text, '')
                            FROM unnest(f.signal_ids) WITH ORDINALITY AS s(id, n)
                            JOIN events e ON e.id = s.id ORDER BY s.n);

-- Keys that include cluster. Failures and lifecycles are still addressed by id alone in the API:
-- a plain (non-unique) index on id serves those lookups.
ALTER TABLE failures DROP CONSTRAINT failures_pkey;
ALTER TABLE failures ADD PRIMARY KEY (cluster, id);
CREATE INDEX failures_id_idx ON failures (id);
-- Folding looks a key's failures up by last_at (failures_key_last_idx); nothing reads first_at per key.
DROP INDEX failures_key_idx;

ALTER TABLE failure_lifecycle_changes DROP CONSTRAINT failure_lifecycle_changes_failure_id_fkey;
ALTER TABLE failure_lifecycle_changes ADD COLUMN cluster text;
UPDATE failure_lifecycle_changes c SET cluster = l.cluster FROM failure_lifecycle l WHERE l.failure_id = c.failure_id;
ALTER TABLE failure_lifecycle_changes ALTER COLUMN cluster SET NOT NULL;
ALTER TABLE failure_lifecycle DROP CONSTRAINT failure_lifecycle_pkey;
ALTER TABLE failure_lifecycle ADD PRIMARY KEY (cluster, failure_id);
CREATE INDEX failure_lifecycle_id_idx ON failure_lifecycle (failure_id);
ALTER TABLE failure_lifecycle_changes DROP CONSTRAINT failure_lifecycle_changes_pkey;
ALTER TABLE failure_lifecycle_changes ADD PRIMARY KEY (cluster, id);
ALTER TABLE failure_lifecycle_changes ADD FOREIGN KEY (cluster, failure_id)
    REFERENCES failure_lifecycle (cluster, failure_id);

ALTER TABLE node_state_changes DROP CONSTRAINT node_state_changes_pkey;
ALTER TABLE node_state_changes ADD PRIMARY KEY (cluster, id);

-- Partitioned events and ledger. The view over events is recreated afterwards.
DROP VIEW reporting.signals;
ALTER TABLE events RENAME TO events_unpartitioned;
ALTER TABLE event_ids RENAME TO event_ids_unpartitioned;

CREATE TABLE events (
    id               uuid        NOT NULL,
    occurred_at      timestamptz NOT NULL,
    received_at      timestamptz NOT NULL DEFAULT now(),
    cluster          text        NOT NULL,
    node             text        NULL,
    gpu_index        integer     NULL,
    gpu_uuid         text        NULL,
    gpu_model        text        NULL,
    job_id           text        NULL,
    job_gpus         integer     NULL,
    kind             text        NOT NULL,
    code             bigint      NULL,
    symptom          text        NULL,
    rc_category      text        NULL,
    rc_component     text        NULL,
    message          text        NULL,
    attributes       jsonb       NOT NULL DEFAULT '{}'::jsonb,
    repeat_count     integer     NOT NULL DEFAULT 1 CONSTRAINT events_repeat_count_check CHECK (repeat_count >= 1),
    last_occurred_at timestamptz NULL
) PARTITION BY RANGE (occurred_at);

-- The ledger: one row per accepted signal id per cluster. It stays keyed by id alone (within the
-- cluster): a log line without a timestamp of its own is stamped with the request time, so its
-- retry carries the same id at another time; a key with the time (as a partitioned table needs)
-- would store it twice. Retention deletes a dropped month's ids by occurred_at.
CREATE TABLE event_ids (
    cluster     text        NOT NULL,
    id          uuid        NOT NULL,
    occurred_at timestamptz NOT NULL
);

-- Monthly partitions (UTC months) of events covering [p_from, p_to), named events_YYYY_MM;
-- never below the retention horizon. Creation is serialised by
-- one advisory lock and bounded by lock_timeout; existing partitions cost one catalog lookup each.
-- Ingest calls it for a batch's months outside a transaction, so it holds nothing while it waits.
CREATE FUNCTION faultline_ensure_partitions(p_from timestamptz, p_to timestamptz) RETURNS integer
LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
    m       timestamptz := date_trunc('month', p_from, 'UTC');
    horizon timestamptz;
    created integer := 0;
    t       text;
    part    text;
BEGIN
    SELECT retained_from INTO horizon FROM signal_retention;
    m := GREATEST(m, horizon);
    WHILE m < p_to LOOP
        FOREACH t IN ARRAY ARRAY['events'] LOOP
            part := t || '_' || to_char(m AT TIME ZONE 'UTC', 'YYYY_MM');
            IF to_regclass(part) IS NULL THEN
                PERFORM pg_advisory_xact_lock(1179385859, 0);
                -- The name lookup may not see a partition another session has just committed (an
                -- advisory lock does not refresh the catalog cache): that creation is a success.
                BEGIN
                    -- CREATE TABLE ... PARTITION OF would lock the parent exclusively (waiting for
                    -- every open ingest); ATTACH takes SHARE UPDATE EXCLUSIVE, which writers ignore.
                    EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part, t);
                    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                                   t, part, m, ((m AT TIME ZONE 'UTC') + interval '1 month') AT TIME ZONE 'UTC');
                    created := created + 1;
                EXCEPTION WHEN duplicate_table THEN
                    NULL;
                END;
            END IF;
        END LOOP;
        m := ((m AT TIME ZONE 'UTC') + interval '1 month') AT TIME ZONE 'UTC';
    END LOOP;
    RETURN created;
END
$$;

-- The signals that analyses read by kind rather than through failures (slowdowns and low
-- utilisation for efficiency, drains and resumes for node transitions and recovery) outlive
-- retention here: a small share of the rows, copied from a partition before it is dropped.
CREATE TABLE events_archive (LIKE events INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
ALTER TABLE events_archive ADD PRIMARY KEY (cluster, occurred_at, id);
CREATE INDEX events_archive_kind_time_idx ON events_archive (kind, occurred_at);

-- Drops the partitions of events that end at or before p_cutoff (archiving their signals of the
-- kinds above first), deletes the ledger's ids of those months and moves the retention horizon to
-- the newest dropped bound.
-- Dropping a partition locks `events` exclusively for a moment: lock_timeout bounds the wait (the
-- maintenance task retries at its next pass). Returns the number of partitions dropped.
CREATE FUNCTION faultline_drop_partitions_before(p_cutoff timestamptz) RETURNS integer
LANGUAGE plpgsql SET lock_timeout = '2s' AS $$
DECLARE
    r       record;
    upper   timestamptz;
    horizon timestamptz;
    dropped integer := 0;
BEGIN
    PERFORM pg_advisory_xact_lock(1179385859, 0);
    FOR r IN SELECT c.relname::text AS name, pg_get_expr(c.relpartbound, c.oid) AS bound
             FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = 'events'::regclass
             ORDER BY 1
    LOOP
        upper := (regexp_match(r.bound, 'TO \(''([^'']+)''\)'))[1]::timestamptz;
        IF upper IS NOT NULL AND upper <= p_cutoff THEN
            EXECUTE format('INSERT INTO events_archive SELECT * FROM %I
                            WHERE kind IN (''slowdown'', ''low_utilization'', ''node_drain'', ''node_resume'')
                            ON CONFLICT DO NOTHING', r.name);
            EXECUTE format('DROP TABLE %I', r.name);
            dropped := dropped + 1;
            horizon := GREATEST(horizon, upper);
        END IF;
    END LOOP;
    IF horizon IS NOT NULL THEN
        UPDATE signal_retention SET retained_from = GREATEST(retained_from, horizon);
        DELETE FROM event_ids WHERE occurred_at < horizon;
    END IF;
    RETURN dropped;
END
$$;

SELECT faultline_ensure_partitions(
    LEAST(COALESCE((SELECT min(occurred_at) FROM events_unpartitioned), now()), now()),
    GREATEST(COALESCE((SELECT max(occurred_at) FROM events_unpartitioned), now()), now()) + interval '3 months');

INSERT INTO events (id, occurred_at, received_at, cluster, node, gpu_index, gpu_uuid, gpu_model, job_id, job_gpus,
                    kind, code, symptom, rc_category, rc_component, message, attributes, repeat_count, last_occurred_at)
SELECT id, occurred_at, received_at, cluster, node, gpu_index, gpu_uuid, gpu_model, job_id, job_gpus,
       kind, code, symptom, rc_category, rc_component, message, attributes, repeat_count, last_occurred_at
FROM events_unpartitioned ORDER BY cluster, occurred_at, id;
-- The old ledger held ids only; stored rows give their cluster and time. Ids that were folded into
-- a burst before this migration have no row of their own: a retry of one of those is stored again.
INSERT INTO event_ids (cluster, id, occurred_at)
SELECT cluster, id, occurred_at FROM events_unpartitioned ORDER BY cluster, id;
DROP TABLE events_unpartitioned;
DROP TABLE event_ids_unpartitioned;

ALTER TABLE events ADD PRIMARY KEY (cluster, occurred_at, id);
ALTER TABLE event_ids ADD PRIMARY KEY (cluster, id);
-- Folding a job key: its signals whose span ends at or after the range start.
CREATE INDEX events_job_end_idx ON events (cluster, job_id, (COALESCE(last_occurred_at, occurred_at)))
    WHERE job_id IS NOT NULL;
-- Folding a node key and finding the stored burst a new signal extends (was two indexes).
CREATE INDEX events_node_end_idx ON events (cluster, node, (COALESCE(last_occurred_at, occurred_at)))
    WHERE node IS NOT NULL;
-- The analyses that read signals by kind (slowdowns, low utilisation, drains and resumes).
CREATE INDEX events_kind_time_idx ON events (kind, occurred_at)
    WHERE kind IN ('slowdown', 'low_utilization', 'node_drain', 'node_resume');

CREATE VIEW reporting.signals AS
SELECT e.id                                        AS signal_id,
       e.occurred_at                               AS occurred_at,
       COALESCE(e.last_occurred_at, e.occurred_at) AS last_occurred_at,
       e.repeat_count                              AS repeat_count,
       e.received_at                               AS received_at,
       e.cluster                                   AS cluster,
       e.node                                      AS node,
       n.gpu_generation                            AS node_generation,
       e.gpu_index                                 AS gpu_index,
       e.gpu_uuid                                  AS gpu_uuid,
       e.gpu_model                                 AS gpu_model,
       e.job_id                                    AS job_id,
       e.kind                                      AS kind,
       e.code                                      AS code,
       e.symptom                                   AS symptom,
       e.rc_category                               AS reported_category,
       e.rc_component                              AS reported_component,
       e.message                                   AS message
FROM events e
LEFT JOIN nodes n ON n.cluster = e.cluster AND n.hostname = e.node;

COMMENT ON VIEW reporting.signals IS
    'Raw signals (one row per stored signal; a burst of repeats is one row with repeat_count), without sender attributes. Holds the retained signals only (FAULTLINE_SIGNAL_RETENTION_DAYS).';
COMMENT ON COLUMN reporting.signals.signal_id IS 'The sender''s idempotency key';
COMMENT ON COLUMN reporting.signals.occurred_at IS 'When the signal (the first of a burst) occurred';
COMMENT ON COLUMN reporting.signals.last_occurred_at IS 'Last repeat of a burst; occurred_at for a single signal';
COMMENT ON COLUMN reporting.signals.repeat_count IS 'Occurrences folded into this row (1 for a single signal)';
COMMENT ON COLUMN reporting.signals.received_at IS 'When Faultline stored it';
COMMENT ON COLUMN reporting.signals.cluster IS 'Cluster name';
COMMENT ON COLUMN reporting.signals.node IS 'Hostname, NULL for a cluster-wide signal';
COMMENT ON COLUMN reporting.signals.node_generation IS 'GPU generation of the node in the inventory, NULL when unknown';
COMMENT ON COLUMN reporting.signals.gpu_index IS 'GPU index on the node, NULL when not given';
COMMENT ON COLUMN reporting.signals.gpu_uuid IS 'GPU UUID, NULL when not given';
COMMENT ON COLUMN reporting.signals.gpu_model IS 'GPU model as the sender reported it';
COMMENT ON COLUMN reporting.signals.job_id IS 'Job named by the sender, NULL when none';
COMMENT ON COLUMN reporting.signals.kind IS 'Signal kind (xid, ecc, nccl_timeout, link_flap, node_drain, ...)';
COMMENT ON COLUMN reporting.signals.code IS 'Signal code (e.g. the XID number), NULL when none';
COMMENT ON COLUMN reporting.signals.symptom IS 'Symptom reported by the sender, NULL when none';
COMMENT ON COLUMN reporting.signals.reported_category IS 'Root-cause category the sender asserted, NULL when none';
COMMENT ON COLUMN reporting.signals.reported_component IS 'Root-cause component the sender asserted, NULL when none';
COMMENT ON COLUMN reporting.signals.message IS 'Message text';

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'faultline_reader') THEN
        GRANT SELECT ON reporting.signals TO faultline_reader;
    END IF;
END
$$;
