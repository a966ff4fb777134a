-- Fleet inventory: one row per node. The GPU generation is derived from gpu_model
-- at write time (a pure function) and stored so analytics can group by it cheaply.
CREATE TABLE nodes (
    cluster             text        NOT NULL,
    hostname            text        NOT NULL,
    gpu_model           text        NOT NULL,
    gpu_generation      text        NOT NULL,
    gpu_count           integer     NOT NULL CHECK (gpu_count >= 0),
    group_label         text        NULL,
    rack                text        NULL,
    -- explicit value from the sender; NULL means "since first registration"
    in_service_since    timestamptz NULL,
    first_registered_at timestamptz NOT NULL DEFAULT now(),
    retired_at          timestamptz NULL,
    updated_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster, hostname)
);
CREATE INDEX nodes_generation_idx ON nodes (gpu_generation);

-- Raw signals as reported by agents. `id` is the sender's idempotency key.
CREATE TABLE events (
    id           uuid        PRIMARY KEY,
    occurred_at  timestamptz NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT now(),
    cluster      text        NOT NULL,
    node         text        NULL,
    gpu_index    integer     NULL,
    gpu_uuid     text        NULL,
    gpu_model    text        NULL,
    job_id       text        NULL,
    job_gpus     integer     NULL,
    kind         text        NOT NULL,
    code         bigint      NULL,
    symptom      text        NULL,
    rc_category  text        NULL,
    rc_component text        NULL,
    message      text        NULL,
    attributes   jsonb       NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX events_cluster_time_idx ON events (cluster, occurred_at);
CREATE INDEX events_job_idx ON events (cluster, job_id, occurred_at) WHERE job_id IS NOT NULL;
CREATE INDEX events_node_idx ON events (cluster, node, occurred_at) WHERE job_id IS NULL;

-- API tokens. Only a SHA-256 of the secret is stored.
CREATE TABLE api_tokens (
    id          uuid        PRIMARY KEY,
    name        text        NOT NULL,
    role        text        NOT NULL CHECK (role IN ('agent', 'reader', 'admin')),
    cluster     text        NULL,
    secret_hash bytea       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz NULL
);

-- Classification catalog: data, not code, so a site can correct a rule without a release.
-- Built-in rows are seeded by 0002; admins edit them through the API.
CREATE TABLE classification_rules (
    rule_id     text    PRIMARY KEY,
    kind        text    NOT NULL,
    code        bigint  NULL,
    pattern     text    NULL,
    priority    integer NOT NULL,
    category    text    NOT NULL CHECK (category IN ('hardware', 'platform', 'user', 'unknown')),
    component   text    NOT NULL,
    severity    text    NOT NULL CHECK (severity IN ('critical', 'high', 'medium', 'low', 'info')),
    transient   boolean NOT NULL,
    secondary   boolean NOT NULL,
    action      text    NOT NULL CHECK (action IN ('none', 'restart_job', 'reset_gpu', 'reboot_node', 'drain_node',
                                                   'contact_support', 'fix_user_code', 'fix_config', 'check_hardware',
                                                   'investigate')),
    description text    NOT NULL,
    source      text    NOT NULL,
    builtin     boolean NOT NULL DEFAULT true,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    updated_by  text    NULL
);
