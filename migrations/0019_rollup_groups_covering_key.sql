-- mtbf's read of `rollup_groups` (a year: ~13,000 rows at 100,000 GPUs) visited a heap page per
-- few rows, and each page holds the hot rows' update chains. With `failures` in the key's index,
-- the read is an index-only scan of each range (`storage::rollups::group_totals`: 12-13 ms -> 8-9
-- ms on 10 M signals). The price: an update of `failures` is no longer a HOT update (it writes an
-- index entry), on a table that ingest updates a few thousand rows a batch.
ALTER TABLE rollup_groups DROP CONSTRAINT rollup_groups_pkey,
    ADD CONSTRAINT rollup_groups_pkey PRIMARY KEY (period, bucket, cluster, node_group, root_node) INCLUDE (failures);
