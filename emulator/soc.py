"""SoC profiles: the chips npuemu emulates, selected by NPUEMU_SOC.

A specific name (e.g. `Ascend910B2`) maps to its family; a family name reports a representative
specific name from `get_soc_name`, as a real card never reports a bare family name. Names are read
without regard to case, as the other NPUEMU_* settings are (`ascend910b3` is `Ascend910B3`).

npuemu keeps no list of every chip sold: a specific name is accepted when the whole value has its
family's shape (SPECIFIC_NAMES), so that `Ascend910B99`, `Ascend950zz` or `Ascend950,Ascend910B` are
refused as the typos they are, not reported by aclrtGetSocName as if they were chips.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

GiB = 1 << 30


@dataclass(frozen=True)
class SocProfile:
    family: str            # the SocVersion the operator library branches on
    default_name: str      # what aclrtGetSocName reports for a bare family name
    memory_bytes: int      # device memory capacity per device
    memory_is_hbm: bool    # HBM (training/A2/A3/950) or DDR (inference series)
    version_rank: int      # position in the library's SocVersion enum, for range checks
    padding_size: int = 32  # AICoreSpec.padding_size: the extra bytes aclrtMalloc adds


# SocVersion enum order: 910, 910B, 910_93, 910_95 (950), 910E, 310, 310P, 310B, 310C, 610LITE.
PROFILES = {
    "Ascend910": SocProfile("Ascend910", "Ascend910A", 32 * GiB, True, 0),
    "Ascend910B": SocProfile("Ascend910B", "Ascend910B3", 64 * GiB, True, 1),
    "Ascend910_93": SocProfile("Ascend910_93", "Ascend910_9391", 64 * GiB, True, 2),
    "Ascend950": SocProfile("Ascend950", "Ascend950PR", 128 * GiB, True, 3),
    "Ascend310P": SocProfile("Ascend310P", "Ascend310P3", 24 * GiB, False, 6),
}
RANK_910E = 4  # the end of the "910B ... 910E" range some operators use

# The specific names each family accepts besides its own (docs/runtime.md), as messages show them.
SPECIFIC_NAMES = {
    "Ascend910": "Ascend910A, Ascend910ProA, Ascend910ProB, Ascend910PremiumA",
    "Ascend910B": "Ascend910B<digit>, Ascend910B2C, Ascend910B4-1",
    "Ascend910_93": "Ascend910_93<two digits>",
    "Ascend950": "Ascend950PR, Ascend950DT, Ascend910_95",
    "Ascend310P": "Ascend310P<digit>",
}
# Whole values (fullmatch): an end left open let "Ascend950zz" and "Ascend950,Ascend910B" pass as
# specific names of Ascend950, which aclrtGetSocName then reported.
_FAMILY_PATTERNS = (
    (re.compile(r"Ascend(950(PR|DT)?|910_95)", re.IGNORECASE), "Ascend950"),
    (re.compile(r"Ascend910_93(\d\d)?", re.IGNORECASE), "Ascend910_93"),
    (re.compile(r"Ascend910B(\d|2C|4-1)?", re.IGNORECASE), "Ascend910B"),
    (re.compile(r"Ascend910(A|ProA|ProB|PremiumA)?", re.IGNORECASE), "Ascend910"),
    (re.compile(r"Ascend310P\d?", re.IGNORECASE), "Ascend310P"),
)


def _canonical_case(name: str, profile: SocProfile) -> str:
    """`name` spelled as the chip reports it: "Ascend" and the family's letters in their case."""
    known = {n.lower(): n for n in ("Ascend950PR", "Ascend950DT", "Ascend910ProA", "Ascend910ProB",
                                    "Ascend910PremiumA")}
    return known.get(name.lower(), "Ascend" + name[len("Ascend"):].upper())


def resolve(name: str) -> tuple[SocProfile, str]:
    """The profile of a chip name and the name get_soc_name reports; ValueError if unknown."""
    for pattern, family in _FAMILY_PATTERNS:
        if pattern.fullmatch(name):
            profile = PROFILES[family]
            if name.lower() == family.lower():
                return profile, profile.default_name
            return profile, _canonical_case(name, profile)
    raise ValueError("unknown SoC %r: expected one of %s, or a specific name: %s"
                     % (name, ", ".join(PROFILES), ", ".join(SPECIFIC_NAMES.values())))
