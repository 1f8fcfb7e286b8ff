"""twill's persistent schedule cache, read and written by the hook.

One entry per `twill-opt` call of the hook (a kernel's module at the split
point, or at Hopper warp specialization for `lower=only`) and per pipeline
verification: a typed JSON record (schema `twill.schedule-cache/1`,
docs/report-schema.md) under `DIR/schedules/` or `DIR/verify/`, named
`<key>.<twill-opt identity>.json`. The key is `module_key` of the module
(Triton's own print of it, without locations) and of the options that
change the answer (Triton's version among them); a verification is also
stored under `_pipeline_key`, the key of the inputs its pipeline was made
from. The identity is the SHA-256 prefix of the twill-opt binary. A warm
compile reads the entries and never starts twill-opt, nor exports or
prints the pipelined module. A schedule entry also keeps
`located`, the digest of the module's print with its locations: the hook
takes it only for the same locations (the entry's module, remarks and line
info name the source it was made from), else schedules again (twill-opt's
own per-loop cache then answers the solve). An index under `DIR/compiles/`,
keyed by Triton's own key of the compile (its metadata's `hash`: the
kernel's source, specialization, options, target and Triton's version) and
twill's options, names a schedule entry with its `located` digest and the
SHA-256 of every source file the module's locations name: where those files
are unchanged, a warm compile takes the entry without printing the module.

The directory is `$TWILL_CACHE_DIR`, else `.triton/twill` beside Triton's
own cache (`$TRITON_HOME`, else the home directory, as Triton's knobs);
`TWILL_CACHE_DIR=off` turns the cache off. `TWILL_REPLAY_DIR=DIR` reads a
cache directory copied from another machine, read-only and whatever
twill-opt recorded it (that machine may have none); a `TWILL_DUMP_DIR` made
by an older hook (its `key.txt` files) is read there too.

Writes are atomic (a temporary file in the same directory, then
`os.replace`): processes compiling at once never read a partial entry, and
two writers of one key leave one whole entry. An entry that does not parse,
is of another schema or names another key is ignored with a warning, as a
miss.
"""

import json
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

log = logging.getLogger("twill")

SCHEMA = "twill.schedule-cache/1"
SCHEDULES = "schedules"
VERIFY = "verify"
COMPILES = "compiles"


@dataclass(frozen=True)
class Cache:
    root: Path
    # A replay directory: read, never written, any twill-opt's entries.
    read_only: bool = False


def default_dir() -> Path:
    """`.triton/twill` under Triton's home (`TRITON_HOME`, else `~`), beside
    Triton's own `.triton/cache`."""
    try:
        from triton import knobs

        return Path(knobs.cache.home_dir) / ".triton" / "twill"
    except (ImportError, AttributeError):
        return Path(os.environ.get("TRITON_HOME") or os.path.expanduser("~")) / ".triton" / "twill"


def location() -> Optional[Cache]:
    """The cache the environment selects, or None where it is off."""
    replay = os.environ.get("TWILL_REPLAY_DIR", "").strip()
    if replay:
        return Cache(Path(replay), read_only=True)
    chosen = os.environ.get("TWILL_CACHE_DIR", "").strip()
    if chosen.lower() == "off":
        return None
    return Cache(Path(chosen) if chosen else default_dir())


def _entry_name(key, identity):
    return f"{key}.{identity}.json"


def _valid(entry, kind, key, path):
    """Whether `entry` (parsed from `path`) is a whole record of `kind` for
    `key`; warns where it is not."""
    ok = (isinstance(entry, dict) and entry.get("schema") == SCHEMA and entry.get("kind") == kind
          and entry.get("key") == key and isinstance(entry.get("value"), dict))
    if not ok:
        log.warning("twill: ignoring the cache entry %s: not a %s record of key %s", path, SCHEMA, key[:16])
    return ok


def _read(path, kind, key):
    try:
        entry = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        log.warning("twill: ignoring the cache entry %s: %s", path, e)
        return None
    return entry["value"] if _valid(entry, kind, key, path) else None


def load(cache: Optional[Cache], kind, key, identity) -> Optional[dict]:
    """The value stored for `key` by twill-opt `identity` (any twill-opt in
    a replay directory), or None."""
    if cache is None:
        return None
    folder = cache.root / kind
    if not cache.read_only:
        return _read(folder / _entry_name(key, identity), kind, key)
    for path in sorted(folder.glob(_entry_name(key, "*"))):
        value = _read(path, kind, key)
        if value is not None:
            return value
    return None


def store(cache: Optional[Cache], kind, key, identity, value: dict) -> None:
    """Writes the entry atomically; a cache that cannot be written is a
    warning, never a failure of the compile."""
    if cache is None or cache.read_only:
        return
    folder = cache.root / kind
    entry = {"schema": SCHEMA, "kind": kind, "key": key, "twill_opt": identity, "value": value}
    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(entry, f)
        os.replace(tmp, folder / _entry_name(key, identity))
    except OSError as e:
        log.warning("twill: cannot write the schedule cache in %s: %s", folder, e)
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
