-- What failures cost: the failure lifecycle (resolution, recovery phases, post-mortem root cause),
-- node service state, scheduler jobs, and the index the straggler/efficiency analytics read.

-- Lifecycle of a failure, kept OUT of the failures table because failures are deleted and rebuilt
-- (late signals re-fold them, a catalog change rebuilds them all). A row is anchored to the session
-- of signals it was written for: (cluster, correlation_key, anchor_at = first_at of the failure when
-- first patched). The failure that owns it now is the one of the same key whose span
-- [first_at, last_at] holds anchor_at: a signal never leaves its session (sessions only merge), so the
-- lifecycle follows a failure whose id changed because an earlier late signal joined it.
-- failure_id is the id the failure had when it was first patched (the row's identity).
CREATE TABLE failure_lifecycle (
    failure_id        uuid        PRIMARY KEY,
    cluster           text        NOT NULL,
    correlation_key   text        NOT NULL,
    anchor_at         timestamptz NOT NULL,
    resolved_at       timestamptz NULL,
    resolution        text        NULL CHECK (resolution IN ('transient_restart', 'drained', 'other')),
    -- Recovery phases in minutes (Unicron's GPT-3 example: 30 + 9 + 14 + 15 = 68).
    detection_minutes     double precision NULL CHECK (detection_minutes >= 0),
    resubmission_minutes  double precision NULL CHECK (resubmission_minutes >= 0),
    setup_minutes         double precision NULL CHECK (setup_minutes >= 0),
    recomputation_minutes double precision NULL CHECK (recomputation_minutes >= 0),
    -- Post-mortem root cause: overrides the automatic one in analytics, never overwrites it.
    pm_category       text        NULL CHECK (pm_category IN ('hardware', 'platform', 'user', 'unknown')),
    pm_component      text        NULL,
    note              text        NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    updated_by        text        NOT NULL,
    CHECK ((pm_category IS NULL) = (pm_component IS NULL))
);
CREATE INDEX failure_lifecycle_anchor_idx ON failure_lifecycle (cluster, correlation_key, anchor_at);

-- Append-only audit of lifecycle changes: who, when, and each field's old and new value.
CREATE TABLE failure_lifecycle_changes (
    id          bigserial   PRIMARY KEY,
    failure_id  uuid        NOT NULL REFERENCES failure_lifecycle (failure_id),
    changed_at  timestamptz NOT NULL DEFAULT now(),
    changed_by  text        NOT NULL,
    -- {"field": {"from": old, "to": new}, ...}
    changes     jsonb       NOT NULL
);
CREATE INDEX failure_lifecycle_changes_idx ON failure_lifecycle_changes (failure_id, id);

-- Failures with their current lifecycle (latest-updated when a merge brought two) and the
-- effective root cause: the post-mortem's when there is one, else the automatic one.
CREATE VIEW failures_effective AS
SELECT f.*,
       l.failure_id AS lifecycle_id, l.resolved_at, l.resolution,
       l.detection_minutes, l.resubmission_minutes, l.setup_minutes, l.recomputation_minutes,
       l.pm_category, l.pm_component, l.note,
       COALESCE(l.pm_category, f.category) AS effective_category,
       COALESCE(l.pm_component, f.component) AS effective_component
FROM failures f
LEFT JOIN LATERAL (
    SELECT * FROM failure_lifecycle l
    WHERE l.cluster = f.cluster AND l.correlation_key = f.correlation_key
      AND l.anchor_at BETWEEN f.first_at AND f.last_at
    ORDER BY l.updated_at DESC, l.failure_id
    LIMIT 1
) l ON true;

-- Node service transitions (drained / returned to service), from the API. Events of kind
-- node_drain / node_resume say the same and are read beside these.
CREATE TABLE node_state_changes (
    id          bigserial   PRIMARY KEY,
    cluster     text        NOT NULL,
    hostname    text        NOT NULL,
    state       text        NOT NULL CHECK (state IN ('drained', 'returned')),
    at          timestamptz NOT NULL,
    reason      text        NULL,
    failure_id  uuid        NULL,
    recorded_by text        NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX node_state_changes_node_idx ON node_state_changes (cluster, hostname, at);
CREATE INDEX node_state_changes_time_idx ON node_state_changes (at);

-- Scheduler jobs, so failure rates can be given per job and per GPU-hour of work.
CREATE TABLE jobs (
    cluster     text        NOT NULL,
    job_id      text        NOT NULL,
    gpus        integer     NOT NULL CHECK (gpus > 0),
    nodes       text[]      NOT NULL,
    started_at  timestamptz NOT NULL,
    ended_at    timestamptz NULL,
    state       text        NOT NULL CHECK (state IN ('completed', 'failed', 'cancelled', 'running')),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster, job_id),
    CHECK (ended_at IS NULL OR ended_at >= started_at)
);
CREATE INDEX jobs_time_idx ON jobs (started_at);

-- Slowdown, low_utilization and node_drain/node_resume signals are read by kind and time.
CREATE INDEX events_kind_time_idx ON events (kind, occurred_at);
