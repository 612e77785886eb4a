"""Which compute a job runs, resolved once by the launcher (or a container's coordinator).

For ``compute.mode: replay`` the model profile is found (``compute.profile``, or
the checked-in profile of ``model.name``, see
:func:`~synclab.compute.profile.find_default_profile`), checked against the
model, and written inline into the spec every node receives, so workers need no
files. Replay runs at the profile's batch size: ``model.batch_size`` is set to
it, and the notes say so when that changes the spec.
"""

from __future__ import annotations

from synclab.config.spec import Spec, SpecError


def resolve_compute(spec: Spec) -> tuple[Spec, list[str]]:
    """The spec with its replay profile inline, and notes for the user; :class:`SpecError` names the problem."""
    from synclab.compute.profile import ModelProfileError, find_default_profile, load_model_profile

    if spec.compute.mode != "replay":
        return spec, []
    notes: list[str] = []
    try:
        if spec.compute.profile is None:
            path, why = find_default_profile(spec.model.name, spec.model.batch_size)
            profile = load_model_profile(path)
            notes.append(f"replay profile: {why}")
        else:
            profile = spec.compute.model_profile()
    except ModelProfileError as e:
        raise SpecError(f"compute.profile: {e}") from None
    if profile.model != spec.model.name:
        raise SpecError(f"compute.profile: the profile is of model {profile.model!r}, model.name is "
                        f"{spec.model.name!r}")
    data = spec.to_dict()
    if profile.batch_size != spec.model.batch_size:
        notes.append(f"replay runs at the profile's batch size {profile.batch_size} "
                     f"(model.batch_size was {spec.model.batch_size})")
        data["model"]["batch_size"] = profile.batch_size
    data["compute"]["profile"] = profile.model_dump(mode="json")
    notes.append(f"replaying {profile.label()}: {profile.iteration_seconds * 1e3:.1f} ms forward+backward"
                 + (f", x{spec.compute.scale:g} (compute.scale)" if spec.compute.scale != 1 else "")
                 + (f", dilation {spec.run.dilation:g}" if spec.run.dilation != 1 else ""))
    from synclab.config.load import parse_spec

    return parse_spec(data), notes
