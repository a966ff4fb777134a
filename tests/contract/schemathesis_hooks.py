"""Schemathesis hooks for tests/api/contract.rs.

They teach the generator what the OpenAPI document does not say about the Faultline API, so that
a case schemathesis calls "valid" is one the server must accept. Every rule JSON Schema can state is
in the document (`http::openapi::schema_rules`); the rules no schema can state are listed in
docs/api.md ("What no schema can state"), each taught here by a function named for it. Besides: an
integral float (36.0) is an integer to JSON Schema, not to serde, so it is sent as the integer, and
NDJSON bodies are sent one JSON value per line.
"""

import json
import re
from datetime import datetime, timedelta, timezone

import schemathesis

MAX_WINDOW = timedelta(days=3660)


def _ts(value):
    """An RFC 3339 timestamp as the server reads it (nanoseconds too: Python keeps microseconds)."""
    if not isinstance(value, str):
        return None
    value = re.sub(r"(\.\d{6})\d+", r"\1", value)
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


def _nodes_ok(body):
    """A node's retired_at is not before its in_service_since."""
    nodes = body.get("nodes") if isinstance(body, dict) else None
    for node in nodes if isinstance(nodes, list) else []:
        if not isinstance(node, dict):
            continue
        retired, since = _ts(node.get("retired_at")), _ts(node.get("in_service_since"))
        if retired and since and retired < since:
            return False
    return True


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


TIMES_NOT_AHEAD = ("occurred_at", "observed_at", "installed_at", "removed_at", "at", "position")


def _timestamps_ok(body):
    """Signals, GPU sets, placements and removals at most 24 h in the future (no schema knows
    when now is)."""
    horizon = datetime.now(timezone.utc) + timedelta(hours=23)
    for obj in _walk(body):
        for key in TIMES_NOT_AHEAD:
            t = _ts(obj.get(key))
            if t is not None and t > horizon:
                return False
    return True


def _blank(v):
    return not isinstance(v, str) or not v.strip()


def _gpus_ok(case, body):
    """No node reports one part, index or bus id twice; a placement does not end before it begins;
    XML GPU sets are nvidia-smi reports, which no JSON schema describes."""
    if case.operation.path == "/v1/nodes/{cluster}/{hostname}/gpus" and isinstance(body, (str, bytes)):
        return False
    if not isinstance(body, dict):
        return True
    nodes = body.get("nodes") if isinstance(body.get("nodes"), list) else [body]
    for node in nodes:
        gpus = node.get("gpus") if isinstance(node, dict) else None
        seen = set()
        for g in gpus if isinstance(gpus, list) else []:
            if not isinstance(g, dict):
                continue
            part = g.get("serial") if not _blank(g.get("serial")) else g.get("uuid")
            keys = [("part", part)]
            if g.get("index") is not None:
                keys.append(("index", g.get("index")))
            if not _blank(g.get("pci_bus_id")):
                keys.append(("bus", g.get("pci_bus_id").strip().lower().removeprefix("pci:")))
            for name, value in keys:
                k = (name, json.dumps(value, sort_keys=True))
                if k in seen:
                    return False
                seen.add(k)
    for p in body.get("placements") if isinstance(body.get("placements"), list) else []:
        if isinstance(p, dict):
            installed, removed = _ts(p.get("installed_at")), _ts(p.get("removed_at"))
            if installed and removed and removed < installed:
                return False
            if p.get("end_reason") is not None and p.get("removed_at") is None:
                return False
    return True


def _token_ok(case, body):
    """A new token's `expires_at` is in the future and at most ten years away."""
    if case.operation.path != "/v1/tokens" or case.method.upper() != "POST" or not isinstance(body, dict):
        return True
    if body.get("expires_at") is not None:
        t = _ts(body.get("expires_at"))
        now = datetime.now(timezone.utc)
        if t is None or t <= now + timedelta(minutes=1) or t > now + timedelta(days=3650):
            return False
    return True


