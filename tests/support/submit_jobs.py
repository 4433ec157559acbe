#!/usr/bin/env python3
"""Submits jobs to ergon's HTTP endpoint with the standard library only, as
docs/operations.md shows: python3 submit_jobs.py URL [SECRET]. Prints one
JSON line per request: {"case", "status", "body"}."""
import base64
import json
import sys
import urllib.error
import urllib.request

url = sys.argv[1].rstrip("/") + "/api/jobs"
secret = sys.argv[2] if len(sys.argv) > 2 else None


def submit(case, body, raw=None, path=""):
    headers = {"Content-Type": "application/json", "X-Ergon": "1"}
    if secret:
        headers["Authorization"] = "Bearer " + secret
    data = raw if raw is not None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            status, text = answer.status, answer.read()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read()
    print(json.dumps({"case": case, "status": status, "body": json.loads(text)}), flush=True)


submit("json", {"type": "resize", "payload": {"w": 640, "tags": ["a", "b"]},
                "group": "tenant-a", "priority": 5})
submit("base64", {"type": "resize",
                  "payload_base64": base64.b64encode(b"\x00\xffraw").decode()})
submit("text", {"type": "email", "payload_text": "hello", "name": "welcome",
                "max_retries": 1, "backoff": {"initial_ms": 1000, "kind": "constant"}})
submit("batch", {"jobs": [{"type": "step", "payload_text": "one"},
                          {"type": "step", "payload_text": "two", "depends_on_batch": [0]}]})
submit("big", {"type": "blob", "payload_text": "x" * 100000})
submit("bad-priority", {"jobs": [{"type": "ok"}, {"type": "step", "priority": "high"}]})
submit("no-type", {"payload": 1})
submit("two-payloads", {"type": "t", "payload": 1, "payload_text": "1"})
submit("unknown-key", {"type": "t", "colour": "red"})
submit("bad-base64", {"type": "t", "payload_base64": "not base64!"})
submit("not-json", None, raw=b"{nope")
submit("tagged", {"type": "email", "payload_text": "x", "tags": {"tenant": "acme", "batch": "7"}})
submit("tagged-kept", {"type": "email", "tags": {"tenant": "initech", "": "no key"}})
submit("tagged-other", {"type": "email", "tags": {"tenant": "initech", "note": "ok"}})
submit("bad-tags", {"type": "t", "tags": {"tenant": 7}})
submit("keyed", {"type": "sync", "priority": 1, "unique_key": "sync:7", "on_duplicate": "requeue"})
submit("keyed-again", {"type": "sync", "priority": 4, "unique_key": "sync:7",
                       "on_duplicate": "requeue", "raise_holder_priority": True})
submit("bad-raise", {"type": "sync", "unique_key": "sync:8", "raise_holder_priority": "yes"})
submit("bad-policy", {"type": "sync", "unique_key": "sync:8", "on_duplicate": "later"})
# Bulk actions take a listing's query string; the body is empty.
submit("cancel-by-tag", None, raw=b"", path="/cancel?tag=tenant%3Dacme&tag=batch%3D7")
submit("delete-pending", None, raw=b"", path="/delete?status=pending&tag=tenant%3Dacme")
submit("delete-by-prefix", None, raw=b"", path="/delete?tag_prefix=bat")
submit("cancel-no-filter", None, raw=b"", path="/cancel")
submit("cancel-misspelled", None, raw=b"", path="/cancel?tags=tenant%3Dinitech")
submit("cancel-paged", None, raw=b"", path="/cancel?tag=tenant%3Dinitech&limit=1")
submit("retry-pending", None, raw=b"", path="/retry?status=pending")
