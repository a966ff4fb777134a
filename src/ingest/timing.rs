//! `faultline_ingest_seconds{route}`: one timer per ingest request, recorded when it is dropped, so
//! a request that ends in an error (422, 503 from the database) is timed as well as one that
//! succeeds.

use std::time::Instant;

use super::batch::Route;

pub struct IngestTimer {
    route: Route,
    started: Instant,
}

impl IngestTimer {
    pub fn start(route: Route) -> Self {
        Self {
            route,
            started: Instant::now(),
        }
    }
}

impl Drop for IngestTimer {
    fn drop(&mut self) {
        metrics::histogram!("faultline_ingest_seconds", "route" => self.route.as_str())
            .record(self.started.elapsed().as_secs_f64());
    }
}
