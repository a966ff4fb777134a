//! SQL behind the decision analytics (compare, job plan, lemon nodes): failures by root node and
//! effective cause (post-mortem over automatic) in a window. One aggregate over the failures of the
//! window (index on first_at); the nodes table and the node transitions are read by their own
//! queries in `storage::nodes` and `storage::lifecycle`.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

/// Failures of the window with one root node (or none) and one effective cause.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct NodeCauseCount {
    pub cluster: String,
    pub root_node: Option<String>,
    pub category: String,
    pub component: String,
    pub failures: i64,
}

pub async fn failures_by_node_and_cause(
    db: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<Vec<NodeCauseCount>, sqlx::Error> {
    sqlx::query_as!(
        NodeCauseCount,
        r#"SELECT cluster AS "cluster!", root_node, effective_category AS "category!", effective_component AS "component!",
                count(*) AS "failures!"
         FROM failures_effective
         WHERE first_at >= $1 AND first_at < $2 AND ($3::text IS NULL OR cluster = $3)
         GROUP BY cluster, root_node, effective_category, effective_component
         ORDER BY cluster, root_node, effective_category, effective_component"#,
        from,
        to,
        cluster,
    )
    .fetch_all(db)
    .await
}
