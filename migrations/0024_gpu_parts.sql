-- GPU parts: a GPU is a part with an identity (its board serial when it reports one, else its UUID)
-- that is installed in node slots over time, removed, repaired and moved. Per-cluster tables,
-- sharded by `cluster` on Citus like the failures they explain: a part that moves to another
-- cluster has a row in each cluster it served in, and its timeline joins them by `part`.

-- What is known of a part in a cluster: its model and the attributes a site groups by.
CREATE TABLE gpu_parts (
    cluster           text        NOT NULL,
    part              text        NOT NULL,
    serial            text        NULL,
    uuid              text        NULL,
    model             text        NULL,
    generation        text        NOT NULL DEFAULT 'unknown',
    board_part_number text        NULL,
    vbios             text        NULL,
    driver            text        NULL,
    -- Site attributes (vendor lot, firmware, purchase batch): string values the analytics group by.
    attributes        jsonb       NOT NULL DEFAULT '{}'::jsonb,
    first_seen_at     timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster, part)
);

-- A part in a slot (node, index, PCI bus id) for an interval; `removed_at` NULL while installed.
-- `end_reason` says why the interval ended: absent (no longer reported by its node), moved
-- (reported by another node or slot), reidentified (same serial, new UUID), or an explicit removal
-- (failed, rma, decommissioned, upgraded), or other (history imported without a reason).
CREATE TABLE gpu_placements (
    cluster      text        NOT NULL,
    part         text        NOT NULL,
    installed_at timestamptz NOT NULL,
    removed_at   timestamptz NULL CHECK (removed_at IS NULL OR removed_at >= installed_at),
    hostname     text        NOT NULL,
    gpu_index    integer     NULL,
    pci_bus_id   text        NULL,
    uuid         text        NULL,
    end_reason   text        NULL CHECK (end_reason IN ('absent', 'moved', 'reidentified', 'failed', 'rma',
                                                        'decommissioned', 'upgraded', 'other')),
    PRIMARY KEY (cluster, part, installed_at)
);
-- Attribution of a signal (node, index or bus id, time) and a node's slots over time.
CREATE INDEX gpu_placements_slot_idx ON gpu_placements (cluster, hostname, installed_at);
-- Attribution by UUID.
CREATE INDEX gpu_placements_uuid_idx ON gpu_placements (cluster, uuid) WHERE uuid IS NOT NULL;
-- A part reported by a new node closes its open placement wherever it is (any cluster).
CREATE INDEX gpu_placements_open_part_idx ON gpu_placements (part) WHERE removed_at IS NULL;

-- Explicit removals: a part retired for a reason, with the vendor's ticket and a note. A part that
-- comes back (repaired, returned from RMA) opens a new placement and keeps this history.
CREATE TABLE gpu_removals (
    cluster    text        NOT NULL,
    part       text        NOT NULL,
    removed_at timestamptz NOT NULL,
    reason     text        NOT NULL CHECK (reason IN ('failed', 'rma', 'decommissioned', 'upgraded')),
    ticket     text        NULL,
    note       text        NULL,
    removed_by text        NULL,
    PRIMARY KEY (cluster, part, removed_at)
);

-- The GPU a failure's root signal named: the part is resolved from these and the placements when
-- read, so inventory that arrives after the signals attributes them as well.
ALTER TABLE failures
    ADD COLUMN root_gpu_index integer NULL,
    ADD COLUMN root_gpu_uuid  text    NULL,
    ADD COLUMN root_gpu_bus   text    NULL;

-- A part's removal and an import of GPU history are audited admin actions.
ALTER TABLE audit_log DROP CONSTRAINT audit_log_action_check;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_action_check CHECK (action IN (
    'token.create', 'token.revoke',
    'rule.upsert', 'rule.delete',
    'term.upsert', 'term.delete',
    'failure.lifecycle',
    'gpu.removal', 'gpu.import'
));
