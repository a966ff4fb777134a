//! A budget of request body bytes held at once, over all requests (`FAULTLINE_MAX_INFLIGHT_BODY_BYTES`).
//!
//! A request that declares its length (Content-Length) reserves it before its body is read: if
//! the budget has no room it is answered 503 + Retry-After at once. A body of unknown length
//! (chunked, or gzip, counted after decompression) reserves its bytes as they arrive, and fails
//! with [`BudgetExceeded`] (503 via the extractors) when the budget runs out. Reservations are
//! released when the response is sent and the body dropped.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

use crate::http::error::ApiError;

/// Seconds a client should wait when the body budget is full.
pub const RETRY_AFTER_SECS: u32 = 1;

#[derive(Clone)]
pub struct BodyBudget {
    permits: Arc<Semaphore>,
    total: usize,
    /// The largest body one request may have; a declared length is reserved up to this.
    max_body: usize,
}

impl BodyBudget {
    pub fn new(total: usize, max_body: usize) -> Self {
        let total = total.clamp(1, Semaphore::MAX_PERMITS);
        BodyBudget {
            permits: Arc::new(Semaphore::new(total)),
            total,
            max_body,
        }
    }

    /// Bytes of the budget free now.
    pub fn available(&self) -> usize {
        self.permits.available_permits()
    }

    fn reserve(&self, bytes: usize) -> bool {
        let Ok(n) = u32::try_from(bytes) else { return false };
        match self.permits.try_acquire_many(n) {
            Ok(p) => {
                p.forget();
                true
            }
            Err(_) => false,
        }
    }
}

/// Bytes reserved for one request; given back when the middleware and the body both let go.
struct Reservation {
    budget: BodyBudget,
    held: AtomicUsize,
}

impl Reservation {
    fn take(&self, bytes: usize) -> bool {
        if self.budget.reserve(bytes) {
            self.held.fetch_add(bytes, Ordering::Relaxed);
            true
        } else {
            false
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let held = *self.held.get_mut();
        if held > 0 {
            self.budget.permits.add_permits(held);
        }
    }
}

/// The error a counted body yields when the budget runs out mid-stream.
#[derive(Debug, thiserror::Error)]
#[error("the server holds too many request bodies at once; retry after {RETRY_AFTER_SECS} s")]
pub struct BudgetExceeded;

/// Whether `e` (or an error it wraps) is [`BudgetExceeded`].
pub fn is_budget_exceeded(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if s.is::<BudgetExceeded>() {
            return true;
        }
        source = s.source();
    }
    false
}

fn shed() -> Response {
    metrics::counter!("faultline_body_budget_shed_total").increment(1);
    ApiError::Unavailable {
        retry_after_secs: RETRY_AFTER_SECS,
    }
    .into_response()
}

pub async fn limit_inflight_bodies(State(budget): State<BodyBudget>, req: Request, next: Next) -> Response {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let reservation = Arc::new(Reservation {
        budget: budget.clone(),
        held: AtomicUsize::new(0),
    });
    let req = match declared {
        Some(0) => req,
        Some(len) => {
            // Larger than one body may be: the handler answers 413 without reading it.
            let want = usize::try_from(len)
                .unwrap_or(usize::MAX)
                .min(budget.max_body.saturating_add(1))
                .min(budget.total);
            if !reservation.take(want) {
                return shed();
            }
            req
        }
        None => {
            let (parts, body) = req.into_parts();
            let counted = CountedBody {
                inner: body,
                reservation: reservation.clone(),
            };
            Request::from_parts(parts, Body::new(counted))
        }
    };
    let response = next.run(req).await;
    let large = reservation.held.load(Ordering::Relaxed) >= TRIM_AFTER_BYTES;
    drop(reservation);
    // The last large body is gone: hand the freed heap back to the OS (see `release_memory`).
    if large && budget.available() == budget.total {
        release_memory();
    }
    response
}

/// Bodies at least this large trigger [`release_memory`] when they are the last in flight.
const TRIM_AFTER_BYTES: usize = 1024 * 1024;

/// glibc keeps freed memory in its per-thread arenas: after 64 clients sent 16 MiB bodies, RSS
/// stayed at the peak (166 MB of a 20 MB idle) though nothing was in use. `malloc_trim` returns
/// the free pages; it runs only when no large body is in flight, off the async workers.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn release_memory() {
    unsafe extern "C" {
        fn malloc_trim(pad: usize) -> i32;
    }
    tokio::task::spawn_blocking(|| {
        // SAFETY: malloc_trim only releases free heap pages; it takes no pointers.
        unsafe { malloc_trim(0) };
    });
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_memory() {}

/// A body that reserves each frame's bytes from the budget as it arrives.
struct CountedBody {
    inner: Body,
    reservation: Arc<Reservation>,
}

impl http_body::Body for CountedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let frame = std::task::ready!(Pin::new(&mut self.inner).poll_frame(cx));
        if let Some(Ok(f)) = &frame
            && let Some(data) = f.data_ref()
            && !self.reservation.take(data.len())
        {
            return Poll::Ready(Some(Err(axum::Error::new(BudgetExceeded))));
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
