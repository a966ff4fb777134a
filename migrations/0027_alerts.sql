-- Alerting: rules over the fleet's own figures, the state of each alert, the outbox of
-- notifications written in the transaction that changes that state, one delivery record per
-- attempt, the evaluation lease (one instance evaluates at a time) and when each node last sent.

-- Rules are evaluated per cluster. `version` grows with every edit; the audit log keeps each
-- version's body. A deleted rule is kept (deleted_at) so its alerts still name it.
CREATE TABLE alert_rules (
    id                   text        NOT NULL PRIMARY KEY,
    version              bigint      NOT NULL,
    spec                 jsonb       NOT NULL,
    created_at           timestamptz NOT NULL,
    updated_at           timestamptz NOT NULL,
    deleted_at           timestamptz NULL
);

-- One row per alert: fingerprint = hash of (rule, cluster, subject).
CREATE TABLE alerts (
    cluster          text        NOT NULL,
    fingerprint      text        NOT NULL,
    rule_id          text        NOT NULL,
    rule_version     bigint      NOT NULL,
    subject          text        NOT NULL,
    state            text        NOT NULL CHECK (state IN ('firing', 'resolved')),
    value            double precision NULL,
    labels           jsonb       NOT NULL,
    annotations      jsonb       NOT NULL,
    starts_at        timestamptz NOT NULL,
    ends_at          timestamptz NULL,
    last_notified_at timestamptz NOT NULL,
    evaluated_at     timestamptz NOT NULL,
    -- Notifications written for this alert so far: the per-alert order of the outbox.
    notifications    bigint      NOT NULL,
    PRIMARY KEY (cluster, fingerprint)
);
CREATE INDEX alerts_state_idx ON alerts (cluster, state, evaluated_at DESC);
CREATE INDEX alerts_rule_idx ON alerts (cluster, rule_id);

-- What is to be sent: one row per (notification, receiver). `seq` orders one alert's
-- notifications; a row is sent only when no earlier row of the same alert and receiver is pending.
CREATE TABLE alert_outbox (
    cluster         text        NOT NULL,
    id              uuid        NOT NULL,
    fingerprint     text        NOT NULL,
    seq             bigint      NOT NULL,
    receiver        integer     NOT NULL,
    receiver_kind   text        NOT NULL CHECK (receiver_kind IN ('alertmanager', 'webhook', 'slack')),
    url             text        NOT NULL,
    secret          text        NULL,
    event           text        NOT NULL CHECK (event IN ('firing', 'repeat', 'resolved')),
    payload         jsonb       NOT NULL,
    created_at      timestamptz NOT NULL,
    state           text        NOT NULL CHECK (state IN ('pending', 'delivered', 'rejected', 'expired')),
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    PRIMARY KEY (cluster, id)
);
CREATE INDEX alert_outbox_pending_idx ON alert_outbox (cluster, next_attempt_at) WHERE state = 'pending';
CREATE INDEX alert_outbox_alert_idx ON alert_outbox (cluster, fingerprint, receiver, seq);

-- One row per delivery attempt.
CREATE TABLE alert_deliveries (
    cluster       text        NOT NULL,
    id            uuid        NOT NULL,
    outbox_id     uuid        NOT NULL,
    fingerprint   text        NOT NULL,
    seq           bigint      NOT NULL,
    receiver      integer     NOT NULL,
    receiver_kind text        NOT NULL,
    event         text        NOT NULL,
    attempt       integer     NOT NULL,
    attempted_at  timestamptz NOT NULL,
    status_code   integer     NULL,
    outcome       text        NOT NULL CHECK (outcome IN ('delivered', 'retry', 'rejected', 'expired')),
    error         text        NULL,
    PRIMARY KEY (cluster, id)
);
CREATE INDEX alert_deliveries_alert_idx ON alert_deliveries (cluster, fingerprint, attempted_at);

-- The evaluation lease: whoever holds an unexpired row evaluates and sends; a crashed holder's
-- lease expires and another instance takes it.
CREATE TABLE alert_lease (
    name       text        NOT NULL PRIMARY KEY,
    holder     text        NULL,
    expires_at timestamptz NOT NULL
);
INSERT INTO alert_lease (name, holder, expires_at) VALUES ('alerting', NULL, '-infinity');

-- When each node last sent a signal or a heartbeat (the silence rule's input).
CREATE TABLE node_last_seen (
    cluster      text        NOT NULL,
    hostname     text        NOT NULL,
    last_seen_at timestamptz NOT NULL,
    PRIMARY KEY (cluster, hostname)
);

ALTER TABLE audit_log DROP CONSTRAINT audit_log_action_check;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_action_check CHECK (action IN (
    'token.create', 'token.revoke',
    'rule.upsert', 'rule.delete',
    'term.upsert', 'term.delete',
    'failure.lifecycle',
    'gpu.removal', 'gpu.import',
    'alert_rule.upsert', 'alert_rule.delete'
));
