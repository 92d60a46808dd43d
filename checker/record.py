"""The result channel: the checked process's observations, signed so that the script cannot forge them.

The ``kata`` process makes a random key for every run and hands it to the
harness outside the script's reach (a pipe it reads before the script starts).
The harness signs the record with it; a record without a valid signature is
treated as no record at all. This stops a script that writes a passing record,
or prints one; it is not meant to stop someone who reads this code and then
digs the key out of the harness's memory.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os

RECORD = "record.json"
SCHEMA = 2


def sign(record: dict, key: str) -> str:
    body = json.dumps(record, sort_keys=True)
    return hmac.new(key.encode(), body.encode(), hashlib.sha256).hexdigest()


def write(channel_dir: str, record: dict, key: str) -> None:
    path = os.path.join(channel_dir, RECORD)
    with open(path + ".tmp", "w") as f:
        json.dump({"record": record, "mac": sign(record, key)}, f)
    os.replace(path + ".tmp", path)


def read(channel_dir: str, key: str) -> tuple[dict | None, bool]:
    """(the record if present, complete and authentic; whether a record was there but not authentic)."""
    try:
        with open(os.path.join(channel_dir, RECORD)) as f:
            doc = json.load(f)
        record, mac = doc["record"], doc["mac"]
    except FileNotFoundError:
        return None, False
    except (OSError, ValueError, KeyError, TypeError):
        return None, True
    if not hmac.compare_digest(sign(record, key), str(mac)):
        return None, True
    return (record if record.get("complete") else None), False
