"""Known `custom_op` wrappers: for a library function, its op signature, the call, and a fake whose
shapes equal eager's. A fake that is wrong is worse than none (the compiled graph would be built on
wrong shapes), so each entry is pinned by a test against the real function on a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KnownFake:
    module: str  # where the function is defined
    attr: str
    op_name: str  # namespace::name for torch.library.custom_op
    params: str  # typed parameter list of the op (source text)
    call_args: str  # how the op calls the original
    returns: str  # return annotation (source text)
    fake_body: str  # body of the fake, indented 4 spaces, same parameters
    source: str  # where the shape rule was read


FP4_QUANTIZE = KnownFake(
    module="flashinfer.fp4_quantization",
    attr="fp4_quantize",
    op_name="dynacheck::fp4_quantize",
    params=(
        "input: torch.Tensor, global_scale: Optional[torch.Tensor] = None, sf_vec_size: int = 16, "
        "sf_use_ue8m0: bool = False, is_sf_swizzled_layout: bool = True, is_sf_8x4_layout: bool = False, "
        "enable_pdl: Optional[bool] = None"
    ),
    call_args=(
        "input, global_scale, sf_vec_size, sf_use_ue8m0, is_sf_swizzled_layout, is_sf_8x4_layout, enable_pdl"
    ),
    returns="Tuple[torch.Tensor, torch.Tensor]",
    fake_body='''\
    # flashinfer 0.6.3 fp4_quantize: column-major input is transposed first and outputs transposed back;
    # values (..., k/2) uint8; block scales uint8, flat buffer reshaped to (-1, k/sf_vec_size):
    # swizzled -> rows padded to 128 (8 for the 8x4 layout), columns to a multiple of 4.
    column_major = input.stride(-2) == 1  # the same test eager makes
    x = input.transpose(-2, -1) if column_major else input
    k = x.shape[-1]
    m = x.numel() // k
    cols = k // sf_vec_size
    values = x.new_empty((*x.shape[:-1], k // 2), dtype=torch.uint8)
    if is_sf_swizzled_layout:
        row_tile = 8 if is_sf_8x4_layout else 128
        sf_size = ((m + row_tile - 1) // row_tile * row_tile) * ((cols + 3) // 4 * 4)
    else:
        sf_size = m * cols
    scales = x.new_empty((sf_size // cols, cols), dtype=torch.uint8)
    if column_major:
        return values.transpose(-2, -1), scales.transpose(-2, -1)
    return values, scales
''',
    source="flashinfer 0.6.3 flashinfer/fp4_quantization.py: fp4_quantize, fp4_quantize_sm100, "
    "_compute_swizzled_layout_sf_size",
)

KNOWN_FAKES: dict[str, KnownFake] = {
    "flashinfer.fp4_quantization.fp4_quantize": FP4_QUANTIZE,
    "flashinfer.fp4_quantize": FP4_QUANTIZE,
}


def fp4_scale_shape(m: int, k: int, sf_vec_size: int = 16, swizzled: bool = True,
                    layout_8x4: bool = False) -> tuple[int, int]:
    """The block-scale shape the fake above gives for a row-major (m, k) input (for tests and docs)."""
    cols = k // sf_vec_size
    if not swizzled:
        return (m, cols)
    row_tile = 8 if layout_8x4 else 128
    size = ((m + row_tile - 1) // row_tile * row_tile) * ((cols + 3) // 4 * 4)
    return (size // cols, cols)
