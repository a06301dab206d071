"""Operators declared once, in the manner of PyTorch's OpInfo.

Each operator module ends with `DECLARATION = OpDeclaration(...)` (or `DECLARATIONS`, a tuple,
when one library source file holds several operators): its C name, its two phase
functions, the dtypes it accepts on each chip family, a float64 NumPy reference, sample inputs
across layouts and sizes (empty included), error inputs with the status code and a message
fragment each must give, its attributes and the files that belong to it. The tests
(tests/test_operators.py), the benchmarks (bench/cases.py) and the README's operator table are all
generated from these declarations, so adding an operator touches only its module, its C++ file,
its sample and its doc page; `all_declarations()` finds it.

The per-chip dtype table is written once, here (`FROM_910B` and `ChipDtypes`): an operator's list
is a base list on every chip family it supports, plus what the library's op_api code adds on the
SoCs from Ascend910B to Ascend910E (A2, A3, 950).
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from emulator.dtypes import ACL_BF16, ACL_DOUBLE, ACL_FLOAT, ACL_FLOAT16, ACL_FORMAT_ND
from emulator.soc import PROFILES, RANK_910E

# ------------------------------------------------------------------------------------------------
# The per-chip dtype table

CHIP_FAMILIES = tuple(PROFILES)  # every chip family npuemu emulates
# The SoCs the library's op_api code tests as "910B ... 910E" (its SocVersion enum order).
FROM_910B = tuple(family for family, profile in PROFILES.items() if 1 <= profile.version_rank <= RANK_910E)
SHORT_NAMES = {"Ascend910": "910", "Ascend910B": "A2", "Ascend910_93": "A3", "Ascend950": "950",
               "Ascend310P": "310P"}
_DTYPE_LABELS = {ACL_FLOAT16: "f16", ACL_FLOAT: "f32", ACL_BF16: "bf16", ACL_DOUBLE: "f64"}


@dataclass(frozen=True)
class ChipDtypes:
    """An operator's dtype list per chip family: `base` on each of `families`, plus `from_910b` on
    those of them from Ascend910B to Ascend910E; nothing on any other family."""
    base: tuple
    from_910b: tuple = ()
    families: tuple = CHIP_FAMILIES

    def on(self, family: str) -> tuple:
        if family not in self.families:
            return ()
        return self.base + (self.from_910b if family in FROM_910B else ())

    def describe(self) -> str:
        """e.g. "all five: f16, f32 (+bf16 on A2, A3, 950)", for the README's table."""
        chips = ("all %s" % _NUMBERS.get(len(CHIP_FAMILIES), len(CHIP_FAMILIES)) if self.families == CHIP_FAMILIES
                 else ", ".join(SHORT_NAMES.get(f, f) for f in self.families))
        text = "%s: %s" % (chips, _labels(self.base))
        extra_on = [f for f in self.families if f in FROM_910B]
        if self.from_910b and extra_on:
            text += " (+%s on %s)" % (_labels(self.from_910b), ", ".join(SHORT_NAMES.get(f, f) for f in extra_on))
        return text


_NUMBERS = {5: "five", 6: "six", 4: "four"}


def _labels(dtypes: Sequence[int]) -> str:
    """Short names, in one order for every operator."""
    return ", ".join(_DTYPE_LABELS[d] for d in sorted(dtypes, key=list(_DTYPE_LABELS).index))


# ------------------------------------------------------------------------------------------------
# Inputs

@dataclass(frozen=True)
class TensorInput:
    """A tensor argument: its values (float64, or the integer/bool data of a fixed-dtype tensor)
    and how it is laid out in device memory. dtype None: the dtype under test."""
    values: np.ndarray
    dtype: Optional[int] = None
    strides: Optional[tuple] = None
    offset: int = 0
    format: int = ACL_FORMAT_ND

    @property
    def shape(self) -> tuple:
        return tuple(np.shape(self.values))

    def laid_out(self, layout: str) -> "TensorInput":
        """The same values in one of LAYOUTS."""
        strides, offset = LAYOUTS[layout](self.shape)
        return TensorInput(self.values, self.dtype, strides, offset, self.format)


@dataclass(frozen=True)
class IntArrayInput:
    """An aclIntArray argument."""
    values: tuple


@dataclass(frozen=True)
class SampleInput:
    """One valid call: every parameter of the first phase by name (TensorInput, IntArrayInput, an
    attribute value, or None for an absent optional tensor)."""
    label: str
    args: dict

    def tensors(self) -> dict:
        return {name: arg for name, arg in self.args.items() if isinstance(arg, TensorInput)}

    def with_layout(self, layout: str, names: Optional[Sequence[str]] = None) -> "SampleInput":
        """The sample with `names` (default: every tensor) laid out in `layout`."""
        args = dict(self.args)
        for name, arg in self.tensors().items():
            if names is None or name in names:
                args[name] = arg.laid_out(layout)
        return SampleInput("%s/%s" % (self.label, layout), args)


@dataclass(frozen=True)
class ErrorInput:
    """A call the first phase rejects: `changes` replace parameters of the op's first sample
    (values of TensorInput fields to change per tensor: dict(dtype=..., shape=..., format=...),
    or a new attribute value); the call returns `code` and its message contains `fragment`."""
    label: str
    changes: dict
    code: int
    fragment: str
    chip: Optional[str] = None  # None: the default chip (Ascend910B)


