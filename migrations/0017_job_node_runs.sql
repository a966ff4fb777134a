-- Job attribution (`faultline_attributed_job`) found a node's job through the GIN index on
-- jobs.nodes: that returns every job the node ever ran, each a heap fetch, and only then filters by
-- time. At 100,000 GPUs a node runs about 1,100 jobs in five years, and ingest and re-folds call
-- the function for every node-only signal. One row per (job, node), indexed on the node and the
-- run's time range, finds just the runs that cover the instant.
--
-- btree_gist lets one GiST index hold the equality columns beside the range; it is a trusted
-- extension (a database owner may create it) shipped with every PostgreSQL, and Citus supports it.
CREATE EXTENSION IF NOT EXISTS btree_gist;

CREATE TABLE job_node_runs (
    cluster     text        NOT NULL,
    job_id      text        NOT NULL,
    node        text        NOT NULL,
    started_at  timestamptz NOT NULL,
    ended_at    timestamptz NULL,
    PRIMARY KEY (cluster, job_id, node)
);
-- A running job (ended_at NULL) has an unbounded range: it covers every later instant.
CREATE INDEX job_node_runs_run_idx ON job_node_runs
    USING gist (cluster, node, tstzrange(started_at, ended_at, '[]'));

INSERT INTO job_node_runs (cluster, job_id, node, started_at, ended_at)
SELECT j.cluster, j.job_id, n.node, j.started_at, j.ended_at
FROM jobs j CROSS JOIN LATERAL (SELECT DISTINCT unnest(j.nodes)) AS n(node);

-- The same answer as before (the latest started run, then the smallest id; NULL when none ran).
CREATE OR REPLACE FUNCTION faultline_attributed_job(p_cluster text, p_node text, p_job_id text, p_at timestamptz)
RETURNS text LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT r.job_id FROM job_node_runs r
    WHERE p_job_id IS NULL AND p_node IS NOT NULL AND r.cluster = p_cluster AND r.node = p_node
      AND tstzrange(r.started_at, r.ended_at, '[]') @> p_at
    ORDER BY r.started_at DESC, r.job_id
    LIMIT 1
$$;

-- Nothing else looked jobs up by node.
DROP INDEX jobs_nodes_idx;
