"""Link profiles as files: where they are found, loading and listing them, and how they read to a person.

The schema (:class:`~synclab.linkprofile.LinkProfile`, units, per-role
overrides) is :mod:`synclab.linkprofile`; the bucket sizing rule is
:func:`synclab.transport.shaper.bucket_for`; dilation is
:mod:`synclab.netem.dilation`.

Where profiles are found (first hit wins): the ``search_dirs`` argument; the
directories in ``$SYNCLAB_PROFILES`` then ``$SYNCLAB_PROFILES_DIR`` (each
``os.pathsep``-separated: a user's own profiles); the stock profiles shipped in the
package (``synclab/netem/profiles``, read through :mod:`synclab.resources`; a
checkout's ``netem/profiles`` links to that one copy), so an installed wheel has them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from synclab.fileio import InputFileError, read_yaml
from synclab.linkprofile import (
    LinkProfile,
    ProfileError,
    RoleOverride,
    format_duration,
    format_rate,
    format_size,
    profile_from_mapping,
    resolve_for_role,
)
from synclab.resources import link_profiles_dir
from synclab.transport.shaper import profile_bucket

PROFILES_ENV = "SYNCLAB_PROFILES"
PROFILES_ENV_OLD = "SYNCLAB_PROFILES_DIR"  # the earlier name, still read after PROFILES_ENV


def package_profiles_dir() -> Path:
    """The stock profiles shipped inside the package (the one copy; ``netem/profiles`` links to it)."""
    return link_profiles_dir()


def default_search_dirs(env: dict[str, str] | None = None) -> list[Path]:
    """``$SYNCLAB_PROFILES`` entries, then ``$SYNCLAB_PROFILES_DIR`` ones, then the packaged stock profiles."""
    env = os.environ if env is None else env
    dirs = [Path(p) for var in (PROFILES_ENV, PROFILES_ENV_OLD) for p in env.get(var, "").split(os.pathsep) if p]
    return dirs + [package_profiles_dir()]


def _profile_files(search_dirs: Iterable[Path]) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for d in search_dirs:
        d = Path(d)
        if not d.is_dir():
            continue
        for p in sorted(d.iterdir()):
            if p.suffix in (".yaml", ".yml") and p.is_file():
                found.setdefault(p.stem, p)
    return found


def load_profile_file(path: Path) -> LinkProfile:
    """Read and validate one profile file; its name is the file's stem."""
    path = Path(path)
    try:
        data = read_yaml(path, "link profile")
    except InputFileError as e:
        raise ProfileError(str(e)) from None
    return profile_from_mapping(data, name=path.stem, source=str(path))


def load_profile(name_or_path: str | Path, search_dirs: Sequence[Path] | None = None) -> LinkProfile:
    """A profile by name (looked up in ``search_dirs``, default :func:`default_search_dirs`) or by file path.

    Anything containing a path separator or ending in ``.yaml``/``.yml`` is a path.
    Raises :class:`ProfileError` for an unknown name (listing the known ones) or an invalid file.
    """
    text = str(name_or_path)
    if isinstance(name_or_path, Path) or os.sep in text or text.endswith((".yaml", ".yml")):
        return load_profile_file(Path(text))
    dirs = default_search_dirs() if search_dirs is None else list(search_dirs)
    files = _profile_files(dirs)
    if text not in files:
        known = ", ".join(sorted(files)) or "none"
        raise ProfileError(f"unknown profile {text!r}; known: {known} (searched {', '.join(map(str, dirs))})")
    return load_profile_file(files[text])


def list_profiles(search_dirs: Sequence[Path] | None = None) -> list[LinkProfile]:
    """Every profile found (earlier directories shadow later ones), by rate then name; invalid files raise."""
    dirs = default_search_dirs() if search_dirs is None else list(search_dirs)
    profiles = [load_profile_file(p) for p in _profile_files(dirs).values()]
    return sorted(profiles, key=lambda p: (p.rate_bps is None, p.rate_bps or 0, p.needs_netem, p.name))


def human(profile: LinkProfile) -> dict[str, Any]:
    """The profile in human units, as a profile file would spell it (derived burst and queue marked)."""
    out: dict[str, Any] = {"name": profile.name, "rate": format_rate(profile.rate_bps)}
    derived = profile_bucket(profile)
    if derived is not None:
        out["burst"] = format_size(derived.burst_bytes) + ("" if profile.burst_bytes else " (derived)")
        out["queue"] = format_size(derived.queue_bytes) + ("" if profile.queue_bytes else " (derived)")
    out.update(delay=format_duration(profile.delay_s), jitter=format_duration(profile.jitter_s),
               loss=f"{profile.loss_pct:g}%", direction=profile.direction)
    if profile.roles:
        out["roles"] = {r: {k: v for k, v in human(resolve_for_role(profile, r)).items()
                            if k in _human_keys(o)} for r, o in profile.roles.items()}
    out["description"] = profile.description
    return out


def _human_keys(o: RoleOverride) -> set[str]:
    names = {"rate_bps": "rate", "burst_bytes": "burst", "queue_bytes": "queue", "delay_s": "delay",
             "jitter_s": "jitter", "loss_pct": "loss", "direction": "direction"}
    return {names[f] for f in o.model_fields_set}
