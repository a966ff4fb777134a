-- Quarter rows in the three rollups: a year's window read twelve month rows per key,
-- and MTBF's keys are per node for unlabelled nodes, so at 100,000 GPUs that is tens of thousands
-- of rows a request. With quarters (bucket = the first day of the UTC calendar quarter) a year
-- reads about three quarters and a few months. Ingest writes a quarter row beside each day and
-- month row, in the same upsert; `rollups::Coverage` decides what a window reads.
ALTER TABLE rollup_causes DROP CONSTRAINT rollup_causes_period_check,
    ADD CONSTRAINT rollup_causes_period_check CHECK (period IN ('day', 'month', 'quarter'));
ALTER TABLE rollup_groups DROP CONSTRAINT rollup_groups_period_check,
    ADD CONSTRAINT rollup_groups_period_check CHECK (period IN ('day', 'month', 'quarter'));
ALTER TABLE rollup_errors DROP CONSTRAINT rollup_errors_period_check,
    ADD CONSTRAINT rollup_errors_period_check CHECK (period IN ('day', 'month', 'quarter'));

-- Backfill from the month rows (a quarter is the sum of its three months).
INSERT INTO rollup_causes (period, bucket, cluster, generation, model, category, component, symptom, failures, signals)
SELECT 'quarter', date_trunc('quarter', bucket)::date, cluster, generation, model, category, component, symptom,
       sum(failures), sum(signals)
FROM rollup_causes WHERE period = 'month'
GROUP BY 2, 3, 4, 5, 6, 7, 8
HAVING sum(failures) <> 0 OR sum(signals) <> 0;

INSERT INTO rollup_groups (period, bucket, cluster, node_group, root_node, failures)
SELECT 'quarter', date_trunc('quarter', bucket)::date, cluster, node_group, root_node, sum(failures)
FROM rollup_groups WHERE period = 'month'
GROUP BY 2, 3, 4, 5
HAVING sum(failures) <> 0;

INSERT INTO rollup_errors (period, bucket, cluster, kind, code, severity, root_failures, holding_failures, signals)
SELECT 'quarter', date_trunc('quarter', bucket)::date, cluster, kind, code, severity,
       sum(root_failures), sum(holding_failures), sum(signals)
FROM rollup_errors WHERE period = 'month'
GROUP BY 2, 3, 4, 5, 6
HAVING sum(root_failures) <> 0 OR sum(holding_failures) <> 0 OR sum(signals) <> 0;
