use sqlx::PgConnection;
use uuid::Uuid;

use crate::domain::event::Event;

/// Stores a batch in one statement; a sender's id seen before (also from a concurrent retry) is
/// skipped by ON CONFLICT. Returns the ids actually inserted. The statement commits before the
/// caller answers, so a 2xx means durable.
pub async fn insert_batch(conn: &mut PgConnection, events: &[Event]) -> Result<Vec<Uuid>, sqlx::Error> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    // Rows are inserted in id order: two overlapping batches then lock ids in the same order
    // and cannot deadlock.
    let mut events: Vec<&Event> = events.iter().collect();
    events.sort_by_key(|e| e.id);
    let mut id = Vec::with_capacity(events.len());
    let mut occurred_at = Vec::with_capacity(events.len());
    let mut cluster = Vec::with_capacity(events.len());
    let mut node = Vec::with_capacity(events.len());
    let mut gpu_index = Vec::with_capacity(events.len());
    let mut gpu_uuid = Vec::with_capacity(events.len());
    let mut gpu_model = Vec::with_capacity(events.len());
    let mut job_id = Vec::with_capacity(events.len());
    let mut job_gpus = Vec::with_capacity(events.len());
    let mut kind = Vec::with_capacity(events.len());
    let mut code = Vec::with_capacity(events.len());
    let mut symptom = Vec::with_capacity(events.len());
    let mut rc_category = Vec::with_capacity(events.len());
    let mut rc_component = Vec::with_capacity(events.len());
    let mut message = Vec::with_capacity(events.len());
    let mut attributes = Vec::with_capacity(events.len());
    for e in &events {
        id.push(e.id);
        occurred_at.push(e.occurred_at);
        cluster.push(e.cluster.as_str());
        node.push(e.node.as_deref());
        gpu_index.push(e.gpu_index);
        gpu_uuid.push(e.gpu_uuid.as_deref());
        gpu_model.push(e.gpu_model.as_deref());
        job_id.push(e.job_id.as_deref());
        job_gpus.push(e.job_gpus);
        kind.push(e.kind.as_str());
        code.push(e.code);
        symptom.push(e.symptom.map(|s| s.as_str()));
        rc_category.push(e.root_cause.map(|r| r.category.as_str()));
        rc_component.push(e.root_cause.map(|r| r.component.as_str()));
        message.push(e.message.as_deref());
        attributes.push(serde_json::Value::Object(e.attributes.clone()));
    }
    sqlx::query_scalar(
        "INSERT INTO events (id, occurred_at, cluster, node, gpu_index, gpu_uuid, gpu_model, job_id, job_gpus,
                             kind, code, symptom, rc_category, rc_component, message, attributes)
         SELECT * FROM UNNEST($1::uuid[], $2::timestamptz[], $3::text[], $4::text[], $5::int[], $6::text[],
                              $7::text[], $8::text[], $9::int[], $10::text[], $11::bigint[], $12::text[],
                              $13::text[], $14::text[], $15::text[], $16::jsonb[])
         ON CONFLICT (id) DO NOTHING
         RETURNING id",
    )
    .bind(id)
    .bind(occurred_at)
    .bind(cluster)
    .bind(node)
    .bind(gpu_index)
    .bind(gpu_uuid)
    .bind(gpu_model)
    .bind(job_id)
    .bind(job_gpus)
    .bind(kind)
    .bind(code)
    .bind(symptom)
    .bind(rc_category)
    .bind(rc_component)
    .bind(message)
    .bind(attributes)
    .fetch_all(&mut *conn)
    .await
}
