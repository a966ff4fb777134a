//! Timeline: failures per day or ISO week by effective root-cause category.

use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use utoipa::ToSchema;

use super::{Computed, computed, inputs};
use crate::analytics::cost::{self as c, Period, TimelinePoint};
use crate::domain::window::Window;

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TimelineResponse {
    pub window: Computed,
    pub period: String,
    pub points: Vec<TimelinePoint>,
    pub definitions: String,
}

const TIMELINE_DEFINITIONS: &str = "Failures counted at their first signal (UTC), per day or ISO week (Monday to Sunday), by \
effective root-cause category (the post-mortem's when recorded, else the automatic one). Every period touching [from, to) is listed, \
empty ones with zeros; the first and last may be partial.";

pub async fn timeline(db: &PgPool, w: &Window, period: Period) -> Result<TimelineResponse, sqlx::Error> {
    // Independent reads: at once, on two connections.
    let (counts, window) = tokio::try_join!(inputs::daily_categories(db, w), computed(db, w))?;
    Ok(TimelineResponse {
        window,
        period: match period {
            Period::Day => "day",
            Period::Week => "week",
        }
        .into(),
        points: c::timeline(&counts, period, w.from, w.to),
        definitions: TIMELINE_DEFINITIONS.into(),
    })
}
