-- A counter per cluster, raised in the same transaction as every write of its GPU parts,
-- placements or removals: readers keep the parts' lives in memory and read them again only when
-- a counter they were built at has moved (a cheap read of a few rows instead of the whole history).
CREATE TABLE gpu_part_versions (
    cluster text   NOT NULL PRIMARY KEY,
    version bigint NOT NULL
);
