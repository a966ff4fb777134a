-- The inventory's version moves in the inventory upsert's own transaction (storage::nodes::upsert,
-- the one statement that writes `nodes`) instead of in a statement trigger: `nodes` is a reference
-- table on Citus, and Citus refuses to distribute a table that has triggers.
DROP TRIGGER nodes_bump_inventory_version ON nodes;
DROP FUNCTION faultline_bump_inventory_version();
