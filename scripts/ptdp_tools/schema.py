"""The result CSV's schema as ptdp declares it (results/fields.json, written by `ptdp fields
--json` from core/config's field tables and kept current by ctest CliFields.*): the header's
columns, the configuration key and its defaults for files written before a key column existed,
and every configuration field (flag, type, default, column, place in the key)."""

from __future__ import annotations

import json
import os

from ptdp_tools import repo

PATH = os.path.join(repo.ROOT, "results", "fields.json")

with open(PATH, encoding="utf-8") as _f:
    _SCHEMA = json.load(_f)

COLUMNS: list = _SCHEMA["columns"]
KEY: list = _SCHEMA["key"]
KEY_DEFAULTS: dict = _SCHEMA["key_defaults"]
FIELDS: list = _SCHEMA["fields"]
