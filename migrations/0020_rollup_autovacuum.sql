-- The rollups are counters: ingest updates the current day's, month's and quarter's rows on every
-- batch, so they collect dead row versions fast while their live row count grows slowly, and
-- the default trigger (20% of the table dead) lets a year's reads wade through them for hours.
-- Measured on 10 M signals right after an ingest with 52,293 dead rows in rollup_groups: mtbf
-- took 27-29 ms, and 20-21 ms after a VACUUM of that table (its read is index-only only where
-- the visibility map says so). Vacuum them after a fixed number of changed rows instead.
ALTER TABLE rollup_causes SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,
                               autovacuum_analyze_scale_factor = 0.02);
ALTER TABLE rollup_groups SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,
                               autovacuum_analyze_scale_factor = 0.02);
ALTER TABLE rollup_errors SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,
                               autovacuum_analyze_scale_factor = 0.02);
