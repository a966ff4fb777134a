-- A version per (period, bucket, cluster) of rollup_groups, moved by every transaction that changes
-- any of those rows (ingest, re-fold, post-mortem, inventory, catalog rebuild), in that
-- transaction. mtbf keeps each bucket's counts in memory, resolved against the inventory, and
-- reads a bucket's rows again only when its versions moved: a year at 100,000 GPUs is ~13,000
-- rows, of which ingest changes only the current day's, month's and quarter's.
-- Values come from one sequence, so a version never repeats, not even after a rebuild deletes
-- the rows and writes them again.
CREATE SEQUENCE rollup_group_version_seq;

CREATE TABLE rollup_group_versions (
    period text NOT NULL CHECK (period IN ('day', 'month', 'quarter')),
    bucket date NOT NULL,
    cluster text NOT NULL,
    version bigint NOT NULL,
    PRIMARY KEY (period, bucket, cluster)
);

INSERT INTO rollup_group_versions (period, bucket, cluster, version)
SELECT period, bucket, cluster, nextval('rollup_group_version_seq')
FROM (SELECT DISTINCT period, bucket, cluster FROM rollup_groups) b;

-- Updated on every batch, like the rollups (0020).
ALTER TABLE rollup_group_versions SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,
                                       autovacuum_analyze_scale_factor = 0.02);
