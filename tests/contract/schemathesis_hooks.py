"""Schemathesis hooks for tests/api/contract.rs.

They teach the generator what the OpenAPI document does not say about the Faultline API, so that
a case schemathesis calls "valid" is one the server must accept. What JSON Schema can state is in
the document (`http::openapi::schema_rules`: a lifecycle patch changes something, a running job has
no `end` and any other one has, timestamps are full RFC 3339 strings); these stay here:

- windows: `from` must not be after `to` (each defaulting as the server does: `to` = now,
  `from` = `to` - 30 days), and no window is longer than 3,660 days;
- `cursor` is an opaque token the server issued on an earlier page, never a made-up string;
- a root cause's component belongs to its category (the taxonomy comes from the Rust domain
  through FAULTLINE_TAXONOMY);
- component and fault lexicon terms name a component, the other kinds none;
- a job's `end` is not before its `start`;
- signals at most 24 h ahead (relative to now);
- NVSentinel events name a check or component; log bodies are not empty and name a cluster;
- an integral float (36.0) is sent as the integer it is;
- NDJSON bodies are sent one JSON value per line.

Each of these is also documented on the operations (400 / 422 descriptions).
"""

import json
import os
from datetime import datetime, timedelta, timezone

import schemathesis

TAXONOMY = json.loads(os.environ.get("FAULTLINE_TAXONOMY", "{}"))
MAX_WINDOW = timedelta(days=3660)


def _ts(value):
    if not isinstance(value, str):
        return None
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else None


class NotATimestamp(Exception):
    """A negative case: the server refuses it whatever the window."""


def _get(query, name, default):
    raw = query.get(name)
    if raw in (None, ""):
        return default
    t = _ts(raw)
    if t is None:
        raise NotATimestamp
    return t


def _span_ok(frm, to):
    return frm <= to and to - frm <= MAX_WINDOW


def _windows_ok(query):
    """The server's defaults: `to` = now, `from` = `to` - 30 days; for compare, B like that and
    A the window of the same length just before B."""
    now = datetime.now(timezone.utc)
    try:
        if any(k in query for k in ("a_from", "a_to", "b_from", "b_to")):
            b_to = _get(query, "b_to", now)
            b_from = _get(query, "b_from", b_to - timedelta(days=30))
            a_to = _get(query, "a_to", b_from)
            a_from = _get(query, "a_from", a_to - (b_to - b_from) if b_from <= b_to else a_to)
            return _span_ok(b_from, b_to) and _span_ok(a_from, a_to)
        to = _get(query, "to", now)
        frm = _get(query, "from", to - timedelta(days=30))
        return _span_ok(frm, to)
    except (NotATimestamp, OverflowError):
        return True


def _jobs_ok(body):
    """A job's end is not before its start (whether it needs one is in the schema)."""
    jobs = body.get("jobs") if isinstance(body, dict) else None
    for job in jobs if isinstance(jobs, list) else []:
        if not isinstance(job, dict):
            continue
        end, start = _ts(job.get("end")), _ts(job.get("start"))
        if start and end and end < start:
            return False
    return True


def _root_causes_ok(value):
    if isinstance(value, list):
        return all(_root_causes_ok(v) for v in value)
    if not isinstance(value, dict):
        return True
    category, component = value.get("category"), value.get("component")
    if isinstance(category, str) and isinstance(component, str) and TAXONOMY.get(component) not in (None, category):
        return False
    return all(_root_causes_ok(v) for v in value.values())


def _terms_ok(body):
    """component and fault terms need a component of their category; the others name none."""
    if not isinstance(body, dict) or "weight" not in body or not isinstance(body.get("kind"), str):
        return True
    component = body.get("component")
    if body["kind"] in ("component", "fault"):
        return isinstance(component, str) and component != "unknown"
    return component in (None, "unknown")


def _integral_floats_as_ints(value):
    """36.0 is an integer to JSON Schema, not to serde: senders write integers as integers."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, list):
        return [_integral_floats_as_ints(v) for v in value]
    if isinstance(value, dict):
        return {k: _integral_floats_as_ints(v) for k, v in value.items()}
    return value


@schemathesis.hook
def map_body(ctx, body):
    return _integral_floats_as_ints(body)


def _walk(value):
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from _walk(v)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v)


def _timestamps_ok(body):
    """Signals at most 24 h in the future (no schema knows when now is)."""
    horizon = datetime.now(timezone.utc) + timedelta(hours=23)
    for obj in _walk(body):
        t = _ts(obj.get("occurred_at"))
        if t is not None and t > horizon:
            return False
    return True


def _token_ok(case, body):
    """A new token: `expires_at` or `ttl_seconds`, not both; `expires_at` in the future and at most
    ten years away; an admin token is never scoped to a cluster."""
    if case.operation.path != "/v1/tokens" or case.method.upper() != "POST" or not isinstance(body, dict):
        return True
    if body.get("expires_at") is not None and body.get("ttl_seconds") is not None:
        return False
    if body.get("role") == "admin" and body.get("cluster") is not None:
        return False
    if body.get("expires_at") is not None:
        t = _ts(body.get("expires_at"))
        now = datetime.now(timezone.utc)
        if t is None or t <= now + timedelta(minutes=1) or t > now + timedelta(days=3650):
            return False
    return True


def _ingest_ok(case, body):
    """NVSentinel events need a checkName or componentClass; log records a cluster (record field or
    query parameter)."""
    path = case.operation.path
    if path.endswith("/nvsentinel/health-events"):
        events = body.get("events") if isinstance(body, dict) and "events" in body else body
        for e in events if isinstance(events, list) else [events]:
            if isinstance(e, dict) and not (e.get("checkName") or e.get("componentClass")):
                return False
    if path == "/v1/logs":
        if body is None or (isinstance(body, (str, bytes)) and not body.strip()):
            return False  # an empty body is a 400, as documented
        query = case.query or {}
        records = body if isinstance(body, list) else [body]
        if not query.get("cluster"):
            if isinstance(body, str) or any(isinstance(r, dict) and not r.get("cluster") for r in records):
                return False
        field = query.get("message_field")
        if field and any(isinstance(r, dict) and not isinstance(r.get(field), str) for r in records):
            return False
    return True


@schemathesis.hook
def filter_failure(ctx, failure, case, response):
    """A "valid request rejected" whose case breaks one of the rules above (the stateful phase
    does not pass its cases through `filter_case`) is no failure. Nor is "invalid request accepted"
    on a batch answered 200 with the invalid item in `rejected` (the others stored, as documented)."""
    code = getattr(failure, "code", None)
    if code == "ST202":
        return _valid(case)
    if code != "ST201" or response.status_code != 200:
        return True
    try:
        return not response.json().get("rejected")
    except Exception:
        return True


@schemathesis.hook
def filter_case(ctx, case):
    return _valid(case)


def _valid(case):
    query = case.query or {}
    if isinstance(case.body, (dict, list)) and not _timestamps_ok(case.body):
        return False
    if not _ingest_ok(case, case.body):
        return False
    if not _token_ok(case, case.body):
        return False
    if "cursor" in query:
        return False
    if not _windows_ok(query):
        return False
    if isinstance(case.body, (dict, list)):
        return _root_causes_ok(case.body) and _jobs_ok(case.body) and _terms_ok(case.body)
    return True


@schemathesis.serializer("application/x-ndjson")
def ndjson(ctx, value):
    items = value if isinstance(value, list) else [value]
    return "".join(json.dumps(v) + "\n" for v in items).encode()
