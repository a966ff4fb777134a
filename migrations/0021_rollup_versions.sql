-- A version per (rollup, period, bucket, cluster), moved by every transaction that changes any of
-- that bucket's rows of `rollup_causes` or `rollup_groups` (ingest, re-fold, post-mortem,
-- inventory, catalog rebuild), as the last statement of that change. The read side keeps what it
-- read of a bucket in memory and reads the bucket again only when its versions moved: mtbf's year
-- at 100,000 GPUs is ~13,000 `rollup_groups` rows and the timeline's ~47,000 `rollup_causes` day
-- rows, of which ingest changes only the current day's, month's and quarter's.
-- A 'causes' month's version also moves when any of its day rows does: the timeline keeps a
-- month of day counts under it.
-- Values come from one sequence, so a version never repeats, not even after a rebuild deletes
-- the rows and writes them again.
CREATE SEQUENCE rollup_version_seq;

CREATE TABLE rollup_versions (
    rollup text NOT NULL CHECK (rollup IN ('causes', 'groups')),
    period text NOT NULL CHECK (period IN ('day', 'month', 'quarter')),
    bucket date NOT NULL,
    cluster text NOT NULL,
    version bigint NOT NULL,
    PRIMARY KEY (rollup, period, bucket, cluster)
);

INSERT INTO rollup_versions (rollup, period, bucket, cluster, version)
SELECT rollup, period, bucket, cluster, nextval('rollup_version_seq')
FROM (SELECT DISTINCT 'causes' AS rollup, period, bucket, cluster FROM rollup_causes
      UNION
      SELECT DISTINCT 'causes', 'month', date_trunc('month', bucket)::date, cluster FROM rollup_causes WHERE period = 'day'
      UNION ALL
      SELECT DISTINCT 'groups', period, bucket, cluster FROM rollup_groups) b;

-- Updated on every batch, like the rollups (0020).
ALTER TABLE rollup_versions SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,
                                 autovacuum_analyze_scale_factor = 0.02);
