-- Job attribution at fold time looks up the job that ran on a node (`nodes @> ARRAY[node]`).
CREATE INDEX jobs_nodes_idx ON jobs USING gin (nodes);
