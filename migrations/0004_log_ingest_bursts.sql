-- Burst deduplication: a signal repeated within a short gap is stored once, with how many
-- times it was seen and when last. Rows written before this migration are single signals.
ALTER TABLE events
    ADD COLUMN repeat_count     integer     NOT NULL DEFAULT 1 CHECK (repeat_count >= 1),
    ADD COLUMN last_occurred_at timestamptz NULL;

-- Finding the stored burst a new signal extends: same cluster, node and kind, close in time.
CREATE INDEX events_burst_idx ON events (cluster, node, kind, occurred_at) WHERE node IS NOT NULL;

-- Every accepted signal id, whether it became a row of `events` or was folded into a burst.
-- Idempotency is decided here: an id seen before is a duplicate and never counted twice,
-- even when it was absorbed by another row's repeat_count.
CREATE TABLE event_ids (
    id          uuid        PRIMARY KEY,
    received_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO event_ids (id) SELECT id FROM events;