def _contiguous(shape: tuple) -> tuple:
    strides, step = [], 1
    for dim in reversed(shape):
        strides.append(step)
        step *= max(dim, 1)
    return tuple(reversed(strides))


def _transposed(shape: tuple) -> tuple:
    """Column-major strides: dim 0 is the innermost."""
    strides, step = [], 1
    for dim in shape:
        strides.append(step)
        step *= max(dim, 1)
    return tuple(strides)


def _strided(shape: tuple) -> tuple:
    """Row-major over a storage one element wider in every dim: gaps between rows and elements."""
    strides, step = [], 2
    for dim in reversed(shape):
        strides.append(step)
        step *= max(dim, 1) + 1
    return tuple(reversed(strides))


LAYOUTS: dict[str, Callable[[tuple], tuple]] = {  # name: shape -> (strides, offset)
    "contiguous": lambda shape: (None, 0),
    "transposed": lambda shape: (_transposed(shape), 0),
    "strided": lambda shape: (_strided(shape), 3),
    "offset": lambda shape: (_contiguous(shape), 7),
}


# ------------------------------------------------------------------------------------------------
# The declaration

@dataclass(frozen=True)
class OpDeclaration:
    name: str                                    # the C name of the second phase, e.g. aclnnLogSigmoidBackward
    first_phase: Callable                        # aclnnXxxGetWorkspaceSize
    second_phase: Callable                       # aclnnXxx
    dtypes: ChipDtypes                           # what the dtype check accepts for the tensors under test
    reference: Callable[[dict], np.ndarray]      # float64 inputs and attributes by name -> the output
    sample_inputs: Callable[[np.random.Generator], list]  # valid calls: layouts and sizes, empty included
    error_inputs: tuple                          # ErrorInput, in the order of the library's checks
    output: str                                  # the parameter the kernel writes
    shape_checked: tuple                         # tensors whose dims the shape step checks
    attributes: dict = field(default_factory=dict)  # name -> {valid value: meaning}
    kernel_dtypes: Optional[ChipDtypes] = None   # what runs, where narrower than `dtypes` (561003 otherwise)
    # Operators on the element-wise engine: a sample of a given full shape, and the inputs that the
    # instruction-set tests fill with special values (inf, NaN payloads, denormals...).
    engine_inputs: Optional[Callable[[tuple, np.random.Generator], SampleInput]] = None
    special_inputs: tuple = ()
    sample: str = ""                             # samples/<module>.py
    doc: str = ""                                # docs/ops/<module>.md

    @property
    def first_phase_name(self) -> str:
        return self.name + "GetWorkspaceSize"

    def functions(self) -> dict:
        """The C names this operator adds to aclnn_api."""
        return {self.first_phase_name: self.first_phase, self.name: self.second_phase}

    def runs(self, family: str, dtype: int) -> bool:
        """Whether a valid call with `dtype` on `family` has a kernel to run."""
        return dtype in (self.kernel_dtypes or self.dtypes).on(family)

    def readme_row(self) -> str:
        return "| %s | %s | [sample](%s) | [page](%s) |" % (
            self.name, (self.kernel_dtypes or self.dtypes).describe(), self.sample, self.doc)


def declaration_files(module_name: str) -> dict:
    """The sample and doc page paths of the operator module `module_name` (e.g. kl_div_backward)."""
    return {"sample": "samples/%s.py" % module_name, "doc": "docs/ops/%s.md" % module_name}


def all_declarations() -> list:
    """Every operator declared in aclnn_api, by name: each module of the package that defines
    DECLARATION is imported and its declaration collected. A module whose library source file holds
    several operators sharing one body (aclnnLogSigmoid and aclnnLogSigmoidForward) defines
    DECLARATIONS, a tuple of them, instead."""
    import aclnn_api
    found = []
    for module in pkgutil.iter_modules(aclnn_api.__path__):
        if module.name.startswith("_") or module.name == "declaration":
            continue
        imported = importlib.import_module("aclnn_api." + module.name)
        declared = getattr(imported, "DECLARATIONS", None) or (getattr(imported, "DECLARATION", None),)
        found.extend(declaration for declaration in declared if isinstance(declaration, OpDeclaration))
    return sorted(found, key=lambda d: d.name)


def readme_table(indent: str = "  ") -> str:
    """The README's operator table, rendered from the declarations (indented as in its list)."""
    lines = ["| operator | chips and dtypes | sample | docs |", "|---|---|---|---|"]
    lines += [d.readme_row() for d in all_declarations()]
    return "".join(indent + line + "\n" for line in lines)


def call_args(sample: SampleInput, tensors: dict, arrays: dict) -> list:
    """The first phase's arguments in parameter order: made tensors and arrays by name, the rest as
    given."""
    args = []
    for name, arg in sample.args.items():
        if isinstance(arg, TensorInput):
            args.append(tensors[name])
        elif isinstance(arg, IntArrayInput):
            args.append(arrays[name])
        else:
            args.append(arg)
    return args


def reference_args(sample: SampleInput, rounded: Callable[[TensorInput], np.ndarray]) -> dict:
    """The reference's arguments: tensors as `rounded` gives their values (what the dtype holds),
    int arrays as lists, attributes as they are."""
    values = {}
    for name, arg in sample.args.items():
        if isinstance(arg, TensorInput):
            values[name] = rounded(arg)
        elif isinstance(arg, IntArrayInput):
            values[name] = list(arg.values)
        else:
            values[name] = arg
    return values