def _logs_ok(case, body):
    """Log records name a cluster (record field or query parameter; text/plain: the parameter),
    and the record field `message_field` names holds a string."""
    if case.operation.path != "/v1/logs":
        return True
    query = case.query or {}
    records = body if isinstance(body, list) else [body]
    if not query.get("cluster"):
        if isinstance(body, (str, bytes)) or any(isinstance(r, dict) and not r.get("cluster") for r in records):
            return False
    field = query.get("message_field")
    if field and any(isinstance(r, dict) and not isinstance(r.get(field), str) for r in records):
        return False
    return True


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")
_RULE_ID = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
_RESERVED_LABELS = {"alertname", "cluster", "subject", "condition"}


def _alert_rule_ok(case, body):
    """An alert rule's id, receiver secrets (webhooks only) and label and annotation names."""
    if case.operation.path != "/v1/alert-rules/{rule_id}" or case.method.upper() != "PUT":
        return True
    rule_id = (case.path_parameters or {}).get("rule_id")
    if not isinstance(rule_id, str) or not _RULE_ID.match(rule_id):
        return False
    if not isinstance(body, dict):
        return True
    for r in body.get("receivers") or []:
        if isinstance(r, dict) and r.get("secret") is not None and r.get("kind") != "webhook":
            return False
    for field in ("labels", "annotations"):
        names = body.get(field) or {}
        if isinstance(names, dict):
            if any(not _NAME.match(k) for k in names):
                return False
            if field == "labels" and _RESERVED_LABELS & set(names):
                return False
    return True


def _text(value):
    """Something other than white space, as the server's `text` reads a string field."""
    return isinstance(value, str) and bool(value.strip())


def _kubernetes_object_ok(item):
    """An object `map_object` reads: an Event, a Node, a Pod, or a node's conditions."""
    if not isinstance(item, dict):
        return False
    kind = item.get("kind").strip() if isinstance(item.get("kind"), str) else ""
    if kind == "Event" or (kind not in ("Node", "Pod") and ("involvedObject" in item or "regarding" in item)):
        about = item["involvedObject"] if "involvedObject" in item else item.get("regarding")
        return isinstance(about, dict) and _text(about.get("name"))
    if kind in ("Node", "Pod"):
        meta = item.get("metadata")
        return isinstance(meta, dict) and _text(meta.get("name"))
    if "conditions" in item:
        return _text(item.get("node")) or _text(item.get("nodeName"))
    return False


def _kubernetes_ok(case, body):
    """At least one object the route reads as an Event, Node, Pod or conditions (the body split
    as `split_body` does: a list, a list's `items`, or one object)."""
    if case.operation.path != "/v1/integrations/kubernetes/events":
        return True
    if isinstance(body, list):
        items = body
    elif isinstance(body, dict) and isinstance(body.get("items"), list):
        items = body["items"]
    else:
        items = [body]
    return any(_kubernetes_object_ok(i) for i in items)


def _rejected_for_stored_data(case, response):
    """An import of post-mortems whose every item names a failure that is not stored (or resolves
    it before its first signal): 422, documented, and a matter of stored data no schema states."""
    if case.path != "/v1/failures/lifecycles" or response.status_code != 422:
        return False
    try:
        rejected = response.json()["details"]["rejected"]
    except Exception:
        return False
    return bool(rejected) and all(r.get("reason") == "not_found" or "first signal" in r.get("message", "") for r in rejected)


@schemathesis.hook
def filter_failure(ctx, failure, case, response):
    """A "valid request rejected" whose case breaks one of the rules above (the stateful phase
    does not pass its cases through `filter_case`) is no failure. Nor is "invalid request accepted"
    on a batch answered 200 with the invalid item in `rejected` (the others stored, as documented)."""
    code = getattr(failure, "code", None)
    if code == "ST202" and _rejected_for_stored_data(case, response):
        return False
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
    if not _timestamps_ok(query):
        return False
    if not _kubernetes_ok(case, case.body):
        return False
    if not _logs_ok(case, case.body):
        return False
    if not _token_ok(case, case.body):
        return False
    if not _gpus_ok(case, case.body):
        return False
    if not _alert_rule_ok(case, case.body):
        return False
    if "cursor" in query:
        return False
    if not _windows_ok(query):
        return False
    if isinstance(case.body, (dict, list)):
        return _jobs_ok(case.body) and _nodes_ok(case.body)
    return True


@schemathesis.serializer("application/x-ndjson")
def ndjson(ctx, value):
    items = value if isinstance(value, list) else [value]
    return "".join(json.dumps(v) + "\n" for v in items).encode()
