"""A scripted round trip with the Python client generated from api/openapi.json by
openapi-python-client (tests/api/contract.rs generates it and runs this script): create tokens,
register nodes, send events, list failures and read the headline analytics, asserting typed
fields. Environment: FAULTLINE_URL, FAULTLINE_ADMIN_TOKEN; the client package on PYTHONPATH."""

import os
import uuid
from datetime import datetime, timezone

from faultline_client import AuthenticatedClient
from faultline_client.api.analytics import failure_mix, mtbf, root_causes
from faultline_client.api.failures import list_failures
from faultline_client.api.ingest import ingest_events
from faultline_client.api.inventory import list_nodes, upsert_nodes
from faultline_client.api.tokens import create_token
from faultline_client.models import (
    CreateToken,
    EventBatch,
    EventInput,
    FailureMixResponse,
    IngestResponse,
    MtbfResponse,
    NodeBatch,
    NodeInput,
    Role,
    RootCausesResponse,
)

BASE = os.environ["FAULTLINE_URL"]
admin = AuthenticatedClient(base_url=BASE, token=os.environ["FAULTLINE_ADMIN_TOKEN"], raise_on_unexpected_status=True)


def token(role):
    created = create_token.sync(client=admin, body=CreateToken(name=f"{role}-roundtrip", role=role))
    assert created.role == role and created.name == f"{role}-roundtrip", created
    assert created.token
    return AuthenticatedClient(base_url=BASE, token=created.token, raise_on_unexpected_status=True)


agent = token(Role.AGENT)
reader = token(Role.READER)

nodes = [
    NodeInput(
        hostname=f"rt{i:03}",
        cluster="rt",
        gpu_model="NVIDIA H100 80GB HBM3",
        gpu_count=8,
        group="su1",
        in_service_since=datetime(2026, 10, 1, tzinfo=timezone.utc),
    )
    for i in range(4)
]
written = upsert_nodes.sync(client=agent, body=NodeBatch(nodes=nodes))
assert (written.received, written.upserted) == (4, 4), written
listed = list_nodes.sync(client=reader, cluster="rt")
assert sorted(n.hostname for n in listed.nodes) == ["rt000", "rt001", "rt002", "rt003"], listed

events = [
    EventInput(
        id=uuid.UUID(int=i + 1),
        occurred_at=datetime(2026, 11, 2 + i, 10, tzinfo=timezone.utc),
        cluster="rt",
        node=f"rt00{i}",
        kind="xid",
        code=79,
        message="GPU has fallen off the bus",
    )
    for i in range(3)
]
ingested = ingest_events.sync(client=agent, body=EventBatch(events=events))
assert isinstance(ingested, IngestResponse), ingested
assert (ingested.received, ingested.accepted, ingested.duplicates) == (3, 3, 0), ingested
again = ingest_events.sync(client=agent, body=EventBatch(events=events))
assert (again.accepted, again.duplicates) == (0, 3), again

window = {
    "from_": datetime(2026, 11, 1, tzinfo=timezone.utc),
    "to": datetime(2026, 11, 8, tzinfo=timezone.utc),
    "cluster": "rt",
}
failures = list_failures.sync(client=reader, **window)
assert len(failures.failures) == 3, failures
first = failures.failures[0]
assert first.cluster == "rt" and first.root_cause.category.value == "hardware", first
assert first.root_cause.component.value == "gpu", first

mix = failure_mix.sync(client=reader, **window)
assert isinstance(mix, FailureMixResponse), mix
assert sum(r.failures for r in mix.rows) == 3, mix
assert mix.totals.gpus_in_service == 32, mix.totals

m = mtbf.sync(client=reader, **window)
assert isinstance(m, MtbfResponse), m
assert m.fleet.failures == 3 and m.fleet.gpus == 32, m.fleet

rc = root_causes.sync(client=reader, **window)
assert isinstance(rc, RootCausesResponse), rc
hardware = next(c for c in rc.categories if c.category.value == "hardware")
assert hardware.failures == 3 and abs(hardware.share - 1.0) < 1e-9, hardware
print("round trip ok: 4 nodes, 3 events, 3 failures, failure mix / MTBF / root causes typed")
