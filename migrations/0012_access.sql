-- Access for more than one team: tokens that expire, and an audit log of admin
-- actions. Neither is in the `reporting` schema: a Grafana user reads neither tokens nor the audit.

-- NULL: the token never expires. An expired token answers 401 and stays listed until revoked.
ALTER TABLE api_tokens ADD COLUMN expires_at timestamptz NULL;

-- One row per admin action, inserted in the transaction of the action itself, so an answered
-- (2xx) action always has its row and a rolled-back one never does.
CREATE TABLE audit_log (
    -- Also the pagination key: rows are read newest (highest id) first.
    id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at             timestamptz NOT NULL DEFAULT now(),
    -- The token that made the call; NULL for the configured admin token (FAULTLINE_ADMIN_TOKEN).
    actor_token_id uuid        NULL,
    actor_name     text        NOT NULL,
    action         text        NOT NULL CHECK (action IN (
        'token.create', 'token.revoke',
        'rule.upsert', 'rule.delete',
        'term.upsert', 'term.delete',
        'failure.lifecycle'
    )),
    -- What was acted on: a token id, rule id, lexicon term or failure id.
    target         text        NOT NULL,
    details        jsonb       NOT NULL DEFAULT '{}'::jsonb
);

-- The time-window filter of GET /v1/audit.
CREATE INDEX audit_log_at_idx ON audit_log (at);
