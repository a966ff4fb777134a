-- Rollups: failure counts pre-aggregated per UTC day and per UTC month, so the
-- headline analytics over a year read a few thousand rows instead of every failure. Maintained in
-- the transaction that writes the failures they count (re-fold, catalog rebuild), the post-mortems
-- that change a failure's effective cause and the inventory changes that move a failure to another
-- generation, model or group. Counts are additive deltas (INSERT ... ON CONFLICT DO UPDATE SET
-- failures = failures + EXCLUDED.failures), applied in key order so concurrent batches never
-- deadlock on them. A row whose count fell back to zero stays (it is reused; reads sum it as 0).
-- `period` is 'day' (bucket = the UTC day) or 'month' (bucket = the first day of the UTC month):
-- each failure counts once in each, under the UTC day of its first_at.

-- What failure-mix, root-causes, top-errors totals and the timeline group by. generation and model
-- are the root node's in the inventory, else the root signal's (as the analytics resolve them);
-- category and component the effective cause (post-mortem over automatic); symptom 'unspecified'
-- when no signal said.
CREATE TABLE rollup_causes (
    period      text    NOT NULL CHECK (period IN ('day', 'month')),
    bucket      date    NOT NULL,
    cluster     text    NOT NULL,
    generation  text    NOT NULL,
    model       text    NOT NULL,
    category    text    NOT NULL,
    component   text    NOT NULL,
    symptom     text    NOT NULL,
    failures    bigint  NOT NULL,
    signals     bigint  NOT NULL,
    PRIMARY KEY (period, bucket, cluster, generation, model, category, component, symptom)
);

-- What MTBF groups by: a labelled root node counts under its group (root_node ''); an unlabelled
-- or unknown root node under itself (node_group ''); a failure without a root node under ('', '').
CREATE TABLE rollup_groups (
    period      text    NOT NULL CHECK (period IN ('day', 'month')),
    bucket      date    NOT NULL,
    cluster     text    NOT NULL,
    node_group  text    NOT NULL,
    root_node   text    NOT NULL,
    failures    bigint  NOT NULL,
    PRIMARY KEY (period, bucket, cluster, node_group, root_node)
);

-- Backfill from the failures already stored (an upgraded database).
INSERT INTO rollup_causes (period, bucket, cluster, generation, model, category, component, symptom, failures, signals)
SELECT p.period, CASE p.period WHEN 'day' THEN f.day ELSE date_trunc('month', f.day)::date END,
       f.cluster, f.generation, f.model, f.category, f.component, f.symptom, count(*), sum(f.signal_count)
FROM (SELECT (fe.first_at AT TIME ZONE 'UTC')::date AS day, fe.cluster,
             COALESCE(n.gpu_generation, fe.signal_generation) AS generation, COALESCE(n.gpu_model, 'unknown') AS model,
             fe.effective_category AS category, fe.effective_component AS component,
             COALESCE(fe.symptom, 'unspecified') AS symptom, fe.signal_count
      FROM failures_effective fe LEFT JOIN nodes n ON n.cluster = fe.cluster AND n.hostname = fe.root_node) f
CROSS JOIN (VALUES ('day'), ('month')) AS p(period)
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8;

INSERT INTO rollup_groups (period, bucket, cluster, node_group, root_node, failures)
SELECT p.period, CASE p.period WHEN 'day' THEN f.day ELSE date_trunc('month', f.day)::date END,
       f.cluster, f.node_group, f.root_node, count(*)
FROM (SELECT (fa.first_at AT TIME ZONE 'UTC')::date AS day, fa.cluster, COALESCE(n.group_label, '') AS node_group,
             CASE WHEN n.group_label IS NULL THEN COALESCE(fa.root_node, '') ELSE '' END AS root_node
      FROM failures fa LEFT JOIN nodes n ON n.cluster = fa.cluster AND n.hostname = fa.root_node) f
CROSS JOIN (VALUES ('day'), ('month')) AS p(period)
GROUP BY 1, 2, 3, 4, 5;
