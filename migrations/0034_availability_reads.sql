-- The availability ledger's reads (availability, repair pipeline, fleet now).
--
-- Pending row remaps degrade their node until it is next drained: a partial index holds just
-- those signals (a few per thousand row_remap signals), so reading them is an index scan instead
-- of a scan of every partition's row_remap signals.
CREATE INDEX events_pending_remap_idx ON events (cluster, node, occurred_at)
    WHERE kind = 'row_remap'
      AND (attributes->>'status' = 'pending' OR attributes->>'counter' = 'remapped_rows_pending');
CREATE INDEX events_archive_pending_remap_idx ON events_archive (cluster, node, occurred_at)
    WHERE kind = 'row_remap'
      AND (attributes->>'status' = 'pending' OR attributes->>'counter' = 'remapped_rows_pending');

-- The cause of a ledger interval is its node's latest failure before it began: with the first
-- signal's time in the root node's index, that is one backward index step per interval. The new
-- index serves every query the old one did.
CREATE INDEX failures_root_node_time_idx ON failures (cluster, root_node, first_at);
DROP INDEX failures_root_node_idx;
