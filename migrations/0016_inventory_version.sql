-- The inventory's version, bumped by every statement that writes `nodes` (a statement trigger, so
-- no write path can forget it). Analytics keep the inventory in memory and reload it only when the
-- version they read has moved: at tens of thousands of nodes, reading the inventory was most of
-- what MTBF and the failure mix cost per request. A fleet-wide table (Citus: reference table).
CREATE TABLE inventory_state (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    version bigint NOT NULL
);
INSERT INTO inventory_state (singleton, version) VALUES (true, 1);

CREATE FUNCTION faultline_bump_inventory_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE inventory_state SET version = version + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER nodes_bump_inventory_version
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON nodes
    FOR EACH STATEMENT EXECUTE FUNCTION faultline_bump_inventory_version();
